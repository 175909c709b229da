"""The wire format between `IsolatedSandbox` and its child: length-prefixed msgpack frames.

A frame is a 4-byte big-endian length, then a msgpack map with string keys whose `"t"` says what
it is. Parent → child: `run` (the activation request) and `reply` (the answer to a callback).
Child → parent: `ready` (started, engine built), `call` (a host import that needs the parent:
`now`, `heartbeat`, `cancel_requested`, or the module's bytes), `record` (one host call, sent as
it ends), and exactly one final `output` or `fault`.

The parent trusts the child no more than the guest it runs: everything read from the child goes
through the strict `*_from_frame` decoders here, and anything oversized, truncated or mistyped is
a `FrameError` (which the parent reports as a host crash), never another exception type.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import struct
import time
from typing import IO, Any

from amber.abi import NotMsgpack, pack, unpack
from amber.runtime.model import (
    AbiViolation,
    DeadlineExceeded,
    GuestFault,
    GuestTrap,
    HostCrash,
    MalformedOutput,
    MemoryLimitExceeded,
    ModuleUnavailable,
    NonDeterminism,
    OutOfFuel,
    SliceUsed,
    StackOverflow,
)

from ._host import MAX_RECORD_DETAIL, ActivationKind, HostCallRecord
from ._sandbox import ActivationRequest, RawOutput, SandboxLimits

MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame either side accepts (an envelope is capped at 4 MiB, a module at 8 MiB)."""

Frame = dict[str, Any]

_HEADER = struct.Struct(">I")
_READ_CHUNK = 1 << 16

FAULT_TYPES: dict[str, type[GuestFault]] = {
    cls.__name__: cls
    for cls in (
        GuestTrap,
        StackOverflow,
        OutOfFuel,
        SliceUsed,
        MemoryLimitExceeded,
        DeadlineExceeded,
        MalformedOutput,
        AbiViolation,
        NonDeterminism,
        ModuleUnavailable,
        HostCrash,
    )
}
"""Every fault a child may report, by type name (a test checks none is missing)."""


class FrameError(Exception):
    """A frame that is oversized, truncated or not what the protocol allows."""


def encode_frame(frame: Frame) -> bytes:
    body = pack(frame)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds the cap of {MAX_FRAME_BYTES}")
    return _HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> Frame:
    try:
        frame = unpack(body, what="frame")
    except NotMsgpack as exc:
        raise FrameError(str(exc)) from None
    if not isinstance(frame, dict) or not all(isinstance(k, str) for k in frame):
        raise FrameError("not a map with string keys")
    if not isinstance(frame.get("t"), str):
        raise FrameError("no frame type")
    return frame


def _body_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes announced; the cap is {MAX_FRAME_BYTES}")
    return int(length)


# ---- the child's side: blocking pipes, trusted peer ------------------------------------------


