"""`amber audit verify|anchor|head|list`: the hash-chained audit log.

`verify` recomputes the whole chain on the server and names the first bad record (edited,
deleted, inserted or reordered); it always prints the head (count and hash) so it can be
recorded elsewhere and passed back with `--expect-head`, which catches a log rewritten
wholesale. `anchor --to FILE` does that recording: it verifies, then appends the verified head
as one JSON line (`seq`, `hash`, `at`) to a file kept where the database's writers cannot
change it (another host, a mounted bucket, a repository); `verify --anchor FILE` checks the
chain against that file's last line. Appending keeps every earlier anchor for an audit.
Rejected: a URL target (the operator's own tools ship a file anywhere; an HTTP client here
would add credentials and retries to a verb that must stay simple). Exit codes: 0 intact;
1 broken (nothing is anchored); 2 refused (bad input).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from amber.abi import AmberError, InvalidInput, jsonable
from amber.runtime.client import AmberClient

from . import _output as out


def _expected(args: argparse.Namespace) -> bytes:
    """The head hash to check against: `--expect-head`, or the last line of `--anchor`."""
    if args.expect_head and getattr(args, "anchor", None):
        raise InvalidInput("give --expect-head or --anchor, not both")
    text = args.expect_head
    if getattr(args, "anchor", None):
        text = _last_anchor(Path(args.anchor))
    try:
        expect = bytes.fromhex(text) if text else b""
    except ValueError:
        raise InvalidInput(
            "--expect-head takes the 64 hex digits `amber audit head` printed"
        ) from None
    return expect


def _last_anchor(path: Path) -> str:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError as exc:
        raise InvalidInput(f"cannot read the anchor file {path}: {exc.strerror}") from None
    if not lines:
        raise InvalidInput(f"the anchor file {path} holds no anchor yet (`amber audit anchor`)")
    try:
        anchor = json.loads(lines[-1])
        digest = anchor["hash"]
        if not isinstance(digest, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise InvalidInput(
            f"the last line of {path} is not an anchor `amber audit anchor` wrote"
        ) from None
    return digest


def verify(client: AmberClient, args: argparse.Namespace) -> int:
    result = client.verify_audit(_expected(args))
    if args.json:
        out.emit_json({"ok": result.ok, "checked": result.checked, "head_seq": result.head_seq,
                       "head_hash": result.head_hash.hex(), "first_bad_seq": result.first_bad_seq,
                       "first_bad_audit_id": result.first_bad_audit_id,
                       "problem": result.problem})  # fmt: skip
    elif result.ok:
        print(f"audit log intact: {result.checked} records verified")
    else:
        where = f" at record {result.first_bad_seq}" if result.first_bad_seq else ""
        print(f"audit log BROKEN{where}: {result.problem}")
    if not args.json:
        print(f"head: {result.head_seq} {result.head_hash.hex()}")
    return 0 if result.ok else 1


def anchor(client: AmberClient, args: argparse.Namespace) -> int:
    """Verify the chain (against the file's last anchor, if any) and append the head to it."""
    path = Path(args.to)
    previous = _last_anchor(path) if path.is_file() and path.read_text().strip() else ""
    result = client.verify_audit(bytes.fromhex(previous) if previous else b"")
    if not result.ok:
        where = f" at record {result.first_bad_seq}" if result.first_bad_seq else ""
        if args.json:
            out.emit_json({"ok": False, "first_bad_seq": result.first_bad_seq,
                           "problem": result.problem, "anchored": False})  # fmt: skip
        else:
            print(f"audit log BROKEN{where}: {result.problem}; nothing anchored")
        return 1
    line = {"seq": result.head_seq, "hash": result.head_hash.hex(),
            "at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
    try:
        with path.open("a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError as exc:
        raise InvalidInput(f"cannot append to the anchor file {path}: {exc.strerror}") from None
    if args.json:
        out.emit_json({"ok": True, "anchored": True, "file": str(path), **line})
    else:
        print(f"audit log intact: {result.checked} records verified")
        print(f"anchored head {result.head_seq} {result.head_hash.hex()} in {path}")
    return 0


def head(client: AmberClient, args: argparse.Namespace) -> int:
    """The stored head, unverified: run `verify` first if it is to become an anchor."""
    seq, digest = client.audit_head()
    if args.json:
        out.emit_json({"seq": seq, "hash": digest.hex()})
    else:
        print(f"{seq} {digest.hex()}")
    return 0


def _current_run(client: AmberClient, ref: str, tenant: str) -> str:
    """The run id `ref` names as a workflow id in `tenant`, or "" (no such run, or not the
    caller's to see)."""
    try:
        return client.result(ref, tenant=tenant).run_id
    except AmberError:
        return ""


def list_records(client: AmberClient, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:  # 0 would travel as "the default"
        raise InvalidInput("--limit must be between 1 and 1000")
    target = args.target or ""
    records = client.list_audit(target=target, limit=args.limit, after_seq=args.after)
    if target and not records:  # a workflow id names its current run, as everywhere else
        run_id = _current_run(client, target, args.tenant or "")
        if run_id not in ("", target):
            records = client.list_audit(target=run_id, limit=args.limit, after_seq=args.after)
    if args.json:
        more = str(records[-1].seq) if len(records) == args.limit and records else None
        out.emit_list("records", [{"seq": r.seq, "at": r.at.isoformat(), "actor": r.actor,
                                   "action": r.action, "target": r.target, "reason": r.reason,
                                   "detail": jsonable(r.detail), "hash": r.hash.hex()}
                                  for r in records], more)  # fmt: skip
        return 0
    rows = [
        [str(r.seq), r.at.strftime("%Y-%m-%d %H:%M:%S"), r.actor, r.action, r.target,
         out.compact(r.reason, 40)]
        for r in records
    ]  # fmt: skip
    print(
        out.table(rows, ["SEQ", "AT", "ACTOR", "ACTION", "TARGET", "REASON"]) if rows else "empty"
    )
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber audit ...` to the CLI."""
    audit = sub.add_parser("audit", parents=[common], help="the audit log").add_subparsers(
        dest="audit_command", required=True
    )
    p = audit.add_parser("verify", parents=[common], help="check the hash chain")
    p.add_argument("--expect-head", help="a head hash recorded earlier (64 hex digits)")
    p.add_argument("--anchor", metavar="FILE", help="check against the last head in this file")
    p.set_defaults(remote=verify)
    p = audit.add_parser(
        "anchor", parents=[common], help="verify, then append the head to an anchor file"
    )
    p.add_argument("--to", required=True, metavar="FILE", help="the anchor file (JSON lines)")
    p.set_defaults(remote=anchor)
    p = audit.add_parser(
        "head", parents=[common], help="record count and last hash (verify before anchoring it)"
    )
    p.set_defaults(remote=head)
    p = audit.add_parser("list", parents=[common], help="audit records, oldest first")
    p.add_argument(
        "--target",
        help="a run id or workflow id (its current run), approval:ID, a workflow type, a digest",
    )
    p.add_argument("--tenant", help="the tenant a workflow id given as --target is in")
    p.add_argument("--after", type=int, default=0, help="records after this seq")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(remote=list_records)
