"""A server's status board: the workers that poll it, and what `amber status` reports.

Workers are known from their polls, per server: a worker polling another server sharing the
database shows there. Rejected: a workers table written on every poll (a write per long poll for
a figure that only needs to be roughly current).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from amber.history import StoreGauges, Task, TaskState
from amber.runtime.model import Clock, QueueDepth, ServerStatus, WorkerSeen

RECENT = timedelta(seconds=30)
"""A worker that has not polled for this long is no longer listed."""
MAX_WORKERS = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusSources:
    """Where the board reads what is not its own."""

    version: str
    database_down: Callable[[], str | None]
    gauges: Callable[[], StoreGauges]
    console_url: Callable[[], str]
    metrics_url: Callable[[], str]


class StatusBoard:
    """Thread-safe; one per server."""

    def __init__(self, clock: Clock, sources: StatusSources) -> None:
        self._clock = clock
        self._sources = sources
        self._lock = threading.Lock()
        self._workers: dict[tuple[str, str, str], datetime] = {}

    def seen(self, worker_id: str, queue: str, pool: str) -> None:
        """A worker polled (queue, pool), or reported and asked for its next task there."""
        now = self._clock.now()
        with self._lock:
            if len(self._workers) >= MAX_WORKERS:
                self._forget(now)
            self._workers[(worker_id, queue, pool)] = now

    def unserved(self, tasks: Iterable[Task]) -> tuple[tuple[str, str], ...]:
        """The (queue, pool) of pending `tasks` no worker polled on this server lately: a run
        waiting on a queue nobody serves otherwise reads as an ordinary pending task."""
        waiting = {
            (t.queue, t.pool) for t in tasks if t.state is TaskState.PENDING and t.pool != "held"
        }
        if not waiting:
            return ()
        now = self._clock.now()
        with self._lock:
            served = {(q, p) for (_, q, p), at in self._workers.items() if now - at <= RECENT}
        return tuple(sorted(waiting - served))

    def _forget(self, now: datetime) -> None:
        for key, at in list(self._workers.items()):
            if now - at > RECENT:
                del self._workers[key]

    def status(self) -> ServerStatus:
        now = self._clock.now()
        with self._lock:
            self._forget(now)
            workers = tuple(
                WorkerSeen(worker_id=w, queue=q, pool=p, last_seen=at)
                for (w, q, p), at in sorted(self._workers.items())
            )
        problem = self._sources.database_down()
        queues: tuple[QueueDepth, ...] = ()
        if problem is None:
            try:
                gauges = self._sources.gauges()
            except Exception as exc:  # the status still answers, saying why
                problem = f"database unavailable: {exc}"
            else:
                queues = gauges.queues
        return ServerStatus(
            version=self._sources.version,
            database_ok=problem is None,
            database_detail=problem or "reachable",
            console_url=self._sources.console_url(),
            metrics_url=self._sources.metrics_url(),
            workers=workers,
            queues=queues,
        )
