"""Python guests (components built with `amber build x.py`) on the real stack: the same
server, worker, replay matcher, faults and queries as C guests.

The guest is `tests/guests/py_guest.py`, built once per session (`python_built`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgpack
import pytest

from amber.abi import InvalidInput, RecordNow, RecordRandom, ScheduleActivity, WorkflowStatus
from amber.history import EventType, RunStatus
from amber.runtime.client._client import decode
from amber.runtime.model._clock import SystemClock
from amber.runtime.model._faults import (
    AbiViolation,
    GuestTrap,
    MalformedOutput,
    MemoryLimitExceeded,
    OutOfFuel,
    StackOverflow,
)
from amber.runtime.model._ids import new_run_id
from amber.runtime.model._settings import EngineSettings, PoisonPolicy
from amber.runtime.replay._replay import WorkflowActivation, WorkflowStep, activate_workflow
from amber.runtime.sandbox import (
    SLICE_FUEL,
    SandboxEngine,
    SandboxRunner,
    StickySandbox,
    guest_runner,
)
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from amber.runtime.worker._worker import Worker, WorkerSettings
from amber.surgical_pool import SurgicalWorker
from amber.tools._build import BuildResult
from tests.conftest import ARTIFACTS, ROOT, InProcessServer, busy_attempt, wait_for

from ._engine_helpers import drive, make_worker, query, serving, settle

LIMITS = SandboxLimits(fuel=2_000_000_000, memory_bytes=48 * 2**20, deadline_s=10.0)


@pytest.fixture
def srv(make_server: Any, python_modules: dict[str, bytes]) -> InProcessServer:
    server: InProcessServer = make_server()
    server.client.upload_version(python_modules["py_guest"], promote=True)
    return server


def _digest(python_built: dict[str, BuildResult]) -> str:
    return python_built["py_guest"].sha256


def _activate(sandbox: SandboxRunner, digest: str, name: str, run_id: str = "") -> WorkflowStep:
    return activate_workflow(
        sandbox,
        WorkflowActivation(
            run_id=run_id or new_run_id(),
            workflow_type=name,
            digest=digest,
            input=msgpack.packb({"name": "Ada"}),
            events=(),
            limits=LIMITS,
        ),
    )


def test_a_python_workflow_runs_to_completion_with_retries_queries_and_logs(
    srv: InProcessServer, py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("hello", {"name": "Ada"}).run.run_id
    run = drive(worker, srv.client, run_id)
    assert run.status is RunStatus.COMPLETED
    result = decode(run.result)
    assert result["greeting"] == "hello Ada"
    assert result["attempt"] == 2  # the first attempt of `flaky` failed and was retried
    assert 0 <= result["roll"] < 1 and result["new_path"] is True
    history = srv.client.history(run_id)
    assert {e.digest for e in history if e.digest} == {_digest(python_built)}
    types = [e.type for e in history]
    assert types.count(EventType.ACTIVITY_COMPLETED) == 2
    assert query(worker, srv.client, run_id, "stage") == {"stage": "done", "name": "Ada"}


def test_a_python_workflow_waits_for_a_signal(srv: InProcessServer, py_sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("gated", {"order": 7}, workflow_id="gate-1").run.run_id
    settle(worker)
    assert srv.client.result(run_id).status is RunStatus.RUNNING
    assert query(worker, srv.client, run_id, "stage") == "waiting"
    # As in Temporal: the code knows the id it was started under, not only its run id.
    assert query(worker, srv.client, run_id, "who") == {"run": run_id, "workflow_id": "gate-1"}
    assert srv.client.signal("gate-1", "go", {"approved": True})
    run = drive(worker, srv.client, run_id)
    assert decode(run.result) == {"decision": {"approved": True}, "payload": {"order": 7}}


def test_activity_errors_reach_python_code_and_application_errors_fail_the_run(
    srv: InProcessServer, py_sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, py_sandbox)
    refused = srv.client.start_run("refused", {"x": 1}).run.run_id
    assert decode(drive(worker, srv.client, refused).result) == {
        "caught": "Refused",
        "message": "not today",
    }
    failing = srv.client.start_run("fails", {}).run.run_id
    run = drive(worker, srv.client, failing)
    assert run.status is RunStatus.FAILED
    assert (run.error_type, run.error_message) == ("VoidOrder", "the order is void")


def test_a_python_workflow_runs_a_c_workflow_as_its_child(
    srv: InProcessServer, py_sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    srv.client.upload_version(modules["chain"], promote=True)
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("calls_c_child", {"k": 3, "value": 4}).run.run_id
    run = drive(worker, srv.client, run_id)
    assert decode(run.result) == {"from_c": {"value": 7}}  # chain.c added one, three times
    child = srv.client.result("c-child-3")
    assert child.digest == hashlib.sha256(modules["chain"]).hexdigest()


def test_continue_as_new_chains_python_runs(srv: InProcessServer, py_sandbox: Sandbox) -> None:
    worker = make_worker(srv.client, py_sandbox)
    first = srv.client.start_run("counts_down", {"n": 2}, workflow_id="countdown").run.run_id
    assert drive(worker, srv.client, first).status is RunStatus.CONTINUED_AS_NEW
    settle(worker)
    last = srv.client.result("countdown")
    assert last.run_id != first and last.status is RunStatus.COMPLETED
    assert decode(last.result) == "done"
    runs, _ = srv.client.list_runs(workflow_type="counts_down")
    assert sorted(r.status.value for r in runs) == ["completed"] + ["continued_as_new"] * 2


def test_replaying_a_python_workflow_is_deterministic(
    py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    digest = _digest(python_built)
    run_id = new_run_id()
    first = _activate(py_sandbox, digest, "hello", run_id)
    second = _activate(py_sandbox, digest, "hello", run_id)
    assert first.status is WorkflowStatus.SUSPENDED
    now, greet = first.new_commands  # `now` is new each time: the host's clock, then recorded
    assert isinstance(now, RecordNow) and isinstance(second.new_commands[0], RecordNow)
    assert second.new_commands[1] == greet
    assert isinstance(greet, ScheduleActivity) and greet.name == "greet"
    # Without a clock reading the two activations are the same computation, to the instruction.
    waits = [_activate(py_sandbox, digest, "gated", run_id) for _ in range(2)]
    assert waits[0].new_commands == waits[1].new_commands
    assert waits[0].stats.fuel_used == waits[1].stats.fuel_used > 0


@pytest.mark.parametrize(
    ("workflow", "fault", "detail"),
    [
        ("spins", OutOfFuel, "fuel"),
        ("hoards", MemoryLimitExceeded, "MemoryError"),
        ("recurses", StackOverflow, "RecursionError"),
        ("reads_clock", GuestTrap, "workflow.now()"),
        ("draws_random", GuestTrap, "workflow.random_bytes()"),
        ("breaks", GuestTrap, "KeyError"),
        ("opens_files", GuestTrap, "Error"),
        ("garbage", MalformedOutput, ""),
    ],
)
def test_a_hostile_python_workflow_ends_in_its_typed_fault(
    py_sandbox: Sandbox,
    python_built: dict[str, BuildResult],
    workflow: str,
    fault: type[Exception],
    detail: str,
) -> None:
    digest = _digest(python_built)
    with pytest.raises(fault) as caught:
        _activate(py_sandbox, digest, workflow)
    assert detail in str(caught.value)
    assert getattr(caught.value, "digest", digest) == digest
    healthy = _activate(py_sandbox, digest, "hello")  # the sandbox is unharmed
    assert healthy.status is WorkflowStatus.SUSPENDED


def test_an_activity_reaching_for_wasi_we_do_not_provide_is_an_abi_violation(
    srv: InProcessServer, py_sandbox: Sandbox
) -> None:
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("sleeps", {}).run.run_id
    settle(worker)
    failures = srv.client.describe(run_id).recent_failures
    assert failures and failures[0].reason == AbiViolation.reason.value
    assert "monotonic-clock" in failures[0].message


def test_a_python_component_is_validated_at_upload(
    srv: InProcessServer, python_modules: dict[str, bytes]
) -> None:
    wasm = python_modules["py_guest"]
    damaged = wasm[:8] + b"\x7f" + wasm[9:]  # its first section's id is no section's
    with pytest.raises(InvalidInput, match="component does not compile"):
        srv.client.upload_version(damaged)
    with pytest.raises(InvalidInput, match="section runs past the end"):
        srv.client.upload_version(wasm[: len(wasm) // 2])
    again = srv.client.upload_version(wasm)  # the same bytes: the same version
    assert not again.created and again.version.digest == hashlib.sha256(wasm).hexdigest()


def test_bytes_reach_components_in_one_copy_on_the_pinned_wasmtime() -> None:
    from amber.runtime.sandbox import _fastlist

    assert _fastlist.FAST  # else every fresh Python activation pays ~5 ms converting bytes


def test_host_functions_keep_their_types_on_the_pinned_wasmtime() -> None:
    from amber.runtime.sandbox import _fasthost

    # Else every host call a component makes reads its type again; every component test in
    # the suite goes through the replacement trampoline.
    assert _fasthost.FAST


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMBER_", "PG"))}
    return subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_python_run_and_a_python_fault_replay_offline_from_their_triage_bundles(
    srv: InProcessServer, py_sandbox: Sandbox, tmp_path: Path
) -> None:
    worker = make_worker(srv.client, py_sandbox)
    done = srv.client.start_run("hello", {"name": "Ada"}).run.run_id
    drive(worker, srv.client, done)
    broken = srv.client.start_run("breaks", {}).run.run_id
    settle(worker)  # a Python exception in workflow code: poisoned at its first crash
    assert srv.client.describe(broken).recent_failures[0].reason == "trap"
    cache = ["--artifacts", str(ARTIFACTS)]  # compiled already: no 10 s compile here
    for run, name in ((done, "done"), (broken, "broken")):
        bundle = tmp_path / f"{name}.bundle"
        exported = _cli("--server", srv.target, "triage", "export", run, "-o", str(bundle))
        assert exported.returncode == 0, exported.stderr
        replayed = _cli("--json", "triage", "replay", str(bundle), *cache)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        doc = json.loads(replayed.stdout)
        assert doc["reproduced"] is True
        if name == "done":  # the whole history, through the module in the bundle
            assert doc["recorded"]["status"] == doc["replayed"]["status"] == "completed"
            assert doc["result_matches"] is True and doc["replayed"]["new_commands"] == 0
        else:  # the failure, to the instruction
            assert doc["replayed"]["reason"] == "trap"
            assert "KeyError" in doc["replayed"]["message"]
            assert doc["replayed"]["fuel_used"] == doc["recorded"]["fuel_used"]


def test_a_python_run_goes_on_in_its_live_instance_and_decides_what_a_replay_decides(
    srv: InProcessServer, py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    """Each prefix of a finished run's history (cut after every activity result) activated
    on a live instance gives the same step as a fresh replay from the top."""
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("hello", {"name": "Ada"}).run.run_id
    drive(worker, srv.client, run_id)
    history = tuple(srv.client.history(run_id))
    cuts = [i + 1 for i, e in enumerate(history) if e.type is EventType.ACTIVITY_COMPLETED]
    cuts += [i + 1 for i, e in enumerate(history) if e.type is EventType.ACTIVITY_FAILED]
    assert len(cuts) == 2  # greet, then flaky (its failed first attempt is no event)
    digest = _digest(python_built)
    engine = py_sandbox._engine  # the session's: the component is compiled already
    with StickySandbox(py_sandbox, engine.activation_lock) as sticky:
        for cut in sorted(cuts):
            activation = WorkflowActivation(
                run_id=run_id,
                workflow_type="hello",
                digest=digest,
                input=msgpack.packb({"name": "Ada"}),
                events=history[:cut],
                limits=LIMITS,
            )
            live = activate_workflow(sticky, activation)
            fresh = activate_workflow(py_sandbox, activation)
            assert (live.status, _shapes(live.new_commands), _unrolled(live.result)) == (
                fresh.status,
                _shapes(fresh.new_commands),
                _unrolled(fresh.result),
            )
        assert sticky.hits == 1 and sticky.misses == 1  # one instance served the whole run
        assert sticky.deltas == 1  # handed only what history added: its SDK reads deltas


def test_a_run_with_a_live_python_instance_waits_for_it_while_another_guest_runs(
    srv: InProcessServer,
    py_sandbox: Sandbox,
    python_built: dict[str, BuildResult],
    modules: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the in-process sandbox busy, an activation whose run has a live Python instance
    there waits for it instead of replaying from the top in a child (and losing the instance)."""
    from amber.runtime.replay import run_activity
    from amber.runtime.sandbox import ParallelSandbox, _parallel

    monkeypatch.setattr(_parallel, "LIVE_PATIENCE_S", 60.0)  # not a race against the clock
    srv.client.upload_version(modules["heavy"], promote=True)
    run_id = srv.client.start_run("hello", {"name": "Ada"}).run.run_id
    drive(make_worker(srv.client, py_sandbox), srv.client, run_id)
    history = tuple(srv.client.history(run_id))
    cuts = [i + 1 for i, e in enumerate(history) if e.type is EventType.ACTIVITY_COMPLETED]
    engine, runner = _served_runner(srv, guests=2, sticky_runs=4, slice_fuel=0)
    assert isinstance(runner, ParallelSandbox)

    def activation(cut: int) -> WorkflowActivation:
        return WorkflowActivation(
            run_id=run_id,
            workflow_type="hello",
            digest=_digest(python_built),
            input=msgpack.packb({"name": "Ada"}),
            events=history[:cut],
            limits=LIMITS,
        )

    try:
        first = activate_workflow(runner, activation(cuts[0]))
        assert first.status is WorkflowStatus.SUSPENDED and runner.live_runs() == 1
        done: list[object] = []
        busy = threading.Thread(
            target=lambda: done.append(run_activity(runner, busy_attempt(modules))), daemon=True
        )
        busy.start()
        wait_for(engine.activation_lock.locked, 20, "a guest to hold the in-process sandbox")
        second = activate_workflow(runner, activation(cuts[1]))  # while it computes
        busy.join(timeout=60)
        assert done, "the busy guest did not complete"
    finally:
        runner.close()
        engine.close()
    assert second.status is WorkflowStatus.COMPLETED
    assert second.stats.continued  # on the live instance, not replayed from the top
    assert runner.in_children == 0  # neither the busy guest nor the run's step went to a child


