"""A minimal ABI v1 host for SDK tests: one fresh instance per call, envelopes in msgpack.

Not the real sandbox: no deadlines (the epoch never ticks), just fuel and a memory limit so a
misbehaving guest cannot hang a test. `await_results` raises `Suspended`, as the real host does.
`publish` and `heartbeat` are recorded; whether the run asked an activity to stop is set per call
(`cancel_requested`), and so is the HTTP response envelope `http_request` hands over (`http`).
`Run` keeps one run's history the way the host does, activation by activation, and checks each
activation's commands against it as the host's non-determinism check does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
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


class AbiViolation(Exception):
    """A guest broke an import's rules (the real host ends the activation with abi_violation)."""


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
    publishes: list[tuple[str, bytes]] = field(default_factory=list)
    heartbeats: list[bytes] = field(default_factory=list)
    http_requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def published(self) -> dict[str, Any]:
        """What a query for each name would answer: the last value published, decoded."""
        return {name: msgpack.unpackb(value) for name, value in dict(self.publishes).items()}

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


def wf_envelope(
    workflow: str,
    payload: Any,
    results: list[list[Any]] | None = None,
    *,
    recorded: int | None = None,
    cancel: tuple[int, str] | None = None,
    query: str | None = None,
) -> bytes:
    """`recorded` (how many commands history holds) is left out when None, as a host from
    before patch markers leaves it out."""
    input_ = msgpack.packb(payload)
    envelope = {"abi": 1, "run_id": "run-1", "workflow": workflow, "input": input_}
    envelope |= {"results": results or []}
    if recorded is not None:
        envelope["recorded"] = recorded
    if cancel is not None:
        envelope["cancel"] = list(cancel)
    if query is not None:
        envelope["query"] = query
    data: bytes = msgpack.packb(envelope)
    return data


def act_envelope(
    activity: str, args: Any, *, attempt: int = 1, key: str = "key-1", details: bytes | None = None
) -> bytes:
    """`args` is packed unless it is bytes already (raw, possibly invalid, msgpack)."""
    args = args if isinstance(args, bytes) else msgpack.packb(args)
    envelope = {"abi": 1, "run_id": "run-1", "activity": activity, "args": args}
    envelope |= {"attempt": attempt, "idempotency_key": key, "deadline_ms": NOW_MS + 60_000}
    if details is not None:
        envelope["heartbeat_details"] = details
    data: bytes = msgpack.packb(envelope)
    return data


HttpResponder = Callable[[dict[str, Any]], dict[str, Any]]
"""Maps a decoded HTTP request map to the response envelope the host hands back."""


class Guest:
    """A compiled module; `call` runs one export in a fresh instance."""

    def __init__(self, path: Path) -> None:
        self.module = wasmtime.Module.from_file(engine(), str(path))

    def call(
        self,
        export: str,
        envelope: bytes,
        *,
        fuel: int = 50_000_000,
        memory: int = 16 * MiB,
        cancel_requested: bool = False,
        http: dict[str, Any] | HttpResponder | None = None,
    ) -> Call:
        """Runs `export`; guest traps propagate as `wasmtime.Trap`. `http` is the response
        envelope for every request, or a function of the request that returns one."""
        call = Call()
        held: list[bytes] = []  # the envelope `take` copies out
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

        def publish(caller: wasmtime.Caller, name: int, name_len: int, val: int, n: int) -> None:
            call.publishes.append((read(caller, name, name_len).decode(), read(caller, val, n)))

        def heartbeat(caller: wasmtime.Caller, ptr: int, length: int) -> int:
            call.heartbeats.append(read(caller, ptr, length))
            return int(cancel_requested)

        def http_request(caller: wasmtime.Caller, ptr: int, length: int) -> int:
            request = msgpack.unpackb(read(caller, ptr, length))
            call.http_requests.append(request)
            assert http is not None, "the test set no HTTP response"
            held[:] = [msgpack.packb(http(request) if callable(http) else http)]
            return len(held[0])

        def take(caller: wasmtime.Caller, ptr: int, length: int) -> None:
            if not held or length != len(held[0]):
                raise AbiViolation(f"take({length}) does not match the envelope the host holds")
            memory_export = caller.get("memory")
            assert isinstance(memory_export, wasmtime.Memory)
            memory_export.write(caller, held.pop(), ptr)

        ft = wasmtime.FuncType
        linker.define_func("amber", "await_results", ft([i32, i32], []), await_results, True)
        # A fresh instance per call, as the host's reference path: waiting ends the activation.
        linker.define_func("amber", "await_next", ft([i32, i32], [i32]), await_results, True)
        linker.define_func("amber", "now", ft([], [i64]), now)
        linker.define_func("amber", "random", ft([i32, i32], []), random, True)
        linker.define_func("amber", "log", ft([i32, i32, i32], []), log, True)
        linker.define_func("amber", "sleep", ft([i64], []), sleep)
        linker.define_func("amber", "publish", ft([i32] * 4, []), publish, True)
        linker.define_func("amber", "heartbeat", ft([i32, i32], [i32]), heartbeat, True)
        linker.define_func(
            "amber", "cancel_requested", ft([], [i32]), lambda: int(cancel_requested)
        )
        linker.define_func("amber", "http_request", ft([i32, i32], [i32]), http_request, True)
        linker.define_func("amber", "take", ft([i32, i32], []), take, True)
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


