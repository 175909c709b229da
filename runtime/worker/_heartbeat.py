"""Lease heartbeats for the tasks a worker is running (one thread per worker, any number of
tasks): each task's lease is renewed every third of its length while its activation runs, and
an activity's own heartbeats are throttled to one RPC per `GUEST_HEARTBEAT_INTERVAL_S`.

A task whose lease is found lost (the run closed, was reset, or the task went to another worker)
reads as asked to stop (`cancel_requested`) until its activation ends: whatever it still computes
is discarded, so an activity sleeping in the host stops holding its guest slot."""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from amber.abi import AmberError
from amber.history import LeaseLost
from amber.runtime.client import AmberClient, WorkStream
from amber.runtime.model import Clock, HeartbeatAck, LeasedTask

_log = logging.getLogger(__name__)

GUEST_HEARTBEAT_INTERVAL_S = 1.0
"""At most one activity heartbeat RPC per task this often (Temporal throttles likewise)."""


@dataclass(slots=True, kw_only=True)
class _Beat:
    task: LeasedTask
    expires_at: datetime
    """Lease expiry as last confirmed by the server."""
    cancel_requested: bool
    """The server asked the activity to stop (seen in a heartbeat answer)."""
    interval: float
    due: float
    pending: bytes | None = None
    """Details of a guest heartbeat held back by the throttle, sent with the next beat."""
    last_guest_beat: float = -math.inf


class Heartbeats(threading.Thread):
    """Keeps the leases of the tasks being run alive (tracked from lease to report)."""

    def __init__(self, client: AmberClient | WorkStream, worker_id: str, clock: Clock) -> None:
        super().__init__(name="amber-heartbeat", daemon=True)
        self._client, self._worker_id, self._clock = client, worker_id, clock
        self._cond = threading.Condition()
        self._beats: dict[int, _Beat] = {}
        """By the identity of the leased task object (a re-lease is a new object)."""
        self._lost: set[int] = set()
        """Tasks (by identity) whose lease was found lost while they ran."""
        self._stopped = False

    def track(self, task: LeasedTask) -> None:
        remaining = (task.lease_expires_at - self._clock.now()).total_seconds()
        interval = max(remaining / 3, 0.05)
        with self._cond:
            self._beats[id(task)] = _Beat(
                task=task,
                expires_at=task.lease_expires_at,
                cancel_requested=task.cancel_requested,
                interval=interval,
                due=time.monotonic() + interval,
            )
            self._cond.notify()

    def untrack(self, task: LeasedTask) -> None:
        """The task's activation ended (its report sent, or abandoned)."""
        with self._cond:
            self._beats.pop(id(task), None)
            self._lost.discard(id(task))

    def lost(self, task: LeasedTask) -> None:
        """The task's lease is gone: stop renewing it, and tell its activity to stop."""
        with self._cond:
            if self._beats.pop(id(task), None) is not None:
                self._lost.add(id(task))

    def holding(self) -> list[int]:
        """The ids of the tasks this worker is running now."""
        with self._cond:
            return [beat.task.task_id for beat in self._beats.values()]

    def expires_at(self, task: LeasedTask) -> datetime:
        """The lease expiry the server last confirmed (the leased value once untracked)."""
        with self._cond:
            beat = self._beats.get(id(task))
            return task.lease_expires_at if beat is None else beat.expires_at

    def cancel_requested(self, task: LeasedTask) -> bool:
        with self._cond:
            if id(task) in self._lost:
                return True  # nothing it computes can be reported any more
            beat = self._beats.get(id(task))
            return task.cancel_requested if beat is None else beat.cancel_requested

    def guest_beat(self, task: LeasedTask, details: bytes) -> bool:
        """An activity's own heartbeat; returns whether cancellation was requested.

        Throttled to one RPC per `GUEST_HEARTBEAT_INTERVAL_S`: a guest that heartbeats in a
        tight loop must not flood the server. A beat inside the interval is held and its
        details go out with the next one (at most an interval later); only the latest is kept.
        """
        with self._cond:
            beat = self._beats.get(id(task))
            now = time.monotonic()
            if beat is not None:
                next_allowed = beat.last_guest_beat + GUEST_HEARTBEAT_INTERVAL_S
                if now < next_allowed:
                    beat.pending = details
                    beat.due = min(beat.due, next_allowed)
                    self._cond.notify()
                    return beat.cancel_requested
                beat.last_guest_beat = now
                beat.pending = None
        ack = self._client.heartbeat(task, worker_id=self._worker_id, details=details)
        self.note(task, ack)
        return self.cancel_requested(task)

    def note(self, task: LeasedTask, ack: HeartbeatAck) -> None:
        """Remember what a heartbeat answer said about `task` (if it is still tracked)."""
        with self._cond:
            beat = self._beats.get(id(task))
            if beat is not None:
                beat.expires_at = ack.lease_expires_at
                beat.cancel_requested = beat.cancel_requested or ack.cancel_requested

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _next_due(self) -> tuple[_Beat | None, bytes | None]:
        with self._cond:
            while not self._stopped:
                beat = min(self._beats.values(), key=lambda b: b.due, default=None)
                now = time.monotonic()
                if beat is not None and beat.due <= now:
                    beat.due = now + beat.interval
                    details, beat.pending = beat.pending, None
                    if details is not None:
                        beat.last_guest_beat = now
                    return beat, details
                self._cond.wait(None if beat is None else beat.due - now)
            return None, None

    def run(self) -> None:
        while True:
            beat, details = self._next_due()
            if beat is None:
                return
            task = beat.task
            try:
                ack = self._client.heartbeat(task, worker_id=self._worker_id, details=details)
                self.note(task, ack)
            except LeaseLost:
                # Most often the run closed or moved on (a cancel, a reset, a completion racing
                # this beat): routine, so not a warning. A lease that expired under a stalled
                # worker shows on the server, as a `worker_lost` attempt.
                _log.info(
                    "task %d: its lease is gone (the run closed, was reset, or the task moved);"
                    " asking it to stop",
                    task.task_id,
                )
                self.lost(task)
            except AmberError as exc:
                _log.warning("heartbeat for task %d failed: %s", task.task_id, exc)
