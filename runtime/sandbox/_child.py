"""The child process of `IsolatedSandbox`: runs one activation (or, reused, one after another).

Started as `python -m amber.runtime.sandbox._child ARTIFACT_DIR MEMORY_BYTES WARM_RUNS` (the
last: runs whose Python activity instance a reused child keeps; 0 for none) with pipes on
stdin and stdout (stderr is the parent's). It caps its own memory, builds its engine on the
parent's artifact cache, says `ready`, and waits for a `run` frame (a spare child may wait a
long time, and exits quietly if the parent closes the pipe instead). It runs the activation in
an ordinary `Sandbox`: host imports that reach outside the process (`now` unless the request
lets it read the system clock, `heartbeat`, `cancel_requested`, and the module bytes on a cache
miss) become `call` frames answered by the parent; host calls are streamed as `record` frames
when the request asks; the last frame is the `output` or the `fault`. A guest fault is an
answer, not a crash: only a dead process is. A request marked `reuse` is followed by waiting
for the next one; otherwise the child exits.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from amber.runtime.model import GuestFault

from ._engine import SandboxEngine
from ._frames import (
    Frame,
    fault_frame,
    limits_from_doc,
    output_frame,
    read_frame,
    record_frame,
    write_frame,
)
from ._host import ActivationKind, ActivityHost, HostCallRecord
from ._sandbox import ActivationRequest, Sandbox, Slice
from ._warm import WarmActivities

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def limit_memory(max_bytes: int) -> None:
    """Cap this process's writable memory (RLIMIT_DATA; see `_isolated`)."""
    resource.setrlimit(resource.RLIMIT_DATA, (max_bytes, max_bytes))


class _Parent:
    """The parent at the other end of the pipes: callbacks and streamed records."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self._reader, self._writer = reader, writer
        self.own_clock = False
        """The current request lets this process read the system clock itself."""

    def send(self, frame: Frame) -> None:
        write_frame(self._writer, frame)

    def receive(self) -> Frame | None:
        return read_frame(self._reader)

    def call(self, name: str, **args: Any) -> Any:
        self.send({"t": "call", "name": name, **args})
        reply = self.receive()
        if reply is None or reply.get("t") != "reply":
            # The parent gave up on this activation (it kills us next): nothing left to do.
            os._exit(1)
        return reply.get("value")

    def record(self, record: HostCallRecord) -> None:
        self.send(record_frame(record))

    def now(self) -> datetime:
        """The parent's clock, exactly (microseconds since the epoch)."""
        if self.own_clock:
            return datetime.now(UTC)
        return EPOCH + timedelta(microseconds=self.call("now"))

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """A host call waits: the parent gives up the places this activation holds there
        until it is over (`Sandbox.give_places_with`)."""
        self.call("wait", begin=True)
        try:
            yield
        finally:
            self.call("wait", begin=False)

    def module(self, digest: str) -> bytes:
        value: bytes = self.call("module", digest=digest)
        return value


def _request(frame: Frame, parent: _Parent, sandbox: Sandbox) -> ActivationRequest:
    kind = ActivationKind(frame["kind"])
    activity = None
    if frame["idempotency_key"] is not None:
        activity = ActivityHost(
            idempotency_key=frame["idempotency_key"],
            http=sandbox.http_policy(frame["digest"]),
            heartbeat=lambda details: bool(parent.call("heartbeat", details=details)),
            cancel_requested=lambda: bool(parent.call("cancel_requested")),
        )
    return ActivationRequest(
        kind=kind,
        digest=frame["digest"],
        export=frame["export"],
        input=frame["input"],
        run_id=frame["run_id"],
        step=frame["step"],
        limits=limits_from_doc(frame["limits"]),
        query=frame["query"],
        slice=None if frame.get("slice") is None else Slice(**frame["slice"]),
        activity=activity,
        observer=parent.record if frame.get("observe", True) else None,
    )


def main(argv: list[str]) -> int:
    artifact_dir, memory_bytes = Path(argv[0]), int(argv[1])
    warm_runs = int(argv[2])
    limit_memory(memory_bytes)
    # Frames own the real stdout; anything else printing to stdout (a stray print, a native
    # library) goes to stderr instead of corrupting the stream.
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    parent = _Parent(sys.stdin.buffer, frames_out)
    # Its pool's tables count against the memory cap (RLIMIT_DATA): room for the kept
    # instances and the one running, no more.
    engine = SandboxEngine(artifact_dir, max_modules=8, instances=warm_runs + 2)
    # A reused child (a worker's) keeps its runs' Python activity instances, as the worker does.
    # Kept instances count against the memory cap: they may take half of it.
    warm = WarmActivities(warm_runs, max_bytes=memory_bytes // 2) if warm_runs > 0 else None
    sandbox = Sandbox(engine, parent, parent.module, warm=warm)
    parent.send({"t": "ready", "pid": os.getpid()})
    while True:
        frame = parent.receive()
        if frame is None:
            return 0  # a spare, or a reused child, the parent no longer needs
        parent.own_clock = bool(frame.get("own_clock"))
        sandbox.give_places_with(parent.waiting if frame.get("places") else None)
        try:
            raw = sandbox.run(_request(frame, parent, sandbox))  # loading may fault too
        except GuestFault as fault:
            parent.send(fault_frame(fault))
        else:
            parent.send(output_frame(raw))
        if not frame.get("reuse"):
            return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except BrokenPipeError:
        code = 1  # the parent is gone (it exited, or killed this activation): nobody to tell
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: the engine and its ticker thread die with us