def _served_runner(
    srv: InProcessServer, *, guests: int, sticky_runs: int, slice_fuel: int = SLICE_FUEL
) -> tuple[SandboxEngine, SandboxRunner]:
    """A worker's guest runner on the session's artifact cache, fetching modules from `srv`."""
    engine = SandboxEngine(ARTIFACTS)
    runner = guest_runner(
        engine, SystemClock(), srv.client.get_module, artifact_dir=ARTIFACTS, guests=guests,
        sticky_runs=sticky_runs, slice_fuel=slice_fuel,
    )  # fmt: skip
    return engine, runner


def _shapes(commands: tuple[object, ...]) -> list[object]:
    """New commands, with the values the host hands out fresh each time (a new `now` or
    `random`) left out."""
    return [type(c) if isinstance(c, RecordNow | RecordRandom) else c for c in commands]


def _unrolled(result: bytes | None) -> object:
    """A result without its `roll`, drawn fresh (a new `random`) by whichever activation
    completes the run."""
    if result is None:
        return None
    doc = msgpack.unpackb(result)
    return {k: v for k, v in doc.items() if k != "roll"}


def test_python_runs_complete_through_a_sticky_worker_and_module_state_stays_per_run(
    srv: InProcessServer, python_built: dict[str, BuildResult]
) -> None:
    engine, runner = _served_runner(srv, guests=1, sticky_runs=8)
    assert isinstance(runner, StickySandbox)
    worker = Worker(srv.client, runner, WorkerSettings(worker_id="py-sticky", poll_wait_s=0.2))
    try:
        with serving(worker):
            runs = [srv.client.start_run("remembers", {}).run.run_id for _ in range(3)]
            hello = srv.client.start_run("hello", {"name": "Bo"}).run.run_id
            ended = [srv.client.result(r, wait_s=60) for r in [*runs, hello]]
    finally:
        runner.close()
        engine.close()
    assert [r.status for r in ended] == [RunStatus.COMPLETED] * 4
    # A module global the workflow appends to once per step: 3 in every run, whether a step
    # went on in the run's live instance or replayed from the top in a fresh one.
    assert [decode(r.result) for r in ended[:3]] == [{"seen": 3}] * 3
    assert decode(ended[3].result)["greeting"] == "hello Bo"
    assert runner.hits > 0


