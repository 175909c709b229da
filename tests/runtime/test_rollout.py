"""Versions side by side, end to end through gRPC: a ramped rollout that splits new runs by
workflow id, pinned replay of in-flight runs, patch markers on both sides, the replay-checked
migration gate, automatic upgrades, retirement with a drain count, a restarted worker serving
every version, and bad rollout commands refused without a change.

The sample is `abi/samples/rollout.c` built three ways: v1; v2 = v1 plus an `audit_log`
activity behind `patched("add-audit")`; v3 = `send_welcome` moved before the signal, unpatched.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from amber.abi import InvalidInput
from amber.history import EventType, RunStatus
from amber.runtime.client._client import AmberClient, decode
from amber.runtime.model._clock import Clock, SystemClock
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker
from amber.versions import (
    LabelConflict,
    UnknownWorkflowType,
    VersionInUse,
    VersionNotFound,
    bucket_of,
)
from tests.conftest import InProcessServer

from ._engine_helpers import make_worker, settle

TYPE = "onboard"


def _digest(wasm: bytes) -> str:
    return hashlib.sha256(wasm).hexdigest()


@pytest.fixture
def srv(make_server, modules: dict[str, bytes]) -> InProcessServer:
    server: InProcessServer = make_server()
    server.client.upload_version(modules["rollout_v1"], promote=True, label="onboard@1")
    return server


@pytest.fixture
def v1(modules: dict[str, bytes]) -> str:
    return _digest(modules["rollout_v1"])


@pytest.fixture
def v2(srv: InProcessServer, modules: dict[str, bytes]) -> str:
    return srv.client.upload_version(modules["rollout_v2"], label="onboard@2").version.digest


@pytest.fixture
def v3(srv: InProcessServer, modules: dict[str, bytes]) -> str:
    return srv.client.upload_version(modules["rollout_v3"], label="onboard@3").version.digest


def _server_sandbox(client: AmberClient, tmp: Path, clock: Clock | None = None) -> Sandbox:
    """A sandbox that fetches modules from the server, as a real worker's does."""
    return Sandbox(SandboxEngine(tmp), clock or SystemClock(), client.get_module)


@pytest.fixture
def background_worker(srv: InProcessServer, sandbox: Sandbox) -> Iterator[Worker]:
    """A worker polling in a thread: checks and migrations wait for workers to replay runs."""
    worker = make_worker(srv.client, sandbox, worker_id="background")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    yield worker
    worker.stop()
    thread.join(timeout=10)


def _park(srv: InProcessServer, worker: Worker | None, ids: list[str]) -> dict[str, str]:
    """Start runs and let them reach the signal wait (None: a background worker serves them)."""
    runs = {wid: srv.client.start_run(TYPE, {"user": wid}, workflow_id=wid).run for wid in ids}
    if worker is not None:
        settle(worker, rounds=10 * len(ids) + 20)
    for run in runs.values():
        _wait_for(lambda r=run.run_id: _waits_for_go(srv, r))
        assert srv.client.result(run.run_id).status is RunStatus.RUNNING
    return {wid: run.run_id for wid, run in runs.items()}


def _waits_for_go(srv: InProcessServer, run_id: str) -> bool:
    return any(e.type is EventType.SIGNAL_AWAITED for e in srv.client.history(run_id))


def _wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def _go(srv: InProcessServer, worker: Worker | None, run_ids: list[str]) -> None:
    """Signal the runs; drive `worker` until idle (None: a background worker serves them)."""
    for run_id in run_ids:
        srv.client.signal(run_id, "go", {})
    if worker is not None:
        settle(worker, rounds=10 * len(run_ids) + 20)
    for run_id in run_ids:
        assert srv.client.result(run_id, wait_s=30).status.closed, run_id


def _digests(srv: InProcessServer, run_id: str) -> set[str]:
    return {e.digest for e in srv.client.history(run_id)}


def _patch_markers(srv: InProcessServer, run_id: str) -> list[str]:
    return [
        e.payload["value"]
        for e in srv.client.history(run_id)
        if e.type is EventType.MARKER_RECORDED and e.payload["kind"] == "patched"
    ]


