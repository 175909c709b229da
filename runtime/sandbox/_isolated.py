"""`IsolatedSandbox`: every activation in its own child OS process, for tasks that kept crashing.

The surgical pool serves poisoned tasks, whose guests may take down whatever process hosts them
(a wasmtime bug, a host-side memory blow-up, a test guest calling `test_exit`). Each activation
therefore runs in a fresh `python -m amber.runtime.sandbox._child` process driving an ordinary
`Sandbox` on the same on-disk artifact cache (a module compiles once for every process). The parent:

- sends the request over the child's stdin and serves its frames (`_frames`) until the final
  `output` or `fault`; a fault is rebuilt as the same `GuestFault` subclass with the same fields;
- answers the host imports that reach outside the process — `now` from the parent's `Clock`
  (a manual clock keeps tests deterministic), an activity's `heartbeat` and `cancel_requested`
  through the request's `ActivityHost`, and the module's bytes on an artifact-cache miss (so a
  warm activation fetches nothing: in the worker `module_source` is a server round trip);
- passes every host-call record to `on_host_call` (and the request's own observer) as the call
  ends, so the calls leading up to a crash are known even though the child is gone;
- raises `HostCrash` (exit code or signal, run/step/digest filled in) when the child dies
  without a final frame, sends anything malformed (the child is as untrusted as its guest), or
  is still running `kill_grace_s` after the activation's deadline (then it is killed).

Memory cap: the child sets RLIMIT_DATA to `process_memory_bytes`. Measured here (wasmtime 50.0.1,
Linux 6.18): RLIMIT_AS does not work with the engine as configured, because each linear memory
reserves ~4.3 GB of address space up front (under a 1 GiB RLIMIT_AS every activation fails with
"mmap failed to reserve 0x104000000 bytes"), so RLIMIT_AS would have to sit above 4.3 GB and
would cap nothing real; shrinking `memory_reservation` to fit changes compiled code (explicit
bounds checks: slower, and artifacts no longer shared with the other pools' engine). RLIMIT_DATA
counts only writable private memory — the committed part of linear memory, the Python heap,
thread stacks — not PROT_NONE reservations: under a 1 GiB RLIMIT_DATA activations run as usual,
a guest at its store limit still gets `memory_limit`, and a 2 GiB host-side allocation fails in
the child (MemoryError, so the child exits non-zero: a `HostCrash`) while the parent is
untouched. A waiting child uses ~45 MB of it (VmData); the cap must exceed the activations'
`memory_bytes` plus that, or the guest's `memory.grow` fails early and it sees a plain trap.

Cost: a child spends most of its start-up importing the runtime, so an activation without a
waiting child pays that start-up; with one waiting, it costs a request, a module load from the
artifact cache, the call and its frames. So one spare child is kept waiting: it is started after
each activation and taken by the next one; a spare that died meanwhile is simply replaced.
Back-to-back activations still wait for the spare's start-up: the surgical pool trades
throughput for isolation. `close()` kills the spare.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType

from amber.abi import AmberError, ManifestError, RetryableError, read_manifest
from amber.runtime.model import Clock, GuestFault, HostCrash, ModuleUnavailable, SystemClock

from ._frames import (
    Frame,
    FrameError,
    FramePipe,
    fault_from_frame,
    output_from_frame,
    record_from_frame,
    request_frame,
)
from ._host import ActivationKind, ActivityHost, HostCallRecord
from ._http import HttpPolicy, http_policy
from ._priority import lower_priority
from ._sandbox import ActivationRequest, Places, RawOutput

CHILD_COMMAND: tuple[str, ...] = (sys.executable, "-m", "amber.runtime.sandbox._child")
"""How a child is started; its artifact directory, memory cap and kept Python activity
instances (`warm_runs`, 0 unless it is reused) are appended."""
MAX_HEARTBEAT_BYTES = 64 * 1024
"""Largest heartbeat details a child may pass up (the host import's own cap)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MANIFESTS = 64


class ChildStartFailed(RetryableError):
    """No child process could be started to host the sandbox (a worker problem, not the guest's:
    the request never reached a child). Retryable: the worker backs off and polls again."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _ModuleInfo:
    activities: frozenset[str]
    http: HttpPolicy | None


class _Child:
    """One child process and the frame pipe to it."""

    def __init__(self, command: Sequence[str], *, niceness: int = 0) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=niceness > 0
        )
        lower_priority(self.proc.pid, niceness)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.pipe = FramePipe(self.proc.stdin.fileno(), self.proc.stdout.fileno())
        self.released_at = 0.0
        self.ready = False
        """It said `ready` (a reused child says it once)."""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def start(self, request: Frame, deadline: float) -> bool:
        """Wait for `ready`, then hand over the request; False if the child died first."""
        try:
            if not self.ready:
                frame = self.pipe.receive(deadline)
                if frame is None or frame.get("t") != "ready":
                    return False
                self.ready = True
            self.pipe.send(request, deadline)
        except (BrokenPipeError, TimeoutError, FrameError):
            return False
        return True

    def exit_status(self, grace_s: float) -> str:
        """How the child ended (killing it if it lingers past `grace_s`)."""
        self.close(grace_s)
        code = self.proc.returncode
        if code < 0:
            try:
                return f"died of signal {signal.Signals(-code).name}"
            except ValueError:
                return f"died of signal {-code}"
        return f"exited with code {code}"

    def close(self, grace_s: float = 0.0) -> None:
        """Let the child exit within `grace_s`, else kill it; reap it and close the pipes."""
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.release()

    def release(self) -> None:
        """Close the pipes, leaving the process to exit on its own (reap it with `reaped`)."""
        self.released_at = time.monotonic()
        self.pipe.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def reaped(self, grace_s: float) -> bool:
        """Whether a released child has exited (it is killed once `grace_s` have passed)."""
        if self.proc.poll() is not None:
            return True
        if time.monotonic() - self.released_at < grace_s:
            return False
        self.close()
        return True


class IsolatedSandbox:
    """A `SandboxRunner` that runs each activation in a separate child process.

    Use it where a guest may crash the process hosting it (the surgical pool); elsewhere use the
    in-process `Sandbox`, which is ~15× faster per activation and starts no processes.
    Activations may run concurrently from several threads (each has its own child);
    `on_host_call` is then called from each of those threads.
    """

    def __init__(
        self,
        module_source: Callable[[str], bytes],
        clock: Clock,
        *,
        artifact_dir: Path,
        on_host_call: Callable[[HostCallRecord], None] | None = None,
        process_memory_bytes: int = 1 << 30,
        kill_grace_s: float = 5.0,
        start_timeout_s: float = 60.0,
        keep_spare: bool = True,
        reuse: int = 0,
        niceness: int = 0,
        warm_runs: int = 0,
        child_command: Sequence[str] = CHILD_COMMAND,
    ) -> None:
        """`reuse` > 0 keeps up to that many children after their activation ended (with an
        output or a guest fault) and hands them the next ones: a child then costs a start-up
        once, not per activation. The surgical pool does not reuse: a guest that crashed
        anything gets a process nobody ran before.

        `niceness` > 0 starts each child in a session of its own at that CPU priority, set
        right after the start so that its imports already yield (`_priority`).

        `warm_runs` > 0 lets a reused child keep that many runs' Python activity instances
        (`WarmActivities`), as the worker process does."""
        self._module_source = module_source
        self._clock = clock
        self._on_host_call = on_host_call
        self._kill_grace_s = kill_grace_s
        self._start_timeout_s = start_timeout_s
        self._keep_spare = keep_spare
        self._command = (
            *child_command,
            str(artifact_dir),
            str(process_memory_bytes),
            str(warm_runs if reuse > 0 else 0),
        )
        self._niceness = niceness
        self._places: Places | None = None
        self._lock = threading.Lock()
        self._spare: _Child | None = None
        self._exiting: list[_Child] = []
        """Children that sent their last frame, not yet reaped."""
        self._closed = False
        self._modules: OrderedDict[str, _ModuleInfo] = OrderedDict()
        self._reuse = reuse
        self._idle: list[_Child] = []
        """Reusable children waiting for a request."""
        self._own_clock = isinstance(clock, SystemClock)

    def activities(self, digest: str) -> frozenset[str]:
        """The activity names a module version declares (read from its manifest, in process)."""
        return self._module_info(digest).activities

    def http_policy(self, digest: str) -> HttpPolicy | None:
        """The HTTP allowlist a module version declares (None: no HTTP capability)."""
        return self._module_info(digest).http

    def run(self, request: ActivationRequest) -> RawOutput:
        """Run one activation in a child process.

        Raises the `GuestFault` the guest caused, `HostCrash` if the child died or misbehaved,
        and whatever a parent-side callback (`module_source`, heartbeat) raised.
        """
        child = self._started_child(request)
        try:
            raw = self._serve(child, request)
        except GuestFault as fault:
            if not isinstance(fault, HostCrash):  # the child answered: as good as before
                self._done_with(child)
            raise  # (a crashed child was closed where the crash was found)
        except BaseException:
            child.close()
            raise
        else:
            self._done_with(child)
        finally:
            self._refill()
        return raw

    def _done_with(self, child: _Child) -> None:
        """Keep a child that answered for the next activation, or let it exit."""
        with self._lock:
            if self._reuse > 0 and not self._closed and len(self._idle) < self._reuse:
                self._idle.append(child)
                return
        # The child exits by itself after its last frame; waiting for that here would add a
        # process teardown to every activation, so it is reaped later.
        child.release()
        with self._lock:
            self._exiting.append(child)

    def give_places_with(self, places: Places | None) -> None:
        """Enter `places` while a child's activity waits in a host call (it says so with
        `wait` frames), to give up its owner's places meanwhile (`ParallelSandbox`)."""
        self._places = places

    def close(self) -> None:
        """Kill the spare child; later activations start their own."""
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
            exiting, self._exiting = self._exiting, []
            idle, self._idle = self._idle, []
        if spare is not None:
            spare.close()
        for child in idle:
            child.release()  # it sees its pipe close and exits
            exiting.append(child)
        for child in exiting:
            child.close(self._kill_grace_s)

    def __enter__(self) -> IsolatedSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- children --------------------------------------------------------------------------

    def _started_child(self, request: ActivationRequest) -> _Child:
        frame = request_frame(
            request,
            places=self._places is not None,
            reuse=self._reuse > 0,
            own_clock=self._own_clock,
            observe=request.observer is not None or self._on_host_call is not None,
        )
        status = "did not start"
        for _ in range(2):  # a spare may have died while it waited: then start a fresh one
            child = self._take_spare() or _Child(self._command, niceness=self._niceness)
            if child.start(frame, time.monotonic() + self._start_timeout_s):
                return child
            status = child.exit_status(grace_s=0.0)
        raise ChildStartFailed(f"the sandbox host process {status} before taking the request")

    def _take_spare(self) -> _Child | None:
        spare: _Child | None
        with self._lock:
            if self._idle:
                spare = self._idle.pop()
            else:
                spare, self._spare = self._spare, None
        if spare is not None and not spare.alive():
            spare.close()
            return None
        return spare

    def _refill(self) -> None:
        with self._lock:
            self._exiting = [c for c in self._exiting if not c.reaped(self._kill_grace_s)]
            if self._closed or not self._keep_spare or self._spare is not None:
                return
            self._spare = _Child(self._command, niceness=self._niceness)

    # ---- serving one activation --------------------------------------------------------------

    def _serve(self, child: _Child, request: ActivationRequest) -> RawOutput:
        started = time.monotonic()
        backstop = started + request.limits.deadline_s + self._kill_grace_s
        waiting = _Waiting(self._places if request.kind is ActivationKind.ACTIVITY else None)
        try:
            while True:
                frame = child.pipe.receive(backstop)
                if frame is None:
                    raise self._crash(request, child.exit_status(self._kill_grace_s))
                kind = frame["t"]
                if kind == "record":
                    self._observe(record_from_frame(frame), request)
                elif kind == "call" and frame.get("name") == "wait":
                    # Time spent taking this activation's places back is the parent's, not
                    # the child's: it does not count against the child's deadline backstop.
                    backstop += waiting.mark(frame.get("begin"))
                    child.pipe.send({"t": "reply", "value": None}, backstop)
                elif kind == "call":
                    child.pipe.send({"t": "reply", "value": self._answer(frame, request)}, backstop)
                elif kind == "output":
                    return output_from_frame(frame, request.kind)
                elif kind == "fault":
                    raise fault_from_frame(frame)
                else:
                    raise FrameError(f"unexpected {kind[:32]!r} frame")
        except FrameError as exc:
            child.close()
            raise self._crash(request, f"sent a malformed frame ({exc})") from None
        except BrokenPipeError:
            raise self._crash(request, child.exit_status(self._kill_grace_s)) from None
        except TimeoutError:
            child.close()
            raise self._crash(
                request,
                f"was killed after {time.monotonic() - started:.1f} s: no answer within the"
                f" {request.limits.deadline_s:g} s deadline plus {self._kill_grace_s:g} s grace",
            ) from None
        finally:
            waiting.mark(False)  # a child that died waiting: the caller's places come back

    def _observe(self, record: HostCallRecord, request: ActivationRequest) -> None:
        if self._on_host_call is not None:
            self._on_host_call(record)
        if request.observer is not None:
            request.observer(record)

    def _answer(self, frame: Frame, request: ActivationRequest) -> object:
        name = frame.get("name")
        answer = _ANSWERS.get(name) if isinstance(name, str) else None
        if answer is None:
            raise FrameError(f"unknown call {str(name)[:32]!r}")
        return answer(self, frame, request)

    def _answer_now(self, frame: Frame, request: ActivationRequest) -> int:
        return (self._clock.now() - _EPOCH) // timedelta(microseconds=1)

    def _answer_module(self, frame: Frame, request: ActivationRequest) -> bytes:
        if frame.get("digest") != request.digest:
            raise FrameError("asked for another module than the request's")
        return self._module_bytes(request.digest)

    def _answer_heartbeat(self, frame: Frame, request: ActivationRequest) -> bool:
        details = frame.get("details")
        if not isinstance(details, bytes) or len(details) > MAX_HEARTBEAT_BYTES:
            raise FrameError("heartbeat details are not bytes within the cap")
        return _activity_host(request).heartbeat(details)

    def _answer_cancel_requested(self, frame: Frame, request: ActivationRequest) -> bool:
        return _activity_host(request).cancel_requested()

    @staticmethod
    def _crash(request: ActivationRequest, what: str) -> HostCrash:
        return HostCrash(
            f"the sandbox host process {what}",
            run_id=request.run_id,
            step=request.step,
            digest=request.digest,
        )

    # ---- modules -----------------------------------------------------------------------------

    def _module_bytes(self, digest: str) -> bytes:
        try:
            wasm = self._module_source(digest)
        except RetryableError:
            raise  # the server is unreachable: nothing is wrong with the module
        except AmberError as exc:
            raise ModuleUnavailable(f"cannot load module: {exc}", digest=digest) from None
        if hashlib.sha256(wasm).hexdigest() != digest:
            raise ModuleUnavailable(f"module bytes do not match digest {digest}", digest=digest)
        return wasm

    def _module_info(self, digest: str) -> _ModuleInfo:
        with self._lock:
            info = self._modules.get(digest)
            if info is not None:
                self._modules.move_to_end(digest)
                return info
        wasm = self._module_bytes(digest)
        try:
            manifest = read_manifest(wasm)
            info = _ModuleInfo(
                activities=frozenset(manifest.activities), http=http_policy(manifest)
            )
        except ManifestError as exc:
            raise ModuleUnavailable(f"cannot load module: {exc}", digest=digest) from None
        with self._lock:
            self._modules[digest] = info
            while len(self._modules) > _MAX_MANIFESTS:
                self._modules.popitem(last=False)
        return info


