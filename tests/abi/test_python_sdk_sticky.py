"""Sticky instances in the Python guest SDK: a workflow kept alive across the activations of one
run (`GuestHost.await_next` answers with the run's next input envelope) against a replay from
the top of the same history.

The invariant the host relies on: whatever the host does, every activation's outcome is the
same. So each scenario drives a workflow through `StickyHost`, a small scripted host that keeps
the instance (it records each offered output in a history, the way the engine does, delivers the
script's next step and hands back the grown history), and splits the run into *stretches*: the
code between one input envelope and the next output. Then, for every stretch, a fresh
`run_workflow` on the same input envelope with a host that keeps nothing must return the same
bytes, and what the code did from the await on (log lines, published values, host `now` and
`random` calls, `is_replaying` at every `note`) must be the tail of what the replay did.

Test workflows are registered in the process-wide registry at import (names start with `ts_`).
"""

from __future__ import annotations

import datetime
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "abi" / "sdk" / "python"))

import amber_sdk as amber  # noqa: E402
from amber_sdk import (  # noqa: E402
    ActivityError,
    CancelledError,
    NondeterminismError,
    workflow,
)

NOW = 1_700_000_000_000

GUARDED = [
    (time, "time", time.time),
    (random, "random", random.random),
    (os, "urandom", os.urandom),
    (uuid, "uuid4", uuid.uuid4),
    (datetime, "datetime", datetime.datetime),
]
"""A few of the names the determinism guard patches, with their real values."""


def guard_installed() -> bool:
    return all(getattr(module, attr) is not real for module, attr, real in GUARDED)


def guard_lifted() -> bool:
    return all(getattr(module, attr) is real for module, attr, real in GUARDED)


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


# ---- a history and the hosts around it -----------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Something history records while the workflow waits (one item of a script step)."""

    cmd: int | None
    """The command whose result this is; None for the cancel request."""
    status: int = 0
    value: Any = None
    at_command: bool = False
    """Delivered at the command's own seq: a signal that arrived before the wait for it."""


def done(cmd: int, value: Any = None) -> Event:
    """An activity, signal or child result (a msgpack payload)."""
    return Event(cmd, 0, pack(value))


def fired(cmd: int) -> Event:
    return Event(cmd, 0, None)


def failed(cmd: int, type: str, message: str) -> Event:
    return Event(cmd, 1, [type, message])


def buffered(cmd: int, value: Any) -> Event:
    return Event(cmd, 0, pack(value), at_command=True)


def cancel(reason: str) -> Event:
    return Event(None, 0, reason)


Script = list[list[Event]]
"""One step per wait: what history records before the host hands the next envelope over."""

_MARKER_TAGS = frozenset({"now", "random", "patched"})


@dataclass
class History:
    """A run's history as the engine keeps it: every command at its own seq (the marker of a
    now, random or patched is its result), then results and a cancel request at new seqs."""

    name: str
    input: Any
    run_id: str = "run-1"
    commands: list[Any] = field(default_factory=list)
    command_seqs: list[int] = field(default_factory=list)
    results: list[list[Any]] = field(default_factory=list)
    cancel: list[Any] | None = None
    seq: int = 0

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def record(self, output: bytes) -> None:
        """Match an activation's output with history and append its new commands."""
        commands = unpack(output)["commands"]
        assert commands[: len(self.commands)] == self.commands, "the output rewrote history"
        for cmd in range(len(self.commands), len(commands)):
            command, seq = commands[cmd], self._next_seq()
            self.commands.append(command)
            self.command_seqs.append(seq)
            if command[0] in _MARKER_TAGS:
                self.results.append([cmd, seq, 0, command[1]])

    def deliver(self, step: list[Event]) -> None:
        for event in step:
            if event.cmd is None:
                assert self.cancel is None
                self.cancel = [self._next_seq(), event.value]
                continue
            assert event.cmd < len(self.commands), f"no command {event.cmd} recorded yet"
            seq = self.command_seqs[event.cmd] if event.at_command else self._next_seq()
            self.results.append([event.cmd, seq, event.status, event.value])

    def envelope(self) -> bytes:
        doc: dict[str, Any] = {
            "abi": 1,
            "run_id": self.run_id,
            "workflow": self.name,
            "input": pack(self.input),
            "results": list(self.results),
            "recorded": len(self.commands),
        }
        if self.cancel is not None:
            doc["cancel"] = list(self.cancel)
        return pack(doc)


