"""The rollout sample (abi/samples/rollout.c) in its three versions: the command sequence of each,
v1 histories replayed on v2 (the patch) and on v3 (reordered, incompatible), v2 histories on v1
(a removed patch), and the builds themselves. Histories are kept by the harness's `Run`, which
checks each activation's commands against them as the host does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest
import wasmtime

from amber.abi import MANIFEST_SECTION, custom_sections
from amber.tools._build import BuildResult, build_module
from tests.abi._harness import Call, Guest, NonDeterminism, Run, act_envelope, wf_envelope
from tests.abi.conftest import SOURCES

pack = msgpack.packb
USER = {"user": "ann"}
CREATE = ["activity", "create_account", pack({"user": "ann"})]
SIGNAL = ["signal", "go"]
MARKER = ["patched", "add-audit"]
AUDIT = ["activity", "audit_log", pack({"account": "acct-ann"})]
WELCOME = ["activity", "send_welcome", pack({"account": "acct-ann"})]


def result(audited: bool) -> dict[str, Any]:
    return {"user": "ann", "account": "acct-ann", "welcomed": True, "audited": audited}


def start(guests: dict[str, Guest], version: int) -> Run:
    return Run(guests[f"rollout_v{version}"], "onboard", USER)


def step(run: Run) -> Call:
    """One activation, then what the world does next: run the activities it scheduled, or
    send the signal it waits for."""
    call = run.activate()
    if run.pending("activity"):
        run.run_activities()
    elif run.pending("signal"):
        run.send_signal("go", {"by": "ops"})
    return call


def finish(run: Run) -> Call:
    for _ in range(10):
        call = step(run)
        if not call.suspended:
            return call
    raise AssertionError("the run did not finish")


def parked(guests: dict[str, Guest], version: int) -> Run:
    """A run of `version` waiting for the signal."""
    run = start(guests, version)
    for _ in range(3):
        assert run.activate().suspended
        if run.pending("signal"):
            return run
        run.run_activities()
    raise AssertionError("the run never waited for the signal")


# --- each version on its own -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "commands", "audited"),
    [
        (1, [CREATE, SIGNAL, WELCOME], False),
        (2, [CREATE, SIGNAL, MARKER, AUDIT, WELCOME], True),
        (3, [CREATE, WELCOME, SIGNAL], False),
    ],
)
def test_command_sequences(
    guests: dict[str, Guest], version: int, commands: list[list[Any]], audited: bool
) -> None:
    run = start(guests, version)
    final = finish(run)
    assert final.output == {
        "status": "completed",
        "commands": commands,
        "result": pack(result(audited)),
    }
    assert run.commands == commands
    # Replaying the finished history on the same code issues the same list and says the same.
    assert finish(run).output == final.output


@pytest.mark.parametrize("version", [1, 2, 3])
def test_parked_on_the_signal_publishes_waiting(guests: dict[str, Guest], version: int) -> None:
    run = parked(guests, version)
    assert run.pending("signal") == [run.commands.index(SIGNAL)]
    answer = run.activate(query="status")
    assert answer.published == {"status": "waiting"}


def test_v2_issues_the_marker_and_the_audit_in_one_activation(guests: dict[str, Guest]) -> None:
    run = parked(guests, 2)
    run.send_signal("go", None)
    assert run.activate().suspended
    assert run.commands[2:] == [MARKER, AUDIT]
    assert run.results[-1] == [2, run.position - 2, 0, "add-audit"]  # the marker, at once


@pytest.mark.parametrize("version", [1, 2, 3])
def test_cancelled_while_parked(guests: dict[str, Guest], version: int) -> None:
    run = parked(guests, version)
    run.request_cancel("changed my mind")
    out = run.activate().output
    assert out["status"] == "cancelled"
    assert out["error"] == ["Cancelled", "changed my mind"]


def test_bad_input_fails(guests: dict[str, Guest]) -> None:
    call = guests["rollout_v1"].call("amber_workflow.onboard", wf_envelope("onboard", {"u": 1}))
    assert call.output == {
        "status": "failed",
        "commands": [],
        "error": ["BadInput", "expected {user: str}"],
    }


@pytest.mark.parametrize(
    ("activity", "args", "expected"),
    [
        ("create_account", {"user": "ann"}, {"account": "acct-ann"}),
        ("send_welcome", {"account": "acct-ann"}, {"sent": True}),
        ("audit_log", {"account": "acct-ann"}, {"logged": True}),
    ],
)
@pytest.mark.parametrize("version", [1, 2, 3])
def test_activities_are_the_same_in_every_version(
    guests: dict[str, Guest], version: int, activity: str, args: Any, expected: Any
) -> None:
    guest = guests[f"rollout_v{version}"]
    assert guest.call(f"amber_activity.{activity}", act_envelope(activity, args)).result == expected
    bad = guest.call(f"amber_activity.{activity}", act_envelope(activity, [1])).output
    assert bad["status"] == "failed" and bad["error"][0] == "BadArgs" and bad["error"][2] is True


# --- one history, other code -----------------------------------------------------------------


def test_a_v1_history_past_the_patch_point_replays_on_v2_without_auditing(
    guests: dict[str, Guest],
) -> None:
    run = parked(guests, 1)
    run.send_signal("go", None)
    run.activate()  # v1 issues send_welcome at position 2
    assert run.commands == [CREATE, SIGNAL, WELCOME]
    run.guest = guests["rollout_v2"]  # migrated: later activations replay on v2
    assert run.activate().output["commands"] == [CREATE, SIGNAL, WELCOME]  # patched: false
    run.run_activities()
    final = run.activate()
    assert final.result == result(audited=False)
    assert run.commands == [CREATE, SIGNAL, WELCOME]


def test_a_finished_v1_history_replays_on_v2(guests: dict[str, Guest]) -> None:
    run = start(guests, 1)
    finish(run)
    run.guest = guests["rollout_v2"]
    replay = run.activate()
    assert replay.output["commands"] == [CREATE, SIGNAL, WELCOME]
    assert replay.result == result(audited=False)


def test_a_parked_v1_run_moved_to_v2_audits_when_signalled(guests: dict[str, Guest]) -> None:
    # Position 2 is not in the history yet: new ground (rule 3), so the new path is taken.
    run = parked(guests, 1)
    run.guest = guests["rollout_v2"]
    assert run.activate().suspended  # compatible: the same two commands
    final = finish(run)
    assert final.result == result(audited=True)
    assert run.commands == [CREATE, SIGNAL, MARKER, AUDIT, WELCOME]


def test_a_parked_v1_run_pinned_to_v1_finishes_on_v1(guests: dict[str, Guest]) -> None:
    run = parked(guests, 1)
    assert finish(run).result == result(audited=False)


@pytest.mark.parametrize("finished", [False, True])
def test_a_v2_history_on_v1_code_diverges_at_the_marker(
    guests: dict[str, Guest], finished: bool
) -> None:
    run = parked(guests, 2)
    run.send_signal("go", None)
    run.activate()
    if finished:
        finish(run)
    history = list(run.commands)
    assert history[:4] == [CREATE, SIGNAL, MARKER, AUDIT]
    run.guest = guests["rollout_v1"]  # the patch removed while the run is open
    with pytest.raises(NonDeterminism) as caught:
        run.activate()
    assert (caught.value.position, caught.value.recorded, caught.value.issued) == (
        2,
        MARKER,
        WELCOME,
    )
    # What v1 hands the host: it awaits send_welcome at 2, finds the marker's str result where an
    # activity's bin belongs, and suspends there, so the host reports position 2.
    call = guests["rollout_v1"].call(
        "amber_workflow.onboard",
        wf_envelope("onboard", USER, run.results, recorded=len(history)),
    )
    assert call.output == {"status": "suspended", "commands": [CREATE, SIGNAL, WELCOME]}
    assert run.commands == history  # nothing appended


def test_a_v1_history_on_v3_diverges_at_the_signal(guests: dict[str, Guest]) -> None:
    run = parked(guests, 1)
    run.guest = guests["rollout_v3"]
    with pytest.raises(NonDeterminism) as caught:
        run.activate()
    assert (caught.value.position, caught.value.recorded, caught.value.issued) == (
        1,
        SIGNAL,
        WELCOME,
    )


def test_a_v1_history_before_the_signal_is_still_compatible_with_v3(
    guests: dict[str, Guest],
) -> None:
    run = start(guests, 1)
    step(run)  # create_account issued and run
    run.guest = guests["rollout_v3"]
    assert finish(run).result == result(audited=False)
    assert run.commands == [CREATE, WELCOME, SIGNAL]


# --- the builds ------------------------------------------------------------------------------


def imports(build: BuildResult) -> set[str]:
    module = wasmtime.Module.from_file(wasmtime.Engine(), str(build.output))
    return {i.name for i in module.imports if i.name is not None}


def manifest_section(build: BuildResult) -> bytes:
    sections = custom_sections(build.output.read_bytes())
    return next(payload for name, payload in sections if name == MANIFEST_SECTION)


def test_versions_differ_only_in_code(built: dict[str, BuildResult]) -> None:
    versions = [built[f"rollout_v{v}"] for v in (1, 2, 3)]
    assert len({b.sha256 for b in versions}) == 3
    assert {manifest_section(b) for b in versions} == {
        b'{"abi":1,"workflows":["onboard"],"activities":["create_account","send_welcome","audit_log"]}'
    }
    assert all(imports(b) == {"await_results", "await_next", "take", "publish"} for b in versions)
    assert all(b.size < 16_000 for b in versions)


def test_the_default_version_is_1(built: dict[str, BuildResult], tmp_path: Path) -> None:
    source, _ = SOURCES["rollout_v1"]
    assert build_module(source, tmp_path / "default.wasm").sha256 == built["rollout_v1"].sha256