def test_a_ramped_rollout_splits_new_runs_and_leaves_in_flight_runs_on_v1(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str, tmp_path: Path
) -> None:
    worker = make_worker(srv.client, sandbox)
    old = _park(srv, worker, [f"user-{i}" for i in range(100)])

    status = srv.client.change_rollout(TYPE, "ramp", "onboard@2", percent=50, operator="ops")
    assert status.rollout.candidate == v2 and status.rollout.ramp_percent == 50
    new = _park(srv, worker, [f"new-{i}" for i in range(200)])
    on_v2 = {wid for wid, run in new.items() if srv.client.result(run).digest == v2}
    # Deterministic: exactly the ids whose bucket is under the ramp, and so close to half.
    assert on_v2 == {wid for wid in new if bucket_of(TYPE, wid) < 50}
    assert 70 <= len(on_v2) <= 130
    started = srv.client.history(new["new-0"])[0].payload["version"]
    assert started["via"] in ("candidate", "current") and started["ramp"] == 50
    again = srv.client.start_run(TYPE, {"user": "new-0"}, workflow_id="new-0")
    assert again.already_started and again.run.digest == srv.client.result(new["new-0"]).digest

    # A worker restarted mid-rollout: a fresh sandbox with an empty artifact cache, no setup.
    worker.stop()
    restarted = make_worker(srv.client, _server_sandbox(srv.client, tmp_path / "artifacts"))
    _go(srv, restarted, [*old.values(), *new.values()])

    for run_id in old.values():
        closed = srv.client.result(run_id)
        assert closed.status is RunStatus.COMPLETED and closed.digest == v1
        assert decode(closed.result)["audited"] is False
        assert _digests(srv, run_id) == {v1}  # every event was produced by v1
        assert _patch_markers(srv, run_id) == []
    for wid, run_id in new.items():
        closed = srv.client.result(run_id)
        assert closed.status is RunStatus.COMPLETED
        audited = decode(closed.result)["audited"]
        assert audited is (wid in on_v2)
        assert _patch_markers(srv, run_id) == (["add-audit"] if wid in on_v2 else [])

    side_by_side = {v.digest: v for v in srv.client.rollout(TYPE).versions}
    assert side_by_side[v1].role == "current" and side_by_side[v2].role == "candidate"
    assert side_by_side[v2].health.activations > 0 and side_by_side[v1].health.activations > 0


def test_an_incompatible_version_is_reported_and_refused_and_a_compatible_one_migrates(
    srv: InProcessServer, sandbox: Sandbox, background_worker: Worker, v1: str, v2: str, v3: str
) -> None:
    runs = list(_park(srv, None, [f"m-{i}" for i in range(5)]).values())

    candidate, checks = srv.client.check_version("onboard@3", TYPE, wait_s=30)
    assert candidate == v3
    assert {c.run_id for c in checks} == set(runs)
    for c in checks:
        assert c.verdict == "incompatible" and c.position == 1
        assert "signal" in c.recorded and "send_welcome" in c.issued
    _, moved = srv.client.migrate_runs(v3, TYPE, reason="try v3", operator="ops", wait_s=30)
    assert {c.outcome for c in moved} == {"refused"}
    assert all(srv.client.result(r).digest == v1 for r in runs)
    with pytest.raises(InvalidInput, match="check"):  # auto-upgrade needs a passing check
        srv.client.change_rollout(TYPE, "auto_upgrade", v3)

    _, checks = srv.client.check_version(v2, TYPE, wait_s=30)
    assert {c.verdict for c in checks} == {"compatible"}
    _, moved = srv.client.migrate_runs(
        v2, TYPE, run_ids=runs[:3], reason="ship the audit", operator="ops", wait_s=30
    )
    assert {c.outcome for c in moved} == {"migrated"}
    for run_id in runs[:3]:
        (event,) = [e for e in srv.client.history(run_id) if e.type is EventType.RUN_MIGRATED]
        assert event.payload["from"] == v1 and event.payload["to"] == v2
        assert event.payload["by"] == "ops" and event.payload["reason"] == "ship the audit"
    _go(srv, None, runs)
    for run_id in runs[:3]:
        closed = srv.client.result(run_id)
        assert closed.digest == v2 and decode(closed.result)["audited"] is True
        migrated_at = next(
            e.seq for e in srv.client.history(run_id) if e.type is EventType.RUN_MIGRATED
        )
        later = [e.digest for e in srv.client.history(run_id) if e.seq > migrated_at]
        assert later and set(later) == {v2}
    for run_id in runs[3:]:
        closed = srv.client.result(run_id)
        assert closed.digest == v1 and decode(closed.result)["audited"] is False


