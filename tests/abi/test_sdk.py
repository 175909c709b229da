"""The C guest SDK (abi/sdk/amber.h) against ABI v1, through the sample modules and a probe."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest
import wasmtime

from tests.abi._harness import (
    NOW_MS,
    Call,
    Guest,
    act_envelope,
    random_bytes,
    wf_envelope,
)

ORDER = {"order_id": "o-1", "sku": "sku-9", "quantity": 2, "amount_cents": 1250}
pack = msgpack.packb


class Run:
    """A run driven the way the host drives one: replay, append new commands, run activities.

    Runs one pending activity per activation so that every await is exercised step by step.
    """

    def __init__(self, guest: Guest, workflow: str, payload: Any) -> None:
        self.guest, self.workflow, self.payload = guest, workflow, payload
        self.history: list[list[Any]] = []
        self.results: list[list[Any]] = []
        self.activations: list[Call] = []
        self.new_per_activation: list[list[list[Any]]] = []

    def activate(self) -> Call:
        envelope = wf_envelope(self.workflow, self.payload, self.results)
        call = self.guest.call(f"amber_workflow.{self.workflow}", envelope)
        self.activations.append(call)
        commands = call.output["commands"]
        assert commands[: len(self.history)] == self.history, "replay diverged"
        new = commands[len(self.history) :]
        self.new_per_activation.append(new)
        for command in new:
            if command[0] in ("now", "random"):
                self.results.append([len(self.history), len(self.results), 0, command[1]])
            self.history.append(command)
        return call

    def run_next_activity(self) -> None:
        done = {result[0] for result in self.results}
        for index, command in enumerate(self.history):
            if command[0] == "activity" and index not in done:
                key = f"run-1/{index}"
                out = self.guest.call(
                    f"amber_activity.{command[1]}", act_envelope(command[1], command[2], key=key)
                ).output
                if out["status"] == "completed":
                    self.results.append([index, len(self.results), 0, out["result"]])
                else:
                    self.results.append([index, len(self.results), 1, out["error"][:2]])
                return
        raise AssertionError("suspended with nothing pending")

    def finish(self, max_activations: int = 100) -> Call:
        for _ in range(max_activations):
            call = self.activate()
            if not call.suspended:
                return call
            self.run_next_activity()
        raise AssertionError("the run did not finish")

    def logs(self) -> list[tuple[int, str]]:
        return [line for call in self.activations for line in call.logs]


def activity_names(commands: list[list[Any]]) -> list[str]:
    return [c[1] if c[0] == "activity" else c[0] for c in commands]


# --- the orders sample ---------------------------------------------------------------------------


def test_orders_first_activation_records_now_and_schedules_reserve(
    guests: dict[str, Guest],
) -> None:
    call = guests["orders"].call("amber_workflow.orders", wf_envelope("orders", ORDER))
    assert call.suspended
    assert call.output == {
        "status": "suspended",
        "commands": [
            ["now", NOW_MS + 1],
            [
                "activity",
                "reserve_inventory",
                pack({"order_id": "o-1", "sku": "sku-9", "quantity": 2}),
            ],
        ],
    }
    assert call.now_calls == 1
    assert call.logs == [(1, "order placed")]


def test_orders_runs_step_by_step_to_completion(guests: dict[str, Guest]) -> None:
    run = Run(guests["orders"], "orders", ORDER)
    final = run.finish()
    assert final.output["status"] == "completed"
    assert final.result == {
        "order_id": "o-1",
        "status": "shipped",
        "reservation": "rsv-o-1",
        "charge": "ch-o-1-run-1/2",
        "tracking": "trk-o-1",
        "placed_at": NOW_MS + 1,
    }
    assert [activity_names(new) for new in run.new_per_activation] == [
        ["now", "reserve_inventory"],
        ["charge_payment"],
        ["ship_order"],
        ["send_confirmation"],
        [],
    ]
    assert run.history[2] == [
        "activity",
        "charge_payment",
        pack({"order_id": "o-1", "amount_cents": 1250, "card": "visa"}),
    ]
    # Replays neither read the clock again nor repeat log lines.
    assert [call.now_calls for call in run.activations] == [1, 0, 0, 0, 0]
    assert run.logs() == [(1, "order placed"), (1, "order shipped")]


def test_orders_declined_payment_releases_inventory(guests: dict[str, Guest]) -> None:
    run = Run(guests["orders"], "orders", {**ORDER, "card": "declined"})
    final = run.finish()
    assert run.results[2][2:] == [1, ["PaymentDeclined", "the card was declined"]]
    assert activity_names(run.history) == [
        "now",
        "reserve_inventory",
        "charge_payment",
        "release_inventory",
    ]
    assert run.history[3][2] == pack({"order_id": "o-1", "reservation": "rsv-o-1"})
    assert final.result == {
        "order_id": "o-1",
        "status": "payment_declined",
        "reservation": "rsv-o-1",
        "placed_at": NOW_MS + 1,
    }
    assert run.logs() == [(1, "order placed"), (2, "payment declined; releasing inventory")]


def test_orders_fails_on_bad_input_and_on_activity_errors(guests: dict[str, Guest]) -> None:
    call = guests["orders"].call("amber_workflow.orders", wf_envelope("orders", {"sku": 1}))
    assert call.output["status"] == "failed"
    assert call.output["error"][0] == "BadInput"
    assert call.output["commands"] == []

    run = Run(guests["orders"], "orders", {**ORDER, "quantity": 0})
    final = run.finish()
    assert final.output["status"] == "failed"
    assert final.output["error"] == ["InvalidQuantity", "quantity must be > 0"]


def test_reordered_variant_charges_first(guests: dict[str, Guest]) -> None:
    guest = guests["orders_reordered"]
    call = guest.call("amber_workflow.orders", wf_envelope("orders", ORDER))
    assert activity_names(call.output["commands"]) == ["now", "charge_payment"]
    # Replaying a history written by the original code issues a different command at index 1.
    original = Run(guests["orders"], "orders", ORDER)
    original.activate()
    original.run_next_activity()
    replay = guest.call("amber_workflow.orders", wf_envelope("orders", ORDER, original.results))
    assert replay.suspended
    assert replay.output["commands"][1][1] == "charge_payment"
    assert original.history[1][1] == "reserve_inventory"


ACTIVITY_CASES = [
    ("reserve_inventory", {"order_id": "o-1", "sku": "s", "quantity": 1}, 1,
     ("completed", {"reservation": "rsv-o-1"})),
    ("reserve_inventory", {"order_id": "o-1", "sku": "s", "quantity": 0}, 1,
     ("failed", ["InvalidQuantity", "quantity must be > 0", True])),
    ("charge_payment", {"order_id": "o-1", "amount_cents": 5, "card": "visa"}, 1,
     ("completed", {"charge": "ch-o-1-key-1"})),
    ("charge_payment", {"order_id": "o-1", "amount_cents": 5, "card": "declined"}, 1,
     ("failed", ["PaymentDeclined", "the card was declined", True])),
    ("charge_payment", {"order_id": "o-1", "amount_cents": 5, "card": "flaky"}, 1,
     ("failed", ["GatewayTimeout", "the payment gateway timed out", False])),
    ("charge_payment", {"order_id": "o-1", "amount_cents": 5, "card": "flaky"}, 2,
     ("completed", {"charge": "ch-o-1-key-1"})),
    ("ship_order", {"order_id": "o-1", "reservation": "rsv-o-1"}, 1,
     ("completed", {"tracking": "trk-o-1"})),
    ("send_confirmation", {"order_id": "o-1", "tracking": "trk-o-1"}, 1,
     ("completed", {"sent": True})),
    ("release_inventory", {"order_id": "o-1", "reservation": "rsv-o-1"}, 1,
     ("completed", {"released": True})),
    ("ship_order", [1, 2], 1, ("failed", ["BadArgs", "expected {order_id, reservation}", True])),
]  # fmt: skip


@pytest.mark.parametrize(("activity", "args", "attempt", "expected"), ACTIVITY_CASES)
def test_orders_activities(
    guests: dict[str, Guest], activity: str, args: Any, attempt: int, expected: tuple[str, Any]
) -> None:
    call = guests["orders"].call(
        f"amber_activity.{activity}", act_envelope(activity, args, attempt=attempt)
    )
    status, value = expected
    assert call.output["status"] == status
    if status == "completed":
        assert set(call.output) == {"status", "result"}
        assert call.result == value
    else:
        assert call.output == {"status": "failed", "error": value}


def test_activity_logs_are_not_suppressed(guests: dict[str, Guest]) -> None:
    args = {"order_id": "o-1", "tracking": "t"}
    call = guests["orders"].call(
        "amber_activity.send_confirmation", act_envelope("send_confirmation", args)
    )
    assert call.logs == [(1, "confirmation sent")]


# --- the chain sample ----------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "value"), [(3, 10), (0, 5), (4, -40)])
def test_chain(guests: dict[str, Guest], k: int, value: int) -> None:
    run = Run(guests["chain"], "chain", {"k": k, "value": value})
    final = run.finish()
    assert final.result == {"value": value + k}
    assert run.history == [["activity", "add_one", pack({"value": value + i})] for i in range(k)]
    assert len(run.activations) == k + 1


@pytest.mark.parametrize("value", [-(2**63), -129, -33, -1, 126, 127, 255, 2**32 - 1, 2**62])
def test_chain_activity_encodes_ints_like_msgpack(guests: dict[str, Guest], value: int) -> None:
    call = guests["chain"].call("amber_activity.add_one", act_envelope("add_one", {"value": value}))
    assert call.output["result"] == pack({"value": value + 1})


# --- SDK details, through the probe guest -------------------------------------------------------


def test_now_and_random_are_recorded_and_replayed(guests: dict[str, Guest]) -> None:
    probe = guests["probe"]
    first = probe.call("amber_workflow.probe", wf_envelope("probe", None))
    rnd = random_bytes(8)
    echo_args = pack({"r": rnd, "t": NOW_MS + 1})
    assert first.output["commands"] == [
        ["random", rnd],
        ["now", NOW_MS + 1],
        ["activity", "echo", echo_args],
    ]
    assert (first.random_calls, first.now_calls, first.logs) == ([8], 1, [(1, "start")])

    recorded = b"12345678"
    results: list[list[Any]] = [[0, 0, 0, recorded], [1, 1, 0, 42], [2, 2, 0, echo_args]]
    replay = probe.call("amber_workflow.probe", wf_envelope("probe", None, results))
    assert (replay.random_calls, replay.now_calls) == ([], 0)
    assert replay.output["commands"][:2] == [["random", recorded], ["now", 42]]
    assert replay.result == {"r": recorded, "t": 42, "echo": {"r": rnd, "t": NOW_MS + 1}}
    assert replay.logs == [(1, "after echo")]


def test_result_of_the_wrong_kind_suspends_for_the_host_to_report(
    guests: dict[str, Guest],
) -> None:
    # History says command 0 was `now` (an int); the code now asks for random bytes first.
    call = guests["probe"].call("amber_workflow.probe", wf_envelope("probe", None, [[0, 0, 0, 7]]))
    assert call.suspended
    assert [c[0] for c in call.output["commands"]] == ["random"]


def test_random_limits(guests: dict[str, Guest]) -> None:
    probe = guests["probe"]
    ok = probe.call("amber_workflow.rand_len", wf_envelope("rand_len", {"n": 1024}))
    assert ok.result == random_bytes(1024)
    with pytest.raises(wasmtime.Trap) as over:
        probe.call("amber_workflow.rand_len", wf_envelope("rand_len", {"n": 1025}))
    assert over.value.trap_code == wasmtime.TrapCode.UNREACHABLE
    # A replay asking for a different length than history recorded traps.
    results = [[0, 0, 0, b"x" * 8]]
    with pytest.raises(wasmtime.Trap):
        probe.call("amber_workflow.rand_len", wf_envelope("rand_len", {"n": 16}, results))


def test_activity_random_is_split_in_host_sized_chunks(guests: dict[str, Guest]) -> None:
    call = guests["probe"].call("amber_activity.rand", act_envelope("rand", {"n": 3000}))
    assert call.random_calls == [1024, 1024, 952]
    assert call.result == random_bytes(1024) * 2 + random_bytes(952)


@pytest.mark.parametrize("b_first", [False, True])
def test_replay_logs_each_line_once_whatever_the_completion_order(
    guests: dict[str, Guest], b_first: bool
) -> None:
    probe = guests["probe"]
    first = probe.call("amber_workflow.fanout", wf_envelope("fanout", None))
    assert activity_names(first.output["commands"]) == ["echo", "echo"]
    order = [1, 0] if b_first else [0, 1]
    logs = []
    for n in (1, 2):
        results = [[cmd, seq, 0, pack(cmd)] for seq, cmd in enumerate(order[:n])]
        logs += probe.call("amber_workflow.fanout", wf_envelope("fanout", None, results)).logs
    assert sorted(logs) == [(1, "got a"), (1, "got b")]


def test_activity_context_accessors(guests: dict[str, Guest]) -> None:
    call = guests["probe"].call(
        "amber_activity.info", act_envelope("info", {}, attempt=3, key="k9")
    )
    assert call.result == {
        "run_id": "run-1",
        "activity": "info",
        "key": "k9",
        "attempt": 3,
        "deadline_ms": NOW_MS + 60_000,
        "now": NOW_MS + 1,
    }
    assert call.logs == [(0, "info")]


def test_writer_matches_msgpack_python(guests: dict[str, Guest]) -> None:
    ints = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, -1, -32, -33,
            -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]  # fmt: skip
    lens = [0, 31, 32, 255, 256, 65535, 65536]
    sizes = [15, 16, 65535, 65536]

    def fill(n: int) -> bytes:
        return bytes(ord("a") + i % 26 for i in range(n))

    expected: list[Any] = [None, True, False, *ints]
    expected += [fill(n).decode() for n in lens] + [fill(n) for n in lens]
    expected += [[None] * n for n in sizes] + [dict.fromkeys(range(n)) for n in sizes]
    call = guests["probe"].call(
        "amber_activity.write_all", act_envelope("write_all", {}), fuel=500_000_000
    )
    assert call.output["result"] == pack(expected)


def _python_accepts(data: bytes) -> bool | None:
    """msgpack-python's verdict on one complete value; None when it cannot judge."""
    try:
        msgpack.unpackb(
            data,
            raw=True,
            strict_map_key=False,
            object_pairs_hook=list,
            ext_hook=lambda code, payload: None,  # accept every ext type code, as the SDK does
        )
    except ValueError as exc:
        if "timestamp" in str(exc).lower():
            return None  # msgpack-python insists on a valid ext -1 payload; the SDK does not
        return False
    except Exception:
        return False
    return True


