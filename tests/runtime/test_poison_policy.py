"""The poison-pill policy, the failure fingerprint, repro and operator-token parsing as pure
functions (the engine paths that use them are tested end to end in tests/surgical_pool)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from amber.abi import InvalidInput
from amber.history import Crash, Task, TaskKind, TaskState
from amber.runtime.model._errors import NotAuthorised
from amber.runtime.model._settings import PoisonPolicy
from amber.runtime.sandbox._host import ActivationKind
from amber.runtime.sandbox._repro import Repro, repro_of
from amber.runtime.sandbox._sandbox import ActivationRequest, SandboxLimits
from amber.runtime.server._operators import Operators, token_hash
from amber.runtime.services._poison import fingerprint, judge

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POLICY = PoisonPolicy()


def _task(kind: TaskKind = TaskKind.ACTIVITY, **changes: object) -> Task:
    task = Task(
        task_id=1,
        run_id="r",
        kind=kind,
        queue="main",
        cmd=2 if kind is TaskKind.ACTIVITY else None,
        name="charge",
        digest="d" * 64,
        args=None,
        state=TaskState.LEASED,
        visible_at=NOW,
        lease_owner="w",
        lease_expires_at=NOW,
        fencing=1,
        attempt=1,
        max_attempts=0,
        consecutive_failures=0,
        last_failure=None,
        scheduled_at=NOW,
    )
    return replace(task, **changes)  # type: ignore[arg-type]


def _crash(count: int) -> Crash:
    return Crash(step=2, fingerprint="f", count=count)


def test_crashes_back_off_then_poison_on_the_third_with_the_first_surgical_delay() -> None:
    task = _task()
    first = judge(task, _crash(1), "trap", NOW, POLICY, 0)
    second = judge(task, _crash(2), "trap", NOW, POLICY, 0)
    assert (first.pool, first.visible_at - NOW) == ("main", timedelta(seconds=1))
    assert (second.pool, second.visible_at - NOW) == ("main", timedelta(seconds=2))
    third = judge(task, _crash(3), "trap", NOW, POLICY, 0)
    assert third.pool == "surgical" and third.poisoned_at == NOW
    assert third.visible_at - NOW == timedelta(minutes=1) and not third.suspend
    assert "3 consecutive crashes (trap) at step 2" in (third.poison_reason or "")


def test_a_crash_whose_fingerprint_already_poisoned_another_run_is_poisoned_at_once() -> None:
    first = judge(
        _task(), _crash(1), "out_of_fuel", NOW, POLICY, 0, known="already poisoned another run"
    )
    assert first.pool == "surgical" and first.poisoned_at == NOW
    assert "already poisoned another run" in (first.poison_reason or "")
    assert "(poisoned at its first crash)" in (first.poison_reason or "")
    # A run that crashed once before the fingerprint became known is diverted at its second.
    second = judge(_task(), _crash(2), "trap", NOW, POLICY, 0, known="crashed 3 times in 24 h")
    assert "(poisoned at its second crash)" in (second.poison_reason or "")
    # A fault that names no step (an oversized workflow result) says so, not "step None".
    stepless = Crash(step=None, fingerprint="f", count=3)
    third = judge(_task(), stepless, "payload_too_large", NOW, POLICY, 0)
    assert "with no step recorded" in (third.poison_reason or "")
    assert "None" not in (third.poison_reason or "")


def test_surgical_failures_escalate_1_5_30_minutes_then_suspend_after_the_window() -> None:
    poisoned = _task(pool="surgical", poisoned_at=NOW, poison_reason="x")
    delays = [
        judge(poisoned, _crash(3 + n), "trap", NOW + timedelta(hours=1), POLICY, n).visible_at
        - (NOW + timedelta(hours=1))
        for n in range(4)
    ]
    assert delays == [timedelta(minutes=m) for m in (1, 5, 30, 30)]
    late = judge(poisoned, _crash(9), "trap", NOW + timedelta(hours=24), POLICY, 8)
    assert late.suspend and late.pool == "held" and late.poisoned_at == NOW


def test_a_trap_or_divergence_in_workflow_code_poisons_at_once_but_not_a_deadline() -> None:
    workflow = _task(TaskKind.WORKFLOW)
    for reason in ("trap", "non_determinism"):
        verdict = judge(workflow, _crash(1), reason, NOW, POLICY, 0)
        assert verdict.pool == "surgical" and "deterministic" in (verdict.poison_reason or "")
    assert judge(workflow, _crash(1), "deadline", NOW, POLICY, 0).pool == "main"
    assert judge(_task(), _crash(1), "trap", NOW, POLICY, 0).pool == "main"  # activities: 3


def test_a_fingerprint_ignores_messages_and_attempts_but_not_step_code_or_version() -> None:
    task = _task()
    base = fingerprint(task, 2, "trap", "unreachable")
    assert len(base) == 16
    assert fingerprint(replace(task, attempt=7), 2, "trap", "unreachable") == base
    assert fingerprint(task, 3, "trap", "unreachable") != base
    assert fingerprint(task, 2, "trap", "int_overflow") != base
    assert fingerprint(replace(task, digest="e" * 64), 2, "trap", "unreachable") != base


def test_a_repro_round_trips_and_garbage_is_refused() -> None:
    request = ActivationRequest(
        kind=ActivationKind.ACTIVITY,
        digest="d" * 64,
        export="amber_activity.charge",
        input=b"\x81\xa1a\x01",
        run_id="r",
        step=2,
        limits=SandboxLimits(fuel=5, memory_bytes=1 << 20, deadline_s=1.5),
    )
    repro = repro_of(request, NOW, last_seq=None)
    again = Repro.decode(repro.encode())
    assert again == repro and again.input == request.input and again.limits.fuel == 5
    workflow = repro_of(replace(request, kind=ActivationKind.WORKFLOW), NOW, last_seq=9)
    assert workflow.input is None and workflow.last_seq == 9  # rebuilt from history
    for bad in (b"", b"\xc1", b"\x81\xa1v\x02", b"\x05", b"\x91\x01"):
        with pytest.raises(InvalidInput):
            Repro.decode(bad)


def test_operator_tokens_name_the_operator_and_refuse_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "operators"
    path.write_text(f"# on-call\nalice {token_hash('s3cret')}\n\n")
    operators = Operators.from_file(path)
    assert operators.authorise("s3cret", "") == "alice"
    assert operators.authorise("s3cret", "alice") == "alice"
    with pytest.raises(NotAuthorised, match="belongs to 'alice'"):
        operators.authorise("s3cret", "bob")
    for token in ("", "wrong"):
        with pytest.raises(NotAuthorised):
            operators.authorise(token, "alice")
    assert Operators().authorise("", "bob") == "bob"  # no file: self-named (development)
    with pytest.raises(InvalidInput):
        Operators().authorise("", "")
    path.write_text("alice not-a-hash\n")
    with pytest.raises(InvalidInput, match="operators:1"):
        Operators.from_file(path)
