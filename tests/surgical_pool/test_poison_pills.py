"""Issue 5's acceptance: poison pills are counted, diverted to the surgical pool, suspended, and
released by audited triage commands — against a real server, real PostgreSQL and real guests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from amber.abi import Conflict, InvalidInput
from amber.history import EventType, RunResumed, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model._bundle import Bundle
from amber.runtime.model._clock import Clock, ManualClock, SystemClock
from amber.runtime.model._errors import NotTroubled
from amber.runtime.model._settings import EngineSettings, PoisonPolicy
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.tracing._setup import JsonLinesExporter
from amber.runtime.worker._worker import Worker, WorkerSettings
from amber.surgical_pool import IsolatedSandbox, SurgicalWorker, replay_bundle
from amber.tools._build import build_module
from tests.conftest import ROOT, InProcessServer, Process, wait_for

FAST = PoisonPolicy(
    crashes_to_poison=3,
    surgical_delays=(timedelta(milliseconds=200),),
    suspend_after=timedelta(seconds=3),
    crash_backoff=timedelta(milliseconds=10),
)
"""The production policy with its waits shortened (1/5/30 min → 0.2 s, 24 h → 3 s)."""


@pytest.fixture(scope="module")
def fixed_hostile(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The hostile guest with `crash_on` fixed (it never traps): the operator's new version."""
    out = tmp_path_factory.mktemp("fixed") / "hostile_fixed.wasm"
    build_module(ROOT / "tests" / "guests" / "hostile.c", out, defines={"AMBER_VARIANT_FIXED": "1"})
    return out.read_bytes()


@contextmanager
def serving(worker: Worker | SurgicalWorker) -> Iterator[None]:
    """Run a worker in a thread for the duration of the block."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(timeout=30)


def _main_worker(srv: InProcessServer, sandbox: Sandbox, name: str = "main") -> Worker:
    return Worker(srv.client, sandbox, WorkerSettings(worker_id=name, poll_wait_s=0.2))


def _surgical(srv: InProcessServer, tmp_path: Path, spans: TracerProvider) -> SurgicalWorker:
    return SurgicalWorker(
        srv.client,
        WorkerSettings(worker_id="surgeon", poll_wait_s=0.2),
        artifact_dir=tmp_path / "surgical-artifacts",
        spans=spans.get_tracer("amber"),
    )


def _step(worker: Worker) -> bool:
    """Let `worker` run whatever is visible (for `wait_for` conditions); always true."""
    worker.run_once(wait_s=0.05)
    return True


def _wait_poisoned(srv: InProcessServer, main: Worker, run_id: str, what: str) -> None:
    """Step the main worker until `run_id`'s task is in the surgical pool."""
    wait_for(
        lambda: _step(main) and srv.client.describe(run_id).tasks[0].pool == "surgical", 60, what
    )


