"""A minimal ABI v1 host for SDK tests: one fresh instance per call, envelopes in msgpack.

Not the real sandbox: no deadlines (the epoch never ticks), just fuel and a memory limit so a
misbehaving guest cannot hang a test. `await_results` raises `Suspended`, as the real host does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import wasmtime

NOW_MS = 1_700_000_000_000
MiB = 1 << 20


@functools.cache
def engine() -> wasmtime.Engine:
    """Created on first use, not at import: wasmtime installs its trap signal handlers with the
    first engine, and pytest's faulthandler (enabled after conftest imports) would replace them,
    turning every `unreachable` trap into a fatal SIGILL."""
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    return wasmtime.Engine(config)


class Suspended(Exception):
    """Raised by the `await_results` import; carries the output envelope's bytes."""

    def __init__(self, envelope: bytes) -> None:
        super().__init__("workflow suspended")
        self.envelope = envelope


@dataclass
class Call:
    """What one activation returned or handed to `await_results`, and the host calls it made."""

    raw: bytes = b""
    packed: int = 0
    suspended: bool = False
    logs: list[tuple[int, str]] = field(default_factory=list)
    now_calls: int = 0
    random_calls: list[int] = field(default_factory=list)
    sleeps: list[int] = field(default_factory=list)

    @property
    def output(self) -> dict[str, Any]:
        out: dict[str, Any] = msgpack.unpackb(self.raw)
        return out

    @property
    def result(self) -> Any:
        return msgpack.unpackb(self.output["result"])


def random_bytes(n: int) -> bytes:
    """The harness's deterministic stand-in for the host CSPRNG."""
    return bytes((i * 37 + 11) & 0xFF for i in range(n))


def wf_envelope(workflow: str, payload: Any, results: list[list[Any]] | None = None) -> bytes:
    input_ = msgpack.packb(payload)
    envelope = {"abi": 1, "run_id": "run-1", "workflow": workflow, "input": input_}
    data: bytes = msgpack.packb(envelope | {"results": results or []})
    return data


def act_envelope(activity: str, args: Any, *, attempt: int = 1, key: str = "key-1") -> bytes:
    """`args` is packed unless it is bytes already (raw, possibly invalid, msgpack)."""
    args = args if isinstance(args, bytes) else msgpack.packb(args)
    envelope = {"abi": 1, "run_id": "run-1", "activity": activity, "args": args}
    data: bytes = msgpack.packb(
        envelope | {"attempt": attempt, "idempotency_key": key, "deadline_ms": NOW_MS + 60_000}
    )
    return data


class Guest:
    """A compiled module; `call` runs one export in a fresh instance."""

    def __init__(self, path: Path) -> None:
        self.module = wasmtime.Module.from_file(engine(), str(path))

    def call(
        self, export: str, envelope: bytes, *, fuel: int = 50_000_000, memory: int = 16 * MiB
    ) -> Call:
        """Runs `export`; guest traps propagate as `wasmtime.Trap`."""
        call = Call()
        store = wasmtime.Store(engine())
        store.set_fuel(fuel)
        store.set_epoch_deadline(1)
        store.set_limits(memory_size=memory)
        linker = wasmtime.Linker(engine())
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()

        def read(caller: wasmtime.Caller, ptr: int, length: int) -> bytes:
            memory_export = caller.get("memory")
            assert isinstance(memory_export, wasmtime.Memory)
            return bytes(memory_export.read(caller, ptr, ptr + length))

        def await_results(caller: wasmtime.Caller, ptr: int, length: int) -> None:
            raise Suspended(read(caller, ptr, length))

        def now() -> int:
            call.now_calls += 1
            return NOW_MS + call.now_calls

        def random(caller: wasmtime.Caller, ptr: int, length: int) -> None:
            call.random_calls.append(length)
            memory_export = caller.get("memory")
            assert isinstance(memory_export, wasmtime.Memory)
            memory_export.write(caller, random_bytes(length), ptr)

        def log(caller: wasmtime.Caller, level: int, ptr: int, length: int) -> None:
            call.logs.append((level, read(caller, ptr, length).decode()))

        def sleep(ms: int) -> None:
            call.sleeps.append(ms)

        ft = wasmtime.FuncType
        linker.define_func("amber", "await_results", ft([i32, i32], []), await_results, True)
        linker.define_func("amber", "now", ft([], [i64]), now)
        linker.define_func("amber", "random", ft([i32, i32], []), random, True)
        linker.define_func("amber", "log", ft([i32, i32, i32], []), log, True)
        linker.define_func("amber", "sleep", ft([i64], []), sleep)
        instance = linker.instantiate(store, self.module)
        exports = instance.exports(store)
        mem, alloc, entry = exports["memory"], exports["amber_alloc"], exports[export]
        assert isinstance(mem, wasmtime.Memory)
        assert isinstance(alloc, wasmtime.Func) and isinstance(entry, wasmtime.Func)
        ptr = alloc(store, len(envelope))
        assert ptr != 0, "amber_alloc failed"
        mem.write(store, envelope, ptr)
        try:
            packed = entry(store, ptr, len(envelope))
        except Suspended as suspended:
            call.raw, call.suspended = suspended.envelope, True
            return call
        call.packed = packed & 0xFFFF_FFFF_FFFF_FFFF  # wasmtime-py returns the i64 signed
        out_ptr, out_len = (packed >> 32) & 0xFFFFFFFF, packed & 0xFFFFFFFF
        if out_ptr + out_len <= mem.data_len(store):
            call.raw = bytes(mem.read(store, out_ptr, out_ptr + out_len))
        return call
