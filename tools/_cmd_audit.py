"""`amber audit verify|head|list`: the hash-chained audit log.

`verify` recomputes the whole chain on the server and names the first bad record (edited,
deleted, inserted or reordered); it always prints the head (count and hash) so it can be
recorded elsewhere and passed back with `--expect-head`, which catches a log rewritten
wholesale. Exit codes: 0 intact; 1 broken; 2 refused (bad input).
"""

from __future__ import annotations

import argparse

from amber.abi import InvalidInput
from amber.runtime.client import AmberClient

from . import _output as out


def verify(client: AmberClient, args: argparse.Namespace) -> int:
    try:
        expect = bytes.fromhex(args.expect_head) if args.expect_head else b""
    except ValueError:
        raise InvalidInput(
            "--expect-head takes the 64 hex digits `amber audit head` printed"
        ) from None
    result = client.verify_audit(expect)
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


def head(client: AmberClient, args: argparse.Namespace) -> int:
    """The stored head, unverified: run `verify` first if it is to become an anchor."""
    seq, digest = client.audit_head()
    if args.json:
        out.emit_json({"seq": seq, "hash": digest.hex()})
    else:
        print(f"{seq} {digest.hex()}")
    return 0


def list_records(client: AmberClient, args: argparse.Namespace) -> int:
    records = client.list_audit(target=args.target or "", limit=args.limit, after_seq=args.after)
    if args.json:
        more = str(records[-1].seq) if len(records) == args.limit and records else None
        out.emit_list("records", [{"seq": r.seq, "at": r.at.isoformat(), "actor": r.actor,
                                   "action": r.action, "target": r.target, "reason": r.reason,
                                   "detail": out.jsonable(r.detail), "hash": r.hash.hex()}
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
    p.set_defaults(remote=verify)
    p = audit.add_parser(
        "head", parents=[common], help="record count and last hash (verify before anchoring it)"
    )
    p.set_defaults(remote=head)
    p = audit.add_parser("list", parents=[common], help="audit records, oldest first")
    p.add_argument("--target", help="a run id, approval:ID, a workflow type, a digest, ...")
    p.add_argument("--after", type=int, default=0, help="records after this seq")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(remote=list_records)
