"""The C-API fast path for exports and calls against wasmtime-py's public path: the same externs,
results, exceptions and trap codes, on a small WAT guest and through the sandbox on the hostile
test guests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import pytest
import wasmtime
import wasmtime._func

from amber.abi import ENTRY_SIGNATURE, Signature, WorkflowStatus
from amber.runtime.model._clock import ManualClock
from amber.runtime.model._faults import GuestFault
from amber.runtime.replay._activity import run_activity
from amber.runtime.replay._replay import WorkflowActivation, activate_workflow
from amber.runtime.sandbox import _fastcall as _fastcall
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._fastcall import FastExports, InstanceExports, PublicExports
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from tests.runtime._engine_helpers import activity_attempt

PATHS: dict[str, Callable[..., InstanceExports]] = {
    "public": PublicExports,
    "fast": FastExports,
}
needs_fast = pytest.mark.skipif(not _fastcall.FAST, reason="no fast path on this wasmtime")

GUEST = """
(module
  (import "host" "fail" (func $fail (param i32)))
  (memory (export "memory") 1)
  (global (export "answer") i32 (i32.const 42))
  (func (export "amber_alloc") (param i32) (result i32)
    (i32.add (local.get 0) (i32.const 1024)))
  (func (export "pack") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get 0)) (i64.const 32))
            (i64.extend_i32_u (local.get 1))))
  (func (export "negate") (param i32) (result i32)
    (i32.sub (i32.const 0) (local.get 0)))
  (func (export "spin") (param i32 i32) (result i64)
    (loop $forever (br $forever))
    (i64.const 0))
  (func (export "boom") (param i32 i32) (result i64)
    unreachable)
  (func (export "host") (param i32 i32) (result i64)
    (call $fail (local.get 0))
    (i64.const 1))
  (func (export "wide") (param i64) (result i64)
    (local.get 0)))
"""
PACK: Signature = ENTRY_SIGNATURE
NEGATE: Signature = (("i32",), ("i32",))
WIDE: Signature = (("i64",), ("i64",))


class HostSignal(BaseException):
    """Raised by the host import, as `Suspended` is (a `BaseException`)."""


class Guest:
    """The WAT guest, with a host import that raises whatever `raising` holds."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.consume_fuel = True
        self.engine = wasmtime.Engine(config)
        self.raising: BaseException | None = None
        linker = wasmtime.Linker(self.engine)
        linker.define_func(
            "host", "fail", wasmtime.FuncType([wasmtime.ValType.i32()], []), self._fail
        )
        self.pre = linker.instantiate_pre(wasmtime.Module(self.engine, GUEST))

    def _fail(self, code: int) -> None:
        if self.raising is not None:
            raise self.raising

    def exports(self, path: str, fuel: int = 1_000_000) -> InstanceExports:
        store = wasmtime.Store(self.engine)
        store.set_fuel(fuel)
        return PATHS[path](self.pre, store, self.pre.instantiate(store))


@pytest.fixture(scope="module")
def guest() -> Iterator[Guest]:
    made = Guest()
    yield made
    made.raising = None


def _outcome(call: Callable[[], object]) -> tuple[Any, ...]:
    """What a call gave, comparable across paths: its value, or its exception's particulars."""
    try:
        return ("returned", call())
    except wasmtime.Trap as trap:
        return ("trap", type(trap), trap.trap_code, trap.message)
    except wasmtime.WasmtimeError as error:
        return ("error", type(error), str(error))
    except (KeyError, TypeError) as exc:
        return ("raised", type(exc), str(exc))


def _both(guest: Guest, call: Callable[[InstanceExports], object]) -> tuple[Any, ...]:
    """Run `call` on the public and the fast path; their (equal) outcome."""
    public = _outcome(lambda: call(guest.exports("public")))
    fast = _outcome(lambda: call(guest.exports("fast")))
    assert fast == public
    return fast


def test_the_fast_path_is_enabled_on_the_pinned_wasmtime() -> None:
    assert _fastcall.FAST
    assert _fastcall.exports is FastExports


@needs_fast
def test_a_normal_call_returns_the_same_value(guest: Guest) -> None:
    assert _both(guest, lambda e: e.call("amber_alloc", NEGATE, 16)) == ("returned", 1040)
    # Unsigned inputs above 2**31 wrap as i32; results come back signed, as Val gives them.
    packed = _both(guest, lambda e: e.call("pack", PACK, 0xFFFF_FFFF, 0x8000_0000))
    assert packed == ("returned", -(1 << 31))
    assert _both(guest, lambda e: e.call("negate", NEGATE, 5)) == ("returned", -5)
    assert _both(guest, lambda e: e.call("wide", WIDE, -(1 << 63))) == ("returned", -(1 << 63))


