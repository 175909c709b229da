"""Wake-ups for long polls: PostgreSQL LISTEN/NOTIFY plus in-process pokes.

Pollers wait on a generation counter instead of sleeping in a loop: a commit that enqueues a
task bumps the queue's generation (directly when it happened in this process, through NOTIFY
when another server did it). Waiters still re-check on a short timeout, so a lost notification
(a dropped LISTEN connection) costs latency, never correctness.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from history import RUNS_CHANNEL, TASKS_CHANNEL, Database

_log = logging.getLogger(__name__)


class Notifier:
    """Per-process hub of task and run-closed wake-ups."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cond = threading.Condition()
        self._task_gen: dict[str, int] = {}
        self._run_gen: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="amber-notify", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def task_generation(self, queue: str) -> int:
        with self._cond:
            return self._task_gen.get(queue, 0)

    def run_generation(self, run_id: str) -> int:
        with self._cond:
            return self._run_gen.get(run_id, 0)

    def poke_tasks(self, queue: str) -> None:
        with self._cond:
            self._task_gen[queue] = self._task_gen.get(queue, 0) + 1
            self._cond.notify_all()

    def poke_run(self, run_id: str) -> None:
        with self._cond:
            self._run_gen[run_id] = self._run_gen.get(run_id, 0) + 1
            if len(self._run_gen) > 10_000:  # forget old runs; waiters re-check on timeout
                self._run_gen.clear()
            self._cond.notify_all()

    def wait_tasks(self, queue: str, seen: int, timeout: float) -> None:
        """Block until the queue's generation moves past `seen` or `timeout` passes."""
        with self._cond:
            self._cond.wait_for(lambda: self._task_gen.get(queue, 0) != seen, timeout)

    def wait_run(self, run_id: str, seen: int, timeout: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._run_gen.get(run_id, 0) != seen, timeout)

    def _wake_all(self) -> None:
        with self._cond:
            for queue in list(self._task_gen):
                self._task_gen[queue] += 1
            for run_id in list(self._run_gen):
                self._run_gen[run_id] += 1
            self._cond.notify_all()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                with self._db.connect() as conn:
                    conn.execute(f"LISTEN {TASKS_CHANNEL}")
                    conn.execute(f"LISTEN {RUNS_CHANNEL}")
                    backoff = 0.1
                    self._wake_all()  # anything may have happened while we were not listening
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            if note.channel == TASKS_CHANNEL:
                                self.poke_tasks(note.payload)
                            else:
                                self.poke_run(note.payload)
            except (psycopg.Error, OSError) as exc:
                if self._stop.is_set():
                    return
                _log.warning("LISTEN connection lost (%s); reconnecting", exc)
            except Exception:  # keep the listener alive; pollers fall back to timeouts
                _log.exception("notification listener failed; restarting it")
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
