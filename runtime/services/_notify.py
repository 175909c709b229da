"""Wake-ups for long polls: PostgreSQL LISTEN/NOTIFY plus in-process pokes.

Pollers wait on a generation counter instead of sleeping in a loop: a commit that enqueues a
task bumps its queue's generation (directly when it happened in this process, through NOTIFY
when another server did it). Each queue and each watched run has its own condition, so a poke
wakes only the waiters it concerns. Waiters still re-check on a timeout, so a lost notification
(a dropped LISTEN connection) costs latency, never correctness.

A task poke wakes one poller, not all of them: waking every idle poller for each new task made
each of them run a claim that found nothing (a worker's eight slots turned one step into a
dozen empty transactions). A poller that does get a task passes the wake on (`pass_on`), so a
commit that enqueued several tasks still reaches as many pollers as it needs, one after another.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from amber.history import QUERIES_CHANNEL, RUNS_CHANNEL, TASKS_CHANNEL, Database

_log = logging.getLogger(__name__)


class _Signal:
    __slots__ = ("cond", "generation", "watchers")

    def __init__(self, lock: threading.Lock) -> None:
        self.cond = threading.Condition(lock)
        self.generation = 0
        self.watchers = 0

    def bump(self, *, one: bool = False) -> None:
        self.generation += 1
        if one:
            self.cond.notify()
        else:
            self.cond.notify_all()


class RunWatch:
    """A registration for one run's close (or one query's answer); from `Notifier.watch_*`."""

    def __init__(self, signal: _Signal) -> None:
        self._signal = signal

    @property
    def generation(self) -> int:
        with self._signal.cond:
            return self._signal.generation

    def wait(self, seen: int, timeout: float) -> None:
        """Block until the run is poked after `seen` or `timeout` passes."""
        with self._signal.cond:
            self._signal.cond.wait_for(lambda: self._signal.generation != seen, timeout)


class Notifier:
    """Per-process hub of task and run-closed wake-ups."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], _Signal] = {}
        """Task wake-ups by (queue, pool)."""
        self._runs: dict[str, _Signal] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="amber-notify", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _queue(self, queue: str, pool: str) -> _Signal:
        signal = self._queues.get((queue, pool))
        if signal is None:
            signal = self._queues[(queue, pool)] = _Signal(self._lock)
        return signal

    def task_generation(self, queue: str, pool: str = "main") -> int:
        with self._lock:
            return self._queue(queue, pool).generation

    def wait_tasks(self, queue: str, seen: int, timeout: float, pool: str = "main") -> None:
        """Block until the generation of the queue's `pool` moves past `seen` or `timeout`
        passes."""
        with self._lock:
            signal = self._queue(queue, pool)
            signal.cond.wait_for(lambda: signal.generation != seen, timeout)

    def poke_tasks(self, queue: str) -> None:
        """A task of `queue` may be claimable: wake one poller of each pool (a wake carries
        no pool, and a poller of the other pool would claim nothing and keep it)."""
        with self._lock:
            for (name, _pool), signal in self._queues.items():
                if name == queue:
                    signal.bump(one=True)

    def pass_on(self, queue: str, pool: str = "main") -> None:
        """A poller claimed a task, or gave up after a wake without claiming: wake the next
        poller of its pool, in case a task is claimable."""
        with self._lock:
            self._queue(queue, pool).bump(one=True)

    @contextmanager
    def _watch(self, key: str) -> Iterator[RunWatch]:
        with self._lock:
            signal = self._runs.get(key)
            if signal is None:
                signal = self._runs[key] = _Signal(self._lock)
            signal.watchers += 1
        try:
            yield RunWatch(signal)
        finally:
            with self._lock:
                signal.watchers -= 1
                if signal.watchers == 0:
                    del self._runs[key]

    def _poke(self, key: str) -> None:
        with self._lock:
            signal = self._runs.get(key)
            if signal is not None:
                signal.bump()

    def watch_run(self, run_id: str) -> contextlib.AbstractContextManager[RunWatch]:
        """Register interest in a run *before* checking it, so no poke can slip between."""
        return self._watch("run:" + run_id)

    def poke_run(self, run_id: str) -> None:
        self._poke("run:" + run_id)

    def watch_query(self, task_id: str) -> contextlib.AbstractContextManager[RunWatch]:
        """Register interest in a query task's answer before checking for it."""
        return self._watch("query:" + task_id)

    def poke_query(self, task_id: str) -> None:
        self._poke("query:" + task_id)

    def poke(self, wakes: Iterable[tuple[str, str]]) -> None:
        """Wake the waiters of what a committed transaction changed: (channel, key) pairs as
        the engine's `*_txn` functions return them. Duplicates wake once."""
        for channel, key in dict.fromkeys(wakes):
            if channel == TASKS_CHANNEL:
                self.poke_tasks(key)
            elif channel == QUERIES_CHANNEL:
                self.poke_query(key)
            else:
                self.poke_run(key)

    def _wake_all(self) -> None:
        with self._lock:
            for signal in (*self._queues.values(), *self._runs.values()):
                signal.bump()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                with self._db.connect() as conn:
                    conn.execute(f"LISTEN {TASKS_CHANNEL}")
                    conn.execute(f"LISTEN {RUNS_CHANNEL}")
                    conn.execute(f"LISTEN {QUERIES_CHANNEL}")
                    backoff = 0.1
                    self._wake_all()  # anything may have happened while we were not listening
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            if note.channel == TASKS_CHANNEL:
                                # Our own commits poke in-process already; their echo would
                                # wake a second poller for the same task.
                                if not self._db.is_own_backend(note.pid):
                                    self.poke_tasks(note.payload)
                            elif note.channel == QUERIES_CHANNEL:
                                self.poke_query(note.payload)
                            else:
                                self.poke_run(note.payload)
            except Exception as exc:  # keep listening; pollers fall back to their timeouts
                if self._stop.is_set():
                    return
                _log.warning("LISTEN connection lost (%s); reconnecting", exc)
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


def poke(notifier: Notifier | None, wakes: Iterable[tuple[str, str]]) -> None:
    """After a commit: wake the waiters of what it changed, if this process runs a notifier
    (a service built without one, in a tool or a test, wakes nobody)."""
    if notifier is not None:
        notifier.poke(wakes)