def test_a_host_refusal_of_a_live_instances_output_is_recorded_as_a_fresh_replay_sees_it(
    py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    # A live instance hands its output over parked in its wait; replayed from the top, the
    # guest unwinds first. A refusal recorded with the parked fuel could not be reproduced
    # offline ("NOT reproduced"): it is recorded from the replay from the top.
    digest = _digest(python_built)
    sticky = StickySandbox(py_sandbox, py_sandbox._engine.activation_lock)
    with sticky, pytest.raises(AbiViolation, match="does not export") as live:
        _activate(sticky, digest, "schedules_its_input", run_id="r-parked")
    with pytest.raises(AbiViolation, match="does not export") as fresh:
        _activate(py_sandbox, digest, "schedules_its_input", run_id="r-parked")
    assert live.value.fuel_used == fresh.value.fuel_used


def test_a_module_imported_only_inside_a_function_is_there_when_it_runs(
    py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    # It used to build, then fail at run time: ModuleNotFoundError on every attempt.
    step = _activate(py_sandbox, _digest(python_built), "late_imports")
    assert step.status is WorkflowStatus.COMPLETED, step
    assert decode(step.result) == {"half": "1/2", "mean": 2}


def test_a_value_msgpack_cannot_carry_and_a_socket_end_in_typed_failures(
    srv: InProcessServer, py_sandbox: Sandbox, python_built: dict[str, BuildResult]
) -> None:
    with pytest.raises(GuestTrap, match="TypeError") as caught:
        _activate(py_sandbox, _digest(python_built), "returns_a_set")
    # Each exception type has its own trap code (so its own fingerprint), and the message says
    # where it was raised: the innermost frame of the guest's traceback.
    assert caught.value.trap_code == "python:TypeError"
    assert re.search(r" \(at _msgpack\.py:\d+ in _pack\)$", caught.value.detail), caught.value
    worker = make_worker(srv.client, py_sandbox)
    run_id = srv.client.start_run("dialing", {}).run.run_id
    settle(worker)
    events = srv.client.history(run_id)
    failure = srv.client.describe(run_id).recent_failures
    # No network for guests: the socket module imports (the build imports what a function
    # imports), but the connection fails, as an activity error.
    assert [f.reason for f in failure] == ["application_error"]
    assert re.match(r"\w+Error: ", failure[0].message), failure[0].message
    assert not failure[0].message.startswith("ModuleNotFoundError")  # it imported
    assert events[-1].type is EventType.ACTIVITY_FAILED or EventType.RUN_FAILED in {
        e.type for e in events
    }


def test_a_poisoned_python_run_is_served_by_the_surgical_pool_with_the_same_diagnosis(
    make_server: Any, python_modules: dict[str, bytes], py_sandbox: Sandbox
) -> None:
    fast = PoisonPolicy(
        crashes_to_poison=3,
        surgical_delays=(timedelta(milliseconds=200),),
        suspend_after=timedelta(seconds=30),
        crash_backoff=timedelta(milliseconds=10),
    )
    srv: InProcessServer = make_server(settings=EngineSettings(poison=fast))
    srv.client.upload_version(python_modules["py_guest"], promote=True)
    run_id = srv.client.start_run("breaks", {}).run.run_id
    main = Worker(srv.client, py_sandbox, WorkerSettings(worker_id="main", poll_wait_s=0.2))
    surgeon = SurgicalWorker(  # a child process per activation, compiled artifacts shared
        srv.client, WorkerSettings(worker_id="surgeon", poll_wait_s=0.2), artifact_dir=ARTIFACTS
    )

    def pools() -> set[str | None]:
        return {f.pool for f in srv.client.describe(run_id).recent_failures}

    try:
        with serving(main), serving(surgeon):
            wait_for(lambda: "surgical" in pools(), 120, "a surgical attempt")
    finally:
        surgeon.close()
    failures = srv.client.describe(run_id).recent_failures
    assert pools() == {"main", "surgical"}
    # A Python exception in workflow code is deterministic: poisoned at its first crash, and
    # the surgical pool's attempt (in its own process) fails the same way, same fingerprint.
    assert {(f.reason, f.fingerprint) for f in failures} == {("trap", failures[0].fingerprint)}
    assert all("KeyError" in f.message for f in failures)


def test_an_evicted_python_instance_unwinds_and_its_thread_ends(
    py_sandbox: Sandbox, python_built: dict[str, BuildResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eviction raises a `BaseException` inside the parked host call; wasmtime-py's component
    trampoline forwards only `Exception`s (it would print the rest as "ignored" and let the
    guest go on), so the host carries it through and raises it again outside."""
    ignored: list[object] = []  # what ctypes reports as "Exception ignored in callback"
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    engine = py_sandbox._engine
    with StickySandbox(py_sandbox, engine.activation_lock) as sticky:
        step = _activate(sticky, _digest(python_built), "hello", "evicted-run")
        assert step.status is WorkflowStatus.SUSPENDED and sticky.live_runs() == 1
        sticky.forget("evicted-run")
        for _ in range(500):
            if not any(t.name == "amber-sticky" for t in threading.enumerate()):
                break
            time.sleep(0.01)
        assert not any(t.name == "amber-sticky" for t in threading.enumerate())
        assert sticky.live_runs() == 0 and sticky.dropped == 1
    assert ignored == []