def _diverged(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> tuple[InProcessServer, str]:
    """A server and a `diverge` run whose replay diverged: poisoned at its first failure."""
    srv = make_server(settings=EngineSettings(poison=FAST))
    srv.client.upload_version(modules["hostile"], promote=True)
    run_id = srv.client.start_run("diverge", {"x": 1}).run.run_id
    worker = _main_worker(srv, sandbox)
    while worker.run_once(wait_s=0.3):  # activation, activity, the replay that diverges
        pass
    return srv, run_id


def _traced_to(path: Path) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(str(path))))
    return provider


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", *args],
        cwd=ROOT,
        env=env if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_crashing_activity_is_poisoned_served_by_the_surgical_pool_suspended_then_exported_replayed_and_resumed(  # noqa: E501
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    sandbox_engine: SandboxEngine,
    fixed_hostile: bytes,
    tmp_path: Path,
) -> None:
    srv = make_server(settings=EngineSettings(poison=FAST))
    srv.client.upload_version(modules["hostile"], promote=True)
    bad = srv.client.start_run("good", {"crash": True}, workflow_id="bad").run.run_id
    healthy = [srv.client.start_run("good", {"n": i}).run.run_id for i in range(30)]
    trace_file = tmp_path / "surgical.jsonl"
    surgeon = _surgical(srv, tmp_path, _traced_to(trace_file))
    main = _main_worker(srv, sandbox)

    # -- poisoned after 3 crashes, then served only by the surgical pool until suspended ------
    with serving(main), serving(surgeon):
        wait_for(
            lambda: any(t.pool == "surgical" for t in srv.client.describe(bad).tasks),
            60,
            "the task to be poisoned",
        )
        more = [srv.client.start_run("good", {"late": i}).run.run_id for i in range(10)]
        wait_for(lambda: all(srv.client.result(r).status.closed for r in more), 60, "late runs")
        wait_for(lambda: srv.client.describe(bad).run.suspension is not None, 90, "suspension")
        wait_for(
            lambda: all(srv.client.result(r).status.closed for r in healthy), 60, "healthy runs"
        )
    surgeon.close()

    for run_id in healthy + more:
        run = srv.client.result(run_id)
        assert run.status is RunStatus.COMPLETED and not srv.client.describe(run_id).recent_failures
    desc = srv.client.describe(bad)
    assert desc.run.status is RunStatus.RUNNING  # suspension is apart from the status
    assert desc.run.suspension is not None and desc.run.suspension.fingerprint
    (task,) = desc.tasks
    assert task.kind.value == "activity" and task.pool == "held" and task.poisoned_at is not None
    failures = desc.recent_failures[::-1]  # oldest first
    assert [f.pool for f in failures[:3]] == ["main"] * 3, "poisoned after exactly 3 crashes"
    surgical = failures[3:]
    assert surgical and all(f.pool == "surgical" for f in surgical), "main never ran it again"
    assert {(f.reason, f.trap_code) for f in failures} == {("trap", "unreachable")}
    assert len({f.fingerprint for f in failures}) == 1
    assert desc.run.suspension.fingerprint == failures[0].fingerprint
    assert len({f.fuel_used for f in failures}) == 1, "fuel is deterministic in either pool"
    events = srv.client.history(bad)
    suspended = [e for e in events if e.type is EventType.RUN_SUSPENDED]
    assert len(suspended) == 1 and suspended[0].payload["fingerprint"] == failures[0].fingerprint

    # -- the trace file has a span for every host call of every surgical attempt --------------
    spans = [json.loads(line) for line in trace_file.read_text().splitlines()]
    host_spans = [
        s for s in spans
        if s["name"].startswith("amber.host.") and s["attributes"].get("amber.run_id") == bad
    ]  # fmt: skip
    for f in surgical:
        assert f.trace_id and [c.split(" ")[1].split("(")[0] for c in f.host_calls] == [
            "log",
            "log",
        ]
        mine = [s for s in host_spans if s["context"]["trace_id"] == "0x" + f.trace_id]
        assert [s["name"] for s in mine] == ["amber.host.log", "amber.host.log"]
        for s in mine:
            attributes = s["attributes"]
            assert attributes["amber.module_digest"] == failures[0].digest
            assert attributes["amber.attempt"] == f.attempt and attributes["amber.step"] == 0
    assert len(host_spans) == 2 * len(surgical)

    # -- export with the CLI, replay on a "fresh machine": no database, empty artifact cache ---
    bundle_file = tmp_path / "bad.bundle"
    exported = _cli("--server", srv.target, "triage", "export", bad, "-o", str(bundle_file))
    assert exported.returncode == 0, exported.stderr
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("AMBER_", "PG"))}
    bare["AMBER_HOME"] = str(tmp_path / "laptop")
    replayed = _cli("--json", "triage", "replay", str(bundle_file), env=bare)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    doc = json.loads(replayed.stdout)
    newest = failures[-1]
    assert doc["reproduced"] and doc["input_matches"]
    assert doc["replayed"]["reason"] == "trap" and doc["replayed"]["trap_code"] == "unreachable"
    assert doc["replayed"]["fuel_used"] == newest.fuel_used == doc["recorded"]["fuel_used"]

    # -- resume on a fixed version: the run finishes, history names operator, reason, digests --
    fixed = srv.client.upload_version(fixed_hostile).version.digest
    from_server = Sandbox(sandbox_engine, SystemClock(), srv.client.get_module)
    worker = _main_worker(srv, from_server, "after-fix")
    with serving(worker):  # answers the replay check, then runs the released task
        resumed = _cli(
            "--server", srv.target, "triage", "resume", bad, "--version", fixed,
            "--reason", "crash_on fixed in v2", "--operator", "alice",
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "resumed" in resumed.stdout
        wait_for(lambda: srv.client.result(bad).status.closed, 30, "the resumed run")
    run = srv.client.result(bad)
    assert run.status is RunStatus.COMPLETED and decode(run.result) == {"crash": True}
    assert run.digest == fixed and run.suspension is None
    events = srv.client.history(bad)
    (migrated,) = [e for e in events if e.type is EventType.RUN_MIGRATED]
    (resumed_event,) = [e for e in events if e.type is EventType.RUN_RESUMED]
    old = failures[0].digest
    assert migrated.payload["from"] == old and migrated.payload["to"] == fixed
    assert resumed_event.payload == RunResumed(
        action="resume",
        by="alice",
        reason="crash_on fixed in v2",
        from_digest=old,
        to=fixed,
        step=None,
        suspended=True,
    )
    (done,) = [e for e in events if e.type is EventType.ACTIVITY_COMPLETED]
    assert done.digest == fixed, "the poisoned activity ran on the fixed version"


def test_a_workflow_that_diverges_on_replay_is_poisoned_at_its_first_failure(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    tmp_path: Path,
) -> None:
    srv, run_id = _diverged(make_server, modules, sandbox)
    desc = srv.client.describe(run_id)
    (failure,) = desc.recent_failures
    assert failure.reason == "non_determinism" and failure.pool == "main"
    (task,) = desc.tasks
    assert task.kind.value == "workflow" and task.pool == "surgical"
    assert task.crash is not None and task.crash.count == 1
    assert "deterministic" in (task.poison_reason or "")

    # The surgical pool replays it again, with a span for every replayed event.
    trace_file = tmp_path / "replay.jsonl"
    surgeon = _surgical(srv, tmp_path, _traced_to(trace_file))
    try:
        wait_for(lambda: surgeon.run_once(wait_s=0.5), 30, "the surgical attempt")
    finally:
        surgeon.close()
    history = srv.client.history(run_id)
    replayed = [
        json.loads(line)["attributes"]
        for line in trace_file.read_text().splitlines()
        if json.loads(line)["name"].startswith("amber.replay.")
    ]
    assert [(a["amber.event.seq"], a["amber.event.type"]) for a in replayed] == [
        (e.seq, e.type.value) for e in history
    ]
    assert all(a["amber.run_id"] == run_id and a["amber.pool"] == "surgical" for a in replayed)
    failures = srv.client.describe(run_id).recent_failures
    assert [(f.pool, f.reason) for f in failures] == [
        ("surgical", "non_determinism"),
        ("main", "non_determinism"),
    ]


def test_a_lease_that_expires_without_a_report_counts_as_one_worker_lost_crash(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    clock = ManualClock()
    srv = make_server(settings=EngineSettings(poison=FAST), clock=clock)
    srv.client.upload_version(modules["hostile"], promote=True)
    run_id = srv.client.start_run("good", {"n": 1}).run.run_id
    leased = srv.client.poll_task(worker_id="doomed", wait_s=1)  # then it "dies": no report
    assert leased is not None
    clock.advance(timedelta(minutes=5))
    srv.server.sweep()
    desc = srv.client.describe(run_id)
    (failure,) = desc.recent_failures
    assert failure.reason == "worker_lost" and failure.fingerprint
    (task,) = desc.tasks
    assert task.crash is not None and task.crash.count == 1 and task.pool == "main"


def test_a_guest_that_kills_its_host_process_takes_down_only_its_surgical_subprocess(
    make_server: Callable[..., InProcessServer],
    amber_process: Callable[..., Process],
    modules: dict[str, bytes],
    tmp_path: Path,
) -> None:
    one = PoisonPolicy(
        crashes_to_poison=1,
        surgical_delays=(timedelta(milliseconds=100),),
        crash_backoff=timedelta(milliseconds=10),
    )
    srv = make_server(settings=EngineSettings(poison=one, lease=timedelta(seconds=2)))
    srv.client.upload_version(modules["exiter"], promote=True)
    run_id = srv.client.start_run("exit_wf", {"exit": True}).run.run_id
    # The main pool runs in its own OS process: the guest's exit kills it, like any host crash.
    main = amber_process("--server", srv.target, "worker", "--poll-wait", "1")
    wait_for(lambda: main.popen.poll() is not None, 60, "the main worker to be killed")
    assert main.popen.returncode == 3
    wait_for(
        lambda: any(t.pool == "surgical" for t in srv.client.describe(run_id).tasks),
        30,
        "the lost lease to poison the task",
    )
    surgeon = SurgicalWorker(
        srv.client,
        WorkerSettings(worker_id="surgeon", poll_wait_s=0.2),
        artifact_dir=tmp_path / "art",
    )
    try:
        for _ in range(3):  # the same guest kills a child process each time
            wait_for(lambda: surgeon.run_once(wait_s=0.5), 30, "a surgical attempt")
    finally:
        surgeon.close()
    failures = srv.client.describe(run_id).recent_failures[::-1]
    assert failures[0].reason == "worker_lost" and failures[0].pool == "main"
    assert [f.reason for f in failures[1:]] == ["host_crash"] * 3
    assert all(f.pool == "surgical" and "3" in f.message for f in failures[1:])
    assert srv.client.result(run_id).status is RunStatus.RUNNING  # nothing is lost


def test_triage_commands_need_a_reason_refuse_runs_with_nothing_to_triage_and_are_audited(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server(settings=EngineSettings(poison=FAST))
    srv.client.upload_version(modules["hostile"], promote=True)
    fine = srv.client.start_run("good", {"n": 1}).run.run_id
    with pytest.raises(InvalidInput, match="reason"):
        srv.client.triage("retry", run_ids=[fine], reason=" ", operator="bob")
    with pytest.raises(NotTroubled):
        srv.client.triage("retry", run_ids=[fine], reason="why not", operator="bob")
    with pytest.raises(InvalidInput, match="no triage action"):
        srv.client.triage("delete", run_ids=[fine], reason="x", operator="bob")
    assert [e.type for e in srv.client.history(fine)] == [EventType.RUN_STARTED]  # nothing written

    # Three runs poisoned by one fingerprint; a bulk retry after the "outage" releases them all.
    crashing = [srv.client.start_run("good", {"crash": True}).run.run_id for _ in range(3)]
    worker = _main_worker(srv, sandbox)
    wait_for(
        lambda: _step(worker) and len(srv.client.list_troubled()) == 3,
        30,
        "three poisoned runs",
    )
    (fingerprint,) = {t.fingerprint for t in srv.client.list_troubled()}
    assert fingerprint
    outcomes = srv.client.triage(
        "retry", fingerprint=fingerprint, reason="payment outage over", operator="bob"
    )
    assert sorted(o.run_id for o in outcomes) == sorted(crashing)
    assert {o.outcome for o in outcomes} == {"retried"}
    assert srv.client.list_troubled() == []
    for run_id in crashing:
        (task,) = srv.client.describe(run_id).tasks
        assert task.pool == "main" and task.crash is None
        (event,) = [e for e in srv.client.history(run_id) if e.type is EventType.RUN_RESUMED]
        assert event.payload["by"] == "bob" and event.payload["action"] == "retry"

    # Skip completes the poisoned step with the operator's result; terminate closes a run.
    wait_for(
        lambda: _step(worker) and len(srv.client.list_troubled()) == 3,
        30,
        "the runs to be poisoned again",
    )
    first, second, third = crashing
    with pytest.raises(InvalidInput, match="no poisoned activity at step 7"):
        srv.client.triage(
            "skip", run_ids=[first], step=7, result=b"\xc0", reason="x", operator="bob"
        )
    srv.client.triage(
        "skip", run_ids=[first], step=0, result=b"\x81\xa2ok\xc3", reason="done by hand",
        operator="bob",
    )  # fmt: skip
    srv.client.triage("terminate", run_ids=[second], reason="customer cancelled", operator="bob")
    wait_for(
        lambda: _step(worker) and srv.client.result(first).status.closed,
        30,
        "the skipped run",
    )
    assert decode(srv.client.result(first).result) == {"ok": True}
    (done,) = [e for e in srv.client.history(first) if e.type is EventType.ACTIVITY_COMPLETED]
    assert done.payload["skipped_by"] == "bob" and done.payload["reason"] == "done by hand"
    assert srv.client.result(second).status is RunStatus.TERMINATED
    assert [t.run.run_id for t in srv.client.list_troubled()] == [third]


def test_a_bundle_replays_in_process_and_isolated_alike_and_tampering_is_refused(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox: Sandbox,
    tmp_path: Path,
) -> None:
    srv, run_id = _diverged(make_server, modules, sandbox)
    data = srv.client.export_run(run_id, operator="carol")
    bundle = Bundle.decode(data)
    engine = SandboxEngine(tmp_path / "fresh")
    try:
        local = replay_bundle(bundle, lambda source, clock: Sandbox(engine, clock, source))
    finally:
        engine.close()
    children: list[IsolatedSandbox] = []

    def isolated(source: Callable[[str], bytes], clock: Clock) -> IsolatedSandbox:
        children.append(IsolatedSandbox(source, clock, artifact_dir=tmp_path / "isolated"))
        return children[-1]

    try:
        apart = replay_bundle(bundle, isolated)
    finally:
        for child in children:
            child.close()
    for result in (local, apart):
        assert result.reproduced and result.reason == "non_determinism"
    assert local.fuel_used == apart.fuel_used == bundle.failures[0].fuel_used
    digest = next(iter(bundle.modules))
    tampered = data.replace(bundle.modules[digest][-16:], b"\x00" * 16)
    with pytest.raises(InvalidInput, match="does not match its digest"):
        Bundle.decode(tampered)
    with pytest.raises(InvalidInput, match="not a triage bundle"):
        Bundle.decode(b"garbage")


def test_poisoned_runs_not_yet_suspended_resume_and_retry_on_a_fixed_version(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox_engine: SandboxEngine,
    fixed_hostile: bytes,
) -> None:
    # The operator's path the day a poison pill shows up: the runs are poisoned (suspension is
    # 24 h away), a fix is uploaded, and they are released onto it without waiting — one by
    # workflow id with `resume`, the rest in bulk by fingerprint with `retry`.
    policy = replace(FAST, suspend_after=timedelta(hours=24))
    srv = make_server(settings=EngineSettings(poison=policy))
    srv.client.upload_version(modules["hostile"], promote=True)
    runs = [
        srv.client.start_run("good", {"crash": True, "n": i}, workflow_id=f"pp-{i}").run.run_id
        for i in range(3)
    ]
    from_server = Sandbox(sandbox_engine, SystemClock(), srv.client.get_module)
    main = _main_worker(srv, from_server)
    wait_for(
        lambda: (
            _step(main) and all(srv.client.describe(r).tasks[0].pool == "surgical" for r in runs)
        ),
        60,
        "the tasks to be poisoned",
    )
    assert all(srv.client.describe(r).run.suspension is None for r in runs)
    (fingerprint,) = {srv.client.describe(r).tasks[0].crash.fingerprint for r in runs}
    fixed = srv.client.upload_version(fixed_hostile).version.digest

    with serving(_main_worker(srv, from_server, "after-fix")):  # answers the replay checks
        (one,) = srv.client.triage(
            "resume", run_ids=["pp-0"], reason="fixed", operator="ops", version=fixed
        )
        assert one.outcome == "resumed" and one.to_digest == fixed
        rest = srv.client.triage(
            "retry", fingerprint=fingerprint, reason="fixed", operator="ops", version=fixed
        )
        assert sorted(o.run_id for o in rest) == sorted(runs[1:])
        assert {o.outcome for o in rest} == {"retried"} and {o.to_digest for o in rest} == {fixed}
        wait_for(lambda: all(srv.client.result(r).status.closed for r in runs), 30, "released runs")
    for run_id in runs:
        run = srv.client.result(run_id)
        assert run.status is RunStatus.COMPLETED and run.digest == fixed
        migrated = [e for e in srv.client.history(run_id) if e.type is EventType.RUN_MIGRATED]
        assert len(migrated) == 1 and migrated[0].payload["to"] == fixed


def test_a_version_check_names_runs_by_workflow_id(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["hostile"], promote=True)
    srv.client.start_run("sleeper", {"ms": 60_000}, workflow_id="nap-1")
    with serving(_main_worker(srv, sandbox)):
        wait_for(lambda: srv.client.describe("nap-1").run.last_seq > 1, 30, "the timer")
        digest = hashlib.sha256(modules["hostile"]).hexdigest()
        _, checks = srv.client.check_version(digest, "sleeper", run_ids=["nap-1"])
    (check,) = checks  # the run's own version: nothing to replay, but the id resolved
    assert check.run_id == srv.client.result("nap-1").run_id and check.verdict == "already_on"


def test_a_known_poison_is_diverted_at_its_first_crash_in_another_run(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    # Isolation: once one run has shown that a crash is a poison pill, the same crash (same
    # code, step, fault and version) in other runs spends one attempt of the healthy pool, not
    # three. A lost worker is no evidence about the code: it is never diverted this way.
    policy = replace(FAST, suspend_after=timedelta(hours=24))
    srv = make_server(settings=EngineSettings(poison=policy))
    srv.client.upload_version(modules["hostile"], promote=True)
    main = _main_worker(srv, sandbox)
    first = srv.client.start_run("good", {"crash": True, "n": 0}).run.run_id
    _wait_poisoned(srv, main, first, "the first run's task to be poisoned after three crashes")
    assert len(srv.client.describe(first).recent_failures) == 3
    later = srv.client.start_run("good", {"crash": True, "n": 1}).run.run_id
    _wait_poisoned(srv, main, later, "the second run's task to be poisoned")
    desc = srv.client.describe(later)
    assert len(desc.recent_failures) == 1, "diverted at its first crash"
    assert "already poisoned another run" in (desc.tasks[0].poison_reason or "")


def test_what_a_poison_taught_outlives_its_run(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    # The operator terminates the first poisoned run; the next run hitting the same crash is
    # still poisoned at its first crash: the knowledge is the fingerprint's, not the run's.
    srv = make_server(settings=EngineSettings(poison=replace(FAST, suspend_after=timedelta(1))))
    srv.client.upload_version(modules["hostile"], promote=True)
    main = _main_worker(srv, sandbox)
    first = srv.client.start_run("good", {"crash": True, "n": 0}).run.run_id
    _wait_poisoned(srv, main, first, "the first run's task to be poisoned after three crashes")
    srv.client.terminate(first, reason="bad input", operator="ops")
    later = srv.client.start_run("good", {"crash": True, "n": 1}).run.run_id
    _wait_poisoned(srv, main, later, "the second run's task to be poisoned")
    desc = srv.client.describe(later)
    assert len(desc.recent_failures) == 1, "diverted at its first crash"
    assert "crashed 3 times in the last 24 h" in (desc.tasks[0].poison_reason or "")


def test_one_crash_in_many_runs_at_once_is_poisoned_after_three_crashes_in_all(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    # A bad release hits many runs together, before any of them has crashed three times: the
    # fingerprint's crashes are counted across runs, so three runs cost at most five crashes of
    # the healthy pool instead of nine.
    srv = make_server(settings=EngineSettings(poison=replace(FAST, suspend_after=timedelta(1))))
    srv.client.upload_version(modules["hostile"], promote=True)
    main = _main_worker(srv, sandbox)
    runs = [srv.client.start_run("good", {"crash": True, "n": n}).run.run_id for n in range(3)]
    wait_for(
        lambda: (
            _step(main) and all(srv.client.describe(r).tasks[0].pool == "surgical" for r in runs)
        ),
        60,
        "all three runs' tasks to be poisoned",
    )
    crashes = sum(len(srv.client.describe(r).recent_failures) for r in runs)
    assert 3 <= crashes <= 5


def test_a_crash_older_than_the_window_is_forgotten(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    policy = replace(FAST, suspend_after=timedelta(1), remember_for=timedelta(milliseconds=1))
    srv = make_server(settings=EngineSettings(poison=policy))
    srv.client.upload_version(modules["hostile"], promote=True)
    main = _main_worker(srv, sandbox)
    first = srv.client.start_run("good", {"crash": True, "n": 0}).run.run_id
    _wait_poisoned(srv, main, first, "the first run's task to be poisoned")
    srv.client.terminate(first, reason="bad input", operator="ops")
    time.sleep(0.05)
    later = srv.client.start_run("good", {"crash": True, "n": 1}).run.run_id
    _wait_poisoned(srv, main, later, "the second run's task to be poisoned")
    assert len(srv.client.describe(later).recent_failures) == 3


@pytest.mark.parametrize("surgeon_mib", [8, 128])
def test_the_surgical_pool_diagnoses_a_task_under_the_limits_it_failed_under(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox_engine: SandboxEngine,
    tmp_path: Path,
    surgeon_mib: int,
) -> None:
    # The main worker gives activities 24 MiB; the surgeon is configured with 8 (or 128). Run
    # under its own limits, the surgeon would record another failure (the guest stopped at
    # 8 MiB, or went on to trap past 100), a new crash count and a bundle replaying that one;
    # the task's last crash says what it ran under, and the surgeon runs it under exactly that.
    srv = make_server(settings=EngineSettings(poison=replace(FAST, suspend_after=timedelta(1))))
    srv.client.upload_version(modules["hostile"], promote=True)
    main_limits = SandboxLimits(memory_bytes=24 << 20, deadline_s=10.0)
    main = Worker(
        srv.client,
        Sandbox(sandbox_engine, SystemClock(), srv.client.get_module),
        WorkerSettings(worker_id="main", poll_wait_s=0.2, activity_limits=main_limits),
    )
    run_id = srv.client.start_run("call", {"activity": "hog", "args": {}}).run.run_id
    _wait_poisoned(srv, main, run_id, "the hog's task to be poisoned")
    (crashed,) = {(f.reason, f.fingerprint, f.memory_bytes) for f in _failures(srv, run_id)}
    assert crashed[0] == "memory_limit" and crashed[2] > 16 << 20  # past the surgeon's 8 MiB
    surgeon = SurgicalWorker(
        srv.client,
        WorkerSettings(
            worker_id="surgeon",
            poll_wait_s=0.2,
            activity_limits=replace(main_limits, memory_bytes=surgeon_mib << 20),
        ),
        artifact_dir=tmp_path / "surgical-artifacts",
    )
    try:
        wait_for(lambda: surgeon.run_once(wait_s=0.5), 30, "the surgical attempt")
    finally:
        surgeon.close()
    failures = srv.client.describe(run_id).recent_failures
    assert failures[0].pool == "surgical"
    assert (failures[0].reason, failures[0].fingerprint, failures[0].memory_bytes) == crashed
    (task,) = srv.client.describe(run_id).tasks
    assert task.crash is not None and task.crash.count == len(failures)  # it went on counting


def _failures(srv: InProcessServer, run_id: str) -> list[Any]:
    return list(srv.client.describe(run_id).recent_failures)


def test_resuming_on_the_runs_own_version_is_replay_gated_too(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    # `--version` naming the version the run is on used to skip the replay check: a run
    # poisoned by its own code's divergence was "resumed", then poisoned again at once.
    srv, run_id = _diverged(make_server, modules, sandbox)
    own = hashlib.sha256(modules["hostile"]).hexdigest()
    refused = pytest.raises(Conflict, match=f"does not replay on {own[:12]}: incompatible")
    with serving(_main_worker(srv, sandbox, "checker")), refused:  # it answers the check
        srv.client.triage("resume", run_ids=[run_id], reason="x", operator="ops", version=own)
    desc = srv.client.describe(run_id)
    assert desc.tasks[0].pool == "surgical" and not desc.run.status.closed
    assert not [e for e in srv.client.history(run_id) if e.type is EventType.RUN_RESUMED]
