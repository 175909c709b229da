"""The surgical pool's isolated sandbox against real guests: each activation runs in a child
process and answers exactly as the in-process sandbox does, and a guest that ends its process
takes down only that child — with the host calls up to the crash already in the parent's hands."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import msgpack
import pytest

from amber.abi import (
    TEST_HOST_IMPORTS_ENV,
    ActivityInput,
    encode_activity_input,
    encode_workflow_input,
)
from amber.runtime.model import _faults
from amber.runtime.model._clock import ManualClock, SystemClock
from amber.runtime.model._faults import (
    AbiViolation,
    DeadlineExceeded,
    FailureReason,
    GuestFault,
    GuestTrap,
    HostCrash,
    MalformedOutput,
    MemoryLimitExceeded,
    ModuleUnavailable,
    NonDeterminism,
    OutOfFuel,
)
from amber.runtime.replay._replay import WorkflowActivation, activate_workflow
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._frames import FAULT_TYPES, fault_frame, fault_from_frame
from amber.runtime.sandbox._host import ActivationKind, ActivityHost, HostCallRecord
from amber.runtime.sandbox._isolated import IsolatedSandbox
from amber.runtime.sandbox._sandbox import (
    ActivationRequest,
    RawOutput,
    Sandbox,
    SandboxLimits,
    SandboxRunner,
)
from amber.versions import InvalidModule, VersionNotFound, validate_module

LIMITS = SandboxLimits(fuel=50_000_000, memory_bytes=16 * 2**20, deadline_s=2.0)

Source = Callable[[str], bytes]


def _digest(modules: dict[str, bytes], name: str) -> str:
    return hashlib.sha256(modules[name]).hexdigest()


@pytest.fixture(scope="module")
def source(modules: dict[str, bytes]) -> Source:
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}

    def fetch(digest: str) -> bytes:
        if digest not in by_digest:
            raise VersionNotFound(f"no module version {digest}")
        return by_digest[digest]

    return fetch


@pytest.fixture(scope="module")
def seen() -> list[HostCallRecord]:
    """What the shared isolated sandbox's `on_host_call` received (emptied for each test)."""
    return []


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, source: Source, seen: list[HostCallRecord]
) -> Iterator[IsolatedSandbox]:
    with IsolatedSandbox(
        source,
        SystemClock(),
        artifact_dir=tmp_path_factory.mktemp("isolated-artifacts"),
        on_host_call=seen.append,
    ) as isolated:
        yield isolated


@pytest.fixture
def isolated(shared: IsolatedSandbox, seen: list[HostCallRecord]) -> IsolatedSandbox:
    seen.clear()
    return shared


def _activity_request(
    digest: str,
    name: str,
    args: object = None,
    *,
    limits: SandboxLimits = LIMITS,
    host: ActivityHost | None = None,
    observer: Callable[[HostCallRecord], None] | None = None,
) -> ActivationRequest:
    return ActivationRequest(
        kind=ActivationKind.ACTIVITY,
        digest=digest,
        export="amber_activity." + name,
        input=encode_activity_input(
            ActivityInput(
                run_id="run-1",
                activity=name,
                args=msgpack.packb(args),
                attempt=1,
                idempotency_key="run-1/7",
                deadline_ms=0,
            )
        ),
        run_id="run-1",
        step=7,
        limits=limits,
        activity=host,
        observer=observer,
    )


def _workflow_request(
    digest: str, name: str, input: object = None, *, limits: SandboxLimits = LIMITS
) -> ActivationRequest:
    return ActivationRequest(
        kind=ActivationKind.WORKFLOW,
        digest=digest,
        export="amber_workflow." + name,
        input=encode_workflow_input(
            run_id="run-2", workflow=name, input=msgpack.packb(input), results=()
        ),
        run_id="run-2",
        step=0,
        limits=limits,
    )


