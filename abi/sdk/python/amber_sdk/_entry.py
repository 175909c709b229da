"""The entry points the component's generated glue calls: one workflow activation, one
activity attempt, and the manifest.

An await whose result history lacks first offers the "suspended" output (every command so far)
to `host.await_next`. A host that keeps the instance for the run (a *sticky* instance) answers
with the run's next input envelope, and the function goes on from that await with the grown
history, inside this same call: one `run_workflow` call then spans several activations, each
ending where the host is handed an output (an `await_next` offer, or the return value). The
function's outcome and every output are byte for byte those of a replay from the top of the
same history, which is what lets the host run any activation fresh instead. A host that does
not keep it answers None, and the SDK unwinds the function. Queries never wait. An answer that
is not the same run's grown history is the host's bug: `run_workflow` raises it.

A workflow activation ends in one of five ways, decided here:

| how the function ended                            | output                                    |
|---------------------------------------------------|-------------------------------------------|
| an await lacked its result, and `await_next` gave | "suspended", every command so far (the    |
| None (the SDK unwound it)                         | envelope offered to `await_next`)         |
| `workflow.continue_as_new(x)`                     | "continue_as_new", result = msgpack(x)    |
| returned `x`                                      | "completed", result = msgpack(x)          |
| raised `ApplicationError` (or a subclass)         | "failed", error = [type, message]         |
| raised `CancelledError`                           | "cancelled", error = ["Cancelled", reason] |

Any other exception is a bug in the workflow code: its traceback goes to stderr and it
propagates, so the host records a sandbox fault an operator can triage (and fix with a new
version). Once the SDK unwound the function, that unwind is the outcome whatever the code did
afterwards (a `finally`, a swallowed `BaseException`). The determinism guard is installed for
the whole call, the stretches spent inside `await_next` included, and lifted when it returns.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

from . import _activity, _envelopes, _guard, _msgpack, _registry
from ._envelopes import WorkflowStatus
from ._errors import ApplicationError, CancelledError, _ContinueAsNew, _HostError, _Suspend, _Unwind
from ._host import GuestHost
from ._replay import CANCELLED, Activation, active

__all__ = ["GuestHost", "manifest", "run_activity", "run_workflow"]


def run_workflow(name: str, envelope: bytes, host: GuestHost) -> bytes:
    """One activation of workflow type `name`: the input envelope in, the output envelope out
    (and, when `host.await_next` keeps the instance, the activations after it: see the module
    docstring). Raises for an unknown name, a malformed envelope, an `await_next` answer that
    is not the run's next input, and a bug in the workflow code (the host sees a trap); the
    traceback is written to stderr first."""
    try:
        return _activate(name, bytes(envelope), host)
    except BaseException:
        traceback.print_exc(file=sys.stderr)
        raise


def _activate(name: str, envelope: bytes, host: GuestHost) -> bytes:
    definition = _registry.current().workflows.get(name)
    if definition is None:
        raise LookupError(f"this module has no workflow named {name!r}")
    memo = _envelopes.results_memo()
    request = _envelopes.parse_workflow_input(envelope, memo)
    payload = _msgpack.decode(request.input)
    activation = Activation(request, host, memo)
    try:
        with active(activation), _guard.installed(definition.scope):
            value = definition.call(payload)
        if activation.unwind is None:
            return _envelopes.workflow_output(
                WorkflowStatus.COMPLETED,
                activation.commands,
                packed=activation.packed,
                result=_msgpack.encode(value),
            )
    except (_Unwind, CancelledError, Exception) as exc:
        if activation.unwind is None:
            return _closed(activation, exc)
    return _unwound(activation, activation.unwind)


def _closed(activation: Activation, exc: BaseException) -> bytes:
    """The output for a function that raised (and was not unwound by the SDK)."""
    if isinstance(exc, CancelledError):
        return _envelopes.workflow_output(
            WorkflowStatus.CANCELLED,
            activation.commands,
            packed=activation.packed,
            error=(CANCELLED, exc.message),
        )
    if isinstance(exc, ApplicationError):
        return _envelopes.workflow_output(
            WorkflowStatus.FAILED,
            activation.commands,
            packed=activation.packed,
            error=(exc.type, exc.message),
        )
    raise exc


def _unwound(activation: Activation, unwind: _Unwind | None) -> bytes:
    if isinstance(unwind, _ContinueAsNew):
        return _envelopes.workflow_output(
            WorkflowStatus.CONTINUE_AS_NEW,
            activation.commands,
            packed=activation.packed,
            result=unwind.payload,
        )
    if isinstance(unwind, _HostError):
        raise unwind.error
    assert isinstance(unwind, _Suspend), unwind
    return unwind.output


def run_activity(name: str, envelope: bytes, host: GuestHost) -> bytes:
    """One attempt of activity `name`: the input envelope in, the output envelope out.

    The function's return value completes the attempt. An exception fails it: type =
    `ApplicationError.type` or the exception's class name, message = `str(exc)`, non-retryable
    only when an `ApplicationError` says so; `CancelledError` fails it as a non-retryable
    `Cancelled`. An unknown name fails non-retryably with `UnknownActivity`. A malformed envelope,
    `MemoryError` and `RecursionError` raise (the host sees a fault of the sandbox)."""
    definition = _registry.current().activities.get(name)
    if definition is None:
        return _envelopes.activity_failed(
            "UnknownActivity", f"this module has no activity named {name!r}", True
        )
    request = _envelopes.parse_activity_input(bytes(envelope))
    details = request.heartbeat_details
    info = _activity.ActivityInfo(
        run_id=request.run_id,
        activity=request.activity or name,
        attempt=request.attempt,
        idempotency_key=request.idempotency_key,
        deadline_ms=request.deadline_ms,
        heartbeat_details=_msgpack.decode(details) if details else None,
    )
    payload = _msgpack.decode(request.args)
    with _activity.attempt(info, host):
        return _attempt(definition.call, payload)


def _attempt(call: Callable[[Any], Any], payload: Any) -> bytes:
    try:
        return _envelopes.activity_completed(_msgpack.encode(call(payload)))
    except ApplicationError as exc:
        return _envelopes.activity_failed(exc.type, exc.message, exc.non_retryable)
    except CancelledError as exc:
        return _envelopes.activity_failed(CANCELLED, exc.message, True)
    except (MemoryError, RecursionError):
        # The sandbox's limits, not the activity's answer: the host reports them as the
        # memory-limit and stack-overflow faults they are.
        traceback.print_exc(file=sys.stderr)
        raise
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return _envelopes.activity_failed(type(exc).__name__, str(exc), False)


def manifest() -> dict[str, object]:
    """The module's manifest: `{"abi": 1, "workflows": [...], "activities": [...]}` with the
    registered names sorted, plus "capabilities" and "limits" when declared (`declare`)."""
    return _registry.current().manifest()
