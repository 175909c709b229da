"""Assemble a surgical-pool worker: isolated sandbox, detailed tracing, lower CPU priority.

It is the ordinary `runtime.Worker` (one code path for both pools) with three differences:
it leases only poisoned tasks (`pool="surgical"`, no eager dispatch), every activation runs in
its own child process (`IsolatedSandbox`), and every host call and replayed event is traced.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from opentelemetry.trace import Tracer

from amber.runtime.client import AmberClient
from amber.runtime.model import Clock, SystemClock
from amber.runtime.sandbox import IsolatedSandbox
from amber.runtime.worker import Worker, WorkerSettings

from ._tracing import SurgicalTrace

SURGICAL_MEMORY_BYTES = 64 * 1024 * 1024
"""Linear-memory limit of a surgical activation: the main pool's default. A poisoned task is
diagnosed under the limits it failed under; a tighter one turned a 48 MiB output into a plain
trap, with a new fingerprint, a crash count starting over and a bundle that replayed the
surgical failure instead of the original. Its isolation is its own process and that process's
memory cap (`IsolatedSandbox`), not a smaller guest. Whatever a surgical worker is configured
with, a task runs under exactly the limits its last crash ran under (`no_tighter_than_crash`
with `exact`: looser ones would change the diagnosis too)."""

SURGICAL_NICENESS = 10
"""CPU niceness of a surgical worker and its guest processes: a poisoned task is work nobody
waits on, and a fuel bomb under diagnosis burns its whole budget on every attempt, so on a busy
machine it gets the CPU healthy tasks leave (a nice-10 process gets about a tenth of a core that
nice-0 work also wants) instead of an equal share. Kept at 10, not 19: an activation still has to
finish inside the wall-clock deadline it failed under, or the diagnosis would change from
`out_of_fuel` to `deadline`."""


def surgical_settings(base: WorkerSettings, *, memory_bytes: int | None = None) -> WorkerSettings:
    """`base` turned into a surgical worker's settings: one task at a time, the same limits
    (or `memory_bytes` for every activation, when given)."""
    if memory_bytes is None:
        return replace(base, pool="surgical", slots=1)
    return replace(
        base,
        pool="surgical",
        slots=1,
        workflow_limits=replace(base.workflow_limits, memory_bytes=memory_bytes),
        activity_limits=replace(base.activity_limits, memory_bytes=memory_bytes),
    )


class SurgicalWorker:
    """A worker serving the surgical pool; `close()` after `run()` returns."""

    def __init__(
        self,
        client: AmberClient,
        settings: WorkerSettings,
        *,
        artifact_dir: Path,
        clock: Clock | None = None,
        spans: Tracer | None = None,
    ) -> None:
        """`spans`: the tracer to use (default: the process's, see `runtime.configure_tracing`)."""
        clock = clock or SystemClock()
        self.trace = SurgicalTrace(spans)
        self.sandbox = IsolatedSandbox(
            client.get_module,
            clock,
            artifact_dir=artifact_dir,
            on_host_call=self.trace.on_host_call,
        )
        self.worker = Worker(
            client,
            self.sandbox,
            replace(settings, pool="surgical", slots=1),
            clock,
            self.trace,
            spans,
        )

    def run(self) -> None:
        self.worker.run()

    def run_once(self, *, wait_s: float) -> bool:
        return self.worker.run_once(wait_s=wait_s)

    def stop(self) -> None:
        self.worker.stop()

    def close(self) -> None:
        self.worker.stop()
        self.sandbox.close()