def test_auto_upgrade_after_a_passing_check_moves_runs_on_their_next_activation(
    srv: InProcessServer, sandbox: Sandbox, background_worker: Worker, v1: str, v2: str
) -> None:
    runs = list(_park(srv, None, [f"a-{i}" for i in range(3)]).values())
    with pytest.raises(InvalidInput, match="versions check"):
        srv.client.change_rollout(TYPE, "auto_upgrade", v2)
    srv.client.check_version(v2, TYPE, wait_s=30)
    status = srv.client.change_rollout(TYPE, "auto_upgrade", v2, operator="ops")
    assert status.rollout.auto_upgrade_to == v2
    roles = {v.digest: v.role for v in status.versions}
    assert roles == {v1: "current", v2: "upgrade_target"}  # not "draining": runs move *to* it
    _go(srv, None, runs)
    for run_id in runs:
        closed = srv.client.result(run_id)
        assert closed.digest == v2 and decode(closed.result)["audited"] is True


def test_retiring_a_version_is_refused_while_runs_use_it_then_allowed(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str
) -> None:
    worker = make_worker(srv.client, sandbox)
    runs = list(_park(srv, worker, [f"r-{i}" for i in range(4)]).values())
    srv.client.change_rollout(TYPE, "promote", v2, operator="ops")
    with pytest.raises(VersionInUse, match="4 open run"):
        srv.client.retire_version(v1, reason="old", operator="ops")
    shown = srv.client.get_version(v1)
    assert shown.use is not None and shown.use.running == 4 and shown.retired_at is None
    _go(srv, worker, runs)
    assert srv.client.get_version(v1).use.running == 0  # type: ignore[union-attr]
    retired = srv.client.retire_version(v1, reason="drained", operator="ops")
    assert retired.retired_at is not None
    with pytest.raises(InvalidInput):  # nothing new may start on a retired version
        srv.client.start_run(TYPE, {"user": "late"}, version=v1)
    with pytest.raises(VersionInUse, match="new runs of onboard"):
        srv.client.retire_version(v2, reason="current", operator="ops")


def test_bad_rollout_commands_are_refused_and_change_nothing(
    srv: InProcessServer, modules: dict[str, bytes], v1: str, v2: str
) -> None:
    before = srv.client.rollout(TYPE).rollout
    orders = srv.client.upload_version(modules["orders"]).version.digest
    with pytest.raises(VersionNotFound):
        srv.client.change_rollout(TYPE, "ramp", "f" * 64, percent=10)
    with pytest.raises(InvalidInput, match="does not declare workflow type 'onboard'"):
        srv.client.change_rollout(TYPE, "ramp", orders, percent=10)
    for percent in (-1, 101):
        with pytest.raises(InvalidInput, match="percentage from 0 to 100"):
            srv.client.change_rollout(TYPE, "ramp", v2, percent=percent)
    with pytest.raises(LabelConflict, match="onboard@1"):
        srv.client.label_version(v2, "onboard@1")
    with pytest.raises(UnknownWorkflowType):
        srv.client.change_rollout("nope", "promote", v2)
    with pytest.raises(InvalidInput):
        srv.client.change_rollout(TYPE, "sideways", v2)
    assert srv.client.rollout(TYPE).rollout == before
    assert srv.client.get_version(v2).labels == ("onboard@2",)
    assert srv.client.get_version(v1).labels == ("onboard@1",)


def test_an_automatic_upgrade_that_cannot_replay_a_run_leaves_it_where_it_is(
    srv: InProcessServer, sandbox: Sandbox, background_worker: Worker, v1: str, v3: str
) -> None:
    _, checks = srv.client.check_version(v3, TYPE, wait_s=30)
    assert checks == []  # no run to disagree with: a (stale) passing check
    (run,) = _park(srv, None, ["stale-1"]).values()
    srv.client.change_rollout(TYPE, "auto_upgrade", v3, operator="ops")
    _go(srv, None, [run])
    closed = srv.client.result(run)
    assert closed.digest == v1 and decode(closed.result)["audited"] is False
    (failed,) = [e for e in srv.client.history(run) if e.type is EventType.UPGRADE_FAILED]
    assert failed.payload["to"] == v3
    assert failed.payload["detail"]["reason"] == "non_determinism"
    assert all(e.type is not EventType.RUN_MIGRATED for e in srv.client.history(run))


def test_removing_a_patch_is_non_determinism_for_histories_that_hold_its_marker(
    srv: InProcessServer, sandbox: Sandbox, background_worker: Worker, v1: str, v2: str
) -> None:
    run = srv.client.start_run(TYPE, {"user": "p"}, workflow_id="p", version=v2).run.run_id
    _wait_for(lambda: _waits_for_go(srv, run))
    _go(srv, None, [run])
    assert _patch_markers(srv, run) == ["add-audit"]
    _, checks = srv.client.check_version(v1, TYPE, run_ids=[run], wait_s=30)
    (check,) = checks
    assert check.verdict == "incompatible" and check.position == 2
    assert "patched" in check.recorded and "send_welcome" in check.issued