class Host:
    """The host imports a workflow may call, in call order. `now` and `random` answer from the
    stretch number, so a value taken from the host where history holds one shows up."""

    def __init__(self, stretch: int = 0) -> None:
        self.stretch = stretch
        self.draws = 0
        self.events: list[tuple[Any, ...]] = []
        self.offered: list[bytes] = []

    def now(self) -> int:
        self.events.append(("now",))
        return NOW + 1000 * self.stretch

    def random(self, n: int) -> bytes:
        self.draws += 1
        self.events.append(("random", n))
        return bytes((37 * self.stretch + 11 * self.draws + k) % 256 for k in range(n))

    def log(self, level: int, line: str) -> None:
        self.events.append(("log", level, line))

    def publish(self, name: str, value: bytes) -> None:
        self.events.append(("publish", name, unpack(value)))

    def await_next(self, envelope: bytes) -> bytes | None:
        self.offered.append(envelope)
        return None  # keeps no instance: the next activation replays from the top

    def heartbeat(self, details: bytes) -> bool:
        raise AssertionError("not from a workflow")

    def cancel_requested(self) -> bool:
        raise AssertionError("not from a workflow")

    def http_request(self, request: bytes) -> bytes:
        raise AssertionError("not from a workflow")

    def sleep(self, ms: int) -> None:
        raise AssertionError("not from a workflow")


@dataclass(frozen=True)
class Stretch:
    """The code between one input envelope and the next output, in a kept instance."""

    input: bytes
    output: bytes
    events: list[tuple[Any, ...]]


class StickyHost(Host):
    """A host that keeps the instance while its script lasts: each `await_next` records the
    offered output in the history, delivers the script's next step and answers with the grown
    history's envelope (or, with `deltas`, with only what the history added since the last
    input). With the script done, it answers None (it drops the
    instance)."""

    deltas = False

    def __init__(self, history: History, script: Script) -> None:
        super().__init__()
        self.history = history
        self.script = list(script)
        self.input = history.envelope()
        self.stretches: list[Stretch] = []
        self.guarded_while_waiting: list[bool] = []
        self.declined: bytes | None = None

    def await_next(self, envelope: bytes) -> bytes | None:
        self.guarded_while_waiting.append(guard_installed())
        self.offered.append(envelope)
        if not self.script:
            self.declined = envelope
            return None
        self.stretches.append(Stretch(input=self.input, output=envelope, events=self.events))
        self.history.record(envelope)
        read = len(unpack(self.input)["results"])
        self.history.deliver(self.script.pop(0))
        self.input = self.history.envelope()
        self.stretch, self.draws, self.events = self.stretch + 1, 0, []
        if self.deltas:
            return delta(unpack(self.input), read)
        return self.input


def delta(doc: dict[str, Any], start: int) -> bytes:
    """The delta answer standing for input envelope `doc` to a guest that read `start`
    results."""
    answer = {
        "abi": 1,
        "delta": True,
        "from": start,
        "more": doc["results"][start:],
        "recorded": doc["recorded"],
    }
    if "cancel" in doc:
        answer["cancel"] = doc["cancel"]
    return pack(answer)


