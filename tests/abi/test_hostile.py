"""The hostile test guests (tests/guests/hostile.c) misbehave exactly as documented."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import wasmtime

from tests.abi._harness import Guest, MiB, act_envelope, wf_envelope


@pytest.fixture(scope="module")
def hostile(guests: dict[str, Guest]) -> Guest:
    return guests["hostile"]


def workflow(guest: Guest, name: str, **kwargs: Any) -> object:
    return guest.call(f"amber_workflow.{name}", wf_envelope(name, {"x": 1}), **kwargs)


def activity(guest: Guest, name: str, args: object = None, **kwargs: Any) -> object:
    return guest.call(f"amber_activity.{name}", act_envelope(name, args or {}), **kwargs)


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_spin_runs_until_fuel_is_gone(hostile: Guest, kind: str) -> None:
    call = workflow if kind == "workflow" else activity
    with pytest.raises(wasmtime.Trap) as trap:
        call(hostile, "spin", fuel=2_000_000)
    assert trap.value.trap_code == wasmtime.TrapCode.OUT_OF_FUEL


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_hog_traps_when_memory_cannot_grow(hostile: Guest, kind: str) -> None:
    call = workflow if kind == "workflow" else activity
    with pytest.raises(wasmtime.Trap) as trap:
        call(hostile, "hog", memory=4 * MiB, fuel=100_000_000)
    assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_boom_traps(hostile: Guest, kind: str) -> None:
    call = workflow if kind == "workflow" else activity
    with pytest.raises(wasmtime.Trap) as trap:
        call(hostile, "boom")
    assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE


@pytest.mark.parametrize("kind", ["workflow", "activity"])
def test_garbage_returns_invalid_msgpack(hostile: Guest, kind: str) -> None:
    export = f"amber_{kind}.garbage"
    envelope = wf_envelope("garbage", {}) if kind == "workflow" else act_envelope("garbage", {})
    call = hostile.call(export, envelope)
    assert call.raw
    with pytest.raises(Exception):  # noqa: B017 - any decoding error will do
        msgpack.unpackb(call.raw)


def test_badptr_points_past_memory(hostile: Guest) -> None:
    call = hostile.call("amber_activity.badptr", act_envelope("badptr", {}))
    assert call.packed == (0xFFFF0000 << 32) | 0x10000
    assert call.raw == b""  # the harness refused to read it


def test_nap_sleeps_ten_minutes(hostile: Guest) -> None:
    call = hostile.call("amber_activity.nap", act_envelope("nap", {}))
    assert call.sleeps == [600_000]
    assert call.result == {"slept": True}


def test_sleepy_workflow_calls_sleep(hostile: Guest) -> None:
    call = hostile.call("amber_workflow.sleepy_wf", wf_envelope("sleepy_wf", {"x": 1}))
    assert call.sleeps == [10]  # the real host must fail this activation with abi_violation


def test_activity_calling_await_results(hostile: Guest) -> None:
    call = hostile.call("amber_activity.awaits", act_envelope("awaits", {}))
    assert call.suspended
    assert call.output == {"status": "suspended", "commands": []}


def test_crash_on(hostile: Guest) -> None:
    args = {"crash": False, "n": 3}
    call = hostile.call("amber_activity.crash_on", act_envelope("crash_on", args))
    assert call.result == args
    with pytest.raises(wasmtime.Trap) as trap:
        hostile.call("amber_activity.crash_on", act_envelope("crash_on", {"crash": True}))
    assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE


def test_good_workflow_calls_crash_on_with_its_input(hostile: Guest) -> None:
    payload = {"crash": False, "n": 1}
    first = hostile.call("amber_workflow.good", wf_envelope("good", payload))
    assert first.output["commands"] == [["activity", "crash_on", msgpack.packb(payload)]]
    result = hostile.call("amber_activity.crash_on", act_envelope("crash_on", payload)).output
    results = [[0, 0, 0, result["result"]]]
    done = hostile.call("amber_workflow.good", wf_envelope("good", payload, results))
    assert done.output["status"] == "completed"
    assert done.result == payload