def test_a_worker_cannot_move_a_run_to_a_version_it_was_not_offered(
    srv: InProcessServer, v1: str, v2: str
) -> None:
    from amber.abi import WorkflowStatus
    from amber.runtime.model._tasks import WorkflowCompletion

    run = srv.client.start_run(TYPE, {"user": "f"}).run.run_id
    task = srv.client.poll_task(worker_id="forger", wait_s=1)
    assert task is not None and task.upgrade_to == ""
    forged = WorkflowCompletion(
        expected_last_seq=1, commands=(), status=WorkflowStatus.SUSPENDED, migrate_to=v2
    )
    srv.client.complete_workflow(task, forged, worker_id="forger")
    assert srv.client.result(run).digest == v1
    history = srv.client.history(run)
    assert [e.type for e in history] == [EventType.RUN_STARTED]  # nothing applied
    (pending,) = srv.client.describe(run).tasks  # handed out again, no failure counted
    assert pending.state.value == "pending" and pending.consecutive_failures == 0


def test_an_upgrade_offer_withdrawn_before_the_report_runs_the_activation_again(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str
) -> None:
    from amber.abi import WorkflowStatus
    from amber.runtime.model._tasks import WorkflowCompletion

    srv.client.check_version(v2, TYPE, wait_s=5)  # no runs: passes
    srv.client.change_rollout(TYPE, "auto_upgrade", v2)
    run = srv.client.start_run(TYPE, {"user": "w"}).run.run_id
    task = srv.client.poll_task(worker_id="slow", wait_s=1)
    assert task is not None and task.upgrade_to == v2
    srv.client.change_rollout(TYPE, "stop_auto_upgrade")
    late = WorkflowCompletion(
        expected_last_seq=1, commands=(), status=WorkflowStatus.SUSPENDED, migrate_to=v2
    )
    srv.client.complete_workflow(task, late, worker_id="slow")
    assert srv.client.result(run).digest == v1
    assert srv.client.describe(run).recent_failures == ()
    settle(make_worker(srv.client, sandbox))
    assert srv.client.result(run).digest == v1 and _waits_for_go(srv, run)


def _between_check_and_move(
    monkeypatch: pytest.MonkeyPatch, worker: Worker, meanwhile: Callable[[], object]
) -> None:
    """Make a migration run `meanwhile` after its replay check and before it moves the runs
    (a worker serves the check tasks until the check is over)."""
    from amber.runtime.services._migration import MigrationService

    real_replay = MigrationService._replay_all

    def replay_then(self, digest, runs, timeout_s, **options):  # type: ignore[no-untyped-def]
        checked = threading.Event()

        def serve() -> None:
            while not checked.is_set():
                worker.run_once(wait_s=0.05)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            verdicts = real_replay(self, digest, runs, timeout_s, **options)
        finally:
            checked.set()
            thread.join()
        meanwhile()
        return verdicts

    monkeypatch.setattr(MigrationService, "_replay_all", replay_then)