@pytest.fixture(autouse=True, params=["whole", "delta"])
def answers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scenario twice: the host answers with whole envelopes, then with deltas."""
    monkeypatch.setattr(StickyHost, "deltas", request.param == "delta")


def drive(name: str, input: Any, script: Script) -> StickyHost:
    """Run one workflow call through a host that keeps the instance for the whole script."""
    host = StickyHost(History(name, input), script)
    output = amber.run_workflow(name, host.input, host)
    if host.declined is not None:
        assert output == host.declined, "a declined wait must return the offered envelope"
    host.stretches.append(Stretch(input=host.input, output=output, events=host.events))
    assert not host.script, "the workflow ended before the script did"
    assert len(host.stretches) == len(script) + 1
    assert all(host.guarded_while_waiting)
    assert guard_lifted()
    return host


def notes(events: list[tuple[Any, ...]]) -> list[str]:
    return [e[2][0] for e in events if e[0] == "publish" and e[1] == "note"]


def assert_each_stretch_is_a_replay(name: str, host: StickyHost) -> None:
    """The invariant: every stretch of the kept instance is what a replay from the top of its
    input envelope produces, byte for byte, and from the await on, call for call."""
    seen: list[str] = []
    for i, stretch in enumerate(host.stretches):
        fresh = Host(stretch=i)
        output = amber.run_workflow(name, stretch.input, fresh)
        assert output == stretch.output, f"stretch {i}: the outputs differ"
        tail = fresh.events[len(fresh.events) - len(stretch.events) :]
        assert tail == stretch.events, f"stretch {i}: the code did something else from the await"
        seen += notes(stretch.events)
        assert notes(fresh.events) == seen, f"stretch {i}: the replay took another path"
        assert fresh.offered[-1:] == ([output] if unpack(output)["status"] == "suspended" else [])
    assert guard_lifted()


def run_sticky(name: str, input: Any, script: Script) -> dict[str, Any]:
    """Drive, check every stretch against a replay, and return the final output."""
    host = drive(name, input, script)
    assert_each_stretch_is_a_replay(name, host)
    out: dict[str, Any] = unpack(host.stretches[-1].output)
    return out


def note(label: str) -> None:
    """Publish where the code is and whether it is replaying there (`set_query` runs replaying
    or not), and log it (which it does only when not replaying)."""
    workflow.set_query("note", [label, workflow.is_replaying()])
    workflow.logger.info(label)


# ---- the workflows -------------------------------------------------------------------------


@workflow.defn(name="ts_sequential")
def ts_sequential(order: Any) -> Any:
    note("start")
    reserved = workflow.execute_activity("reserve", order)
    note("reserved")
    try:
        charged = workflow.execute_activity("charge", reserved)
    except ActivityError as exc:
        note(f"declined: {exc.type}")
        raise
    note("charged")
    shipped = workflow.execute_activity("ship", charged)
    note("shipped")
    return [reserved, charged, shipped]


@workflow.defn(name="ts_race")
def ts_race(input: Any) -> Any:
    fetch = workflow.start_activity("fetch", input)
    timer = workflow.start_timer(60)
    note("racing")
    try:
        first = workflow.wait_any([fetch, timer])
    except CancelledError:
        note("cancelled")
        timer.cancel()
        raise
    note(f"first {first}")
    if first == 1:
        return "timed out"
    timer.cancel()
    value = fetch.result()
    note("fetched")
    return value


@workflow.defn(name="ts_signal")
def ts_signal() -> Any:
    note("waiting")
    first = workflow.wait_signal("approve")
    note(f"approved by {first}")
    second = workflow.wait_signal("approve")
    note(f"and by {second}")
    return [first, second]


@workflow.defn(name="ts_saga")
def ts_saga(order: Any) -> str:
    note("start")
    booking = workflow.execute_activity("book", order)
    note("booked")
    try:
        workflow.execute_activity("charge", booking)
    except CancelledError:
        note(f"compensating: {workflow.cancel_reason()} {workflow.cancel_requested()}")
        workflow.logger.warning("unbooking")
        workflow.execute_activity("unbook", booking)
        note("unbooked")
        raise
    note("charged")
    workflow.execute_activity("ship", booking)
    note("shipped")
    return "shipped"


@workflow.defn(name="ts_patch")
def ts_patch() -> Any:
    audited = workflow.patched("audit")
    if audited:
        workflow.execute_activity("audit")
        note("audited")
    workflow.execute_activity("welcome")
    note("welcomed")
    bonus = workflow.patched("bonus")  # new ground after a wait
    if bonus:
        note("bonus")
        workflow.execute_activity("bonus")
    note("end")
    return [audited, bonus]


@workflow.defn(name="ts_clock")
def ts_clock() -> Any:
    started = workflow.now_ms()
    token = workflow.random_bytes(4).hex()
    note(f"drawn {started} {token}")
    who = workflow.wait_signal("go")
    note(f"go {who}")
    later = workflow.now_ms()  # new ground after the wait: this stretch's host clock
    ident = workflow.uuid4()
    note(f"later {later} {ident}")
    workflow.sleep(5)
    note("slept")
    return [started, token, who, later, ident, workflow.now_ms()]


@workflow.defn(name="ts_markers")
def ts_markers(markers: list[str]) -> Any:
    go = workflow.start_wait_signal("go")
    drawn: list[Any] = []
    for marker in markers:  # issued after the wait, so a buffered signal is delivered before
        if marker == "now":
            drawn.append(workflow.now_ms())
        elif marker == "random":
            drawn.append(workflow.random_bytes(2).hex())
        else:
            drawn.append(workflow.patched("fast"))
    note("waiting")
    who = go.result()
    note(f"go {who}")
    return [who, drawn]


@workflow.defn(name="ts_loop")
def ts_loop(state: Any) -> Any:
    note(f"round {state['n']}")
    value = workflow.execute_activity("step", state["n"])
    note("stepped")
    workflow.sleep(1)
    note("slept")
    if state["n"] < 3:
        workflow.continue_as_new({"n": state["n"] + 1, "last": value})
    return value


@workflow.defn(name="ts_catch_all")
def ts_catch_all() -> Any:
    try:
        workflow.execute_activity("a")
        return workflow.execute_activity("b")
    except Exception as exc:  # must not catch the host's bug
        return f"swallowed {exc!r}"


@workflow.defn(name="ts_cheat_later")
def ts_cheat_later() -> Any:
    workflow.execute_activity("a")
    return time.time()  # the guard is still there after the wait


# ---- scenarios: a kept instance is a replay, stretch by stretch ----------------------------


@pytest.mark.parametrize(
    ("script", "status", "commands"),
    [
        ([[done(0, "r")], [done(1, "c")], [done(2, "s")]], "completed", 3),
        ([[done(0, "r")], [done(1, "c")]], "suspended", 3),  # then the host drops the instance
        ([[done(0, "r")], [failed(1, "Declined", "no funds")]], "failed", 2),
        ([], "suspended", 1),
    ],
    ids=["completes", "dropped", "fails", "never-kept"],
)
def test_sequential_activities(script: Script, status: str, commands: int) -> None:
    out = run_sticky("ts_sequential", {"id": 7}, script)
    assert out["status"] == status
    assert len(out["commands"]) == commands
    if status == "completed":
        assert unpack(out["result"]) == ["r", "c", "s"]
    if status == "failed":
        assert out["error"] == ["Declined", "no funds"]


@pytest.mark.parametrize(
    ("script", "status", "result"),
    [
        ([[done(0, "data")]], "completed", "data"),
        ([[fired(1)]], "completed", "timed out"),
        ([[fired(1), done(0, "late")]], "completed", "timed out"),
        ([[done(0, "early"), fired(1)]], "completed", "early"),
        ([[], [], [done(0, "data")]], "completed", "data"),  # history grew, nothing for the race
        ([[cancel("stop")]], "cancelled", None),
        ([[], [cancel("stop")]], "cancelled", None),
    ],
    ids=[
        "activity",
        "timer",
        "timer-first",
        "activity-first",
        "idle-steps",
        "cancel",
        "idle-cancel",
    ],
)
def test_wait_any_racing_a_timer_and_an_activity(script: Script, status: str, result: Any) -> None:
    out = run_sticky("ts_race", "url", script)
    assert out["status"] == status
    if result is not None:
        assert unpack(out["result"]) == result
    if status == "cancelled":
        assert out["commands"][-1] == ["cancel_timer", 1]
        assert out["error"] == ["Cancelled", "stop"]


@pytest.mark.parametrize(
    "script",
    [
        [[done(0, "ada")], [done(1, "bob")]],
        [[buffered(0, "ada")], [buffered(1, "bob")]],
        [[], [done(0, "ada")], [], [done(1, "bob")]],
    ],
    ids=["delivered", "buffered", "idle-steps"],
)
def test_a_signal_wait(script: Script) -> None:
    out = run_sticky("ts_signal", None, script)
    assert out["status"] == "completed"
    assert unpack(out["result"]) == ["ada", "bob"]


@pytest.mark.parametrize(
    ("script", "status", "commands"),
    [
        # the cancel arrives while the workflow waits for the charge: compensation follows
        ([[done(0, "b1")], [cancel("customer")], [done(2)]], "cancelled", 3),
        # recorded with the charge's result after it: the cancel is still due at the charge
        ([[done(0, "b1")], [cancel("customer"), done(1, "c")], [done(2)]], "cancelled", 3),
        # the charge came first: the cancel goes to the next await (ship), outside the try
        ([[done(0, "b1")], [done(1, "c"), cancel("customer")]], "cancelled", 3),
        # while the workflow waits for the booking, before the try
        ([[cancel("early")]], "cancelled", 1),
        # the compensation's own activity fails after the cancellation
        ([[done(0, "b1")], [cancel("x")], [failed(2, "Gone", "no booking")]], "failed", 3),
        ([[done(0, "b1")], [done(1, "c")], [done(2)]], "completed", 3),
    ],
    ids=["while-charging", "with-result", "result-first", "while-booking", "unbook-fails", "none"],
)
def test_a_cancellation_arriving_while_waiting_then_compensation(
    script: Script, status: str, commands: int
) -> None:
    out = run_sticky("ts_saga", {"id": 1}, script)
    assert out["status"] == status
    assert len(out["commands"]) == commands


def test_compensation_sees_the_cancel_reason_after_a_refresh() -> None:
    host = drive("ts_saga", {"id": 1}, [[done(0, "b1")], [cancel("customer")], [done(2)]])
    assert ("publish", "note", ["compensating: customer True", False]) in host.stretches[2].events
    assert ("log", 2, "unbooking") in host.stretches[2].events
    assert unpack(host.stretches[-1].output)["error"] == ["Cancelled", "customer"]


@pytest.mark.parametrize(
    "script",
    [
        [[done(1)], [done(2)], [done(4)]],
        [[done(1)], [done(2)]],
    ],
    ids=["completes", "dropped"],
)
def test_patched_markers_recorded_while_the_instance_waits(script: Script) -> None:
    out = run_sticky("ts_patch", None, script)
    assert out["commands"][0] == ["patched", "audit"]
    assert out["commands"][3] == ["patched", "bonus"]
    if out["status"] == "completed":
        assert unpack(out["result"]) == [True, True]


@pytest.mark.parametrize(
    "script",
    [
        [[done(2, "ada")], [fired(5)]],
        [[buffered(2, "ada")], [fired(5)]],
        [[], [done(2, "ada")], [], [fired(5)]],
    ],
    ids=["delivered", "buffered", "idle-steps"],
)
def test_now_and_random_issued_before_a_wait_and_recorded_afterwards(script: Script) -> None:
    host = drive("ts_clock", None, script)
    assert_each_stretch_is_a_replay("ts_clock", host)
    out = unpack(host.stretches[-1].output)
    started, token, who, later, ident, last = unpack(out["result"])
    # each value came from the host of the stretch that issued it, once, and from history after
    clocks = [
        NOW + 1000 * i for i, s in enumerate(host.stretches) for e in s.events if e == ("now",)
    ]
    assert [started, later, last] == clocks
    assert len(set(clocks)) == 3
    assert bytes.fromhex(token) == bytes((11 + k) % 256 for k in range(4))
    assert who == "ada" and len(ident) == 36
    calls = [e for s in host.stretches for e in s.events if e[0] in ("now", "random")]
    assert calls == [("now",), ("random", 4), ("now",), ("random", 16), ("now",)]


@pytest.mark.parametrize(
    "markers", [["now"], ["random"], ["patched"], ["now", "random", "patched"], []]
)
def test_a_marker_recorded_after_the_wait_it_precedes_is_caught_up(markers: list[str]) -> None:
    # A buffered signal is delivered at its wait's seq, so after the refresh the newest entry
    # is the marker of the last now/random/patched issued before the await: a replay from the
    # top reads it on its way there, so the code after the await is not replaying (it logs).
    # Without markers the signal itself is the newest entry, consumed by the await.
    host = drive("ts_markers", markers, [[buffered(0, "ada")]])
    assert_each_stretch_is_a_replay("ts_markers", host)
    after = host.stretches[1].events
    assert after == [("publish", "note", ["go ada", False]), ("log", 1, "go ada")]


def test_continue_as_new_after_waits() -> None:
    out = run_sticky("ts_loop", {"n": 1, "last": None}, [[done(0, "one")], [fired(1)]])
    assert out["status"] == "continue_as_new"
    assert unpack(out["result"]) == {"n": 2, "last": "one"}
    assert [c[0] for c in out["commands"]] == ["activity", "timer"]


def test_a_host_that_keeps_no_instance_gets_its_offer_back_as_the_output() -> None:
    host = Host()
    envelope = History("ts_signal", None).envelope()
    out = amber.run_workflow("ts_signal", envelope, host)
    assert host.offered == [out]
    assert unpack(out) == {"status": "suspended", "commands": [["signal", "approve"]]}


def test_a_query_activation_never_waits() -> None:
    host = Host()
    doc = unpack(History("ts_signal", None).envelope())
    out = amber.run_workflow("ts_signal", pack({**doc, "query": "note"}), host)
    assert host.offered == []
    assert unpack(out)["status"] == "suspended"
    assert ("publish", "note", ["waiting", False]) in host.events


# ---- a host that breaks the contract -------------------------------------------------------


class AnswersHost(Host):
    """Answers each `await_next` with the next of `answers` (then None)."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__()
        self.answers = list(answers)

    def await_next(self, envelope: bytes) -> Any:
        self.offered.append(envelope)
        return self.answers.pop(0) if self.answers else None


