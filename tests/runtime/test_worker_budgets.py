"""Budgets per workflow type and per activity (`amber worker --budgets FILE`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from amber.abi import InvalidInput
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.worker import Budget, Budgets
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, wait_for


def test_a_budget_overrides_only_what_it_names() -> None:
    budgets = Budgets.from_json(
        {"activities": {"burn": {"fuel": 10**6}}, "workflows": {"orders": {"deadline_s": 2}}}
    )
    default = SandboxLimits(deadline_s=60.0)
    burn = budgets.for_activity("burn", default)
    assert (
        burn.fuel == 10**6 and burn.deadline_s == 60.0 and burn.memory_bytes == default.memory_bytes
    )
    assert budgets.for_activity("other", default) == default
    assert budgets.for_workflow("orders", default).deadline_s == 2.0
    assert budgets.activities["burn"] == Budget(fuel=10**6)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "budgets must be"),
        ({"tasks": {}}, "budgets must be"),
        ({"activities": {"a": {"fuel": 0}}}, "fuel must be an integer"),
        ({"activities": {"a": {"fuel": True}}}, "fuel must be an integer"),
        ({"activities": {"a": {"deadline_s": -1}}}, "deadline_s must be in"),
        ({"workflows": {"w": {"memory_mb": 10**6}}}, "memory_mb must be an integer"),
        ({"workflows": {"w": {"cpu": 1}}}, "takes fuel, deadline_s and memory_mb"),
    ],
)
def test_a_bad_budget_is_refused_with_its_place(doc: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Budgets.from_json(doc)


def test_an_unreadable_budgets_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text("{nope")
    with pytest.raises(InvalidInput, match="cannot read budgets"):
        Budgets.from_file(tmp_path / "b.json")


def test_an_activity_budget_ends_a_fuel_bomb_sooner(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["poison"], promote=True)
    budgets = Budgets(activities={"burn": Budget(fuel=10**6)})
    settings = WorkerSettings(worker_id="budgeted", poll_wait_s=0.2, budgets=budgets)
    worker = Worker(srv.client, sandbox, settings)
    run_id = srv.client.start_run("poisoned", {"kind": "fuel"}).run.run_id
    wait_for(
        lambda: (
            worker.run_once(wait_s=0.2) is not None
            and bool(srv.client.describe(run_id).recent_failures)
        ),
        30,
        "the fuel bomb's first crash",
    )
    (failure,) = srv.client.describe(run_id).recent_failures
    assert failure.reason == "out_of_fuel" and failure.fuel_used is not None
    assert failure.fuel_used <= 10**6  # the default would have let it burn 10⁹


def _repro_under(limits: SandboxLimits) -> bytes:
    from datetime import UTC, datetime

    from amber.runtime.sandbox import ActivationKind, Repro

    return Repro(
        kind=ActivationKind.ACTIVITY,
        digest="d" * 64,
        export="amber_activity.hog",
        run_id="r",
        step=0,
        limits=limits,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        input_sha256="0" * 64,
        input=b"\x80",
    ).encode()


def test_a_crashed_task_runs_under_no_tighter_limits_than_its_last_crash() -> None:
    from amber.runtime.worker._budgets import MAX_FUEL, no_tighter_than_crash

    own = SandboxLimits(fuel=10**9, memory_bytes=16 << 20, deadline_s=5.0)
    wider = SandboxLimits(fuel=10**10, memory_bytes=128 << 20, deadline_s=30.0)
    assert no_tighter_than_crash(own, _repro_under(wider)) == replace(
        own, fuel=10**10, memory_bytes=128 << 20, deadline_s=30.0
    )
    # Never lower: a crash under less leaves the worker's own limits.
    narrower = SandboxLimits(fuel=10, memory_bytes=1 << 20, deadline_s=0.1)
    assert no_tighter_than_crash(own, _repro_under(narrower)) == own
    # The surgical pool diagnoses: exactly the crash's limits, lower ones included.
    assert no_tighter_than_crash(own, _repro_under(narrower), exact=True) == narrower
    assert no_tighter_than_crash(own, _repro_under(wider), exact=True) == wider
    # An attempt with its own deadline keeps it.
    assert no_tighter_than_crash(own, _repro_under(wider), deadline=False).deadline_s == 5.0
    # Nothing recorded, or not a repro: the worker's own limits.
    assert no_tighter_than_crash(own, b"") == own
    assert no_tighter_than_crash(own, b"\x81\xa1v\x07") == own
    # A worker's report raises limits only as far as a budget may.
    huge = SandboxLimits(fuel=10**18, memory_bytes=1 << 40, deadline_s=10**9)
    capped = no_tighter_than_crash(own, _repro_under(huge))
    assert capped.fuel == MAX_FUEL and capped.memory_bytes == 4096 << 20
    assert capped.deadline_s == 24 * 3600.0