def test_a_run_that_closes_between_its_check_and_its_move_is_reported_closed(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator migrating a named run while another terminates (or resets) it: the run did
    # not move, and the answer says so (`runs migrate` then exits 3), not "skipped".
    worker = make_worker(srv.client, sandbox)
    (run,) = _park(srv, worker, ["ended"]).values()
    _between_check_and_move(
        monkeypatch,
        worker,
        lambda: srv.client.terminate(run, reason="another operator", operator="bob"),
    )
    _, moved = srv.client.migrate_runs(v2, TYPE, run_ids=[run], reason="r", wait_s=30)
    assert [(c.verdict, c.outcome) for c in moved] == [("compatible", "closed")]
    assert srv.client.result(run).digest == v1


def test_a_migration_is_skipped_for_a_run_whose_history_grew_since_its_check(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker(srv.client, sandbox)
    (run,) = _park(srv, worker, ["grown"]).values()
    # History grows between the check and the move.
    _between_check_and_move(monkeypatch, worker, lambda: srv.client.signal(run, "go", {}))
    _, moved = srv.client.migrate_runs(v2, TYPE, reason="r", wait_s=30)
    assert [c.outcome for c in moved] == ["moved_on"]
    assert srv.client.result(run).digest == v1
    assert all(e.type is not EventType.RUN_MIGRATED for e in srv.client.history(run))


def test_retirement_waits_for_activities_scheduled_on_the_version(
    srv: InProcessServer, sandbox: Sandbox, v1: str, v2: str
) -> None:
    from ._engine_helpers import run_one_task

    run = srv.client.start_run(TYPE, {"user": "t"}).run.run_id
    run_one_task(srv.client, sandbox)  # schedules create_account on v1; nobody runs it yet
    held = srv.client.poll_task(worker_id="holder", wait_s=1)  # running, on v1
    assert held is not None and held.kind.value == "activity" and held.digest == v1
    worker = make_worker(srv.client, sandbox, worker_id="checker")  # only checks are left
    done = threading.Event()
    thread = threading.Thread(target=lambda: _serve(worker, done), daemon=True)
    thread.start()
    _, moved = srv.client.migrate_runs(v2, TYPE, reason="r", wait_s=30)
    done.set()
    thread.join(timeout=30)
    assert [c.outcome for c in moved] == ["migrated"] and srv.client.result(run).digest == v2
    srv.client.change_rollout(TYPE, "promote", v2)
    with pytest.raises(VersionInUse, match="1 task") as refused:
        srv.client.retire_version(v1, reason="old")
    assert "open run" not in str(refused.value)  # the run is on v2; its activity is not


def _serve(worker: Worker, done: threading.Event) -> None:
    while not done.is_set():
        worker.run_once(wait_s=0.1)


def test_retiring_rollout_pointers_is_refused_or_clears_them(
    srv: InProcessServer, v1: str, v2: str, v3: str
) -> None:
    srv.client.check_version(v3, TYPE, wait_s=5)
    srv.client.change_rollout(TYPE, "auto_upgrade", v3)
    with pytest.raises(VersionInUse, match="upgrade to it automatically"):
        srv.client.retire_version(v3, reason="r")
    srv.client.change_rollout(TYPE, "stop_auto_upgrade")
    srv.client.change_rollout(TYPE, "promote", v2)
    assert srv.client.rollout(TYPE).rollout.previous == v1
    srv.client.retire_version(v1, reason="gone")
    assert srv.client.rollout(TYPE).rollout.previous is None
    with pytest.raises(InvalidInput, match="no candidate and no previous"):
        srv.client.change_rollout(TYPE, "rollback")
    srv.client.change_rollout(TYPE, "promote", v2)  # already current: a no-op
    assert srv.client.rollout(TYPE).rollout.current == v2


def test_health_counts_failures_by_reason_and_fuel_per_version(
    srv: InProcessServer, sandbox: Sandbox, v1: str
) -> None:
    from amber.runtime.model._tasks import FailureReport

    srv.client.start_run(TYPE, {"user": "h"})
    task = srv.client.poll_task(worker_id="w", wait_s=1)
    assert task is not None
    report = FailureReport(reason="trap", message="boom", trap_code="unreachable", fuel_used=777)
    srv.client.fail_task(task, report, worker_id="w")
    srv.server.sweep()  # flushes the counters
    (status,) = [v for v in srv.client.rollout(TYPE).versions if v.digest == v1]
    assert status.health.failures == {"trap": 1}
    assert status.health.activations == 1 and status.health.fuel == 777


def test_an_upload_larger_than_one_request_carries_gets_amber_s_own_error(make_server) -> None:
    from amber.runtime.model import PayloadTooLarge

    srv = make_server()
    with pytest.raises(PayloadTooLarge, match="one upload carries at most"):
        srv.client.upload_version(b"\x00asm" + b"\x00" * (64 * 1024 * 1024))
    assert srv.client.list_versions() == []


def test_divergences_of_closed_runs_are_reported_apart_and_gate_nothing(
    srv: InProcessServer, sandbox: Sandbox, background_worker: Worker, v1: str, v3: str
) -> None:
    # A closed run can never move to another version: its divergence is worth seeing, but it
    # must not hold up an automatic upgrade of the open runs (there are none here).
    runs = list(_park(srv, None, ["c-1"]).values())
    _go(srv, None, runs)
    _, checks = srv.client.check_version(v3, TYPE, closed_sample=20, wait_s=30)
    (closed,) = checks
    assert closed.status == "completed" and closed.verdict == "incompatible"
    status = srv.client.change_rollout(TYPE, "auto_upgrade", v3, operator="ops")
    assert status.rollout.auto_upgrade_to == v3
