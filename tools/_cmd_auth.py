"""`amber auth grant|rotate|revoke|list|bootstrap`: API credentials.

A server started with `--auth` (and `amber dev`) answers only calls that carry a credential of a
principal whose role and tenants allow them (the table is in `runtime/server/_access.py`). An
admin manages principals over the API; each change is audited under the admin's name. The first
admin comes from `bootstrap`, which needs what only the database's owner has: its URL. A token
is printed once, when granted or rotated; the server keeps only its sha256. `--save` writes it
where the CLI looks (`$AMBER_HOME/token`, mode 0600) instead of printing it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from amber.history import Principal
from amber.runtime.client import AmberClient

from . import _output as out
from ._operator import save_token, token_files


def _doc(p: Principal) -> dict[str, object]:
    return {
        "name": p.name,
        "role": p.role,
        "tenants": list(p.tenants),
        "queues": list(p.queues),
        "pools": list(p.pools),
        "created_at": p.created_at.isoformat(),
        "created_by": p.created_by,
        "rotated_at": p.rotated_at.isoformat() if p.rotated_at else None,
        "revoked_at": p.revoked_at.isoformat() if p.revoked_at else None,
    }


def _issued(args: argparse.Namespace, p: Principal, token: str, verb: str) -> int:
    saved = save_token(Path(args.save), token) if getattr(args, "save", None) else None
    if args.json:
        doc = {**_doc(p), "token": None if saved else token, "saved_to": str(saved or "") or None}
        out.emit_json(doc)
        return 0
    if p.role == "worker":
        scope = f"queues {', '.join(p.queues)}; pools {', '.join(p.pools)}"
    else:
        scope = f"tenants {', '.join(p.tenants)}"
    print(f"{verb} {p.name} ({p.role}; {scope})")
    if saved:
        print(f"token saved to {saved} (readable by you only)")
    else:
        print(f"token (shown once; the server keeps only its hash): {token}")
    return 0


def grant(client: AmberClient, args: argparse.Namespace) -> int:
    principal, token = client.change_credential(
        "grant",
        args.name,
        role=args.role,
        tenants=args.tenant or (),
        queues=args.queue or (),
        pools=args.pool or (),
        reason=args.reason,
    )
    return _issued(args, principal, token, "granted")


def rotate(client: AmberClient, args: argparse.Namespace) -> int:
    principal, token = client.change_credential("rotate", args.name, reason=args.reason)
    return _issued(args, principal, token, "rotated")


def revoke(client: AmberClient, args: argparse.Namespace) -> int:
    principal, _ = client.change_credential("revoke", args.name, reason=args.reason)
    if args.json:
        out.emit_json(_doc(principal))
    else:
        print(f"revoked {principal.name}: its token no longer works")
    return 0


def list_principals(client: AmberClient, args: argparse.Namespace) -> int:
    principals = client.list_credentials()
    if args.json:
        out.emit_list("principals", [_doc(p) for p in principals])
        return 0
    rows = [
        [p.name, p.role, ",".join(p.tenants) or "-", ",".join(p.queues) or "-",
         ",".join(p.pools) or "-", "revoked" if p.revoked_at else "live", p.created_by]
        for p in principals
    ]  # fmt: skip
    headers = ["NAME", "ROLE", "TENANTS", "QUEUES", "POOLS", "STATE", "GRANTED BY"]
    print(out.table(rows, headers) if rows else "no principals")
    return 0


def bootstrap(args: argparse.Namespace) -> int:
    """The first admin, made with database access (no server, no credential needed)."""
    from amber.history import Database, resolve_database_url
    from amber.runtime.model import SystemClock
    from amber.runtime.server import migrate_all
    from amber.runtime.services import CredentialService

    db = Database(resolve_database_url(), max_size=1).open()
    try:
        migrate_all(db)
        issued = CredentialService(db, SystemClock()).grant(
            args.name, "admin", by="bootstrap (database access)", reason=args.reason
        )
    finally:
        db.close()
    return _issued(args, issued.principal, issued.token, "granted")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber auth ...` to the CLI."""
    auth = sub.add_parser(
        "auth", parents=[common], help="API credentials: who may call the server"
    ).add_subparsers(dest="auth_command", required=True)
    save_help = (
        f"write the token to DIR/token (mode 0600) instead of printing it; the CLI reads"
        f" {', '.join(str(p) for p in token_files())}"
    )
    p = auth.add_parser("grant", parents=[common], help="a principal and its token (admins)")
    p.add_argument("name")
    p.add_argument("--role", required=True, choices=["admin", "operator", "application", "worker"])
    p.add_argument(
        "--tenant", action="append", help="a tenant it acts in (repeat; '*' for every tenant)"
    )
    p.add_argument("--queue", action="append", help="a worker's queue (repeat; default: all)")
    p.add_argument(
        "--pool",
        action="append",
        choices=["main", "surgical"],
        help="a worker's pool (repeat; default: both)",
    )
    p.add_argument("--reason", required=True)
    p.add_argument("--save", metavar="DIR", help=save_help)
    p.set_defaults(remote=grant)
    p = auth.add_parser("rotate", parents=[common], help="a new token; the old one stops working")
    p.add_argument("name")
    p.add_argument("--reason", required=True)
    p.add_argument("--save", metavar="DIR", help=save_help)
    p.set_defaults(remote=rotate)
    p = auth.add_parser("revoke", parents=[common], help="the principal's token stops working")
    p.add_argument("name")
    p.add_argument("--reason", required=True)
    p.set_defaults(remote=revoke)
    p = auth.add_parser("list", parents=[common], help="principals, live and revoked")
    p.set_defaults(remote=list_principals)
    p = auth.add_parser(
        "bootstrap",
        parents=[common],
        help="the first admin, with database access (AMBER_DATABASE_URL); no server needed",
    )
    p.add_argument("name", nargs="?", default="admin")
    p.add_argument("--reason", default="first admin")
    p.add_argument("--save", metavar="DIR", help=save_help)
    p.set_defaults(local=bootstrap)
