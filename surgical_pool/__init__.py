"""Poison pills: the surgical worker pool and offline replay of triage bundles.

The engine side — crash counting, fingerprints, poisoning, suspension and the audited triage
commands — lives in `runtime` and `history`, where the transactions that record failures are.
This package holds what runs *outside* the server: the surgical worker, which serves only
poisoned tasks and runs each activation in its own OS process (`runtime.sandbox`'s
`IsolatedSandbox`, re-exported here) with a span per replayed event and per host call
(`SurgicalTrace`), and the offline replay of an exported bundle (`replay_bundle`), which needs
no database.

Rejected: a separate queue (table) for poisoned tasks — moving a task between two queues can
lose it; a fork of the worker for the surgical pool — one code path means what the surgical
pool sees is what the main pool ran; in-process isolation by threads — a guest that crashes
its host process (or a host bug it triggers) would take the pool down.
"""

from amber import _checkout

_checkout.alias(__name__)


from amber.runtime.sandbox import ChildStartFailed, IsolatedSandbox

from ._replay import (
    HistoryReplay,
    ReplayResult,
    SandboxFactory,
    failure_to_replay,
    replay_bundle,
    replay_history,
)
from ._tracing import SurgicalTrace
from ._worker import SURGICAL_MEMORY_BYTES, SURGICAL_NICENESS, SurgicalWorker, surgical_settings

__all__ = [
    "SURGICAL_MEMORY_BYTES",
    "SURGICAL_NICENESS",
    "ChildStartFailed",
    "HistoryReplay",
    "IsolatedSandbox",
    "ReplayResult",
    "SandboxFactory",
    "SurgicalTrace",
    "SurgicalWorker",
    "failure_to_replay",
    "replay_bundle",
    "replay_history",
    "surgical_settings",
]
