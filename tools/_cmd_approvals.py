"""`amber approvals ...` and `amber approvers ...`: human approval steps from the terminal.

`decide` is the approver's path (it needs a token); the others are operator commands (a reason,
and the operator token where the server checks them). Exit codes: 0 done; 2 refused (the
message says why; a refused token changed nothing and was audited).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from amber.history import Approval
from amber.runtime.client import AmberClient

from . import _output as out
from ._operator import operator_name


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _approval_json(a: Approval) -> dict[str, Any]:
    return {
        "approval_id": a.approval_id,
        "tenant": a.tenant,
        "run_id": a.run_id,
        "step": a.cmd,
        "action": a.action,
        "approvers": list(a.approvers),
        "roles": list(a.roles),
        "required": a.required,
        "policy_version": a.policy_version,
        "status": a.status,
        "created_at": a.created_at.isoformat(),
        "expires_at": a.expires_at.isoformat(),
        "decided_at": a.decided_at.isoformat() if a.decided_at else None,
    }


def list_approvals(client: AmberClient, args: argparse.Namespace) -> int:
    found = client.list_approvals(
        tenant=args.tenant or "", status=args.status or "", run_id=args.run or "", limit=args.limit
    )
    if args.json:
        out.emit_list("approvals", [_approval_json(a) for a in found])
        return 0
    rows = [
        [a.approval_id, a.status, a.run_id, str(a.cmd), f"{a.required} of "
         + ",".join([*a.approvers, *(f"@{r}" for r in a.roles)]), _when(a.expires_at),
         out.compact(a.action, 50)]
        for a in found
    ]  # fmt: skip
    header = ["APPROVAL", "STATUS", "RUN", "STEP", "POLICY", "EXPIRES", "ACTION"]
    print(out.table(rows, header) if rows else "no approvals")
    return 0


def show(client: AmberClient, args: argparse.Namespace) -> int:
    detail = client.get_approval(args.approval_id, tenant=args.tenant or "")
    a = detail.approval
    if args.json:
        doc = _approval_json(a)
        doc["tokens"] = [
            {"hash": t.token_hash.hex(), "approver": t.approver, "status": t.status,
             "issued_at": t.issued_at.isoformat()}
            for t in detail.tokens
        ]  # fmt: skip
        doc["decisions"] = [
            {"approver": d.approver, "approve": d.approve, "comment": d.comment, "via": d.via,
             "at": d.decided_at.isoformat()}
            for d in detail.decisions
        ]  # fmt: skip
        out.emit_json(doc)
        return 0
    print(f"approval      {a.approval_id} ({a.status})")
    print(f"action        {a.action}")
    print(f"run           {a.run_id} step {a.cmd}")
    who = ", ".join([*a.approvers, *(f"role {r}" for r in a.roles)])
    print(f"policy        {a.required} of {who} (version {a.policy_version})")
    print(f"expires       {_when(a.expires_at)}")
    for t in detail.tokens:
        print(f"token         {t.token_hash.hex()}… {t.approver} {t.status} {_when(t.issued_at)}")
    for d in detail.decisions:
        verdict = "approved" if d.approve else "rejected"
        print(f"decision      {d.approver} {verdict} via {d.via} {_when(d.decided_at)} {d.comment}")
    return 0


def decide(client: AmberClient, args: argparse.Namespace) -> int:
    token = sys.stdin.readline().strip() if args.token == "-" else args.token
    outcome = client.decide_approval(
        token,
        approve=args.approve,
        comment=args.comment or "",
        approver=args.approver or "",
        tenant=args.tenant or "",
    )
    if args.json:
        out.emit_json({"approval_id": outcome.approval_id, "status": outcome.status,
                       "counted": outcome.counted, "approvals": outcome.approvals,
                       "required": outcome.required})  # fmt: skip
        return 0
    note = "" if outcome.counted else " (you had decided already: counted once)"
    print(
        f"{outcome.approval_id}: {outcome.status}, {outcome.approvals} of {outcome.required}{note}"
    )
    return 0


def issue(client: AmberClient, args: argparse.Namespace) -> int:
    token, link = client.issue_approval_token(
        args.approval_id,
        args.approver,
        reason=args.reason,
        operator=operator_name(args),
        tenant=args.tenant or "",
    )
    if args.json:
        out.emit_json({"token": token, "link": link})
        return 0
    print(f"token for {args.approver} (shown once, stored only as a hash): {token}")
    if link:
        print(f"link: {link}")
    return 0


def revoke(client: AmberClient, args: argparse.Namespace) -> int:
    count = client.revoke_approval_tokens(
        args.approval_id,
        reason=args.reason,
        approver=args.approver or "",
        operator=operator_name(args),
        tenant=args.tenant or "",
    )
    if args.json:
        out.emit_json({"revoked": count})
    else:
        print(f"revoked {count} token(s)")
    return 0


def change_role(client: AmberClient, args: argparse.Namespace) -> int:
    changed = client.change_approver_role(
        grant=args.roles_command == "grant",
        role=args.role,
        approver=args.approver,
        reason=args.reason,
        operator=operator_name(args),
        tenant=args.tenant or "",
    )
    if args.json:
        out.emit_json(
            {"approver": args.approver, "role": args.role, "action": args.roles_command,
             "changed": changed}
        )  # fmt: skip
    else:
        state = "done" if changed else "no change"
        print(f"{args.approver} {args.roles_command} {args.role}: {state}")
    return 0


def list_roles(client: AmberClient, args: argparse.Namespace) -> int:
    members = client.list_approver_roles(tenant=args.tenant or "")
    if args.json:
        out.emit_list("roles", [{"role": r, "approver": a} for r, a in members])
        return 0
    print(out.table([[r, a] for r, a in members], ["ROLE", "APPROVER"]) if members else "no roles")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `amber approvals ...` and `amber approvers ...` to the CLI."""
    approvals = sub.add_parser(
        "approvals", parents=[common], help="human approval steps"
    ).add_subparsers(dest="approvals_command", required=True)
    p = approvals.add_parser("list", parents=[common], help="approvals and their status")
    p.add_argument("--status", choices=["pending", "approved", "rejected", "expired"])
    p.add_argument("--run", help="only this run")
    p.add_argument("--tenant")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(remote=list_approvals)
    p = approvals.add_parser("show", parents=[common], help="policy, tokens (hashes), decisions")
    p.add_argument("approval_id")
    p.add_argument("--tenant")
    p.set_defaults(remote=show)
    p = approvals.add_parser("decide", parents=[common], help="approve or reject with a token")
    p.add_argument("token", help="the token, or - to read it from stdin (keeps it out of ps)")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--approve", dest="approve", action="store_true")
    verdict.add_argument("--reject", dest="approve", action="store_false")
    p.add_argument("--comment")
    p.add_argument("--as", dest="approver", help="who you are (checked against the token)")
    p.add_argument("--tenant")
    p.set_defaults(remote=decide)

    def operator_command(name: str, text: str) -> argparse.ArgumentParser:
        p = approvals.add_parser(name, parents=[common], help=text)
        p.add_argument("approval_id")
        p.add_argument("--reason", required=True)
        p.add_argument("--operator", help="who (default: your user name)")
        p.add_argument("--tenant")
        return p

    p = operator_command("issue", "mint a new token for an approver (revokes their old ones)")
    p.add_argument("--approver", required=True)
    p.set_defaults(remote=issue)
    p = operator_command("revoke", "revoke an approval's pending tokens")
    p.add_argument("--approver", help="only this approver's")
    p.set_defaults(remote=revoke)

    roles = sub.add_parser("approvers", parents=[common], help="approver roles").add_subparsers(
        dest="roles_command", required=True
    )
    for name in ("grant", "revoke"):
        p = roles.add_parser(name, parents=[common], help=f"{name} a role")
        p.add_argument("role")
        p.add_argument("approver")
        p.add_argument("--reason", required=True)
        p.add_argument("--operator", help="who (default: your user name)")
        p.add_argument("--tenant")
        p.set_defaults(remote=change_role)
    p = roles.add_parser("list", parents=[common], help="who holds which approver role")
    p.add_argument("--tenant")
    p.set_defaults(remote=list_roles)
