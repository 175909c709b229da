"""Golden histories that together hold every event type, replayed on the modules that wrote them.

Each golden is one real run's history, recorded through the in-process server by a scenario of
`_golden_scenarios.py`, and stored as JSON in the format of the orders goldens of
test_replay.py: {run_id, workflow_type, source, events: [{seq, type, digest, time_ms, payload}]},
where a payload is the event's msgpack wire map with bytes as {"$bytes": base64}.

The always-run tests check that the goldens cover `EventType`, that they load, and that every
run replays on today's build of its source without non-determinism, ending as it was recorded
when the workflow itself closed it. Samples build reproducibly, so a golden's digests are those
of the `modules` fixture; a run that migrated replays each part on the version it ran on.

Regenerate after an intentional, replay-breaking change of a sample or of what the engine writes
with `AMBER_REGENERATE_GOLDENS=1 pytest tests/runtime/test_goldens.py`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import pytest

from amber.abi import RecordRandom, WorkflowStatus
from amber.history import (
    CLOSING_EVENTS,
    PAYLOAD_TYPES,
    Event,
    EventType,
    Payload,
    decode_payload,
    encode_payload,
)
from amber.runtime.client._client import decode
from amber.runtime.model._clock import ManualClock, from_ms, to_ms
from amber.runtime.model._faults import NonDeterminism
from amber.runtime.replay import ReplayMemo
from amber.runtime.replay._replay import WorkflowActivation, WorkflowStep, activate_workflow
from amber.runtime.sandbox import SandboxEngine, StickySandbox
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from tests.conftest import GUEST_SOURCES, ROOT

from ._golden_scenarios import SCENARIOS, Kit

GOLDENS = Path(__file__).parent / "goldens"
NAMES = sorted(path.stem for path in GOLDENS.glob("*.json"))
"""Every golden, the orders goldens of test_replay.py included."""
RECORDED = sorted(name for scenario in SCENARIOS.values() for name in scenario.goldens)
"""The goldens the scenarios record. (The orders goldens predate today's orders build, so
test_replay.py replays them on today's digest instead of the one they name.)"""
LIMITS = SandboxLimits(deadline_s=5.0)

WORKFLOW_CLOSED = {
    EventType.RUN_COMPLETED: WorkflowStatus.COMPLETED,
    EventType.RUN_FAILED: WorkflowStatus.FAILED,
    EventType.RUN_CANCELLED: WorkflowStatus.CANCELLED,
    EventType.RUN_CONTINUED_AS_NEW: WorkflowStatus.CONTINUE_AS_NEW,
}
"""How the workflow's own last activation ends, by the closing event it led to."""
HOST_FAILURES = frozenset({"amber.HistoryLimitExceeded"})
"""RunFailed error types the engine writes without the workflow (none is in the goldens yet)."""


# -- the payload form: known here and nowhere else ------------------------------------------------


def wire_map(event: Event) -> dict[str, Any]:
    """The event's payload as its msgpack wire map, as stored (bytes stay bytes)."""
    doc: dict[str, Any] = msgpack.unpackb(event.raw, raw=False)
    return doc


def load_golden(name: str) -> tuple[Event, ...]:
    """The events of golden `name`, as `amber.history.Event`s."""
    doc = _doc(name)
    return tuple(
        Event(
            run_id=doc["run_id"],
            seq=e["seq"],
            type=EventType(e["type"]),
            raw=msgpack.packb(_from_json(e["payload"]), use_bin_type=True),
            digest=e["digest"],
            created_at=from_ms(e["time_ms"]),
        )
        for e in doc["events"]
    )


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((GOLDENS / f"{name}.json").read_text())
    return doc


# -- regeneration ---------------------------------------------------------------------------------


@pytest.mark.skipif(not os.environ.get("AMBER_REGENERATE_GOLDENS"), reason="regeneration only")
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_regenerate_scenario_goldens(
    scenario: str, make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    kit = Kit(make_server=make_server, modules=modules, sandbox=sandbox)
    recorded = SCENARIOS[scenario].record(kit)
    assert tuple(run.name for run in recorded) == SCENARIOS[scenario].goldens
    for run in recorded:
        doc = {
            "run_id": run.run_id,
            "workflow_type": run.workflow_type,
            "source": run.source,
            "events": [
                {
                    "seq": e.seq,
                    "type": e.type.value,
                    "digest": e.digest,
                    "time_ms": to_ms(e.created_at),
                    "payload": _to_json(wire_map(e)),
                }
                for e in run.events
            ],
        }
        (GOLDENS / f"{run.name}.json").write_text(json.dumps(doc, indent=1) + "\n")


# -- always run -----------------------------------------------------------------------------------


def test_the_goldens_together_hold_every_event_type() -> None:
    held = {event.type for name in NAMES for event in load_golden(name)}
    missing = sorted(t.value for t in set(EventType) - held)
    assert not missing, f"no golden holds {', '.join(missing)}"


@pytest.mark.parametrize("name", NAMES)
def test_a_golden_loads_as_the_history_it_recorded(name: str) -> None:
    doc, events = _doc(name), load_golden(name)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type is EventType.RUN_STARTED
    assert wire_map(events[0])["workflow_type"] == doc["workflow_type"]
    assert (ROOT / doc["source"]).is_file()
    for event, stored in zip(events, doc["events"], strict=True):
        assert event.run_id == doc["run_id"] and to_ms(event.created_at) == stored["time_ms"]
        assert _to_json(wire_map(event)) == stored["payload"]  # nothing lost on the way in
    closing = [e for e in events if e.type in CLOSING_EVENTS]
    assert len(closing) <= 1, f"{name} closed {len(closing)} times"


_UNDECLARED = object()


def _defaults(cls: type[Payload]) -> dict[str, Any]:
    """The wire form of each field's default (what a payload leaves out)."""
    return {
        f.encode_name: msgspec.msgpack.decode(msgspec.msgpack.encode(f.default))
        for f in msgspec.structs.fields(cls)
        if f.default is not msgspec.NODEFAULT
    }


LEGACY_KEYS = {(EventType.ACTIVITY_SCHEDULED, "max_attempts")}
"""Keys earlier engines wrote that today's payload classes no longer declare (read, ignored)."""


@pytest.mark.parametrize("name", NAMES)
def test_every_golden_payload_reads_as_its_typed_class_losing_nothing(name: str) -> None:
    for event in load_golden(name):
        payload = event.payload  # strict: a key of the wrong type fails here
        assert type(payload) is PAYLOAD_TYPES[event.type]
        assert decode_payload(event.type, encode_payload(payload)) == payload
        written, defaults = payload.to_doc(), _defaults(type(payload))
        for key, value in wire_map(event).items():
            if (event.type, key) in LEGACY_KEYS:
                continue
            # A key the class does not declare would be dropped; a default is left out.
            assert key in written or value == defaults.get(key, _UNDECLARED), (
                f"{name} #{event.seq}: {event.type.value}.{key} = {value!r} is lost"
            )
            if key in written:
                assert written[key] == value, (
                    f"{name} #{event.seq} {event.type.value}.{key}: {value!r} reads back as"
                    f" {written[key]!r}"
                )


def _built(source: str, modules: dict[str, bytes]) -> set[str]:
    """Digests of every module the fixture builds from `source`."""
    return {
        hashlib.sha256(modules[module]).hexdigest()
        for module, (path, _) in GUEST_SOURCES.items()
        if str(path.relative_to(ROOT)) == source
    }


def _parts(events: tuple[Event, ...]) -> list[tuple[str, tuple[Event, ...]]]:
    """(digest, history so far) for each version the run ran on: the history up to each
    migration on the version it left, and the whole open history on the last one."""
    ends = [i for i, e in enumerate(events) if e.type in CLOSING_EVENTS]
    open_history = events[: ends[0]] if ends else events
    parts, digest = [], events[0].digest
    for i, event in enumerate(open_history):
        if event.type is EventType.RUN_MIGRATED:
            parts.append((digest, open_history[:i]))
            digest = wire_map(event)["to"]
    parts.append((digest, open_history))
    return parts


def _activation(workflow_type: str, events: tuple[Event, ...], digest: str) -> WorkflowActivation:
    return WorkflowActivation(
        run_id=events[0].run_id,
        workflow_type=workflow_type,
        digest=digest,
        input=wire_map(events[0])["input"],
        events=events,
        limits=LIMITS,
    )


def _replay(name: str, events: tuple[Event, ...], digest: str, sandbox: Sandbox) -> WorkflowStep:
    activation = _activation(_doc(name)["workflow_type"], events, digest)
    try:
        return activate_workflow(sandbox, activation)
    except NonDeterminism as fault:
        pytest.fail(f"{name} up to event {events[-1].seq} on {digest[:12]}: {fault}")


@pytest.mark.parametrize("name", RECORDED)
def test_a_golden_replays_on_the_versions_it_ran_on_and_ends_as_recorded(
    name: str, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    source, events = _doc(name)["source"], load_golden(name)
    built = _built(source, modules)
    assert built, f"{name}: the modules fixture builds nothing from {source}"
    steps = []
    for digest, history in _parts(events):
        assert digest in built, (
            f"{name} ran on {digest[:12]}, which no build of {source} has today:"
            " the source changed since it was recorded (regenerate) or its build is not"
            " reproducible"
        )
        step = _replay(name, history, digest, sandbox)
        assert step.expected_last_seq == history[-1].seq
        steps.append((step, len(history)))
    last, replayed = steps[-1]
    _assert_ends_as_recorded(name, last, events[replayed] if replayed < len(events) else None)


def _assert_ends_as_recorded(name: str, step: WorkflowStep, closing: Event | None) -> None:
    if closing is None or closing.type not in WORKFLOW_CLOSED:
        # Still open, or closed by the host (terminated, timed out, ...) while it waited.
        assert step.status is WorkflowStatus.SUSPENDED, f"{name} ended {step.status.value}"
        return
    recorded = wire_map(closing)
    if closing.type is EventType.RUN_FAILED and recorded["error_type"] in HOST_FAILURES:
        assert step.status is WorkflowStatus.SUSPENDED, f"{name} ended {step.status.value}"
        return
    assert step.status is WORKFLOW_CLOSED[closing.type], f"{name} ended {step.status.value}"
    assert step.new_commands == (), f"{name} issued commands history does not hold"
    if closing.type is EventType.RUN_COMPLETED:
        assert step.result is not None and decode(step.result) == decode(recorded["result"])
    elif closing.type is EventType.RUN_CONTINUED_AS_NEW:
        assert step.result is not None and decode(step.result) == decode(recorded["input"])
    else:
        assert step.error is not None
        assert (step.error.type, step.error.message) == (
            recorded["error_type"],
            recorded["message"],
        )


def test_a_migrated_run_diverges_on_the_version_it_left(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # What makes replaying part by part necessary: after the migration, the run took v2's patched
    # branch, which v1's code does not issue.
    events = load_golden("onboard_migrated")
    (v1, _), (v2, after) = _parts(events)
    assert (v1, v2) == tuple(hashlib.sha256(modules[f"rollout_v{v}"]).hexdigest() for v in (1, 2))
    with pytest.raises(NonDeterminism) as caught:
        activate_workflow(sandbox, _activation("onboard", after, v1))
    assert "patched 'add-audit'" in caught.value.recorded


# -- sticky instances against the reference path -------------------------------------------------


def _comparable(step: WorkflowStep) -> tuple[Any, ...]:
    """What an activation decides, with the random bytes the host hands out blanked (each run of
    the guest draws its own); `now` comes from the fixed clock below."""
    commands = tuple(
        replace(c, value=b"") if isinstance(c, RecordRandom) else c for c in step.new_commands
    )
    return (
        step.expected_last_seq,
        step.first_new_cmd,
        commands,
        step.status,
        step.result,
        step.error,
        step.stats.logs,
        step.reactivate,
    )


def test_a_live_instance_decides_what_a_replay_from_the_top_decides_at_every_point(
    sandbox_engine: SandboxEngine, modules: dict[str, bytes]
) -> None:
    # Every golden, cut after each of its events in turn, is activated twice: on a live instance
    # that goes on from its last wait (the sticky path), and from the top in a fresh instance
    # (the reference). They must issue the same commands, end the same way and log the same
    # lines; only fuel and memory may differ. Migrated runs change module digest midway, which
    # must start a new instance.
    by_digest = {hashlib.sha256(m).hexdigest(): m for m in modules.values()}
    clock = ManualClock(from_ms(1_767_225_600_000))
    fresh = Sandbox(sandbox_engine, clock, by_digest.__getitem__)
    sticky = StickySandbox(
        Sandbox(sandbox_engine, clock, by_digest.__getitem__),
        sandbox_engine.activation_lock,
        keep_long_waits=True,  # go on after timers, signals and approvals too: every kind of wait
    )
    memo = ReplayMemo()  # as a worker keeps it: each cut extends the last one
    compared = 0
    with sticky:
        for name in RECORDED:
            workflow_type = _doc(name)["workflow_type"]
            for digest, history in _parts(load_golden(name)):
                for end in range(1, len(history) + 1):
                    activation = _activation(workflow_type, history[:end], digest)
                    expected = activate_workflow(fresh, activation)
                    got = activate_workflow(sticky, activation, memo=memo)
                    assert _comparable(got) == _comparable(expected), (
                        f"{name} up to event {history[end - 1].seq}"
                    )
                    compared += 1
    assert sticky.hits > compared // 2  # most activations went on where the last one waited
    assert sticky.misses >= len(RECORDED)
    assert sticky.restarts == 0
    assert sticky.live_runs() == 0  # closed
    assert memo.extended > compared // 2 and memo.commands_reused > compared
    assert sticky.deltas == 0  # C guests read whole envelopes