def _sample_documents(rng: random.Random) -> list[bytes]:
    def value(depth: int) -> Any:
        kind = rng.randrange(8 if depth < 3 else 5)
        if kind == 0:
            return rng.choice([None, True, False, 1.5])
        if kind == 1:
            return rng.choice([0, 1, -1, 127, 128, -33, 2**40, -(2**40), 2**64 - 1])
        if kind == 2:
            return "s" * rng.choice([0, 5, 31, 32, 300])
        if kind == 3:
            return b"b" * rng.choice([0, 3, 256])
        if kind == 4:
            return msgpack.ExtType(5, b"e" * rng.choice([1, 2, 4, 8, 16, 3]))
        if kind < 7:
            return [value(depth + 1) for _ in range(rng.choice([0, 2, 17]))]
        return {f"k{i}": value(depth + 1) for i in range(rng.choice([0, 2, 16]))}

    documents = []
    for _ in range(60):
        doc = pack(value(0))
        documents.append(doc)
        documents.append(doc[: rng.randrange(len(doc) + 1)])  # truncated
        documents.append(doc + b"\xc0")  # trailing data
        mutated = bytearray(doc)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        documents.append(bytes(mutated))
    return documents


def test_reader_agrees_with_msgpack_python(guests: dict[str, Guest]) -> None:
    probe = guests["probe"]
    documents = _sample_documents(random.Random(1234))
    documents += [b"", b"\xc1", b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff\xc0",
                  b"\xc6\xff\xff\xff\xff", b"\x91" * 500 + b"\xc0", b"\x91" * 500]  # fmt: skip
    judged = 0
    for doc in documents:
        verdict = _python_accepts(doc)
        if verdict is None:
            continue
        judged += 1
        call = probe.call("amber_activity.skip", act_envelope("skip", doc), fuel=5_000_000)
        assert call.result == {"ok": verdict}, doc.hex()
    assert judged > 200


