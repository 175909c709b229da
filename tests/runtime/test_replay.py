"""Replay against committed golden histories: the live path and offline replay are one function.

A golden is a real run's history (recorded through the server) stored as JSON. Replaying it
through today's build of the same source must reproduce it exactly; replaying it through a
variant that reorders its commands must fail with a typed non-determinism error.

Regenerate after an intentional, replay-breaking change of a sample with
`AMBER_REGENERATE_GOLDENS=1 pytest tests/runtime/test_replay.py`.
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
import pytest

from amber.abi import ActivityOptions, RecordNow, RecordRandom, ScheduleActivity, WorkflowStatus
from amber.history import ActivityScheduled, Event, EventType, MarkerRecorded, RunStarted
from amber.runtime.client._client import decode
from amber.runtime.model import RecordedCommand
from amber.runtime.model._clock import from_ms, to_ms
from amber.runtime.model._faults import NonDeterminism
from amber.runtime.replay import ReplayMemo
from amber.runtime.replay._replay import WorkflowActivation, activate_workflow
from amber.runtime.sandbox._sandbox import Sandbox, SandboxLimits
from tests.conftest import InProcessServer

from ._engine_helpers import drive, make_worker, serving

GOLDENS = Path(__file__).parent / "goldens"
LIMITS = SandboxLimits(deadline_s=5.0)
CASES = {
    "orders_shipped": {"order_id": "G-1", "sku": "BOOK-9", "quantity": 3, "amount_cents": 4200},
    "orders_declined": {
        "order_id": "G-2", "sku": "PEN-1", "quantity": 1, "amount_cents": 300, "card": "declined",
    },
}  # fmt: skip


def _to_json(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
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


def _load(name: str) -> tuple[str, str, tuple[Event, ...]]:
    doc = json.loads((GOLDENS / f"{name}.json").read_text())
    events = tuple(
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
    return doc["run_id"], doc["workflow_type"], events


def _activation(
    run_id: str, workflow_type: str, events: tuple[Event, ...], digest: str
) -> WorkflowActivation:
    started = events[0]
    assert started.type is EventType.RUN_STARTED
    return WorkflowActivation(
        run_id=run_id,
        workflow_type=workflow_type,
        digest=digest,
        input=started.payload["input"],
        events=events,
        limits=LIMITS,
    )


@pytest.mark.skipif(not os.environ.get("AMBER_REGENERATE_GOLDENS"), reason="regeneration only")
def test_regenerate_goldens(make_server, modules: dict[str, bytes], sandbox: Sandbox) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    for name, order in CASES.items():
        run_id = srv.client.start_run("orders", order).run.run_id
        drive(make_worker(srv.client, sandbox), srv.client, run_id)
        events = srv.client.history(run_id)
        doc = {
            "run_id": run_id,
            "workflow_type": "orders",
            "source": "abi/samples/orders.c",
            "events": [
                {
                    "seq": e.seq,
                    "type": e.type.value,
                    "digest": e.digest,
                    "time_ms": to_ms(e.created_at),
                    "payload": _to_json(e.payload.to_doc()),
                }
                for e in events
            ],
        }
        (GOLDENS / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_golden_history_replays_to_the_same_end(
    name: str, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    run_id, workflow_type, events = _load(name)
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    *before, recorded = events
    step = activate_workflow(sandbox, _activation(run_id, workflow_type, tuple(before), digest))
    assert step.status is WorkflowStatus.COMPLETED
    assert step.new_commands == ()
    assert step.expected_last_seq == before[-1].seq
    assert recorded.type is EventType.RUN_COMPLETED
    assert decode(step.result) == decode(recorded.payload["result"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_prefix_of_a_golden_issues_exactly_what_history_recorded_next(
    name: str, sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    run_id, workflow_type, events = _load(name)
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    checked = 0
    for cut, event in enumerate(events, start=1):
        if event.type not in (EventType.ACTIVITY_COMPLETED, EventType.ACTIVITY_FAILED):
            continue
        step = activate_workflow(sandbox, _activation(run_id, workflow_type, events[:cut], digest))
        following = events[cut]
        if following.type is EventType.ACTIVITY_SCHEDULED:
            assert step.status is WorkflowStatus.SUSPENDED
            (command,) = step.new_commands
            assert isinstance(command, ScheduleActivity)
            assert command.name == following.payload["name"]
            assert command.args == following.payload["args"]
            assert step.first_new_cmd == following.payload["cmd"]
        else:
            assert following.type is EventType.RUN_COMPLETED
            assert step.status is WorkflowStatus.COMPLETED
        checked += 1
    assert checked >= 3


def test_a_reordered_variant_fails_with_a_typed_non_determinism_error(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    run_id, workflow_type, events = _load("orders_shipped")
    variant = hashlib.sha256(modules["orders_reordered"]).hexdigest()
    with pytest.raises(NonDeterminism) as caught:
        activate_workflow(sandbox, _activation(run_id, workflow_type, events, variant))
    error = caught.value
    assert error.run_id == run_id
    assert error.position == 1
    assert error.recorded.startswith("activity 'reserve_inventory'")
    assert error.issued.startswith("activity 'charge_payment'")
    message = str(error)
    for part in (run_id, "command 1", "reserve_inventory", "charge_payment", variant[:12]):
        assert part in message


def test_a_variant_that_faults_on_a_result_meant_for_another_command_is_found_diverging(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    # The strict variant traps on the reservation it is handed for its charge (as Python code
    # indexing the result raises) before the host sees its commands: replayed whole it is a
    # trap; replayed prefix by prefix, the first mismatch is found where it is.
    from amber.runtime.model._faults import GuestTrap
    from amber.runtime.replay import first_divergence

    run_id, workflow_type, events = _load("orders_shipped")
    strict = hashlib.sha256(modules["orders_reordered_strict"]).hexdigest()
    activation = _activation(run_id, workflow_type, events, strict)
    with pytest.raises(GuestTrap):
        activate_workflow(sandbox, activation)
    found = first_divergence(sandbox, activation)
    assert found is not None and found.position == 1
    assert found.recorded.startswith("activity 'reserve_inventory'")
    assert found.issued.startswith("activity 'charge_payment'")
    original = hashlib.sha256(modules["orders"]).hexdigest()
    assert first_divergence(sandbox, _activation(run_id, workflow_type, events, original)) is None


def test_a_version_check_reports_such_a_variant_incompatible_not_failed(
    make_server, modules: dict[str, bytes], sandbox: Sandbox
) -> None:
    srv: InProcessServer = make_server()
    srv.client.upload_version(modules["orders"], promote=True)
    order = {"order_id": "S-1", "sku": "B", "quantity": 1, "amount_cents": 500, "card": "ok"}
    run_id = srv.client.start_run("orders", order).run.run_id
    worker = make_worker(srv.client, sandbox)
    worker.run_once(wait_s=1)  # the first activation: it schedules the reservation
    worker.run_once(wait_s=1)  # the reservation, and (combined) the next activation
    strict = srv.client.upload_version(modules["orders_reordered_strict"]).version.digest
    with serving(make_worker(srv.client, sandbox, worker_id="checker")):
        _, (check,) = srv.client.check_version(strict, "orders", run_ids=[run_id], wait_s=30)
    assert (check.verdict, check.position) == ("incompatible", 1), check
    assert "reserve_inventory" in check.recorded and "charge_payment" in check.issued
    assert "replayed whole, it failed: trap" in check.detail


def test_a_memo_that_saw_the_run_agree_still_catches_an_early_divergence(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    """The worker's memo lets a step's check skip the positions its last check compared, but
    only where both sides are the very objects compared: a variant that diverges at position 1,
    after every earlier step of the run agreed, is still caught there."""
    run_id, workflow_type, events = _load("orders_shipped")
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    memo = ReplayMemo()
    cuts = [n for n, e in enumerate(events, 1) if e.type is EventType.ACTIVITY_COMPLETED]
    for cut in cuts:
        activate_workflow(
            sandbox, _activation(run_id, workflow_type, events[:cut], digest), memo=memo
        )
    projection = memo.project(run_id, events[: cuts[-1]])
    assert memo.agreed(run_id, projection.commands, [c.command for c in projection.commands]) == 0
    variant = hashlib.sha256(modules["orders_reordered"]).hexdigest()
    with pytest.raises(NonDeterminism) as caught:
        activate_workflow(sandbox, _activation(run_id, workflow_type, events, variant), memo=memo)
    assert caught.value.position == 1


def test_the_memo_skips_only_positions_holding_the_objects_it_saw_agree() -> None:
    recorded = tuple(
        RecordedCommand(cmd=i, seq=i + 2, command=ScheduleActivity(name=f"a{i}", args=b"\x90"))
        for i in range(3)
    )
    issued = tuple(r.command for r in recorded)
    events = (
        Event.of(
            run_id="r",
            seq=1,
            payload=RunStarted(workflow_type="w", workflow_id="r", tenant="", input=b"\x90"),
            digest="d",
            created_at=from_ms(0),
        ),
    )
    memo = ReplayMemo()
    memo.project("r", events)
    assert memo.agreed("r", recorded, issued) == 0  # nothing checked yet
    memo.note_agreed("r", recorded[:2], issued)
    assert memo.agreed("r", recorded, issued) == 2
    assert memo.agreed("r", recorded[:1], issued) == 0  # history shorter than what agreed
    equal_copies = tuple(replace(c) for c in issued)
    assert equal_copies == issued
    assert memo.agreed("r", recorded, equal_copies) == 0  # equal is not enough: the same ones
    assert memo.agreed("other", recorded, issued) == 0


def test_a_workflow_that_stops_short_of_its_history_is_non_deterministic(
    sandbox: Sandbox, modules: dict[str, bytes]
) -> None:
    run_id, workflow_type, events = _load("orders_shipped")
    digest = hashlib.sha256(modules["orders"]).hexdigest()
    # Drop every result: the workflow can only reach its first activity, yet history says it
    # issued four. A module whose code no longer issues recorded commands is caught the same way.
    trimmed = tuple(e for e in events if e.type is not EventType.ACTIVITY_COMPLETED)[:-1]
    with pytest.raises(NonDeterminism) as caught:
        activate_workflow(sandbox, _activation(run_id, workflow_type, trimmed, digest))
    assert caught.value.position == 2
    assert "stopped before reaching it" in caught.value.issued


def test_replayed_now_and_random_values_must_be_the_recorded_ones() -> None:
    # Replay compares the command rebuilt from the recorded payload with the one re-issued.
    recorded = MarkerRecorded(cmd=0, kind="random", value=b"\x00" * 16).command()
    assert recorded == RecordRandom(value=b"\x00" * 16)
    assert recorded != RecordRandom(value=b"\x01" * 16)  # drawn afresh on replay
    assert recorded != RecordRandom(value=b"\x00" * 8)
    clock = MarkerRecorded(cmd=1, kind="now", value=1_700_000_000_000).command()
    assert clock == RecordNow(value=1_700_000_000_000)
    assert clock != RecordNow(value=1_700_000_000_001)
    assert clock != RecordRandom(value=b"\x00" * 16)


def test_activity_options_are_not_part_of_what_replay_matches() -> None:
    # A new version may change an activity's timeouts or retries; its name and arguments not.
    scheduled = ActivityScheduled(
        cmd=2, name="charge", args=b"\x90", options=ActivityOptions(start_to_close_ms=5_000)
    ).command()
    assert scheduled == ScheduleActivity(name="charge", args=b"\x90")
    assert scheduled != ScheduleActivity(name="charge", args=b"\x91")
    assert scheduled != ScheduleActivity(name="refund", args=b"\x90")


def test_golden_payloads_decode() -> None:
    _, _, events = _load("orders_shipped")
    assert msgpack.unpackb(events[0].payload["input"])["order_id"] == "G-1"


def test_a_divergence_in_arguments_names_the_keys_that_differ() -> None:
    from amber.abi import StartChild, pack
    from amber.runtime.replay._replay import _payload_diff

    recorded = ScheduleActivity(name="charge", args=pack({"amount": 100, "note": "x", "id": 7}))
    issued = ScheduleActivity(name="charge", args=pack({"amount": 200, "id": 7, "currency": "EUR"}))
    diff = _payload_diff(recorded, issued)
    assert diff == "; args keys that differ from the recorded ones: amount, +currency, -note"
    assert "100" not in diff and "200" not in diff  # values may be personal data: keys only
    assert _payload_diff(recorded, ScheduleActivity(name="refund", args=issued.args)) == ""
    child = StartChild(workflow_type="ship", workflow_id="c", input=pack({"to": "A"}))
    moved = StartChild(workflow_type="ship", workflow_id="c", input=pack({"to": "B"}))
    assert _payload_diff(child, moved).endswith("input keys that differ from the recorded ones: to")
    assert _payload_diff(recorded, ScheduleActivity(name="charge", args=b"\xc1")) == ""
