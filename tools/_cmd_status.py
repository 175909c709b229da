"""`amber status`: is the server up, does it reach its database, where are its console and
metrics, which workers poll it and how deep are its queues.

Exit codes: 0 server and database answer; 1 either does not (the output says which).
"""

from __future__ import annotations

import argparse
from typing import Any

from amber.abi import RetryableError
from amber.runtime.client import AmberClient

from . import _output as out


def status(client: AmberClient, args: argparse.Namespace) -> int:
    try:
        st = client.status()
    except RetryableError as exc:  # no server: say so, in the same shape
        doc: dict[str, Any] = {
            "server": {"address": client.target, "reachable": False, "detail": str(exc)},
            "database": None,
            "console_url": "",
            "metrics_url": "",
            "workers": [],
            "queues": [],
        }
        _show(doc, args)
        return 1
    doc = {
        "server": {"address": client.target, "reachable": True, "version": st.version},
        "database": {"ok": st.database_ok, "detail": st.database_detail},
        "console_url": st.console_url,
        "metrics_url": st.metrics_url,
        "workers": [
            {"worker_id": w.worker_id, "queue": w.queue, "pool": w.pool,
             "last_seen": w.last_seen.isoformat()}
            for w in st.workers
        ],
        "queues": [
            {"queue": q.queue, "pool": q.pool, "ready": q.ready, "delayed": q.delayed,
             "leased": q.leased, "oldest_ready_s": round(q.oldest_ready_s, 3)}
            for q in st.queues
        ],
    }  # fmt: skip
    _show(doc, args)
    return 0 if st.database_ok else 1


def _show(doc: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        out.emit_json(doc)
        return
    server = doc["server"]
    if not server["reachable"]:
        print(f"server    {server['address']}: UNREACHABLE ({server['detail']})")
        return
    database = doc["database"]
    print(f"server    {server['address']} (amber {server['version']})")
    print(f"database  {'ok' if database['ok'] else 'DOWN'}: {database['detail']}")
    print(f"console   {doc['console_url'] or '-'}")
    print(f"metrics   {doc['metrics_url'] or '-'}")
    workers = [[w["worker_id"], w["queue"], w["pool"], w["last_seen"]] for w in doc["workers"]]
    print("\nworkers (polled in the last 30 s)")
    print(out.table(workers, ["WORKER", "QUEUE", "POOL", "LAST POLL"]) if workers else "none")
    queues = [
        [q["queue"], q["pool"], str(q["ready"]), str(q["delayed"]), str(q["leased"]),
         f"{q['oldest_ready_s']:.1f}"]
        for q in doc["queues"]
    ]  # fmt: skip
    print("\nqueues")
    print(
        out.table(queues, ["QUEUE", "POOL", "READY", "DELAYED", "LEASED", "OLDEST READY S"])
        if queues
        else "empty"
    )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber status` to the CLI."""
    p = sub.add_parser(
        "status",
        parents=[common],
        help="server, database, console and metrics URLs, workers and queue depths",
    )
    p.set_defaults(remote=status)