def _same_output(a: RawOutput, b: RawOutput) -> None:
    assert (a.envelope, a.suspended, a.handed_out, a.logs, a.published) == (
        b.envelope,
        b.suspended,
        b.handed_out,
        b.logs,
        b.published,
    )
    assert (a.fuel_used, a.memory_bytes, a.host_calls) == (
        b.fuel_used,
        b.memory_bytes,
        b.host_calls,
    )


def _fields(fault: GuestFault) -> dict[str, object]:
    return {
        "type": type(fault),
        "detail": fault.detail,
        "run_id": fault.run_id,
        "step": fault.step,
        "digest": fault.digest,
        "trap_code": fault.trap_code,
        "fuel_used": fault.fuel_used,
        "memory_bytes": fault.memory_bytes,
        "published": fault.published,
    }


def _healthy(runner: SandboxRunner, modules: dict[str, bytes]) -> None:
    raw = runner.run(_activity_request(_digest(modules, "hostile"), "crash_on", {"ok": 1}))
    assert msgpack.unpackb(raw.envelope)["status"] == "completed"


# ---- same answers as in process ------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "kind", "name", "payload"),
    [
        ("hostile", "activity", "crash_on", {"crash": False, "n": 1}),
        ("exiter", "activity", "exit_on", {"exit": False}),
        ("hostile", "workflow", "good", {"x": 1}),
        ("exiter", "workflow", "exit_wf", {"exit": False}),
        ("orders", "workflow", "orders", {"order_id": "A-1", "sku": "S", "quantity": 1}),
    ],
)
def test_an_activation_answers_as_it_does_in_process(
    isolated: IsolatedSandbox,
    sandbox_engine: SandboxEngine,
    source: Source,
    modules: dict[str, bytes],
    module: str,
    kind: str,
    name: str,
    payload: object,
) -> None:
    clock = ManualClock()  # `orders` reads the clock: both must see the same time
    clock.advance(timedelta(seconds=1234))
    in_process = Sandbox(sandbox_engine, clock, source)
    with IsolatedSandbox(
        source, clock, artifact_dir=sandbox_engine.artifact_dir, keep_spare=False
    ) as fresh:
        digest = _digest(modules, module)
        make = _activity_request if kind == "activity" else _workflow_request
        request = make(digest, name, payload)
        expected = in_process.run(request)
        _same_output(fresh.run(request), expected)
    # The shared sandbox (with its spare child) gives the same answer as a fresh one.
    if module != "orders":
        _same_output(isolated.run(request), expected)