def first_divergence(recorded: list[list[Any]], issued: list[list[Any]]) -> int | None:
    """The first position where issued commands differ from recorded ones, as the host checks
    it: commands beyond the history are new. Only the overlap is compared."""
    pairs = zip(recorded, issued, strict=False)
    return next((i for i, (r, c) in enumerate(pairs) if r != c), None)


class NonDeterminism(AssertionError):
    """An activation issued a command that differs from history (the host fails the run)."""

    def __init__(self, position: int, recorded: list[Any], issued: list[Any]) -> None:
        super().__init__(f"position {position}: recorded {recorded!r}, issued {issued!r}")
        self.position, self.recorded, self.issued = position, recorded, issued


class Run:
    """One run driven the way the host drives it: every activation replays the results (and the
    cancel request) recorded so far, with `recorded` = the number of commands in history; its
    new commands are appended, and each new command, result or cancel request takes the next
    history position (its `seq`). `now`, `random`, `patched` and `cancel_timer` get their
    results at once. Assign `guest` to replay the same history on other code (a migration)."""

    def __init__(self, guest: Guest, workflow: str, payload: Any) -> None:
        self.guest, self.workflow, self.payload = guest, workflow, payload
        self.commands: list[list[Any]] = []
        self.results: list[list[Any]] = []
        self.cancel: tuple[int, str] | None = None
        self.position = 0

    def _seq(self) -> int:
        self.position += 1
        return self.position - 1

    def activate(self, *, query: str | None = None) -> Call:
        """Raises `NonDeterminism` when the commands diverge from history, as the host does."""
        envelope = wf_envelope(
            self.workflow,
            self.payload,
            self.results,
            recorded=len(self.commands),
            cancel=self.cancel,
            query=query,
        )
        call = self.guest.call(f"amber_workflow.{self.workflow}", envelope)
        commands = call.output["commands"]
        position = first_divergence(self.commands, commands)
        if position is not None:
            raise NonDeterminism(position, self.commands[position], commands[position])
        if query is not None:  # a query appends nothing
            return call
        for command in commands[len(self.commands) :]:
            index = len(self.commands)
            self.commands.append(command)
            self._seq()
            if command[0] in ("now", "random", "patched"):  # the value is the result
                self.record(index, command[1])
            elif command[0] == "cancel_timer":  # recorded at once; the timer's result follows
                self.record(index, None)
                if command[1] not in self.resolved():
                    self.record(command[1], ["TimerCancelled", "cancelled"], status=1)
        return call

    def resolved(self) -> set[int]:
        return {result[0] for result in self.results}

    def pending(self, kind: str) -> list[int]:
        done = self.resolved()
        return [i for i, c in enumerate(self.commands) if c[0] == kind and i not in done]

    def record(self, cmd: int, value: Any, *, status: int = 0) -> None:
        self.results.append([cmd, self._seq(), status, value])

    def send_signal(self, name: str, payload: Any) -> None:
        index = next(i for i in self.pending("signal") if self.commands[i][1] == name)
        self.record(index, msgpack.packb(payload))

    def fire_timer(self) -> None:
        [index] = self.pending("timer")
        self.record(index, None)

    def request_cancel(self, reason: str) -> None:
        self.cancel = (self._seq(), reason)

    def run_activities(self) -> None:
        """Runs every pending activity (on the current `guest`) and records its outcome."""
        for index in self.pending("activity"):
            _, name, args = self.commands[index][:3]
            out = self.guest.call(f"amber_activity.{name}", act_envelope(name, args)).output
            if out["status"] == "completed":
                self.record(index, out["result"])
            else:
                self.record(index, out["error"][:2], status=1)
