"""Amber's Python guest SDK: workflows and activities for a Wasm component built with
componentize-py, speaking guest ABI v1's envelopes (abi/README.md).

    import amber_sdk as amber
    from amber_sdk import workflow, activity

    @activity.defn
    def charge(args): ...

    @workflow.defn
    def orders(input):
        charge_id = workflow.execute_activity(charge, input, start_to_close_timeout=30)
        ...

Design:
- **The C SDK's semantics, in Python.** Command indices, results by `cmd`, delivery seqs,
  cancellation delivered once, `is_replaying`, the three `patched` rules and the bytes of every
  command (options keys in `amber_commands.h`'s order) are the same as `amber.h`'s, because
  the host replays and compares both kinds of guest the same way.
- **Synchronous workflow functions, replayed from the top or kept alive.** An await whose
  result history lacks offers the "suspended" output (every command so far) to the host's
  `await_next`. A host that keeps the instance for the run (a *sticky* instance, as for C
  guests) answers with the run's next input envelope, and the function goes on from that await
  inside the same call, with its replay state refreshed exactly as `amber__wf_refresh` does.
  Otherwise the function unwinds with a private `BaseException` caught at the entry point, the
  activation returns that output, and the next one runs the function again from the top. Both
  paths produce the same bytes for the same history, so the host may switch at any activation.
  No threads, no asyncio.
- **Batch entry points.** `run_workflow` / `run_activity` take the input envelope and return
  the output envelope; host calls go through a `GuestHost` object (the generated glue wraps the
  component's imports; tests pass a fake).
- **Standard library only.** The component has no msgpack package, so `_msgpack` is a strict
  pure-Python codec that writes what msgpack-python writes.
- **A determinism guard**, not a sandbox: while workflow code runs, `time.time`, `random.random`,
  `datetime.datetime.now`, `uuid.uuid4`, ... raise `NondeterminismError` naming the replacement.

Rejected alternatives:
- *asyncio workflows (Temporal's shape)*: an event loop adds a scheduler whose ordering the
  replay would have to pin down, for no gain in a guest that runs one activation per call.
- *Generators/coroutines driven by the SDK*: every await site would need `yield`, and a
  forgotten one silently skips an await.
- *Sticky instances by parking the Python stack (a thread or a greenlet per run)*: they need
  threads or a C extension the component lacks; a host call that returns later parks the
  stack just as well.
- *Wrapping the C SDK in a native extension*: its awaits end the activation inside a host call
  that never returns, which does not fit a Python call stack, and it would add a wasm C
  toolchain next to componentize-py.
- *Recording results of `now`/`random` outside history (e.g. seeding a PRNG once)*: the ABI
  records each value as a command, and the host compares them.
"""

from __future__ import annotations

from . import activity, workflow
from ._activity import ActivityInfo
from ._approvals import ApprovalDecision, ApprovalOutcome, ApprovalResult
from ._entry import GuestHost, manifest, run_activity, run_workflow
from ._errors import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    HttpError,
    NondeterminismError,
    TimerCancelledError,
)
from ._handles import (
    ActivityHandle,
    ApprovalHandle,
    ChildWorkflowHandle,
    Handle,
    SignalHandle,
    TimerHandle,
)
from ._http import HttpResponse
from ._log import Logger, LogLevel
from ._options import ParentClosePolicy, RetryPolicy
from ._registry import declare
from ._replay import WorkflowInfo

__all__ = [
    "ActivityError",
    "ActivityHandle",
    "ActivityInfo",
    "ApplicationError",
    "ApprovalDecision",
    "ApprovalHandle",
    "ApprovalOutcome",
    "ApprovalResult",
    "CancelledError",
    "ChildWorkflowError",
    "ChildWorkflowHandle",
    "GuestHost",
    "Handle",
    "HttpError",
    "HttpResponse",
    "LogLevel",
    "Logger",
    "NondeterminismError",
    "ParentClosePolicy",
    "RetryPolicy",
    "SignalHandle",
    "TimerCancelledError",
    "TimerHandle",
    "WorkflowInfo",
    "activity",
    "declare",
    "manifest",
    "run_activity",
    "run_workflow",
    "workflow",
]