def envelope(name: str, **changes: Any) -> bytes:
    doc: dict[str, Any] = {
        "abi": 1,
        "run_id": "run-1",
        "workflow": name,
        "input": pack(None),
        "results": [],
        "recorded": 0,
    }
    doc.update(changes)
    return pack({k: v for k, v in doc.items() if v is not None})


def delta_answer(
    *, start: int = 0, more: list[Any] | None = None, recorded: int = 0, cancel: Any = None
) -> bytes:
    """A delta answer, as a host that keeps the instance may give it."""
    doc = {"abi": 1, "delta": True, "from": start, "more": more or [], "recorded": recorded}
    if cancel is not None:
        doc["cancel"] = cancel
    return pack(doc)


A0 = [0, 1, 0, pack("a")]  # ts_catch_all's results
B1 = [1, 2, 0, pack("b")]
SAGA_BOOKED = [[0, 1, 0, pack("b1")]]


@pytest.mark.parametrize(
    ("name", "answers", "error", "match"),
    [
        ("ts_catch_all", [envelope("ts_catch_all", run_id="run-2")], ValueError, "run 'run-2'"),
        ("ts_catch_all", [envelope("ts_sequential")], ValueError, "not this activation's run"),
        (
            "ts_catch_all",
            [envelope("ts_catch_all", input=pack(1))],
            ValueError,
            "with the same input",
        ),
        (
            "ts_catch_all",
            [envelope("ts_catch_all", results=[A0], recorded=1), envelope("ts_catch_all")],
            ValueError,
            "result of command 0 was",
        ),
        (
            "ts_catch_all",
            [
                envelope("ts_catch_all", results=[A0], recorded=1),
                envelope("ts_catch_all", results=[[0, 1, 0, pack("x")]], recorded=1),
            ],
            ValueError,
            "history only grows",
        ),
        (
            "ts_catch_all",
            [
                envelope("ts_catch_all", results=[A0], recorded=2),
                envelope("ts_catch_all", results=[A0], recorded=1),
            ],
            ValueError,
            "'recorded' went from 2 to 1",
        ),
        (
            "ts_saga",
            [
                envelope("ts_saga", results=SAGA_BOOKED, recorded=1),
                envelope("ts_saga", results=SAGA_BOOKED, recorded=2, cancel=[3, "x"]),
                envelope("ts_saga", results=SAGA_BOOKED, recorded=3),
            ],
            ValueError,
            "the cancel request was",
        ),
        ("ts_catch_all", [envelope("ts_catch_all", query="q")], ValueError, "a query's envelope"),
        ("ts_catch_all", [b"\xc1"], ValueError, "msgpack"),
        ("ts_catch_all", [delta_answer(start=1, more=[A0])], ValueError, "a delta from 1"),
        (
            "ts_catch_all",
            [delta_answer(more=[A0], recorded=1), delta_answer(start=1, more=[A0], recorded=2)],
            ValueError,
            "second result for command 0",
        ),
        (
            "ts_catch_all",
            [delta_answer(more=[A0], recorded=2), delta_answer(start=1, recorded=1)],
            ValueError,
            "'recorded' went from 2 to 1",
        ),
        (
            "ts_saga",
            [
                delta_answer(more=SAGA_BOOKED, recorded=1),
                delta_answer(start=1, recorded=2, cancel=[3, "x"]),
                delta_answer(start=1, recorded=3),
            ],
            ValueError,
            "the cancel request was",
        ),
        (
            "ts_catch_all",
            [delta_answer(more=[[5, 1, 0, pack("a")]], recorded=1)],
            ValueError,
            "beyond 1",
        ),
        ("ts_catch_all", [pack({"abi": 1, "delta": True, "more": []})], ValueError, "'from'"),
        ("ts_catch_all", [envelope("ts_catch_all").decode("latin-1")], TypeError, "returned str"),
    ],
    ids=[
        "other-run",
        "other-workflow",
        "other-input",
        "results-shrank",
        "result-changed",
        "recorded-shrank",
        "cancel-vanished",
        "query",
        "malformed",
        "not-bytes",
        "delta-from-elsewhere",
        "delta-repeats-a-result",
        "delta-recorded-shrank",
        "delta-cancel-vanished",
        "delta-beyond-recorded",
        "delta-without-from",
    ],
)
def test_an_answer_that_is_not_the_runs_grown_history_raises(
    name: str, answers: list[Any], error: type[Exception], match: str
) -> None:
    # ts_catch_all catches Exception around its awaits: the host's bug still escapes.
    host = AnswersHost(answers)
    with pytest.raises(error, match=match):
        amber.run_workflow(name, envelope(name), host)
    assert len(host.offered) == len(answers)
    assert guard_lifted()


