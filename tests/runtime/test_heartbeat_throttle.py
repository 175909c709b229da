"""A guest that heartbeats in a tight loop sends one RPC per interval, and its latest details
still reach the server. The fake client records calls; the heartbeat RPC itself is tested
against the real server in test_timeouts and test_durable."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from amber.history import TaskKind
from amber.runtime.model._clock import SystemClock
from amber.runtime.model._tasks import HeartbeatAck, LeasedTask
from amber.runtime.worker._heartbeat import GUEST_HEARTBEAT_INTERVAL_S, Heartbeats


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[bytes | None] = []

    def heartbeat(self, task: LeasedTask, *, worker_id: str, details: bytes | None = None) -> Any:
        self.calls.append(details)
        return HeartbeatAck(lease_expires_at=task.lease_expires_at, cancel_requested=False)


def test_a_tight_heartbeat_loop_is_throttled_and_the_last_details_are_sent() -> None:
    clock = SystemClock()
    client = _Recorder()
    beat = Heartbeats(client, "w", clock)  # type: ignore[arg-type]
    beat.start()
    task = LeasedTask(
        task_id=1, fencing=1, kind=TaskKind.ACTIVITY, run_id="r", tenant="t", digest="d",
        name="a", attempt=1, lease_expires_at=clock.now() + timedelta(hours=1),
    )  # fmt: skip
    beat.track(task)
    try:
        for i in range(1000):
            beat.guest_beat(task, bytes([i % 256]))
        assert client.calls == [b"\x00"]  # the first goes out, the rest wait
        deadline = time.monotonic() + 10 * GUEST_HEARTBEAT_INTERVAL_S
        while len(client.calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.calls == [b"\x00", bytes([999 % 256])]  # only the latest, once
    finally:
        beat.untrack(task)
        beat.stop()
        beat.join(timeout=5)