def test_a_workflow_replayed_through_the_isolated_sandbox_gets_the_same_step(
    isolated: IsolatedSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    activation = WorkflowActivation(
        run_id="run-3",
        workflow_type="good",
        digest=_digest(modules, "hostile"),
        input=msgpack.packb({"x": 1}),
        events=(),
        limits=LIMITS,
    )
    here, there = activate_workflow(sandbox, activation), activate_workflow(isolated, activation)
    assert (there.status, there.new_commands) == (here.status, here.new_commands)
    assert there.stats.fuel_used == here.stats.fuel_used > 0


def test_module_descriptions_come_from_the_manifest(
    isolated: IsolatedSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    for name in ("hostile", "exiter", "payments"):
        digest = _digest(modules, name)
        assert isolated.activities(digest) == sandbox.activities(digest)
        assert isolated.http_policy(digest) == sandbox.http_policy(digest)
    with pytest.raises(ModuleUnavailable):
        isolated.activities("0" * 64)
    with pytest.raises(ModuleUnavailable):
        isolated.run(_activity_request("0" * 64, "spin"))


# ---- typed faults ----------------------------------------------------------------------------

SLOW = SandboxLimits(fuel=10**15, memory_bytes=16 * 2**20, deadline_s=0.3)


@pytest.mark.parametrize(
    ("kind", "name", "payload", "limits", "fault_type"),
    [
        ("activity", "boom", None, LIMITS, GuestTrap),
        ("workflow", "boom", None, LIMITS, GuestTrap),
        ("workflow", "publish_then_trap", None, LIMITS, GuestTrap),
        ("activity", "spin", None, LIMITS, OutOfFuel),
        ("workflow", "spin", None, LIMITS, OutOfFuel),
        ("activity", "hog", None, LIMITS, MemoryLimitExceeded),
        ("workflow", "hog", None, LIMITS, MemoryLimitExceeded),
        ("activity", "spin", None, SLOW, DeadlineExceeded),
        ("activity", "nap", None, SLOW, DeadlineExceeded),
        ("activity", "badptr", None, LIMITS, MalformedOutput),
        ("activity", "awaits", None, LIMITS, AbiViolation),
        ("workflow", "sleepy_wf", None, LIMITS, AbiViolation),
    ],
)
def test_a_fault_comes_back_typed_with_the_same_fields(
    isolated: IsolatedSandbox,
    sandbox: Sandbox,
    modules: dict[str, bytes],
    kind: str,
    name: str,
    payload: object,
    limits: SandboxLimits,
    fault_type: type[GuestFault],
) -> None:
    make = _activity_request if kind == "activity" else _workflow_request
    request = make(_digest(modules, "hostile"), name, payload, limits=limits)
    with pytest.raises(fault_type) as in_process:
        sandbox.run(request)
    with pytest.raises(fault_type) as isolated_fault:
        isolated.run(request)
    expected, got = _fields(in_process.value), _fields(isolated_fault.value)
    if fault_type is DeadlineExceeded:  # how far a guest got before its deadline varies
        for key in ("fuel_used", "memory_bytes"):
            expected.pop(key), got.pop(key)
    assert got == expected
    assert str(isolated_fault.value) == str(in_process.value)
    _healthy(isolated, modules)


def test_a_trap_keeps_its_trap_code_and_what_was_published(
    isolated: IsolatedSandbox, modules: dict[str, bytes]
) -> None:
    with pytest.raises(GuestTrap) as caught:
        isolated.run(_workflow_request(_digest(modules, "hostile"), "publish_then_trap"))
    assert caught.value.trap_code == "unreachable"
    assert caught.value.published == {"status": msgpack.packb("about to fail")}


def test_every_guest_fault_type_can_cross_the_process_boundary() -> None:
    defined = {
        value
        for value in vars(_faults).values()
        if isinstance(value, type) and issubclass(value, GuestFault) and value is not GuestFault
    }
    assert defined <= set(FAULT_TYPES.values())
    fault = NonDeterminism(
        run_id="r", digest="d" * 64, position=3, recorded="now 1", issued="now 2", seq=9
    )
    fault.fuel_used, fault.memory_bytes = 10, 65536
    fault.published = {"q": b"\x01"}
    back = fault_from_frame(msgpack.unpackb(msgpack.packb(fault_frame(fault))))
    assert isinstance(back, NonDeterminism)
    assert (back.position, back.seq, back.recorded, back.issued) == (3, 9, "now 1", "now 2")
    assert _fields(back) == _fields(fault)
    assert str(back) == str(fault)


# ---- a guest that kills its process ------------------------------------------------------


def test_a_guest_that_ends_its_process_is_a_host_crash_and_the_pool_goes_on(
    isolated: IsolatedSandbox, seen: list[HostCallRecord], modules: dict[str, bytes]
) -> None:
    digest = _digest(modules, "exiter")
    with pytest.raises(HostCrash) as caught:
        isolated.run(_activity_request(digest, "exit_on", {"exit": True}))
    fault = caught.value
    assert fault.reason is FailureReason.HOST_CRASH
    assert "exited with code 3" in fault.detail
    assert (fault.run_id, fault.step, fault.digest) == ("run-1", 7, digest)
    assert [r.name for r in seen] == ["log", "test_exit"]
    assert seen[-1].detail == "code 3"
    raw = isolated.run(_activity_request(digest, "exit_on", {"exit": False}))
    assert msgpack.unpackb(msgpack.unpackb(raw.envelope)["result"]) == {"exit": False}


def test_host_calls_up_to_the_crash_reach_the_parent_with_their_callbacks(
    isolated: IsolatedSandbox, seen: list[HostCallRecord], modules: dict[str, bytes]
) -> None:
    beats: list[bytes] = []
    host = ActivityHost(
        idempotency_key="run-1/7",
        http=None,
        heartbeat=lambda details: beats.append(details) is not None,  # False: keep going
        cancel_requested=lambda: False,
    )
    own: list[HostCallRecord] = []
    args = {"heartbeat": True, "exit": True}
    request = _activity_request(
        _digest(modules, "exiter"), "exit_on", args, host=host, observer=own.append
    )
    before = time.time_ns()
    with pytest.raises(HostCrash):
        isolated.run(request)
    assert beats == [msgpack.packb(args)]
    assert [r.name for r in seen] == ["log", "heartbeat", "cancel_requested", "test_exit"]
    assert own == seen  # the request's own observer sees the same stream
    details = [r.detail for r in seen]
    assert details == ["level 1, 7 B", f"{len(beats[0])} B -> 0", "-> 0", "code 3"]
    assert all(before <= r.started_ns <= r.ended_ns <= time.time_ns() for r in seen)
    assert all(r.error is None for r in seen)


def test_a_cancelled_heartbeat_reaches_the_guest(
    isolated: IsolatedSandbox, modules: dict[str, bytes]
) -> None:
    host = ActivityHost(
        idempotency_key="k", http=None, heartbeat=lambda details: True, cancel_requested=lambda: 0
    )
    raw = isolated.run(
        _activity_request(_digest(modules, "exiter"), "exit_on", {"heartbeat": True}, host=host)
    )
    assert msgpack.unpackb(raw.envelope)["error"][0] == "Cancelled"


def test_records_match_the_in_process_ones_and_carry_errors_and_suspensions(
    isolated: IsolatedSandbox,
    sandbox: Sandbox,
    seen: list[HostCallRecord],
    modules: dict[str, bytes],
) -> None:
    digest = _digest(modules, "hostile")
    local: list[HostCallRecord] = []
    requests = [_activity_request(digest, "awaits"), _workflow_request(digest, "good", {"x": 1})]
    for request in requests:
        for runner, observer in ((sandbox, local.append), (isolated, None)):
            with contextlib.suppress(AbiViolation):
                runner.run(replace(request, observer=observer))
    summary = [(r.name, r.detail, r.error) for r in seen]
    assert summary == [(r.name, r.detail, r.error) for r in local]
    assert ("await_results", "28 B", "AbiViolation") in summary
    assert ("await_next", "suspended", None) in summary  # how the SDK waits


# ---- a child that misbehaves -----------------------------------------------------------------

FAKE_CHILD = """
import os, signal, struct, sys, time
def frame(body):
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()
frame(b"\\x81\\xa1t\\xa5ready")  # {"t": "ready"}
sys.stdin.buffer.read(4)  # the request has arrived
ACTION
time.sleep(60)
"""


def _fake(action: str) -> tuple[str, ...]:
    return (sys.executable, "-c", FAKE_CHILD.replace("ACTION", action))


def _packed(doc: object) -> str:
    return f"frame({msgpack.packb(doc)!r})"


OUTPUT = {
    "t": "output",
    "envelope": b"",
    "suspended": False,
    "handed_out": [],
    "logs": [],
    "fuel_used": 1,
    "memory_bytes": 1,
    "host_calls": 0,
    "duration_s": 0.1,
    "published": {},
}


@pytest.mark.parametrize(
    ("action", "what"),
    [
        ("frame(b'\\xc1\\xc1')", "not msgpack"),
        ("sys.stdout.buffer.write(struct.pack('>I', 2**31)); sys.stdout.buffer.flush()", "cap"),
        (_packed([1, 2]), "not a map"),
        (_packed({"t": "surprise"}), "unexpected 'surprise' frame"),
        (_packed({**OUTPUT, "envelope": 5}), "'envelope' is not bytes"),
        (_packed({**OUTPUT, "fuel_used": True}), "'fuel_used' is not int"),
        (_packed({**OUTPUT, "logs": [[1]]}), "log line"),
        (_packed({**OUTPUT, "handed_out": [["now", 1]]}), "handed-out"),  # not in an activity
        (_packed({**OUTPUT, "published": {"a": 1}}), "'published'"),
        (_packed({"t": "fault", "type": "KeyboardInterrupt", "detail": "x"}), "unknown fault"),
        (_packed({"t": "record", "name": "log", "started_ns": "x"}), "'started_ns'"),
        (_packed({"t": "call", "name": "exec"}), "unknown call 'exec'"),
        (_packed({"t": "call", "name": "heartbeat", "details": b"x"}), "outside an activity"),
        (_packed({"t": "call", "name": "module", "digest": "0" * 64}), "another module"),
    ],
)
def test_a_malformed_frame_from_the_child_is_a_host_crash(
    tmp_path: Path, source: Source, modules: dict[str, bytes], action: str, what: str
) -> None:
    with IsolatedSandbox(
        source,
        SystemClock(),
        artifact_dir=tmp_path,
        keep_spare=False,
        child_command=_fake(action),
    ) as isolated:
        digest = _digest(modules, "hostile")
        with pytest.raises(HostCrash, match="malformed frame") as caught:
            isolated.run(_activity_request(digest, "crash_on"))
    assert what in caught.value.detail
    assert (caught.value.run_id, caught.value.step, caught.value.digest) == ("run-1", 7, digest)


def test_a_child_killed_by_a_signal_is_a_host_crash(
    tmp_path: Path, source: Source, modules: dict[str, bytes]
) -> None:
    with (
        IsolatedSandbox(
            source,
            SystemClock(),
            artifact_dir=tmp_path,
            keep_spare=False,
            child_command=_fake("os.kill(os.getpid(), signal.SIGKILL)"),
        ) as isolated,
        pytest.raises(HostCrash, match="died of signal SIGKILL"),
    ):
        isolated.run(_activity_request(_digest(modules, "hostile"), "crash_on"))


def test_a_child_that_never_answers_is_killed_after_its_deadline_and_grace(
    tmp_path: Path, source: Source, modules: dict[str, bytes]
) -> None:
    limits = SandboxLimits(fuel=LIMITS.fuel, memory_bytes=LIMITS.memory_bytes, deadline_s=0.2)
    with IsolatedSandbox(
        source,
        SystemClock(),
        artifact_dir=tmp_path,
        keep_spare=False,
        kill_grace_s=0.3,
        child_command=_fake("pass"),
    ) as isolated:
        started = time.monotonic()
        with pytest.raises(HostCrash, match="killed after") as caught:
            isolated.run(_activity_request(_digest(modules, "hostile"), "crash_on", limits=limits))
    assert 0.5 <= time.monotonic() - started < 3
    assert "0.2 s deadline plus 0.3 s grace" in caught.value.detail


def test_a_spare_that_died_is_replaced(
    isolated: IsolatedSandbox, modules: dict[str, bytes]
) -> None:
    _healthy(isolated, modules)  # leaves a spare waiting
    spare = isolated._spare
    assert spare is not None
    spare.proc.kill()
    spare.proc.wait()
    _healthy(isolated, modules)
    assert isolated._spare is not None and isolated._spare is not spare


def test_close_kills_the_spare(tmp_path: Path, source: Source, modules: dict[str, bytes]) -> None:
    isolated = IsolatedSandbox(source, SystemClock(), artifact_dir=tmp_path)
    _healthy(isolated, modules)
    spare = isolated._spare
    assert spare is not None and spare.alive()
    isolated.close()
    assert spare.proc.returncode is not None
    _healthy(isolated, modules)  # still usable, without spares
    assert isolated._spare is None


def test_children_share_the_artifact_cache_and_fetch_a_module_only_on_a_miss(
    tmp_path: Path, source: Source, modules: dict[str, bytes]
) -> None:
    fetched: list[str] = []

    def counting(digest: str) -> bytes:
        fetched.append(digest)
        return source(digest)

    digest = _digest(modules, "hostile")
    with IsolatedSandbox(counting, SystemClock(), artifact_dir=tmp_path) as isolated:
        for _ in range(3):
            _healthy(isolated, modules)
        assert fetched == [digest]  # the first child compiled it; the others loaded the artifact
        assert isolated.activities(digest) == isolated.activities(digest)
        assert fetched == [digest, digest]  # the manifest, read once
    assert any(p.name.startswith(digest) and p.suffix == ".cwasm" for p in tmp_path.iterdir())


def test_a_module_source_outage_propagates_unchanged(
    tmp_path: Path, modules: dict[str, bytes]
) -> None:
    from amber.abi import RetryableError

    def down(digest: str) -> bytes:
        raise RetryableError("server unreachable")

    with (
        IsolatedSandbox(down, SystemClock(), artifact_dir=tmp_path) as isolated,
        pytest.raises(RetryableError),
    ):
        _healthy(isolated, modules)


def test_the_child_process_memory_is_capped(
    tmp_path: Path, source: Source, modules: dict[str, bytes]
) -> None:
    cap = 256 * 2**20
    limits = SandboxLimits(fuel=10**10, memory_bytes=2**30, deadline_s=10.0)
    with IsolatedSandbox(
        source, SystemClock(), artifact_dir=tmp_path, process_memory_bytes=cap, keep_spare=False
    ) as isolated:
        with pytest.raises(GuestTrap) as caught:  # memory.grow refused below the store's limit
            isolated.run(_activity_request(_digest(modules, "hostile"), "hog", limits=limits))
        assert caught.value.memory_bytes is not None and caught.value.memory_bytes < cap
        _healthy(isolated, modules)


def test_both_sandboxes_are_sandbox_runners(
    isolated: IsolatedSandbox, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    runners: list[SandboxRunner] = [isolated, sandbox]
    for runner in runners:
        _healthy(runner, modules)


# ---- the test-only host import -----------------------------------------------------------


def test_a_module_importing_test_exit_is_refused_where_test_imports_are_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, modules: dict[str, bytes]
) -> None:
    wasm = modules["exiter"]
    assert validate_module(wasm).activities == ("exit_on",)  # conftest enables them
    monkeypatch.delenv(TEST_HOST_IMPORTS_ENV)
    with pytest.raises(InvalidModule, match=r"imports amber\.test_exit, which ABI v1 does not"):
        validate_module(wasm)
    engine = SandboxEngine(tmp_path)  # its linker does not define test_exit either
    try:
        refusing = Sandbox(engine, SystemClock(), lambda digest: wasm)
        with pytest.raises(ModuleUnavailable, match="does not link"):
            refusing.activities(hashlib.sha256(wasm).hexdigest())
    finally:
        engine.close()
    assert os.environ.get(TEST_HOST_IMPORTS_ENV) is None


def test_test_imports_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from amber.abi import HOST_IMPORTS, TEST_HOST_IMPORTS, allowed_host_imports

    monkeypatch.setenv(TEST_HOST_IMPORTS_ENV, "1")
    assert allowed_host_imports() == {**HOST_IMPORTS, **TEST_HOST_IMPORTS}
    monkeypatch.setenv(TEST_HOST_IMPORTS_ENV, "0")
    assert allowed_host_imports() == HOST_IMPORTS