def test_a_sound_answer_goes_on_where_the_broken_ones_raise() -> None:
    host = AnswersHost(
        [
            envelope("ts_catch_all", results=[A0], recorded=1),
            envelope("ts_catch_all", results=[A0, B1], recorded=2),
        ]
    )
    out = unpack(amber.run_workflow("ts_catch_all", envelope("ts_catch_all"), host))
    assert out["status"] == "completed" and unpack(out["result"]) == "b"
    assert [len(unpack(o)["commands"]) for o in host.offered] == [1, 2]


def test_deltas_go_on_like_whole_envelopes() -> None:
    host = AnswersHost(
        [delta_answer(more=[A0], recorded=1), delta_answer(start=1, more=[B1], recorded=2)]
    )
    out = unpack(amber.run_workflow("ts_catch_all", envelope("ts_catch_all"), host))
    assert out["status"] == "completed" and unpack(out["result"]) == "b"
    assert [len(unpack(o)["commands"]) for o in host.offered] == [1, 2]


def test_the_guard_is_still_installed_when_the_code_goes_on_after_a_wait() -> None:
    host = AnswersHost([envelope("ts_cheat_later", results=[A0], recorded=1)])
    with pytest.raises(NondeterminismError, match=r"time\.time\(\)"):
        amber.run_workflow("ts_cheat_later", envelope("ts_cheat_later"), host)
    assert guard_lifted()
