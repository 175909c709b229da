"""Rollout, version 2: the sample for versions and rollout, in Python — one of three versions of
the workflow `onboard` (`rollout_v1.py`, `rollout_v2.py`, `rollout_v3.py`).

The port of `rollout.c` built with -DROLLOUT_V=2, and a drop-in for it: every version declares
the same workflow and activities as the C builds, with the same payloads, results and commands,
so the versions differ only in code.

Input:  {"user": str}
v1:     create_account → publish "status" = "waiting" → signal "go" (any payload)
        → send_welcome. Positions: 0 create_account, 1 signal, 2 send_welcome.
v2:     v1 plus, after the signal, `if workflow.patched("add-audit"): audit_log`. New runs
        audit (positions 2 patched, 3 audit_log, 4 send_welcome); a v1 history that already
        holds send_welcome at position 2 replays on v2 with patched = False and does not.
v3:     send_welcome BEFORE the signal, without a patch: an incompatible change (a v1 history
        waiting on the signal at position 1 diverges there).
Result: {"user", "account", "welcomed": true, "audited": bool}

This is v2: keep it while runs that recorded the "add-audit" marker are open.

A cancellation closes the run as cancelled (["Cancelled", reason]); an activity's error fails it.
The activities compute their results from their arguments.
"""

from __future__ import annotations

from amber_sdk import ApplicationError, activity, workflow


def _str(doc: object, key: str) -> str | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, type="BadArgs", non_retryable=True)


# ---- workflow ------------------------------------------------------------------------------


@workflow.defn
def onboard(signup: object) -> dict[str, object]:
    user = _str(signup, "user")
    if user is None:
        raise ApplicationError("expected {user: str}", type="BadInput")
    account = _str(workflow.execute_activity(create_account, {"user": user}), "account")
    if account is None:
        raise ApplicationError("create_account returned no account", type="BadResult")
    workflow.set_query("status", "waiting")

    workflow.wait_signal("go")
    # New code, guarded: histories that got past here on v1 skip it.
    audited = workflow.patched("add-audit")
    if audited:
        workflow.execute_activity(audit_log, {"account": account})
    welcome = workflow.execute_activity(send_welcome, {"account": account})
    return {
        "user": user,
        "account": account,
        "welcomed": isinstance(welcome, dict) and welcome.get("sent") is True,
        "audited": audited,
    }


# ---- activities ----------------------------------------------------------------------------


@activity.defn
def create_account(args: object) -> dict[str, str]:
    """{"user": str} → {"account": "acct-<user>"}"""
    user = _str(args, "user")
    if user is None:
        raise _refused("expected {user: str}")
    return {"account": f"acct-{user}"}


@activity.defn
def send_welcome(args: object) -> dict[str, bool]:
    """{"account": str} → {"sent": true}"""
    if _str(args, "account") is None:
        raise _refused("expected {account: str}")
    return {"sent": True}


@activity.defn
def audit_log(args: object) -> dict[str, bool]:
    """{"account": str} → {"logged": true}"""
    if _str(args, "account") is None:
        raise _refused("expected {account: str}")
    return {"logged": True}
