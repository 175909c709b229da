"""Expense: the sample for human approval, in Python — a payment that waits, durably, for people
to approve it, with a timeout path.

The port of `expense.c`, and a drop-in for it: the same names, payloads and results, and the same
commands for a policy given with its three keys (the SDK writes the policy map itself, all three
keys in that order, where the C sample passes the input's map on as it came).

Workflow `expense`
  Input:  {"expense_id": str, "amount_cents": int,
           "policy": {"approvers": [str], "roles": [str], "required": int},
           "expires_ms": int, "prepare_first": bool (optional)}
  Flow:   requests an approval of "pay expense <expense_id>"; with prepare_first it runs the
          activity `prepare` before it waits (decisions arriving meanwhile are kept); then
            approved → `pay`        → status "paid"
            rejected →                status "rejected"
            expired  → `escalate`   → status "escalated" (the timeout path)
  Result: {"expense_id", "status", "outcome", "decisions": the approval's decisions}

An activity's error fails the run with that error; so does a cancellation, as in the C sample
(["Cancelled", reason], status failed). The activities return their arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from amber_sdk import (
    ApplicationError,
    ApprovalOutcome,
    ApprovalResult,
    CancelledError,
    Handle,
    activity,
    workflow,
)


def _str(doc: object, key: str) -> str | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _int(doc: object, key: str) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _settled(handle: Handle) -> Any:
    """The awaited result. Its error propagates and fails the run; a cancellation fails it too,
    with ["Cancelled", reason], as `amber_wf_fail(wf, r.error_type, ...)` does in C."""
    try:
        return handle.result()
    except CancelledError as exc:
        raise ApplicationError(exc.message, type="Cancelled") from None


def _run(fn: Callable[..., Any], expense_id: str) -> None:
    _settled(workflow.start_activity(fn, {"expense_id": expense_id}))


@workflow.defn
def expense(claim: object) -> dict[str, object]:
    doc: dict[Any, Any] = claim if isinstance(claim, dict) else {}
    expense_id, expires_ms = _str(doc, "expense_id"), _int(doc, "expires_ms")
    if expense_id is None or expires_ms is None:
        raise ApplicationError("expected expense_id, expires_ms and policy", type="BadInput")
    policy = doc.get("policy")
    if not isinstance(policy, dict):
        raise ApplicationError("expected a policy map", type="BadInput")

    approval = workflow.start_approval(
        f"pay expense {expense_id}",
        expires=timedelta(milliseconds=expires_ms),
        approvers=policy.get("approvers", []),
        roles=policy.get("roles", []),
        required=policy.get("required", 1),
    )
    if doc.get("prepare_first") is True:
        _run(prepare, expense_id)
    decided: ApprovalResult = _settled(approval)

    match decided.outcome:
        case ApprovalOutcome.APPROVED:
            _run(pay, expense_id)
            status = "paid"
        case ApprovalOutcome.EXPIRED:
            _run(escalate, expense_id)
            status = "escalated"
        case _:
            status = "rejected"
    return {
        "expense_id": expense_id,
        "status": status,
        "outcome": decided.outcome.value,
        "decisions": [dataclasses.asdict(d) for d in decided.decisions],
    }


@activity.defn
def prepare(args: object) -> object:
    return args


@activity.defn
def pay(args: object) -> object:
    return args


@activity.defn
def escalate(args: object) -> object:
    return args
