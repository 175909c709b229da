"""Sticky workflow instances (`StickySandbox`): when a live instance may go on, and what happens
when it must not. That it decides what a replay from the top decides is checked over every
golden in test_goldens.py; here a run's history is the `shipment_delivered` golden, cut short.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from amber.abi import AwaitSignal, RecordNow, pack
from amber.history import (
    ActivityScheduled,
    Event,
    EventType,
    MarkerRecorded,
    Payload,
    RunStarted,
    RunStatus,
    SignalAwaited,
    SignalReceived,
)
from amber.runtime.client._client import decode
from amber.runtime.model import ManualClock, OutOfFuel, SystemClock
from amber.runtime.model._clock import from_ms
from amber.runtime.replay import run_activity
from amber.runtime.replay._replay import (
    WorkflowActivation,
    activate_workflow,
    answer_query,
)
from amber.runtime.sandbox import (
    ParallelSandbox,
    Sandbox,
    SandboxEngine,
    SandboxLimits,
    StickySandbox,
    guest_runner,
)
from amber.runtime.worker._worker import Worker, WorkerSettings
from tests.conftest import InProcessServer, busy_attempt
from tests.runtime._engine_helpers import serving
from tests.runtime.test_goldens import load_golden, wire_map

GOLDEN = "shipment_delivered"
LIMITS = SandboxLimits(deadline_s=5.0)


@pytest.fixture
def plain(sandbox_engine: SandboxEngine, modules: dict[str, bytes]) -> Sandbox:
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    return Sandbox(sandbox_engine, ManualClock(from_ms(1_767_225_600_000)), by_digest.__getitem__)


@pytest.fixture
def sticky(plain: Sandbox, sandbox_engine: SandboxEngine) -> Iterator[StickySandbox]:
    with StickySandbox(plain, sandbox_engine.activation_lock, keep_long_waits=True) as keeper:
        yield keeper


def _history() -> tuple[Event, ...]:
    return load_golden(GOLDEN)


def _activation(events: tuple[Event, ...], **changes: object) -> WorkflowActivation:
    activation = WorkflowActivation(
        run_id=events[0].run_id,
        workflow_type=wire_map(events[0])["workflow_type"],
        digest=events[0].digest,
        input=wire_map(events[0])["input"],
        events=events,
        limits=LIMITS,
    )
    return replace(activation, **changes)  # type: ignore[arg-type]


def _sticky_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "amber-sticky" and t.is_alive())


def _settled(expected: int) -> int:
    # An evicted instance's thread ends once it has unwound (it needs the activation lock).
    for _ in range(200):
        if _sticky_threads() == expected:
            break
        threading.Event().wait(0.01)
    return _sticky_threads()


def test_a_run_goes_on_in_its_live_instance_and_a_shorter_history_starts_a_new_one(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    history = _history()
    activate_workflow(sticky, _activation(history[:2]))  # waits for its first activity
    assert (sticky.misses, sticky.hits, sticky.live_runs()) == (1, 0, 1)
    activate_workflow(sticky, _activation(history[:3]))  # its result arrived: go on
    assert (sticky.misses, sticky.hits) == (1, 1)
    # A history that does not extend what the instance saw (it cannot happen in a real run,
    # whose history only grows) is replayed from the top in a new instance, correctly.
    step = activate_workflow(sticky, _activation(history[:2]))
    assert (sticky.misses, sticky.hits) == (2, 1)
    assert step == replace(activate_workflow(plain, _activation(history[:2])), stats=step.stats)


def test_only_runs_waiting_for_an_activity_keep_their_instance_by_default(
    plain: Sandbox, sandbox_engine: SandboxEngine
) -> None:
    history = _history()  # book_carrier, then a delivery signal raced against a timer
    with StickySandbox(plain, sandbox_engine.activation_lock) as keeper:
        activate_workflow(keeper, _activation(history[:2]))
        assert keeper.live_runs() == 1  # waits for book_carrier: back in moments
        activate_workflow(keeper, _activation(history[:3]))
        assert keeper.hits == 1
        # It now waits for a signal or a timer, which may take days: a parked run costs no
        # worker memory.
        assert keeper.live_runs() == 0 and keeper.dropped == 1
    assert _settled(0) == 0


def test_an_instance_whose_clock_readings_history_does_not_hold_is_not_continued(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    # `chatty` reads the clock n times, then waits for a signal. The instance reads the fixed
    # test clock; the golden history recorded other readings (as when this worker's report
    # was refused and another worker's activation was recorded). Going on would keep the
    # readings history does not hold: the run replays from the top instead.
    history = load_golden("chatty_warned")
    activate_workflow(sticky, _activation(history[:1]))
    assert sticky.live_runs() == 1
    later = _activation(history[:-1])
    step = activate_workflow(sticky, later)
    assert (sticky.hits, sticky.misses) == (0, 2)
    assert step == replace(activate_workflow(plain, later), stats=step.stats)


def test_an_instance_goes_on_when_history_recorded_its_own_readings(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    history = load_golden("chatty_warned")
    first = _activation(history[:1])
    step = activate_workflow(sticky, first)
    # Record what the instance issued, as the server would on its report.
    payloads = [
        MarkerRecorded(cmd=i, kind="now", value=command.value)
        if isinstance(command, RecordNow)
        else SignalAwaited(cmd=i, name=command.name)
        for i, command in enumerate(step.new_commands)
        if isinstance(command, RecordNow | AwaitSignal)
    ]
    assert len(payloads) == len(step.new_commands) > 1
    recorded = tuple(
        Event.of(
            run_id=history[0].run_id,
            seq=2 + i,
            payload=payload,
            digest=history[0].digest,
            created_at=history[0].created_at,
        )
        for i, payload in enumerate(payloads)
    )
    again = replace(first, events=history[:1] + recorded)
    went_on = activate_workflow(sticky, again)
    assert (sticky.hits, sticky.misses) == (1, 1)
    assert went_on == replace(activate_workflow(plain, again), stats=went_on.stats)


def test_a_stretch_gets_only_what_is_left_of_the_activation_s_budget(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    # A stretch does not pay for the prefix a replay from the top pays for. Given the whole
    # budget each time, a live instance would go on where that replay runs out of fuel, and
    # the run's fate would depend on whether its instance happened to be live.
    history = _history()
    limits = LIMITS
    first = activate_workflow(sticky, _activation(history[:2], limits=limits))
    needed = activate_workflow(plain, _activation(history[:3], limits=limits)).stats.fuel_used
    tight = replace(limits, fuel=(first.stats.fuel_used + needed) // 2)  # the top runs out
    assert first.stats.fuel_used < tight.fuel  # but the first stretch fitted
    with pytest.raises(OutOfFuel) as from_the_top:
        activate_workflow(plain, _activation(history[:3], limits=tight))
    with pytest.raises(OutOfFuel) as on_the_way:
        activate_workflow(sticky, _activation(history[:3], limits=tight))
    assert sticky.restarts == 1  # it ran out of what was left, and the reference decided
    assert on_the_way.value.fuel_used == from_the_top.value.fuel_used


def test_a_marker_recorded_since_the_wait_counts_as_read_as_it_does_from_the_top(
    sticky: StickySandbox, plain: Sandbox, modules: dict[str, bytes]
) -> None:
    # probe_wait schedules an activity, waits for a signal that is already buffered and reads
    # the clock; its report makes the clock's marker the newest entry. From the top, the
    # replay reads that marker before the await, so the log line after it is not a replay's
    # and is written; going on from the await must write it too.
    digest = hashlib.sha256(modules["sticky"]).hexdigest()
    run, at, given = "run-probe", from_ms(1_767_225_600_000), pack({"k": 1})

    def event(seq: int, payload: Payload) -> Event:
        return Event.of(run_id=run, seq=seq, payload=payload, digest=digest, created_at=at)

    history = [
        event(1, RunStarted(workflow_type="probe_wait", workflow_id="w", tenant="t", input=given)),
        event(2, SignalReceived(name="x", payload=pack("sig"))),
    ]

    def activation() -> WorkflowActivation:
        return WorkflowActivation(
            run_id=run,
            workflow_type="probe_wait",
            digest=digest,
            input=given,
            events=tuple(history),
            limits=LIMITS,
        )

    first = activate_workflow(sticky, activation())
    [now] = [c for c in first.new_commands if isinstance(c, RecordNow)]
    history += [
        event(3, ActivityScheduled(cmd=0, name="echo", args=given)),
        event(4, SignalAwaited(cmd=1, name="x")),
        event(5, MarkerRecorded(cmd=2, kind="now", value=now.value)),
    ]
    went_on = activate_workflow(sticky, activation())
    assert went_on.stats.continued and sticky.hits == 1
    expected = activate_workflow(plain, activation())
    assert went_on.stats.logs == expected.stats.logs == ((1, "after the first await"),)
    assert went_on == replace(expected, stats=went_on.stats)


def test_a_fresh_activation_neither_uses_nor_leaves_a_live_instance(
    sticky: StickySandbox,
) -> None:
    # What a version check asks for: replaying a run on a candidate version must not go on in
    # the run's live instance, nor park one of the candidate's in the cache.
    history = _history()
    activate_workflow(sticky, _activation(history[:2]), fresh=True)
    assert (sticky.live_runs(), sticky.hits, sticky.misses) == (0, 0, 0)
    activate_workflow(sticky, _activation(history[:2]))
    assert sticky.live_runs() == 1
    activate_workflow(sticky, _activation(history[:3]), fresh=True)
    assert sticky.live_runs() == 0 and sticky.hits == 0


def test_a_query_never_moves_the_live_instance(sticky: StickySandbox) -> None:
    history = _history()
    activate_workflow(sticky, _activation(history[:3]))
    answer_query(sticky, _activation(history[:3]), "status")
    assert sticky.live_runs() == 1
    activate_workflow(sticky, _activation(history[:5]))
    assert sticky.hits == 1  # the query ran from the top, beside it


def test_a_fault_on_the_way_is_recorded_as_a_replay_from_the_top_records_it(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    history = _history()
    first = activate_workflow(sticky, _activation(history[:2]))
    # What is left for the next stretch is 100 units: it runs out of fuel on the way, and so
    # does the replay from the top that then decides.
    starved = replace(LIMITS, fuel=first.stats.fuel_used + 100)
    with pytest.raises(OutOfFuel) as on_the_way:
        activate_workflow(sticky, _activation(history[:3], limits=starved))
    with pytest.raises(OutOfFuel) as from_the_top:
        activate_workflow(plain, _activation(history[:3], limits=starved))
    assert sticky.restarts == 1 and sticky.live_runs() == 0
    assert on_the_way.value.fuel_used == from_the_top.value.fuel_used
    assert on_the_way.value.step == from_the_top.value.step


def test_an_instance_that_spent_the_budget_is_replaced_by_a_replay_from_the_top(
    sticky: StickySandbox, plain: Sandbox
) -> None:
    history = _history()
    first = activate_workflow(sticky, _activation(history[:2]))
    spent = replace(LIMITS, fuel=first.stats.fuel_used)  # nothing left for a stretch
    with pytest.raises(OutOfFuel) as replayed:
        activate_workflow(sticky, _activation(history[:3], limits=spent))
    with pytest.raises(OutOfFuel) as from_the_top:
        activate_workflow(plain, _activation(history[:3], limits=spent))
    assert (sticky.hits, sticky.misses, sticky.restarts) == (0, 2, 0)
    assert replayed.value.fuel_used == from_the_top.value.fuel_used


def test_a_new_module_version_drops_the_live_instance(
    sticky: StickySandbox, modules: dict[str, bytes]
) -> None:
    history = _history()
    activate_workflow(sticky, _activation(history[:2]))
    other = hashlib.sha256(modules["orders"]).hexdigest()
    with pytest.raises(Exception):  # noqa: B017 - orders has no shipment workflow
        activate_workflow(sticky, _activation(history[:3], digest=other))
    assert sticky.dropped == 1 and sticky.hits == 0


def test_live_instances_are_bounded_by_count_idleness_and_memory(
    plain: Sandbox, sandbox_engine: SandboxEngine
) -> None:
    history = _history()
    runs = [tuple(replace(e, run_id=f"run-{i}") for e in history[:2]) for i in range(3)]
    with StickySandbox(
        plain, sandbox_engine.activation_lock, runs=2, keep_long_waits=True
    ) as bounded:
        for events in runs:
            activate_workflow(bounded, _activation(events))
        assert bounded.live_runs() == 2 and bounded.dropped == 1
    assert _settled(0) == 0  # closing unwound every parked guest
    with StickySandbox(
        plain, sandbox_engine.activation_lock, idle_s=0.0, keep_long_waits=True
    ) as idle:
        activate_workflow(idle, _activation(runs[0]))
        activate_workflow(idle, _activation(runs[1]))
        assert idle.live_runs() == 1 and idle.dropped == 1  # run-0 waited too long
    with StickySandbox(
        plain, sandbox_engine.activation_lock, max_memory_bytes=1, keep_long_waits=True
    ) as small:
        activate_workflow(small, _activation(runs[0]))
        assert small.live_runs() == 0 and small.dropped == 1
    assert _settled(0) == 0


def test_a_run_that_ends_leaves_no_instance_behind(sticky: StickySandbox) -> None:
    history = _history()
    for end in range(2, len(history)):
        activate_workflow(sticky, _activation(history[:end]))
    step = activate_workflow(sticky, _activation(history[:-1]))
    assert step.status.value == "completed"
    assert sticky.live_runs() == 0 and sticky.hits > 0
    assert _settled(0) == 0


def test_runs_complete_through_the_server_on_live_instances(
    make_server, modules: dict[str, bytes], tmp_path
) -> None:
    # The worker's own path: a stream of activations of several runs, signals arriving while
    # instances wait, a cancellation; every run ends as it does replaying from the top.
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["shipment"], promote=True)
    engine = SandboxEngine(tmp_path / "artifacts")
    runner = guest_runner(
        engine, SystemClock(), srv.client.get_module, artifact_dir=tmp_path, guests=1,
        sticky_runs=8,
    )  # fmt: skip
    assert isinstance(runner, StickySandbox)
    worker = Worker(srv.client, runner, WorkerSettings(worker_id="sticky", poll_wait_s=0.2))
    worker.metrics.watch_live(runner.live_runs)
    try:
        with serving(worker):
            ids = [f"S-{i}" for i in range(4)]
            runs = [
                srv.client.start_run(
                    "shipment",
                    {"shipment_id": i, "address": "1 Main St", "deadline_days": 3},
                    workflow_id=i,
                ).run.run_id
                for i in ids
            ]
            for run_id in runs:  # each waits for its delivery signal
                _wait(lambda r=run_id: _waits_for_signal(srv, r))
            for i in ids[:3]:
                assert srv.client.signal(i, "delivered", {"signed_by": "Ann"}, request_id=i)
            assert srv.client.cancel(runs[3], reason="withdrawn", operator="ops@example.com")
            ended = [srv.client.result(r, wait_s=20) for r in runs]
    finally:
        runner.close()
        engine.close()
    assert [r.status for r in ended] == [RunStatus.COMPLETED] * 3 + [RunStatus.CANCELLED]
    assert all(decode(r.result)["signed_by"] == "Ann" for r in ended[:3])
    assert runner.hits >= 4 and runner.restarts == 0
    metrics = worker.metrics.registry
    assert metrics.get_sample_value("amber_worker_continued_activations_total") == runner.hits
    assert metrics.get_sample_value("amber_worker_live_instances") == 0  # all closed


def _waits_for_signal(srv: InProcessServer, run_id: str) -> bool:
    types = [e.type for e in srv.client.history(run_id)]
    return EventType.SIGNAL_AWAITED in types


def _wait(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_run_whose_activation_goes_to_a_child_forgets_its_live_instance(
    modules: dict[str, bytes], plain: Sandbox, tmp_path: Path
) -> None:
    # With parallel guests, an activation runs in a child process when the in-process sandbox
    # is busy. The run then moves on without its live instance, which must not be left behind
    # (it would fall behind; and a replay from the top sent there after a fault must not leave
    # the instance that needed it).
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    clock = ManualClock(from_ms(1_767_225_600_000))
    engine = SandboxEngine(tmp_path / "artifacts")
    runner = guest_runner(
        engine, clock, by_digest.__getitem__,
        artifact_dir=tmp_path / "artifacts", guests=2, sticky_runs=8, slice_fuel=0,
    )  # fmt: skip
    assert isinstance(runner, ParallelSandbox)
    history = _history()
    try:
        activate_workflow(runner, _activation(history[:2]))  # in process: its instance waits
        assert runner.live_runs() == 1
        done: list[object] = []
        busy = threading.Thread(
            target=lambda: done.append(run_activity(runner, busy_attempt(modules)))
        )
        busy.start()  # holds the in-process sandbox for seconds
        _wait(engine.activation_lock.locked)
        step = activate_workflow(runner, _activation(history[:3]))  # so this goes to a child
        busy.join()
        assert done, "the busy guest did not complete"
        assert runner.in_children >= 1 and runner.live_runs() == 0
        assert step == replace(activate_workflow(plain, _activation(history[:3])), stats=step.stats)
    finally:
        runner.close()
        engine.close()