@needs_fast
def test_exports_are_the_same_kinds(guest: Guest) -> None:
    for name, kind in [
        ("memory", wasmtime.Memory),
        ("amber_alloc", wasmtime.Func),
        ("answer", wasmtime.Global),
    ]:
        for path in PATHS:
            exports = guest.exports(path)
            assert type(exports.get(name)) is kind
            assert type(exports[name]) is kind
    fast = guest.exports("fast")
    memory = fast["memory"]
    assert isinstance(memory, wasmtime.Memory)
    assert memory.data_len(fast._store) == 65536  # type: ignore[attr-defined]


@needs_fast
def test_a_missing_export(guest: Guest) -> None:
    for path in PATHS:
        assert guest.exports(path).get("nope") is None
    assert _both(guest, lambda e: e["nope"])[:2] == ("raised", KeyError)
    assert _both(guest, lambda e: e.call("nope", PACK, 1, 2))[:2] == ("raised", KeyError)


@needs_fast
def test_running_out_of_fuel_is_the_same_trap(guest: Guest) -> None:
    outcome = _both(guest, lambda e: e.call("spin", PACK, 0, 0))
    assert outcome[:3] == ("trap", wasmtime.Trap, wasmtime.TrapCode.OUT_OF_FUEL)


@needs_fast
def test_unreachable_is_the_same_trap(guest: Guest) -> None:
    outcome = _both(guest, lambda e: e.call("boom", PACK, 0, 0))
    assert outcome[:3] == ("trap", wasmtime.Trap, wasmtime.TrapCode.UNREACHABLE)


@needs_fast
@pytest.mark.parametrize(
    "raised",
    [HostSignal("suspend"), ValueError("bad"), wasmtime.WasmtimeError("host error")],
    ids=["base-exception", "exception", "wasmtime-error"],
)
@pytest.mark.parametrize("path", list(PATHS))
def test_a_host_exception_comes_out_unchanged(
    guest: Guest, path: str, raised: BaseException
) -> None:
    guest.raising = raised
    try:
        with pytest.raises(type(raised)) as caught:
            guest.exports(path).call("host", PACK, 3, 0)
    finally:
        guest.raising = None
    assert caught.value is raised
    assert wasmtime._func.LAST_EXCEPTION is None  # taken, so the next call does not see it
    assert guest.exports(path).call("host", PACK, 3, 0) == 1


@needs_fast
def test_a_pending_host_exception_wins_over_a_trap(guest: Guest) -> None:
    """As in `enter_wasm`. wasmtime 50 reports a failed host import as an error, not a trap
    (the path the host-exception test takes), so the pending exception is planted here."""
    for path in PATHS:
        exports = guest.exports(path)
        pending = HostSignal(path)
        wasmtime._func.LAST_EXCEPTION = pending  # type: ignore[assignment]
        try:
            with pytest.raises(HostSignal) as caught:
                exports.call("boom", PACK, 0, 0)
        finally:
            wasmtime._func.LAST_EXCEPTION = None
        assert caught.value is pending


@needs_fast
def test_wrong_arguments_are_the_same_errors(guest: Guest) -> None:
    too_few = _both(guest, lambda e: e.call("pack", PACK, 1))
    assert too_few[:2] == ("error", wasmtime.WasmtimeError)
    too_many = _both(guest, lambda e: e.call("pack", PACK, 1, 2, 3))
    assert too_many[:2] == ("error", wasmtime.WasmtimeError)
    assert _both(guest, lambda e: e.call("memory", PACK, 1, 2))[:2] == ("raised", TypeError)


@needs_fast
def test_an_export_of_another_signature_goes_through_the_public_call(guest: Guest) -> None:
    # `wide` takes an i64: called as an i32 function, Func.__call__ converts by the real type.
    assert _both(guest, lambda e: e.call("wide", NEGATE, 7)) == ("returned", 7)
    wrong = _both(guest, lambda e: e.call("negate", PACK, 1, 2))
    assert wrong[:2] == ("error", wasmtime.WasmtimeError)