def read_frame(stream: IO[bytes]) -> Frame | None:
    """The next frame from the parent, or None when the parent closed the pipe."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    length = _body_length(header)
    body = stream.read(length)
    if len(body) < length:
        return None
    return decode_body(body)


def write_frame(stream: IO[bytes], frame: Frame) -> None:
    stream.write(encode_frame(frame))
    stream.flush()


# ---- the parent's side: non-blocking pipes with a deadline, untrusted peer -------------------


class FramePipe:
    """Frames to and from one child over its stdin/stdout, never blocking past a deadline.

    `deadline` values are `time.monotonic()` instants; passing one raises `TimeoutError`.
    """

    def __init__(self, write_fd: int, read_fd: int) -> None:
        os.set_blocking(write_fd, False)
        os.set_blocking(read_fd, False)
        self._write_fd, self._read_fd = write_fd, read_fd
        self._buffer = bytearray()
        self._eof = False
        self._reader = selectors.DefaultSelector()
        self._reader.register(read_fd, selectors.EVENT_READ)
        self._writer = selectors.DefaultSelector()
        self._writer.register(write_fd, selectors.EVENT_WRITE)

    def send(self, frame: Frame, deadline: float) -> None:
        """Write one frame. Raises `BrokenPipeError` if the child is gone."""
        view = memoryview(encode_frame(frame))
        while view:
            self._wait(self._writer, deadline)
            try:
                written = os.write(self._write_fd, view)
            except BlockingIOError:
                continue
            view = view[written:]

    def receive(self, deadline: float) -> Frame | None:
        """The next frame, or None once the child closed its end (exited or died)."""
        header = self._take(_HEADER.size, deadline)
        if header is None:
            return None
        body = self._take(_body_length(header), deadline)
        return None if body is None else decode_body(body)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()

    def _take(self, size: int, deadline: float) -> bytes | None:
        while len(self._buffer) < size:
            if self._eof:
                return None
            self._wait(self._reader, deadline)
            try:
                chunk = os.read(self._read_fd, max(_READ_CHUNK, size - len(self._buffer)))
            except BlockingIOError:
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken

    @staticmethod
    def _wait(selector: selectors.BaseSelector, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not selector.select(remaining):
            raise TimeoutError


# ---- what the frames carry -------------------------------------------------------------------


def request_frame(
    request: ActivationRequest,
    *,
    places: bool = False,
    reuse: bool = False,
    own_clock: bool = False,
    observe: bool = True,
) -> Frame:
    """The `run` frame: the request without its callables (the child proxies those back).

    `reuse`: the child waits for another request afterwards instead of exiting. `own_clock`:
    the child reads the system clock itself instead of asking the parent (whose clock is the
    system clock). `observe`: the child streams a record of every host call. `places`: the
    child says when its activity waits in a host call (`wait` calls), so that the parent gives
    up its owner's places meanwhile."""
    return {
        "reuse": reuse,
        "own_clock": own_clock,
        "observe": observe,
        "t": "run",
        "kind": request.kind.value,
        "digest": request.digest,
        "export": request.export,
        "input": request.input,
        "run_id": request.run_id,
        "step": request.step,
        "limits": dataclasses.asdict(request.limits),
        "query": request.query,
        "slice": None if request.slice is None else dataclasses.asdict(request.slice),
        "places": places,
        "idempotency_key": None if request.activity is None else request.activity.idempotency_key,
    }


def limits_from_doc(doc: dict[str, Any]) -> SandboxLimits:
    return SandboxLimits(**doc)


def record_frame(record: HostCallRecord) -> Frame:
    return {"t": "record", **dataclasses.asdict(record)}


def record_from_frame(frame: Frame) -> HostCallRecord:
    return HostCallRecord(
        name=_str(frame, "name")[:64],
        started_ns=_int(frame, "started_ns"),
        ended_ns=_int(frame, "ended_ns"),
        detail=_str(frame, "detail")[:MAX_RECORD_DETAIL],
        error=_opt_str(frame, "error"),
    )


def output_frame(raw: RawOutput) -> Frame:
    return {
        "t": "output",
        "envelope": raw.envelope,
        "suspended": raw.suspended,
        "handed_out": [list(pair) for pair in raw.handed_out],
        "logs": [list(line) for line in raw.logs],
        "fuel_used": raw.fuel_used,
        "memory_bytes": raw.memory_bytes,
        "host_calls": raw.host_calls,
        "duration_s": raw.duration_s,
        "published": raw.published,
    }


def output_from_frame(frame: Frame, kind: ActivationKind) -> RawOutput:
    return RawOutput(
        envelope=_bytes(frame, "envelope"),
        suspended=_bool(frame, "suspended"),
        handed_out=tuple(_handed_out(v, kind) for v in _list(frame, "handed_out")),
        logs=tuple(_log_line(v) for v in _list(frame, "logs")),
        fuel_used=_int(frame, "fuel_used"),
        memory_bytes=_int(frame, "memory_bytes"),
        host_calls=_int(frame, "host_calls"),
        duration_s=_float(frame, "duration_s"),
        published=_published(frame),
    )