class _Waiting:
    """Whether the child's guest waits in a host call now, giving up its owner's places
    (`IsolatedSandbox.give_places_with`) for as long as it does."""

    def __init__(self, places: Places | None) -> None:
        self._yields = places
        self._given: AbstractContextManager[None] | None = None

    def mark(self, begin: object) -> float:
        """The child's guest begins (or ends) a wait; returns the seconds it took to take the
        places back."""
        if self._yields is None or bool(begin) == (self._given is not None):
            return 0.0  # nothing to give up, or already as the child says
        if begin:
            self._given = self._yields()
            self._given.__enter__()
            return 0.0
        given, self._given = self._given, None
        assert given is not None
        began = time.monotonic()
        given.__exit__(None, None, None)
        return time.monotonic() - began


_ANSWERS: dict[str, Callable[[IsolatedSandbox, Frame, ActivationRequest], object]] = {
    "now": IsolatedSandbox._answer_now,
    "module": IsolatedSandbox._answer_module,
    "heartbeat": IsolatedSandbox._answer_heartbeat,
    "cancel_requested": IsolatedSandbox._answer_cancel_requested,
}
"""The child's `call` frames: host imports (and the module fetch) served by the parent."""


def _activity_host(request: ActivationRequest) -> ActivityHost:
    if request.activity is None:  # the child's host refuses these outside activities
        raise FrameError("an activity callback outside an activity")
    return request.activity