@needs_fast
def test_each_export_type_is_checked_once_per_module(
    guest: Guest, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[str] = []
    original = _fastcall._signature_of

    def counting(func: wasmtime.Func, store: wasmtime.Store) -> Signature:
        checks.append("checked")
        return original(func, store)

    monkeypatch.setattr(_fastcall, "_signature_of", counting)
    monkeypatch.setitem(_fastcall._checked, guest.pre, {})
    for _ in range(3):
        assert guest.exports("fast").call("negate", NEGATE, 2) == -2
    assert checks == ["checked"]


# -- through the sandbox, on the hostile test guests ------------------------------------------

LIMITS = SandboxLimits(fuel=50_000_000, memory_bytes=16 * 2**20, deadline_s=2.0)


def _digest(modules: dict[str, bytes], name: str) -> str:
    return hashlib.sha256(modules[name]).hexdigest()


@pytest.fixture
def fixed_sandbox(sandbox_engine: SandboxEngine, modules: dict[str, bytes]) -> Sandbox:
    """A sandbox whose clock stands still, so `now` gives both paths the same value."""
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    return Sandbox(sandbox_engine, ManualClock(), by_digest.__getitem__)


def _fault(exc: GuestFault) -> tuple[Any, ...]:
    return (
        type(exc),
        exc.detail,
        exc.trap_code,
        exc.run_id,
        exc.step,
        exc.digest,
        exc.fuel_used,
        exc.memory_bytes,
    )


def _activity(
    sandbox: Sandbox, digest: str, name: str, args: object, limits: SandboxLimits
) -> tuple[Any, ...]:
    try:
        report = run_activity(
            sandbox,
            activity_attempt(digest, name, args, limits),
        )
    except GuestFault as fault:
        return ("fault", *_fault(fault))
    stats = report.stats
    return ("report", report.outcome, stats.fuel_used, stats.memory_bytes, stats.host_calls)


def _workflow(sandbox: Sandbox, digest: str, name: str, input: object) -> tuple[Any, ...]:
    activation = WorkflowActivation(
        run_id="run-2",
        workflow_type=name,
        digest=digest,
        input=msgpack.packb(input),
        events=(),
        limits=LIMITS,
    )
    try:
        step = activate_workflow(sandbox, activation)
    except GuestFault as fault:
        return ("fault", *_fault(fault))
    return ("step", step.status, step.new_commands, step.stats.fuel_used, step.stats.memory_bytes)


def _on_both_paths(monkeypatch: pytest.MonkeyPatch, run: Callable[[], tuple[Any, ...]]) -> Any:
    outcomes = {}
    for path, exports in PATHS.items():
        monkeypatch.setattr(_fastcall, "exports", exports)
        outcomes[path] = run()
    assert outcomes["fast"] == outcomes["public"]
    return outcomes["fast"]


@needs_fast
@pytest.mark.parametrize(
    ("name", "args", "deadline_s", "expected"),
    [
        ("crash_on", {"crash": False}, 2.0, "report"),
        ("spin", None, 2.0, "OutOfFuel"),
        ("boom", None, 2.0, "GuestTrap"),
        ("crash_on", {"crash": True}, 2.0, "GuestTrap"),
        ("nap", None, 0.2, "DeadlineExceeded"),  # raised in the `sleep` host import
        ("awaits", None, 2.0, "AbiViolation"),  # raised in the `await_results` host import
        ("missing", None, 2.0, "AbiViolation"),  # no such export
        ("badptr", None, 2.0, "MalformedOutput"),
        ("hog", None, 2.0, "MemoryLimitExceeded"),
    ],
)
def test_an_activity_ends_the_same_on_both_paths(
    sandbox: Sandbox,
    modules: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    args: object,
    deadline_s: float,
    expected: str,
) -> None:
    limits = SandboxLimits(
        fuel=LIMITS.fuel, memory_bytes=LIMITS.memory_bytes, deadline_s=deadline_s
    )
    digest = _digest(modules, "hostile")
    outcome = _on_both_paths(monkeypatch, lambda: _activity(sandbox, digest, name, args, limits))
    kind = outcome[0] if outcome[0] == "report" else outcome[1].__name__
    assert kind == expected
    if name == "crash_on" and expected == "GuestTrap":
        assert outcome[3] == "unreachable"


@needs_fast
@pytest.mark.parametrize(
    ("module", "name", "input"),
    [
        ("orders", "orders", {"order_id": "A-1", "sku": "SKU-1", "quantity": 1, "amount_cents": 1}),
        ("hostile", "boom", {"x": 1}),
        ("hostile", "spin", {"x": 1}),
        ("hostile", "idle", {"x": 1}),
    ],
)
def test_a_workflow_ends_the_same_on_both_paths(
    fixed_sandbox: Sandbox,
    modules: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    name: str,
    input: object,
) -> None:
    digest = _digest(modules, module)
    outcome = _on_both_paths(monkeypatch, lambda: _workflow(fixed_sandbox, digest, name, input))
    if module == "orders":  # suspended through `await_results`: a host import raising
        assert outcome[0] == "step" and outcome[1] is WorkflowStatus.SUSPENDED