def fault_frame(fault: GuestFault) -> Frame:
    frame: Frame = {
        "t": "fault",
        "type": type(fault).__name__,
        "detail": fault.detail,
        "run_id": fault.run_id,
        "step": fault.step,
        "digest": fault.digest,
        "trap_code": fault.trap_code,
        "fuel_used": fault.fuel_used,
        "memory_bytes": fault.memory_bytes,
        "published": fault.published,
    }
    if isinstance(fault, NonDeterminism):
        frame |= {
            "position": fault.position,
            "seq": fault.seq,
            "recorded": fault.recorded,
            "issued": fault.issued,
        }
    return frame


def fault_from_frame(frame: Frame) -> GuestFault:
    """The same `GuestFault` subclass, with the same fields, as the child raised."""
    kind = FAULT_TYPES.get(_str(frame, "type"))
    if kind is None:
        raise FrameError(f"unknown fault type {frame['type'][:64]!r}")
    fault: GuestFault
    if kind is NonDeterminism:
        fault = NonDeterminism(
            run_id=_str(frame, "run_id"),
            digest=_str(frame, "digest"),
            position=_int(frame, "position"),
            recorded=_str(frame, "recorded"),
            issued=_str(frame, "issued"),
            seq=_opt_int(frame, "seq"),
        )
        fault.step = _opt_int(frame, "step")
    else:
        fault = kind(
            _str(frame, "detail"),
            run_id=_str(frame, "run_id"),
            step=_opt_int(frame, "step"),
            digest=_str(frame, "digest"),
        )
    fault.trap_code = _opt_str(frame, "trap_code")
    fault.fuel_used = _opt_int(frame, "fuel_used")
    fault.memory_bytes = _opt_int(frame, "memory_bytes")
    fault.published = _published(frame)
    return fault


def _get(frame: Frame, key: str, kind: type | tuple[type, ...]) -> Any:
    value = frame.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise FrameError(f"{frame['t']} frame: {key!r} is not {_names(kind)}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _as_tuple(kind))


def _str(frame: Frame, key: str) -> str:
    value: str = _get(frame, key, str)
    return value


def _opt_str(frame: Frame, key: str) -> str | None:
    value: str | None = _get(frame, key, (str, type(None)))
    return value


def _int(frame: Frame, key: str) -> int:
    value: int = _get(frame, key, int)
    return value


def _opt_int(frame: Frame, key: str) -> int | None:
    value: int | None = _get(frame, key, (int, type(None)))
    return value


def _bool(frame: Frame, key: str) -> bool:
    value: bool = _get(frame, key, bool)
    return value


def _float(frame: Frame, key: str) -> float:
    return float(_get(frame, key, (float, int)))


def _bytes(frame: Frame, key: str) -> bytes:
    value: bytes = _get(frame, key, bytes)
    return value


def _list(frame: Frame, key: str) -> list[Any]:
    value: list[Any] = _get(frame, key, list)
    return value


def _handed_out(value: Any, kind: ActivationKind) -> tuple[str, object]:
    if kind is ActivationKind.WORKFLOW and isinstance(value, list) and len(value) == 2:
        name, item = value
        if name == "now" and isinstance(item, int) and not isinstance(item, bool):
            return name, item
        if name == "random" and isinstance(item, bytes):
            return name, item
    raise FrameError("output frame: a handed-out value is not [now, int] or [random, bytes]")


def _log_line(value: Any) -> tuple[int, str]:
    if isinstance(value, list) and len(value) == 2:
        level, line = value
        if isinstance(level, int) and not isinstance(level, bool) and isinstance(line, str):
            return level, line
    raise FrameError("output frame: a log line is not [int, str]")


def _published(frame: Frame) -> dict[str, bytes]:
    value = _get(frame, "published", dict)
    if not all(isinstance(k, str) and isinstance(v, bytes) for k, v in value.items()):
        raise FrameError(f"{frame['t']} frame: 'published' is not a map of str to bytes")
    return dict(value)
