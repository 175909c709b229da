"""The sandbox against hostile guests: every way a guest can misbehave ends its activation with
its own typed reason, and the same sandbox goes on serving the next activation."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import msgpack
import pytest

from amber.abi import ActivityStatus, WorkflowStatus
from amber.runtime.model._clock import SystemClock
from amber.runtime.model._faults import (
    AbiViolation,
    DeadlineExceeded,
    FailureReason,
    GuestFault,
    GuestTrap,
    MalformedOutput,
    MemoryLimitExceeded,
    OutOfFuel,
)
from amber.runtime.model._ids import new_run_id
from amber.runtime.replay._activity import run_activity
from amber.runtime.replay._replay import WorkflowActivation, WorkflowStep, activate_workflow
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.tools._build import build_module
from tests.runtime._engine_helpers import activity_attempt

LIMITS = SandboxLimits(fuel=50_000_000, memory_bytes=16 * 2**20, deadline_s=2.0)


def _digest(modules: dict[str, bytes], name: str) -> str:
    return hashlib.sha256(modules[name]).hexdigest()


def _activity(
    sandbox: Sandbox, digest: str, name: str, args: object = None, limits: SandboxLimits = LIMITS
) -> ActivityStatus:
    return run_activity(sandbox, activity_attempt(digest, name, args, limits)).outcome.status


ORDER = {"order_id": "A-1", "sku": "SKU-1", "quantity": 1, "amount_cents": 100}


def _workflow(
    sandbox: Sandbox,
    digest: str,
    name: str,
    limits: SandboxLimits = LIMITS,
    input: object = None,
) -> WorkflowStep:
    return activate_workflow(
        sandbox,
        WorkflowActivation(
            run_id=new_run_id(),
            workflow_type=name,
            digest=digest,
            input=msgpack.packb(input if input is not None else {"x": 1}),
            events=(),
            limits=limits,
        ),
    )


def _healthy(sandbox: Sandbox, digest: str) -> None:
    """The sandbox still works after a fault."""
    assert _activity(sandbox, digest, "crash_on", {"crash": False}) is ActivityStatus.COMPLETED


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_a_guest_that_loops_forever_is_stopped_by_fuel(
    sandbox: Sandbox, modules: dict[str, bytes], kind: str
) -> None:
    digest = _digest(modules, "hostile")
    with pytest.raises(OutOfFuel) as caught:
        if kind == "workflow":
            _workflow(sandbox, digest, "spin")
        else:
            _activity(sandbox, digest, "spin")
    fault = caught.value
    assert fault.reason is FailureReason.OUT_OF_FUEL
    assert fault.fuel_used == LIMITS.fuel
    assert fault.digest == digest
    _healthy(sandbox, digest)


def test_fuel_use_is_deterministic_and_recorded(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    digest = _digest(modules, "orders")
    first = _workflow(sandbox, digest, "orders", input=ORDER)
    second = _workflow(sandbox, digest, "orders", input=ORDER)
    assert first.stats.fuel_used == second.stats.fuel_used > 0


def test_a_loop_with_unbounded_fuel_is_stopped_by_the_wall_clock(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    limits = SandboxLimits(fuel=10**15, memory_bytes=16 * 2**20, deadline_s=0.3)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as caught:
        _activity(sandbox, _digest(modules, "hostile"), "spin", limits=limits)
    assert caught.value.reason is FailureReason.DEADLINE
    assert time.monotonic() - started < 5  # stopped, not merely reported late
    _healthy(sandbox, _digest(modules, "hostile"))


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_a_guest_that_allocates_without_bound_hits_the_memory_limit(
    sandbox: Sandbox, modules: dict[str, bytes], kind: str
) -> None:
    digest = _digest(modules, "hostile")
    with pytest.raises(MemoryLimitExceeded) as caught:
        if kind == "workflow":
            _workflow(sandbox, digest, "hog")
        else:
            _activity(sandbox, digest, "hog")
    fault = caught.value
    assert fault.reason is FailureReason.MEMORY_LIMIT
    assert fault.memory_bytes is not None
    assert LIMITS.memory_bytes - 2**20 < fault.memory_bytes <= LIMITS.memory_bytes
    _healthy(sandbox, digest)


def test_a_guest_blocked_in_a_host_call_is_cut_off_at_its_deadline(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    limits = SandboxLimits(fuel=10**9, memory_bytes=16 * 2**20, deadline_s=0.5)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as caught:
        _activity(sandbox, _digest(modules, "hostile"), "nap", limits=limits)
    elapsed = time.monotonic() - started
    assert "sleep" in str(caught.value)
    assert 0.4 < elapsed < 3  # the guest asked for 10 minutes
    _healthy(sandbox, _digest(modules, "hostile"))


@pytest.mark.parametrize(
    ("kind", "name", "fault_type"),
    [
        ("workflow", "garbage", MalformedOutput),
        ("activity", "garbage", MalformedOutput),
        ("activity", "badptr", MalformedOutput),
        ("workflow", "boom", GuestTrap),
        ("activity", "boom", GuestTrap),
        ("workflow", "sleepy_wf", AbiViolation),
        ("activity", "awaits", AbiViolation),
    ],
)
def test_each_misbehaviour_has_its_own_typed_reason(
    sandbox: Sandbox, modules: dict[str, bytes], kind: str, name: str, fault_type: type[GuestFault]
) -> None:
    digest = _digest(modules, "hostile")
    with pytest.raises(fault_type) as caught:
        if kind == "workflow":
            _workflow(sandbox, digest, name)
        else:
            _activity(sandbox, digest, name)
    assert type(caught.value) is fault_type
    assert caught.value.digest == digest
    _healthy(sandbox, digest)


def test_a_trap_carries_its_trap_code(sandbox: Sandbox, modules: dict[str, bytes]) -> None:
    with pytest.raises(GuestTrap) as caught:
        _activity(sandbox, _digest(modules, "hostile"), "crash_on", {"crash": True})
    assert caught.value.trap_code == "unreachable"
    assert caught.value.step == 7


def test_runaway_recursion_is_a_stack_overflow_and_a_stray_pointer_is_not(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # A C guest's stack lives in linear memory: recursing past it is an out-of-bounds access,
    # told apart from a stray pointer by the recursion in the backtrace.
    from amber.runtime.model import StackOverflow

    digest = _digest(modules, "recursion")
    with pytest.raises(StackOverflow) as caught:
        _activity(sandbox, digest, "deep")
    assert caught.value.reason is FailureReason.STACK_OVERFLOW
    assert caught.value.trap_code == "memory_out_of_bounds"
    with pytest.raises(GuestTrap) as stray:
        _activity(sandbox, digest, "shallow")
    assert not isinstance(stray.value, StackOverflow)
    assert stray.value.trap_code == "memory_out_of_bounds"


def test_the_orders_workflow_suspends_on_its_first_activity(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    step = _workflow(sandbox, _digest(modules, "orders"), "orders", input=ORDER)
    assert step.status is WorkflowStatus.SUSPENDED
    kinds = [type(c).__name__ for c in step.new_commands]
    assert kinds == ["RecordNow", "ScheduleActivity"]


def test_an_unknown_module_version_is_a_typed_failure(sandbox: Sandbox) -> None:
    from amber.runtime.model._faults import ModuleUnavailable

    with pytest.raises(ModuleUnavailable) as caught:
        _activity(sandbox, "0" * 64, "spin")
    assert caught.value.reason is FailureReason.MODULE_UNAVAILABLE


def test_growing_a_table_is_held_to_the_table_limit(sandbox_engine: SandboxEngine) -> None:
    """`table.grow` allocates host memory the memory limit does not count (8 B per element)."""
    import resource

    import wasmtime

    from amber.abi import MANIFEST_SECTION, custom_section

    wat = """
    (module
      (memory (export "memory") 1)
      (table $t 1 funcref)
      (func (export "amber_alloc") (param i32) (result i32) (i32.const 1024))
      (func (export "amber_activity.grow") (param i32 i32) (result i64)
        (drop (table.grow $t (ref.null func) (i32.const 400000000)))
        (unreachable)))
    """
    wasm = wasmtime.wat2wasm(wat) + custom_section(
        MANIFEST_SECTION, b'{"abi":1,"workflows":[],"activities":["grow"]}'
    )
    digest = hashlib.sha256(wasm).hexdigest()
    local = Sandbox(sandbox_engine, SystemClock(), lambda d: wasm)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(GuestTrap):
        _activity(local, digest, "grow")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024  # 400M elements would be ~3 GB


def test_a_workflow_may_not_schedule_what_its_module_does_not_export(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    digest = _digest(modules, "hostile")
    with pytest.raises(AbiViolation, match="'nope', which the module does not export"):
        _workflow(sandbox, digest, "call", input={"activity": "nope", "args": None})


def test_a_workflow_may_issue_at_most_a_thousand_new_commands(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    digest = _digest(modules, "hostile")
    step = _workflow(sandbox, digest, "fanout", input={"n": 1000})
    assert len(step.new_commands) == 1000
    with pytest.raises(AbiViolation, match="issued 1001 new commands") as refused:
        _workflow(sandbox, digest, "fanout", input={"n": 1001})
    # Refused after the guest ran: the crash record still says what it used, and where.
    fault = refused.value
    assert fault.fuel_used and fault.fuel_used > 0
    assert fault.memory_bytes and fault.memory_bytes > 0
    assert fault.step == 0


def test_suspending_with_nothing_outstanding_is_refused(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    with pytest.raises(AbiViolation, match="suspended although every command") as refused:
        _workflow(sandbox, _digest(modules, "hostile"), "idle")
    assert refused.value.fuel_used and refused.value.memory_bytes and refused.value.step == 0


def test_a_query_value_published_under_a_name_that_is_not_utf8_is_an_abi_violation(
    tmp_path: Path,
) -> None:
    # No query could name it; the host used to replace the bad bytes and keep it silently.
    source = tmp_path / "odd.c"
    source.write_text(
        '#include "amber.h"\n'
        'AMBER_MANIFEST({"abi": 1, "workflows": ["odd"], "activities": []})\n'
        "AMBER_WORKFLOW(odd) {\n"
        '    amber_publish(wf, "st\\xff" "age", amber_str("\\xc0"));\n'
        '    return amber_wf_complete(wf, amber_str("\\xc0"));\n'
        "}\n"
    )
    wasm = build_module(source, tmp_path / "odd.wasm").output.read_bytes()
    engine = SandboxEngine(tmp_path / "artifacts")
    try:
        sandbox = Sandbox(engine, SystemClock(), lambda _digest: wasm)
        digest = hashlib.sha256(wasm).hexdigest()
        with pytest.raises(AbiViolation, match=r"publish name b'st\\xffage' is not UTF-8"):
            _workflow(sandbox, digest, "odd")
    finally:
        engine.close()
