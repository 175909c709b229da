"""The WASI a Python guest sees: a handful of deterministic stubs, and traps for the rest.

A componentize-py component imports about a hundred WASI 0.2 functions; CPython calls a few of
them at its first call in an instance (environment, preopened directories, random bytes to seed
its hash and `random`) and the rest only when guest code reaches for the world (files,
sockets, `sys.exit`, `time.sleep`). Amber defines only what CPython needs and what a guest may
see, and lets `Linker.define_unknown_imports_as_traps` turn every other import into a trap that
`_component` reports as an ABI violation naming the import.

What each stub returns depends on the activation (`GuestIO`):

| import | workflow | activity |
|---|---|---|
| wall clock | the Unix epoch (the SDK makes `time.time()` raise first) | the host's clock |
| monotonic clock | 1 µs more at each read, from 0 | the host's monotonic clock |
| random bytes | a stream seeded by the run id (the same on every replay) | the OS's CSPRNG |
| environment, arguments, directories | none | none |
| stdout, stderr | kept (stderr explains a Python exception's trap) | kept |

Rejected: stock WASI (`Linker.add_wasip2`) with a `WasiConfig`: its clocks and randomness are
real and differ per instance, so a replay would not see what the first run saw, and which
sockets and files a guest reaches would depend on `WasiConfig` defaults.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Final

from wasmtime.component import Linker, LinkerInstance, ResourceHost, ResourceType, Variant

from amber.runtime.model import AbiViolation

WASI_VERSION: Final = "@0.2.9"
"""The WASI release componentize-py 0.25.1 links against (its import names carry it)."""
MAX_STDIO_BYTES: Final = 64 * 1024
"""Guest output kept per activation (per stream); the rest is dropped."""
_OUTPUT_STREAM: Final = 1
"""The host resource type id of `wasi:io/streams.output-stream`."""
_STDOUT, _STDERR = 1, 2


@dataclass(frozen=True, slots=True)
class Datetime:
    """`wasi:clocks/wall-clock.datetime` (wasmtime-py reads a record's fields by name)."""

    seconds: int
    nanoseconds: int


@dataclass(slots=True, kw_only=True)
class GuestIO:
    """What the WASI stubs hand one activation, and what its guest wrote."""

    deterministic: bool
    """A workflow activation: fixed clocks and seeded randomness (see the module's table)."""
    seed: str
    """The run id: the seed of a workflow's random stream."""
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    _rng: random.Random | None = None
    _ticks: int = 0

    def random_bytes(self, length: int) -> bytes:
        if length < 0 or length > 1 << 20:
            raise AbiViolation(f"wasi get-random-bytes asked for {length} bytes")
        if not self.deterministic:
            return os.urandom(length)
        if self._rng is None:
            self._rng = random.Random(hashlib.sha256(self.seed.encode()).digest())
        return self._rng.randbytes(length)

    def wall_clock(self) -> Datetime:
        if self.deterministic:
            return Datetime(0, 0)
        now = time.time_ns()
        return Datetime(now // 1_000_000_000, now % 1_000_000_000)

    def monotonic(self) -> int:
        if self.deterministic:
            self._ticks += 1_000
            return self._ticks
        return time.monotonic_ns()

    def write(self, stream: int, data: bytes) -> None:
        out = self.stderr if stream == _STDERR else self.stdout
        room = MAX_STDIO_BYTES - len(out)
        if room > 0:
            out += data[:room]


class WasiStubs:
    """Defines the stubs on a component linker; each call goes to the running activation's
    `GuestIO` (`activate`), like the `amber` host imports go to its `HostCalls`."""

    def __init__(self) -> None:
        self.active: GuestIO | None = None

    def activate(self, io: GuestIO | None) -> None:
        self.active = io

    def _io(self) -> GuestIO:
        io = self.active
        if io is None:
            raise AbiViolation("a WASI function was called outside an activation")
        return io

    def define(self, linker: Linker) -> None:
        with linker.root() as root:
            self._clocks(root)
            with root.add_instance(f"wasi:random/random{WASI_VERSION}") as inst:
                inst.add_func("get-random-bytes", lambda _s, n: self._io().random_bytes(n))
            with root.add_instance(f"wasi:cli/environment{WASI_VERSION}") as inst:
                inst.add_func("get-environment", lambda _s: [])
                inst.add_func("get-arguments", lambda _s: [])
            with root.add_instance(f"wasi:filesystem/preopens{WASI_VERSION}") as inst:
                inst.add_func("get-directories", lambda _s: [])
            self._streams(root)

    def _clocks(self, root: LinkerInstance) -> None:
        with root.add_instance(f"wasi:clocks/wall-clock{WASI_VERSION}") as inst:
            inst.add_func("now", lambda _s: self._io().wall_clock())
            inst.add_func("resolution", lambda _s: Datetime(0, 1))
        with root.add_instance(f"wasi:clocks/monotonic-clock{WASI_VERSION}") as inst:
            inst.add_func("now", lambda _s: self._io().monotonic())
            inst.add_func("resolution", lambda _s: 1)

    def _streams(self, root: LinkerInstance) -> None:
        with root.add_instance(f"wasi:io/streams{WASI_VERSION}") as inst:
            inst.add_resource("output-stream", ResourceType.host(_OUTPUT_STREAM), _no_drop)

            def method(result: Any) -> Any:
                # A borrow<> argument must be turned into its host handle (which ends the
                # borrow) before the call returns, or wasmtime refuses the return.
                return lambda s, this, *args: result(this.to_host(s).rep, *args)

            def write(stream: int, data: Any) -> Variant:
                self._io().write(stream, bytes(data))
                return Variant("ok")  # result<_, stream-error>

            inst.add_func("[method]output-stream.check-write", method(lambda _fd: 65536))
            inst.add_func("[method]output-stream.write", method(write))
            inst.add_func("[method]output-stream.blocking-write-and-flush", method(write))
            inst.add_func("[method]output-stream.blocking-flush", method(lambda _fd: Variant("ok")))
        for name, stream in (("stdout", _STDOUT), ("stderr", _STDERR)):
            with root.add_instance(f"wasi:cli/{name}{WASI_VERSION}") as inst:
                inst.add_func(
                    f"get-{name}", lambda _s, fd=stream: ResourceHost.own(fd, _OUTPUT_STREAM)
                )
        for name in ("stdin", "stdout", "stderr"):  # CPython asks before it writes a traceback
            with root.add_instance(f"wasi:cli/terminal-{name}{WASI_VERSION}") as inst:
                inst.add_func(f"get-terminal-{name}", lambda _s: None)  # not a terminal


def _no_drop(_store: Any, _rep: int) -> None:
    """stdout and stderr outlive every handle a guest drops."""