def test_reader_skips_deep_nesting_without_recursion(guests: dict[str, Guest]) -> None:
    doc = b"\x91" * 200_000 + b"\xc0"  # far deeper than the 64 KiB stack could recurse
    call = guests["probe"].call("amber_activity.skip", act_envelope("skip", doc), fuel=50_000_000)
    assert call.result == {"ok": True}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({1: "x", "a": {"k": 1}, "k": [1, 2]}, [1, 2]),
        ({"kk": 1, "k": {"n": None}}, {"n": None}),
        ({"a": 1}, None),
        ([1, "k"], None),
    ],
)
def test_map_find(guests: dict[str, Guest], args: Any, expected: Any) -> None:
    call = guests["probe"].call("amber_activity.lookup", act_envelope("lookup", args))
    assert call.result == expected


# --- malformed input never hangs the guest -------------------------------------------------------


def _trap_or_output(guest: Guest, export: str, envelope: bytes) -> str:
    try:
        call = guest.call(export, envelope, fuel=5_000_000)
    except wasmtime.Trap as trap:
        assert trap.trap_code == wasmtime.TrapCode.UNREACHABLE, trap
        return "trap"
    status: str = call.output["status"]
    assert status in {"suspended", "completed", "failed"}
    return status


def test_truncated_envelopes_trap_cleanly(guests: dict[str, Guest]) -> None:
    results = [[0, 0, 0, NOW_MS], [1, 1, 0, pack({"reservation": "rsv-o-1"})]]
    workflow_envelope = wf_envelope("orders", ORDER, results)
    for cut in range(len(workflow_envelope)):
        outcome = _trap_or_output(
            guests["orders"], "amber_workflow.orders", workflow_envelope[:cut]
        )
        assert outcome == "trap", cut
    activity_envelope = act_envelope("ship_order", {"order_id": "o", "reservation": "r"})
    for cut in range(len(activity_envelope)):
        export = "amber_activity.ship_order"
        assert _trap_or_output(guests["orders"], export, activity_envelope[:cut]) == "trap", cut


def test_corrupted_envelopes_never_hang_or_fault(guests: dict[str, Guest]) -> None:
    rng = random.Random(99)
    results = [[0, 0, 0, NOW_MS], [1, 1, 0, pack({"reservation": "rsv-o-1"})]]
    envelope = wf_envelope("orders", ORDER, results)
    outcomes = set()
    for _ in range(300):
        corrupted = bytearray(envelope)
        corrupted[rng.randrange(len(corrupted))] = rng.randrange(256)
        outcomes.add(_trap_or_output(guests["orders"], "amber_workflow.orders", bytes(corrupted)))
    for _ in range(100):
        junk = rng.randbytes(rng.randrange(64))
        outcomes.add(_trap_or_output(guests["orders"], "amber_workflow.orders", junk))
    assert "trap" in outcomes and "suspended" in outcomes


def test_truncated_user_input_fails_the_workflow_cleanly(guests: dict[str, Guest]) -> None:
    envelope = msgpack.packb(
        {"abi": 1, "run_id": "r", "workflow": "orders", "input": pack(ORDER)[:-3], "results": []}
    )
    call = guests["orders"].call("amber_workflow.orders", envelope)
    assert call.output["status"] == "failed"
    assert call.output["error"][0] == "BadInput"
