"""The Python guest SDK (abi/sdk/python/amber_sdk), run in host CPython against a fake host.

Input envelopes are built and output envelopes read with the real `msgpack` library, so these
tests check the SDK's own codec and the bytes the host's replay matcher compares. Where the C
SDK fixes a byte layout (the key order of activity options, retry policies, child options,
approval policies and HTTP requests), the expected order is read from the C headers themselves.

The test workflows and activities are registered in the process-wide registry at import (names
start with `t_`); tests about registration itself use `_registry.isolated()`.
"""

from __future__ import annotations

import ast
import datetime
import logging
import math
import os
import random
import re
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "abi" / "sdk" / "python"
sys.path.insert(0, str(SDK))

import amber_sdk as amber  # noqa: E402
from amber_sdk import (  # noqa: E402
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    HttpError,
    NondeterminismError,
    ParentClosePolicy,
    RetryPolicy,
    TimerCancelledError,
    _envelopes,
    _msgpack,
    _registry,
    activity,
    workflow,
)

NOW = 1_700_000_000_000


# ---- helpers -------------------------------------------------------------------------------


def pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def ordered(data: bytes) -> Any:
    """Decode with every map as a list of (key, value) pairs, to see key order."""
    return msgpack.unpackb(data, raw=False, object_pairs_hook=list)


def ok(cmd: int, seq: int, value: Any = None) -> list[Any]:
    """A recorded ok result whose value is a payload (bin holding msgpack)."""
    return [cmd, seq, 0, pack(value)]


def raw_ok(cmd: int, seq: int, value: Any) -> list[Any]:
    """A recorded ok result with a bare value (now: int, random: bin, timer: nil, patched)."""
    return [cmd, seq, 0, value]


def err(cmd: int, seq: int, type: str, message: str) -> list[Any]:
    return [cmd, seq, 1, [type, message]]


def act(name: str, args: Any = None, options: dict[str, Any] | None = None) -> list[Any]:
    """An activity command as the SDK must issue it."""
    return ["activity", name, pack(args)] + ([options] if options is not None else [])


class FakeHost:
    """The host imports, recorded."""

    def __init__(
        self,
        *,
        clock: int = NOW,
        stop_after: int | None = None,
        cancel: bool = False,
        http_response: Any = None,
    ) -> None:
        self.clock = clock
        self.stop_after = stop_after
        self.cancel = cancel
        self.http_response = http_response
        self.now_calls = 0
        self.random_calls: list[int] = []
        self.logs: list[tuple[int, str]] = []
        self.published: list[tuple[str, bytes]] = []
        self.heartbeats: list[bytes] = []
        self.requests: list[bytes] = []
        self.sleeps: list[int] = []

    def now(self) -> int:
        self.now_calls += 1
        return self.clock

    def random(self, n: int) -> bytes:
        self.random_calls.append(n)
        return bytes((0xA0 + i) % 256 for i in range(n))

    def log(self, level: int, line: str) -> None:
        self.logs.append((level, line))

    def publish(self, name: str, value: bytes) -> None:
        self.published.append((name, value))

    def heartbeat(self, details: bytes) -> bool:
        self.heartbeats.append(details)
        return self.stop_after is not None and len(self.heartbeats) >= self.stop_after

    def cancel_requested(self) -> bool:
        return self.cancel

    def http_request(self, request: bytes) -> bytes:
        self.requests.append(request)
        return pack(self.http_response)

    def sleep(self, ms: int) -> None:
        self.sleeps.append(ms)

    def await_next(self, envelope: bytes) -> bytes | None:
        return None  # keeps no instance: every activation replays from the top


class ReplayHost(FakeHost):
    """A host for activations that must take every value from history."""

    def now(self) -> int:
        raise AssertionError("a replayed now must not read the host's clock")

    def random(self, n: int) -> bytes:
        raise AssertionError("a replayed random must not draw from the host")


def wf_envelope(
    name: str,
    input: Any = None,
    *,
    results: list[list[Any]] | tuple[()] = (),
    recorded: int | None = None,
    send_recorded: bool = True,
    cancel: tuple[int, str] | None = None,
    query: str | None = None,
    run_id: str = "run-1",
    workflow_id: str | None = None,
) -> bytes:
    doc: dict[str, Any] = {
        "abi": 1,
        "run_id": run_id,
        "workflow": name,
        "input": pack(input),
        "results": list(results),
    }
    if send_recorded:
        doc["recorded"] = (
            recorded if recorded is not None else max((r[0] + 1 for r in results), default=0)
        )
    if cancel is not None:
        doc["cancel"] = list(cancel)
    if query is not None:
        doc["query"] = query
    if workflow_id is not None:
        doc["workflow_id"] = workflow_id
    return pack(doc)


def run_raw(name: str, input: Any = None, host: FakeHost | None = None, **kw: Any) -> bytes:
    return amber.run_workflow(name, wf_envelope(name, input, **kw), host or FakeHost())


def run(name: str, input: Any = None, host: FakeHost | None = None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = unpack(run_raw(name, input, host, **kw))
    return out


def act_envelope(
    name: str,
    args: Any = None,
    *,
    attempt: int = 1,
    details: Any = None,
) -> bytes:
    doc: dict[str, Any] = {
        "abi": 1,
        "run_id": "run-1",
        "activity": name,
        "args": pack(args),
        "attempt": attempt,
        "idempotency_key": "run-1/3",
        "deadline_ms": NOW + 30_000,
    }
    if details is not None:
        doc["heartbeat_details"] = pack(details)
    return pack(doc)


def run_act(name: str, args: Any = None, host: FakeHost | None = None, **kw: Any) -> Any:
    return unpack(amber.run_activity(name, act_envelope(name, args, **kw), host or FakeHost()))


def c_key_order(header: str, definition: str) -> list[str]:
    """The string keys a C SDK function writes, in the order it writes them."""
    text = (ROOT / "abi" / "sdk" / header).read_text()
    start = text.index(definition)
    body = text[start : text.index("\n}\n", start)]
    return re.findall(r'(?:amber__write_kv_int|amber_write_str)\(&?w, "([a-z_]+)"', body)


# ---- the msgpack codec ---------------------------------------------------------------------

SAMPLES: list[Any] = [
    None,
    True,
    False,
    *(0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1),
    *(-1, -31, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)),
    *(0.0, -0.0, 1.5, -2.25, 1e300, math.inf, -math.inf, 0.1),
    *("", "a", "x" * 31, "x" * 32, "x" * 255, "x" * 256, "x" * 65535, "x" * 65536, "héllo ☃ 😀"),
    *(b"", b"\x00", b"y" * 255, b"y" * 256, b"y" * 65535, b"y" * 65536),
    *([], [1], [0] * 15, [0] * 16, [0] * 65535, [0] * 65536),
    *({}, {"a": 1}, {f"k{i}": i for i in range(15)}, {f"k{i}": i for i in range(16)}),
    {f"k{i}": i for i in range(65536)},
    {"nested": {"list": [1, "two", b"three", None, [True, {"deep": -5}]]}, "f": 2.5},
    {"é": "non-ASCII key"},
]
OTHER_KEYS = [
    {1: "int key", -2: "negative"},
    {None: "nil key", True: "bool key", b"k": "bin key", "é": "non-ASCII key"},
]
"""Maps the SDK reads (a C guest may write them) but never writes: the host holds payloads to
JSON's string keys."""


def same(a: Any, b: Any) -> bool:
    """Equal, with equal types all the way down (bytes is not str, bool is not int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: repr(v)[:40])
def test_msgpack_matches_the_msgpack_library_both_ways(value: Any) -> None:
    assert _msgpack.encode(value) == pack(value)
    assert same(_msgpack.decode(pack(value)), value)


@pytest.mark.parametrize("value", OTHER_KEYS, ids=lambda v: repr(v)[:40])
def test_msgpack_reads_maps_with_other_keys_but_writes_only_string_keys(value: Any) -> None:
    assert same(_msgpack.decode(pack(value)), value)
    with pytest.raises(TypeError, match="a dict key must be a str"):
        _msgpack.encode(value)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["nil", "bool", "int", "float", "str", "bin"] + (["list", "dict"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "nil":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        bits = rng.choice([5, 7, 8, 15, 16, 31, 32, 63])
        return rng.randrange(-(2**bits), 2**bits) if bits < 63 else rng.randrange(-(2**63), 2**64)
    if kind == "float":
        return rng.uniform(-1e9, 1e9)
    if kind == "str":
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)]))
            for _ in range(rng.choice([0, 3, 31, 32, 300]))
        )
    if kind == "bin":
        return rng.randbytes(rng.choice([0, 1, 255, 256, 70000]))
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.choice([0, 2, 15, 16]))]
    return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.choice([0, 2, 15, 16]))}


def test_msgpack_matches_the_msgpack_library_on_random_documents() -> None:
    rng = random.Random(20240611)
    for _ in range(300):
        value = _random_value(rng)
        assert _msgpack.encode(value) == pack(value)
        assert same(_msgpack.decode(pack(value)), value)


def test_msgpack_reads_float32_and_non_minimal_encodings() -> None:
    assert _msgpack.decode(msgpack.packb(1.5, use_single_float=True)) == 1.5
    assert _msgpack.decode(b"\xcd\x00\x01") == 1  # uint16 holding 1
    assert _msgpack.decode(b"\xd3\xff\xff\xff\xff\xff\xff\xff\xff") == -1
    assert _msgpack.decode(b"\xd9\x01a") == "a"  # str8 of length 1
    assert _msgpack.decode(b"\xdc\x00\x01\x01") == [1]
    assert _msgpack.decode(b"\xde\x00\x01\xa1k\xc0") == {"k": None}


def test_msgpack_encodes_tuples_as_arrays_and_byte_likes_as_bin() -> None:
    assert _msgpack.encode((1, "a")) == pack([1, "a"])
    assert _msgpack.encode(bytearray(b"xy")) == pack(b"xy")
    assert _msgpack.encode(memoryview(b"xy")) == pack(b"xy")
    assert _msgpack.encode({"b": 1, "a": 2}) == b"\x82\xa1b\x01\xa1a\x02"  # insertion order


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02", "trailing"),
        (b"", "truncated"),
        (b"\xcd\x00", "truncated"),
        (b"\xa3ab", "truncated"),
        (b"\x92\x01", "truncated"),
        (b"\xdd\xff\xff\xff\xff", "truncated"),  # a count the input cannot hold
        (b"\xc1", "never used"),
        (b"\xd4\x01\x00", "ext"),
        (b"\xc7\x01\x05\x00", "ext"),
        (b"\xa1\xff", "UTF-8"),
        (b"\x81\xa1\xff\x01", "UTF-8"),  # a map key read on the map's own fast path
        (b"\x81\xa3ab", "truncated"),  # a map key cut short
        (b"\x81\xc4\x05ab", "truncated"),  # a bin8 cut short
        (b"\x81\xc1\x01", "never used"),
        (b"\x82\xa1a\x01\xa1a\x02", "repeats"),
        (b"\x81\x90\x01", "map key"),
        (b"\x91" * 200 + b"\xc0", "deeper"),
    ],
)
def test_msgpack_refuses_malformed_input(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _msgpack.decode(data)


@pytest.mark.parametrize("status", list(_envelopes.WorkflowStatus))
def test_an_output_is_what_msgpack_writes_for_its_document(status: Any) -> None:
    """The output's bytes, written in parts (a fixed head, the commands encoded once), are
    msgpack's for the whole document, with and without a result or an error."""
    from amber_sdk import _commands

    issued = [_commands.activity("add", pack({"n": i}), None) for i in range(20)]
    wire = [[str(c.kind), *c.fields] for c in issued]
    packed = _msgpack.PackedArray()
    for n in (0, 1, 16, 20):  # the array's header grows past 15 items
        out = _envelopes.workflow_output(status, issued[:n], packed=packed)
        assert out == pack({"status": str(status), "commands": wire[:n]})
    done = _envelopes.workflow_output(status, issued, result=pack(1), error=("E", "m"))
    assert done == pack(
        {"status": str(status), "commands": wire, "result": pack(1), "error": ["E", "m"]}
    )


def _read_next(data: bytes, *, fast: bool) -> tuple[str, Any]:
    """`parse_next_input`'s answer (or its refusal), with or without its host-layout path."""
    memo = _envelopes.results_memo()
    original = _envelopes._host_delta
    if not fast:
        _envelopes._host_delta = lambda data: None  # type: ignore[assignment]
    try:
        return "ok", _envelopes.parse_next_input(data, memo)
    except ValueError as exc:
        return "refused", str(exc)
    finally:
        _envelopes._host_delta = original  # type: ignore[assignment]


def test_a_delta_in_the_host_s_layout_reads_as_the_whole_document_path_reads_it() -> None:
    """A live step reads the host's delta by its layout (keys compared, values decoded): on
    deltas of every shape, and on each of them cut short or with a byte changed, it answers or
    refuses exactly as decoding the whole document does."""
    rng = random.Random(20261204)
    values: list[Any] = [pack({"value": 1}), pack("x" * 300), None, ["Boom", "it broke"], b""]
    deltas = []
    for _ in range(60):
        doc: dict[str, Any] = {
            "abi": 1,
            "delta": True,
            "from": rng.choice([0, 1, 127, 128, 70_000]),
            "more": [
                [rng.randrange(0, 300), rng.randrange(0, 70_000), rng.choice([0, 1]), v]
                for v in rng.sample(values, rng.randrange(0, 4))
            ],
            "recorded": rng.choice([0, 5, 300, 1 << 24]),
        }
        if rng.random() < 0.3:
            doc["cancel"] = [rng.randrange(0, 500), "stop"]
        deltas.append(pack(doc))
    assert all(_envelopes._host_delta(data) is not None for data in deltas)  # the fast path
    # Deltas in another layout: the whole-document path reads them.
    deltas.append(pack({"abi": 1, "delta": True, "from": 0, "more": [], "recorded": 0, "x": 1}))
    deltas.append(pack({"delta": True, "abi": 1, "from": 0, "more": [], "recorded": 0}))
    assert _envelopes._host_delta(deltas[-1]) is None
    for data in deltas:
        variants = [data, *(data[:end] for end in range(len(data)))]
        for at in range(len(data)):
            for byte in (0x00, 0xC1, 0xFF, data[at] ^ 0x01):
                variants.append(data[:at] + bytes([byte]) + data[at + 1 :])
        for variant in variants:
            assert _read_next(variant, fast=True) == _read_next(variant, fast=False), variant


def test_msgpack_refuses_every_truncation_of_a_document() -> None:
    doc = pack({"a": [1, 2.5, "três", b"\x00" * 300, {"n": -(2**40)}], "b": None})
    for end in range(len(doc)):
        with pytest.raises(ValueError, match="truncated"):
            _msgpack.decode(doc[:end])


def test_msgpack_decoding_with_a_memo_reuses_only_items_with_the_same_bytes() -> None:
    converted: list[Any] = []

    def convert(item: Any) -> Any:
        converted.append(item)
        return [item]  # what a caller makes of an item (the SDK: a checked result)

    memo = _msgpack.ItemMemo("r", convert)
    rng = random.Random(7)
    items: list[Any] = []
    for step in range(40):
        changed = step % 9 == 8
        if changed:  # an earlier item changes: it is read again, not taken from the memo
            items[rng.randrange(len(items))] = _random_value(rng, 2)
        items.append(_random_value(rng, 2))
        doc = {"a": step, "r": list(items), "z": {"r": [1]}}  # a nested "r" is left alone
        converted.clear()
        decoded = _msgpack.decode_reusing(pack(doc), memo)
        assert same(decoded, {**doc, "r": [[item] for item in items]})
        assert 1 <= len(converted) <= 2 if changed else len(converted) == 1  # what is new only
    assert _msgpack.decode_reusing(pack({"r": 5}), memo) == {"r": 5}  # not an array: as it is
    with pytest.raises(ValueError, match="truncated"):
        _msgpack.decode_reusing(pack({"r": [1, 2]})[:-1], memo)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**64, ValueError),
        (-(2**63) - 1, ValueError),
        ("\ud800", ValueError),
        ({1, 2}, TypeError),
        (object(), TypeError),
        ({1: "a"}, TypeError),  # the host reads string keys only (it showed these as bytes)
        ({"ok": {(1, 2): 3}}, TypeError),
        ({b"k": 1}, TypeError),
    ],
)
def test_msgpack_refuses_what_it_cannot_encode(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        _msgpack.encode(value)


def test_msgpack_refuses_to_encode_deep_nesting() -> None:
    deep: list[Any] = []
    for _ in range(_msgpack.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper"):
        _msgpack.encode(deep)


def test_the_sdk_imports_only_the_standard_library() -> None:
    for path in sorted((SDK / "amber_sdk").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top == "__future__" or top in sys.stdlib_module_names, (path.name, name)


# ---- workflows under test ------------------------------------------------------------------


@workflow.defn(name="t_greet")
def t_greet(input: Any) -> Any:
    greeting = workflow.execute_activity("hello", {"name": input["name"], "lang": "en"})
    return {"greeting": greeting, "n": 1}


@workflow.defn(name="t_options")
def t_options(input: Any) -> None:
    kwargs = dict(input)
    if "retry" in kwargs:
        kwargs["retry_policy"] = RetryPolicy(**kwargs.pop("retry"))
    for key in [k for k in kwargs if k.endswith("_days")]:
        kwargs[key.removesuffix("_days")] = datetime.timedelta(days=kwargs.pop(key))
    workflow.start_activity("book", "args", **kwargs)  # never awaited: fire and forget


@workflow.defn(name="t_clock")
def t_clock() -> Any:
    ms = workflow.now_ms()
    moment = workflow.now()
    fraction = workflow.random()
    raw = workflow.random_bytes(4)
    ident = workflow.uuid4()
    facts = {
        "ms": ms,
        "iso": moment.isoformat(),
        "is_datetime": isinstance(moment, datetime.datetime),
        "fraction": fraction,
        "raw": raw,
        "uuid": ident,
    }
    workflow.execute_activity("record", facts)
    return facts


@workflow.defn(name="t_patch")
def t_patch() -> bool:
    audited = workflow.patched("add-audit")
    if audited:
        workflow.execute_activity("audit")
    workflow.execute_activity("welcome")
    return audited


def _publish_cancel_state(stage: str) -> None:
    workflow.set_query(
        stage, {"requested": workflow.cancel_requested(), "reason": workflow.cancel_reason()}
    )


@workflow.defn(name="t_saga")
def t_saga(order: Any) -> str:
    _publish_cancel_state("before")
    book = workflow.start_activity("book", order)
    try:
        booking = book.result()
    except CancelledError:
        workflow.logger.info("compensating")
        _publish_cancel_state("after")
        try:  # the activity may have run anyway: await its own outcome, then undo it
            outcome = book.result()
        except ActivityError:
            outcome = None
        if outcome is not None:
            workflow.execute_activity("unbook", outcome)
        raise
    try:
        workflow.execute_activity("ship", booking)
    except CancelledError:
        workflow.execute_activity("unbook", booking)
        raise CancelledError("cancelled while shipping") from None
    return "shipped"


@workflow.defn(name="t_race")
def t_race(input: Any) -> Any:
    timer = workflow.start_timer(datetime.timedelta(days=input["days"]))
    signal = workflow.start_wait_signal("delivered")
    try:
        first = workflow.wait_any([timer, signal])
    except CancelledError:
        timer.cancel()
        raise
    if first == 1:
        timer.cancel()
        return {"signed_by": signal.result()["signed_by"]}
    return "late"


@workflow.defn(name="t_timer_cancel")
def t_timer_cancel() -> str:
    timer = workflow.start_timer(10)
    timer.cancel()
    try:
        timer.result()
    except TimerCancelledError:
        return "cancelled"
    return "fired"


@workflow.defn(name="t_sleep")
def t_sleep() -> str:
    workflow.sleep(1.5)
    return "rested"


@workflow.defn(name="t_signal")
def t_signal() -> Any:
    return [workflow.wait_signal("approve"), workflow.wait_signal("approve")]


@workflow.defn(name="t_child")
def t_child(input: Any) -> Any:
    first = workflow.start_child_workflow(
        "t_greet", {"name": "kid"}, id=input["id"] + "-1", parent_close_policy="cancel"
    )
    workflow.start_child_workflow(t_greet, {"name": "kid2"}, id=input["id"] + "-2")
    workflow.start_child_workflow(
        "t_greet",
        None,
        id=input["id"] + "-3",
        parent_close_policy=ParentClosePolicy.ABANDON,
        version="sha256:abc",
    )
    return first.result()


@workflow.defn(name="t_expense")
def t_expense(input: Any) -> Any:
    approval = workflow.start_approval(
        f"Refund {input['amount']} EUR",
        expires=datetime.timedelta(days=2),
        approvers=["alice", "bob"],
        roles=["finance"],
        required=2,
    )
    if input.get("prepare_first"):
        workflow.execute_activity("prepare", input)
    result = approval.result()
    return {
        "outcome": result.outcome.value,
        "approved": result.approved,
        "decisions": [[d.approver, d.approve, d.comment, d.at_ms] for d in result.decisions],
    }


@workflow.defn(name="t_loop")
def t_loop(input: Any) -> None:
    workflow.execute_activity("step", input["n"])
    workflow.continue_as_new({"n": input["n"] + 1})


@workflow.defn(name="t_status")
def t_status() -> str:
    info = workflow.info()
    workflow.set_query(
        "info",
        {"run": info.run_id, "id": info.workflow_id, "type": info.workflow_type, "q": info.query},
    )
    workflow.set_query("status", {"stage": 1})
    workflow.execute_activity("a")
    workflow.set_query("status", {"stage": 2})
    workflow.execute_activity("b")
    return "done"


@workflow.defn(name="t_big_query")
def t_big_query() -> None:
    workflow.set_query("big", b"x" * (workflow.PUBLISH_MAX + 1))


@workflow.defn(name="t_logs")
def t_logs() -> str:
    workflow.logger.info("start %s", "now")
    workflow.execute_activity("a")
    workflow.logger.warning("after a")
    workflow.execute_activity("b")
    workflow.logger.error("end")
    return "ok"


@workflow.defn(name="t_fanout")
def t_fanout() -> Any:
    return workflow.wait_all([workflow.start_activity("work", i) for i in range(3)])


@workflow.defn(name="t_fail")
def t_fail(input: Any) -> None:
    if input == "typed":
        raise ApplicationError("the order is empty", type="BadInput")
    raise ApplicationError("plain")


@workflow.defn(name="t_bug")
def t_bug() -> None:
    _ = {}["missing"]


@workflow.defn(name="t_swallow")
def t_swallow(how: str) -> str:
    try:
        if how == "finally":
            try:
                workflow.execute_activity("a")
            finally:
                workflow.logger.info("cleanup")
                workflow.execute_activity("never")
        if how == "continue":
            workflow.continue_as_new("next")
        workflow.execute_activity("a")
    except Exception:
        return "caught by except Exception"
    except BaseException:
        if how in ("base", "continue"):
            return "swallowed"
        raise
    return "done"


CHEATS: dict[str, tuple[Callable[[], Any], str]] = {
    "time.time": (lambda: time.time(), "time.time() in workflow code: use workflow.now()"),
    "time.time_ns": (lambda: time.time_ns(), "use workflow.now_ms()"),
    "time.monotonic": (lambda: time.monotonic(), "use workflow.now()"),
    "time.monotonic_ns": (lambda: time.monotonic_ns(), "use workflow.now_ms()"),
    "time.perf_counter": (lambda: time.perf_counter(), "use workflow.now()"),
    "time.perf_counter_ns": (lambda: time.perf_counter_ns(), "use workflow.now_ms()"),
    "time.sleep": (lambda: time.sleep(0), "time.sleep() in workflow code: use workflow.sleep()"),
    "datetime.now": (lambda: datetime.datetime.now(), "use workflow.now()"),
    "datetime.now_tz": (lambda: datetime.datetime.now(datetime.UTC), "use workflow.now()"),
    "datetime.utcnow": (lambda: datetime.datetime.utcnow(), "use workflow.now()"),
    "datetime.today": (lambda: datetime.datetime.today(), "use workflow.now()"),
    "date.today": (lambda: datetime.date.today(), "use workflow.now().date()"),
    "random.random": (lambda: random.random(), "random.random() in workflow code"),
    "random.randint": (lambda: random.randint(1, 6), "use workflow.new_random().randint()"),
    "random.choice": (lambda: random.choice("ab"), "use workflow.new_random().choice()"),
    "random.shuffle": (lambda: random.shuffle([1, 2]), "use workflow.new_random().shuffle()"),
    "random.uniform": (lambda: random.uniform(0, 1), "use workflow.new_random().uniform()"),
    "random.randrange": (lambda: random.randrange(10), "use workflow.new_random().randrange()"),
    "random.getrandbits": (lambda: random.getrandbits(8), "use workflow.random_bytes()"),
    "os.urandom": (lambda: os.urandom(4), "os.urandom() in workflow code"),
    "uuid.uuid4": (lambda: uuid.uuid4(), "uuid.uuid4() in workflow code: use workflow.uuid4()"),
}


@workflow.defn(name="t_cheat")
def t_cheat(which: str) -> Any:
    return str(CHEATS[which][0]())


@workflow.defn(name="t_allowed")
def t_allowed() -> Any:
    logging.getLogger("amber.test").warning("stdlib logging timestamps its records")
    made = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)
    return {
        "constructed": made.isoformat(),
        "isinstance": isinstance(made, datetime.datetime),
        "issubclass": issubclass(datetime.datetime, datetime.date),
        "parsed": datetime.datetime.fromisoformat("2024-01-02T03:04:05").hour,
        "seeded": random.Random(42).random(),
    }


# (module, attribute, original) for everything the guard patches, captured before any test.
GUARDED = [
    (module, attr, getattr(module, attr))
    for module, attrs in (
        (
            time,
            (
                "time",
                "time_ns",
                "monotonic",
                "monotonic_ns",
                "perf_counter",
                "perf_counter_ns",
                "sleep",
            ),
        ),
        (
            random,
            (
                "random",
                "randint",
                "choice",
                "choices",
                "sample",
                "shuffle",
                "uniform",
                "randrange",
                "getrandbits",
            ),
        ),
        (os, ("urandom",)),
        (uuid, ("uuid4",)),
        (datetime, ("datetime", "date")),
    )
    for attr in attrs
]


def assert_guard_restored() -> None:
    for module, attr, original in GUARDED:
        assert getattr(module, attr) is original, f"{module.__name__}.{attr} was not restored"


# ---- workflows: activities and replay ------------------------------------------------------


def test_an_activity_suspends_the_workflow_with_the_exact_command_bytes() -> None:
    out = run_raw("t_greet", {"name": "ada"})
    args = _msgpack.encode({"name": "ada", "lang": "en"})
    assert args == b"\x82\xa4name\xa3ada\xa4lang\xa2en"  # insertion order, as written
    assert out == pack({"status": "suspended", "commands": [["activity", "hello", args]]})


def test_replay_with_the_result_completes() -> None:
    out = run_raw("t_greet", {"name": "ada"}, results=[ok(0, 1, "hi ada")])
    assert out == pack(
        {
            "status": "completed",
            "commands": [act("hello", {"name": "ada", "lang": "en"})],
            "result": pack({"greeting": "hi ada", "n": 1}),
        }
    )


def test_an_activity_error_fails_the_run_with_its_type_and_message() -> None:
    out = run("t_greet", {"name": "ada"}, results=[err(0, 1, "amber.timeout.start_to_close", "x")])
    assert out == {
        "status": "failed",
        "commands": [act("hello", {"name": "ada", "lang": "en"})],
        "error": ["amber.timeout.start_to_close", "x"],
    }


def test_a_result_of_the_wrong_kind_suspends_so_the_host_reports_nondeterminism() -> None:
    # Mirrors amber__wf_resolve: history holds a `now` (an int) where the code awaits an activity.
    out = run("t_greet", {"name": "ada"}, results=[raw_ok(0, 1, NOW)])
    assert out["status"] == "suspended"
    assert out["commands"] == [act("hello", {"name": "ada", "lang": "en"})]


def test_wait_all_awaits_each_handle_in_order() -> None:
    assert run("t_fanout")["commands"] == [act("work", i) for i in range(3)]
    partial = run("t_fanout", results=[ok(0, 1, "w0"), ok(2, 2, "w2")], recorded=3)
    assert partial["status"] == "suspended"
    done = run("t_fanout", results=[ok(2, 1, "w2"), ok(0, 2, "w0"), ok(1, 3, "w1")])
    assert unpack(done["result"]) == ["w0", "w1", "w2"]


# ---- activity options ----------------------------------------------------------------------


def test_no_options_is_the_three_element_command() -> None:
    out = run("t_options", {})
    assert out == {"status": "completed", "commands": [act("book", "args")], "result": pack(None)}


def test_the_options_key_order_is_the_c_sdk_order() -> None:
    option_keys = c_key_order("amber_commands.h", "amber_bytes amber_activity_options_encode(")
    retry_keys = c_key_order("amber_commands.h", "void amber__write_retry(")
    # The order amber_commands.h writes (and the host's own ActivityOptions/RetryOptions use).
    assert option_keys == [
        "start_to_close_ms",
        "schedule_to_close_ms",
        "schedule_to_start_ms",
        "heartbeat_ms",
        "retry",
    ]
    assert retry_keys == [
        "initial_ms",
        "coefficient",
        "max_interval_ms",
        "max_attempts",
        "non_retryable",
    ]
    given = {  # deliberately in another order than the one written
        "retry": {
            "non_retryable_error_types": ["InvalidAddress", "Fraud"],
            "maximum_attempts": 10,
            "maximum_interval": 60,
            "backoff_coefficient": 1.5,
            "initial_interval": 2,
        },
        "heartbeat_timeout": 10,
        "schedule_to_start_timeout": 5,
        "schedule_to_close_timeout": 120,
        "start_to_close_timeout": 30,
    }
    raw = run_raw("t_options", given)
    command = ordered(raw)[1][1][0]
    options = command[3]
    assert [key for key, _ in options] == option_keys
    retry = dict(options)["retry"]
    assert [key for key, _ in retry] == retry_keys
    expected = {
        "start_to_close_ms": 30_000,
        "schedule_to_close_ms": 120_000,
        "schedule_to_start_ms": 5_000,
        "heartbeat_ms": 10_000,
        "retry": {
            "initial_ms": 2_000,
            "coefficient": 1.5,
            "max_interval_ms": 60_000,
            "max_attempts": 10,
            "non_retryable": ["InvalidAddress", "Fraud"],
        },
    }
    assert list(expected) == option_keys
    assert unpack(raw)["commands"] == [act("book", "args", expected)]
    assert pack(["activity", "book", pack("args"), expected]) in raw  # byte for byte


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ({"start_to_close_timeout": 30}, {"start_to_close_ms": 30_000}),
        ({"start_to_close_timeout": 0.25}, {"start_to_close_ms": 250}),
        ({"heartbeat_timeout": 0.0015}, {"heartbeat_ms": 2}),
        ({"schedule_to_close_timeout_days": 1}, {"schedule_to_close_ms": 86_400_000}),
        ({"start_to_close_timeout": None}, None),
        ({"retry": {"maximum_attempts": 1}}, {"retry": {"max_attempts": 1}}),
        ({"retry": {"maximum_attempts": 0}}, {"retry": {"max_attempts": 0}}),  # unlimited
        ({"retry": {}}, {"retry": {}}),
        ({"retry": {"backoff_coefficient": 2}}, {"retry": {"coefficient": 2.0}}),
        ({"retry": {"non_retryable_error_types": []}}, {"retry": {}}),
        (
            {
                "retry": {
                    "initial_interval": 1,
                    "backoff_coefficient": 2.0,
                    "maximum_interval": None,
                    "maximum_attempts": 5,
                    "non_retryable_error_types": [],
                }
            },
            {"retry": {"initial_ms": 1000, "coefficient": 2.0, "max_attempts": 5}},
        ),
    ],
)
def test_only_the_options_given_are_written(given: dict[str, Any], written: Any) -> None:
    raw = run_raw("t_options", given)
    assert unpack(raw)["commands"] == [act("book", "args", written)]
    if written and "retry" in written and "coefficient" in written["retry"]:
        assert b"\xabcoefficient\xcb" in raw  # always a float64, as amber_write_double writes


@pytest.mark.parametrize(
    "given",
    [
        {"start_to_close_timeout": -1},
        {"start_to_close_timeout": 0},
        {"start_to_close_timeout": "30"},
        {"retry": {"backoff_coefficient": 0.5}},
        {"retry": {"maximum_attempts": -1}},
        {"retry": {"non_retryable_error_types": "Fraud"}},
    ],
)
def test_invalid_options_are_a_bug_in_the_workflow(given: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        run_raw("t_options", given)


# ---- now and random ------------------------------------------------------------------------


@workflow.defn(name="t_new_random")
def t_new_random() -> Any:
    rng = workflow.new_random()
    return {"die": rng.randint(1, 6), "pick": rng.choice("abc"), "deck": rng.sample(range(5), 5)}


def test_new_random_is_a_generator_seeded_by_one_recorded_value() -> None:
    # Temporal's workflow.random(): randint, choice, shuffle... with one command in all.
    host = FakeHost()
    first = run("t_new_random", host=host)
    assert first["status"] == "completed" and host.random_calls == [16]
    assert first["commands"] == [["random", host.random(16)]]
    seeded = random.Random(int.from_bytes(host.random(16), "big"))
    expected = {"die": seeded.randint(1, 6), "pick": seeded.choice("abc")}
    expected["deck"] = seeded.sample(range(5), 5)
    assert unpack(first["result"]) == expected
    replayed = run("t_new_random", host=ReplayHost(), results=[raw_ok(0, 1, host.random(16))])
    assert unpack(replayed["result"]) == expected  # the same draws on replay


def test_now_and_random_are_recorded_then_replayed() -> None:
    host = FakeHost()
    first = run("t_clock", host=host)
    facts = {
        "ms": NOW,
        "iso": "2023-11-14T22:13:20+00:00",
        "is_datetime": True,
        "fraction": (int.from_bytes(host.random(8), "big") >> 11) / 2**53,
        "raw": host.random(4),
        "uuid": str(uuid.UUID(bytes=host.random(16), version=4)),
    }
    assert host.now_calls == 2
    assert host.random_calls[:3] == [8, 4, 16]
    commands = [
        ["now", NOW],
        ["now", NOW],
        ["random", host.random(8)],
        ["random", host.random(4)],
        ["random", host.random(16)],
        act("record", facts),
    ]
    assert first == {"status": "suspended", "commands": commands}
    assert uuid.UUID(facts["uuid"]).version == 4
    assert 0 <= facts["fraction"] < 1

    history = [raw_ok(i, i + 1, value) for i, (_, value) in enumerate(commands[:5])]
    replay = run("t_clock", host=ReplayHost(), results=[*history, ok(5, 6, None)])
    assert replay["status"] == "completed"
    assert replay["commands"] == commands  # byte-identical: the recorded values, not new ones
    assert unpack(replay["result"]) == facts


def test_a_replay_reads_recorded_values_then_asks_the_host_on_new_ground() -> None:
    host = FakeHost(clock=NOW + 5)
    out = run("t_clock", host=host, results=[raw_ok(0, 1, NOW - 7)], recorded=1)
    assert host.now_calls == 1  # only the second now is new
    assert out["commands"][:2] == [["now", NOW - 7], ["now", NOW + 5]]


def test_a_replayed_random_of_another_length_is_nondeterminism() -> None:
    history = [raw_ok(0, 1, NOW), raw_ok(1, 2, NOW), raw_ok(2, 3, b"\x00" * 7)]
    with pytest.raises(NondeterminismError, match="history recorded 7 bytes"):
        run("t_clock", host=ReplayHost(), results=history)


# ---- patch markers -------------------------------------------------------------------------


def test_patched_on_new_ground_issues_the_marker() -> None:  # rule 3
    out = run("t_patch")
    assert out == {
        "status": "suspended",
        "commands": [["patched", "add-audit"], act("audit")],
    }


def test_patched_with_its_marker_recorded_takes_the_new_path() -> None:  # rule 1
    history = [raw_ok(0, 1, "add-audit"), ok(1, 2), ok(2, 3)]
    out = run("t_patch", results=history)
    assert out["commands"] == [["patched", "add-audit"], act("audit"), act("welcome")]
    assert unpack(out["result"]) is True


@pytest.mark.parametrize(
    "results",
    [[ok(0, 1)], [], [raw_ok(0, 1, "another-change")]],
    ids=["old-command-with-result", "old-command-pending", "another-marker"],
)
def test_patched_below_recorded_without_its_marker_keeps_the_old_path(
    results: list[list[Any]],
) -> None:  # rule 2
    out = run("t_patch", results=results, recorded=1)
    assert out["commands"][0] != ["patched", "add-audit"]
    assert out["commands"][:1] == [act("welcome")]
    if results == [ok(0, 1)]:
        assert out["status"] == "completed"
        assert unpack(out["result"]) is False


def test_patched_without_recorded_never_applies_rule_two() -> None:
    out = run("t_patch", results=[ok(0, 1)], send_recorded=False)
    assert out["commands"][0] == ["patched", "add-audit"]


# ---- cancellation --------------------------------------------------------------------------


def published(host: FakeHost, name: str) -> Any:
    return [unpack(value) for n, value in host.published if n == name]


def test_cancel_is_delivered_at_the_first_await_with_a_missing_result() -> None:
    host = FakeHost()
    out = run("t_saga", "o-1", host, cancel=(1, "customer asked"), recorded=1)
    # The delivered cancellation, then the compensation awaits `book` again: still pending.
    assert out == {"status": "suspended", "commands": [act("book", "o-1")]}
    assert published(host, "before") == [{"requested": False, "reason": ""}]
    assert published(host, "after") == [{"requested": True, "reason": "customer asked"}]


def test_a_result_recorded_after_the_cancel_is_skipped_once_then_read() -> None:
    out = run("t_saga", "o-1", results=[ok(0, 2, "bk-1")], cancel=(1, "customer asked"))
    assert out == {
        "status": "suspended",
        "commands": [act("book", "o-1"), act("unbook", "bk-1")],
    }
    done = run("t_saga", "o-1", results=[ok(0, 2, "bk-1"), ok(1, 3)], cancel=(1, "customer asked"))
    assert done == {
        "status": "cancelled",
        "commands": [act("book", "o-1"), act("unbook", "bk-1")],
        "error": ["Cancelled", "customer asked"],
    }


def test_results_recorded_before_the_cancel_are_delivered_normally() -> None:
    history = [ok(0, 1, "bk-1")]
    out = run("t_saga", "o-1", results=history, cancel=(2, "stop"), recorded=2)
    assert out == {
        "status": "suspended",
        "commands": [act("book", "o-1"), act("ship", "bk-1"), act("unbook", "bk-1")],
    }
    history += [err(1, 3, "Cancelled", "never started"), ok(2, 4)]
    done = run("t_saga", "o-1", results=history, cancel=(2, "stop"))
    assert done["status"] == "cancelled"
    assert done["error"] == ["Cancelled", "cancelled while shipping"]


def test_an_activity_the_host_cancelled_is_an_activity_error_after_the_delivery() -> None:
    history = [err(0, 2, "Cancelled", "never started")]
    out = run("t_saga", "o-1", results=history, cancel=(1, "stop"))
    assert out == {
        "status": "cancelled",
        "commands": [act("book", "o-1")],
        "error": ["Cancelled", "stop"],
    }


def test_the_cancel_skips_only_results_recorded_strictly_after_it() -> None:
    # amber__wf_cancel_due compares `seq > cancel_seq`: a result at the cancel's own seq (not a
    # valid history, but the rule is pinned) is delivered normally.
    out = run("t_saga", "o-1", results=[ok(0, 1, "bk-1")], cancel=(1, "stop"), recorded=2)
    assert out["commands"] == [act("book", "o-1"), act("ship", "bk-1"), act("unbook", "bk-1")]


def test_delivering_the_newest_cancel_ends_replaying() -> None:
    host = FakeHost()
    run("t_saga", "o-1", host, cancel=(1, "stop"), recorded=1)
    assert host.logs == [(1, "compensating")]
    host = FakeHost()  # the cancel is older than book's result: still replaying at delivery
    run("t_saga", "o-1", host, results=[ok(0, 2, "bk-1")], cancel=(1, "stop"), recorded=1)
    assert host.logs == []


def test_a_cancel_no_await_reaches_leaves_the_run_to_complete() -> None:
    history = [ok(0, 1, "bk-1"), ok(1, 2)]
    out = run("t_saga", "o-1", results=history, cancel=(3, "too late"))
    assert out["status"] == "completed"
    assert unpack(out["result"]) == "shipped"


def test_cancel_is_delivered_to_wait_any_then_the_timer_is_cancelled() -> None:
    out = run("t_race", {"days": 3}, cancel=(2, "stop"), recorded=2)
    assert out == {
        "status": "cancelled",
        "commands": [["timer", 3 * 86_400_000], ["signal", "delivered"], ["cancel_timer", 0]],
        "error": ["Cancelled", "stop"],
    }


@pytest.mark.parametrize(
    ("signal_seq", "cancel_seq", "status"),
    [(3, 4, "completed"), (4, 3, "cancelled")],
)
def test_wait_any_delivers_the_cancel_only_when_it_came_first(
    signal_seq: int, cancel_seq: int, status: str
) -> None:
    history = [ok(1, signal_seq, {"signed_by": "bob"})]
    out = run("t_race", {"days": 3}, results=history, cancel=(cancel_seq, "stop"), recorded=2)
    assert out["status"] == status


# ---- timers, signals, children, approvals --------------------------------------------------


def test_a_timer_raced_against_a_signal() -> None:
    first = run("t_race", {"days": 3})
    assert first == {
        "status": "suspended",
        "commands": [["timer", 259_200_000], ["signal", "delivered"]],
    }
    delivered = run("t_race", {"days": 3}, results=[ok(1, 3, {"signed_by": "bob"})], recorded=2)
    assert delivered["commands"][2:] == [["cancel_timer", 0]]
    assert unpack(delivered["result"]) == {"signed_by": "bob"}
    late = run("t_race", {"days": 3}, results=[raw_ok(0, 3, None)], recorded=2)
    assert late["commands"] == first["commands"]
    assert unpack(late["result"]) == "late"


@pytest.mark.parametrize(("timer_seq", "signal_seq", "winner"), [(4, 5, "late"), (5, 4, "bob")])
def test_wait_any_picks_the_smallest_delivery_seq_not_the_list_order(
    timer_seq: int, signal_seq: int, winner: str
) -> None:
    history = [ok(1, signal_seq, {"signed_by": "bob"}), raw_ok(0, timer_seq, None)]
    result = unpack(run("t_race", {"days": 1}, results=history)["result"])
    assert (result if result == "late" else result["signed_by"]) == winner


def test_awaiting_a_cancelled_timer_raises_timer_cancelled() -> None:
    assert run("t_timer_cancel") == {
        "status": "suspended",
        "commands": [["timer", 10_000], ["cancel_timer", 0]],
    }
    cancelled = [raw_ok(1, 1, None), err(0, 2, "TimerCancelled", "cancelled")]
    assert unpack(run("t_timer_cancel", results=cancelled)["result"]) == "cancelled"
    fired = [raw_ok(0, 1, None), raw_ok(1, 2, None)]
    out = run("t_timer_cancel", results=fired)
    assert out["commands"][1] == ["cancel_timer", 0]  # issued anyway, where the code says so
    assert unpack(out["result"]) == "fired"


def test_sleep_is_an_awaited_timer() -> None:
    assert run("t_sleep") == {"status": "suspended", "commands": [["timer", 1500]]}
    assert unpack(run("t_sleep", results=[raw_ok(0, 1, None)])["result"]) == "rested"


def test_signals_are_awaited_one_command_each() -> None:
    out = run("t_signal", results=[ok(0, 1, {"by": "ann"})], recorded=1)
    assert out == {"status": "suspended", "commands": [["signal", "approve"]] * 2}
    done = run("t_signal", results=[ok(0, 1, {"by": "ann"}), ok(1, 2, "second")])
    assert unpack(done["result"]) == [{"by": "ann"}, "second"]


def test_child_workflows_carry_an_options_map_always() -> None:
    raw = run_raw("t_child", {"id": "batch"})
    out = unpack(raw)
    assert out == {
        "status": "suspended",
        "commands": [
            [
                "child",
                "t_greet",
                "batch-1",
                pack({"name": "kid"}),
                {"parent_close_policy": "cancel"},
            ],
            ["child", "t_greet", "batch-2", pack({"name": "kid2"}), {}],
            [
                "child",
                "t_greet",
                "batch-3",
                pack(None),
                {"parent_close_policy": "abandon", "version": "sha256:abc"},
            ],
        ],
    }
    c_order = c_key_order("amber_commands.h", "uint32_t amber_start_child(")
    assert [key for key, _ in ordered(raw)[1][1][2][4]] == c_order
    done = run("t_child", {"id": "batch"}, results=[ok(0, 4, {"greeting": "hi"})], recorded=3)
    assert unpack(done["result"]) == {"greeting": "hi"}
    failed = run("t_child", {"id": "b"}, results=[err(0, 4, "ChildFailed", "boom")], recorded=3)
    assert failed["status"] == "failed"
    assert failed["error"] == ["ChildFailed", "boom"]
    assert issubclass(ChildWorkflowError, ApplicationError)


@pytest.mark.parametrize(
    ("type", "message", "cause"),
    [
        # The host records a child's own error as "type: message" under ChildFailed.
        ("ChildFailed", "BadInput: the sku is unknown", ("BadInput", "the sku is unknown")),
        (
            "ChildFailed",
            "amber.timeout.start_to_close: late: again",
            ("amber.timeout.start_to_close", "late: again"),
        ),
        ("ChildFailed", "the child run r-1 failed", ("", "the child run r-1 failed")),
        ("ChildCancelled", "Cancelled: asked to stop", ("", "Cancelled: asked to stop")),
        ("ChildTerminated", "operator: gone", ("", "operator: gone")),
    ],
)
def test_a_child_s_own_error_type_is_its_cause(
    type: str, message: str, cause: tuple[str, str]
) -> None:
    error = ChildWorkflowError(message, type=type)
    assert (error.type, error.message) == (type, message)
    assert (error.cause_type, error.cause_message) == cause


def test_an_approval_command_and_its_result() -> None:
    raw = run_raw("t_expense", {"amount": 120})
    policy = {"approvers": ["alice", "bob"], "roles": ["finance"], "required": 2}
    assert unpack(raw) == {
        "status": "suspended",
        "commands": [["approval", "Refund 120 EUR", 2 * 86_400_000, policy]],
    }
    c_order = c_key_order("amber_commands.h", "uint32_t amber_request_approval(")
    assert [key for key, _ in ordered(raw)[1][1][0][3]] == c_order
    decided = {
        "outcome": "approved",
        "decisions": [
            {"approver": "alice", "approve": True, "comment": "ok", "at_ms": 5},
            {"approver": "bob", "approve": True, "comment": "", "at_ms": 6},
        ],
    }
    out = run("t_expense", {"amount": 120}, results=[ok(0, 1, decided)])
    assert unpack(out["result"]) == {
        "outcome": "approved",
        "approved": True,
        "decisions": [["alice", True, "ok", 5], ["bob", True, "", 6]],
    }
    expired = run("t_expense", {"amount": 1}, results=[ok(0, 1, {"outcome": "expired"})])
    assert unpack(expired["result"])["outcome"] == "expired"


def test_an_approval_handle_can_wait_while_other_work_runs() -> None:
    input = {"amount": 5, "prepare_first": True}
    out = run("t_expense", input, results=[ok(1, 1, "prepared")], recorded=2)
    assert out["status"] == "suspended"
    assert [c[0] for c in out["commands"]] == ["approval", "activity"]


# ---- ending the run ------------------------------------------------------------------------


def test_continue_as_new_closes_the_run_with_the_new_input() -> None:
    out = run_raw("t_loop", {"n": 1}, results=[ok(0, 1)])
    assert out == pack(
        {"status": "continue_as_new", "commands": [act("step", 1)], "result": pack({"n": 2})}
    )


def test_an_application_error_fails_the_run() -> None:
    assert run("t_fail", "typed") == {
        "status": "failed",
        "commands": [],
        "error": ["BadInput", "the order is empty"],
    }
    assert run("t_fail", "plain")["error"] == ["ApplicationError", "plain"]


def test_any_other_exception_is_a_bug_that_traps_with_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(KeyError):
        run("t_bug")
    err_text = capsys.readouterr().err
    assert "Traceback" in err_text
    assert "KeyError: 'missing'" in err_text


def test_an_unknown_workflow_type_raises() -> None:
    with pytest.raises(LookupError, match="no workflow named 'nope'"):
        run("nope")


@pytest.mark.parametrize(
    "envelope",
    [
        pack({"abi": 2, "input": pack(None), "results": []}),
        pack({"abi": 1, "results": []}),
        pack({"abi": 1, "input": pack(None)}),
        pack({"abi": 1, "input": pack(None), "results": [[0, 1, 0]]}),
        pack({"abi": 1, "input": pack(None), "results": [ok(0, 1), ok(0, 2)]}),
        pack({"abi": 1, "input": pack(None), "results": [ok(1, 1)], "recorded": 1}),
        pack({"abi": 1, "input": pack(None), "results": [], "cancel": [1]}),
        pack({"abi": 1, "input": pack(None), "results": [[0, 1, 2, None]]}),
        pack([1, 2]),
        pack({"abi": 1, "input": pack(None), "results": []}) + b"\x00",
    ],
)
def test_a_malformed_input_envelope_raises(envelope: bytes) -> None:
    with pytest.raises(ValueError):
        amber.run_workflow("t_greet", envelope, FakeHost())


@pytest.mark.parametrize(
    ("how", "commands", "status"),
    [
        ("exception", [act("a")], "suspended"),
        ("base", [act("a")], "suspended"),
        ("finally", [act("a")], "suspended"),
        ("continue", [], "continue_as_new"),
    ],
)
def test_user_code_cannot_swallow_the_sdk_unwinding(
    how: str, commands: list[Any], status: str
) -> None:
    host = FakeHost()
    out = run("t_swallow", how, host)
    assert out["status"] == status
    assert out["commands"] == commands  # the `finally` block's activity never reaches the output
    assert host.logs == []  # nor its log line


# ---- queries and logging -------------------------------------------------------------------


def test_a_query_activation_runs_normally_and_publishes() -> None:
    host = FakeHost()
    out = run(
        "t_status",
        host=host,
        results=[ok(0, 1)],
        query="status",
        run_id="run-9",
        workflow_id="order-9",
    )
    assert published(host, "status") == [{"stage": 1}, {"stage": 2}]
    assert published(host, "info") == [
        {"run": "run-9", "id": "order-9", "type": "t_status", "q": "status"}
    ]
    assert out == {"status": "suspended", "commands": [act("a"), act("b")]}
    assert host.published[1] == ("status", _msgpack.encode({"stage": 1}))


def test_a_query_value_over_64_kib_is_refused() -> None:
    with pytest.raises(ValueError, match="limit 65536"):
        run("t_big_query")


def test_logging_is_silent_while_replaying() -> None:
    host = FakeHost()
    run("t_logs", host=host)  # no history: nothing is replayed
    assert host.logs == [(1, "start now")]

    host = FakeHost()
    run("t_logs", host=host, results=[ok(0, 1)])  # replays `start`, then new ground
    assert host.logs == [(2, "after a")]

    host = FakeHost()
    run("t_logs", host=host, results=[ok(0, 1), ok(1, 2)])
    assert host.logs == [(3, "end")]


def test_without_recorded_replaying_ends_when_the_newest_result_is_consumed() -> None:
    host = FakeHost()
    run("t_logs", host=host, results=[ok(0, 1)], send_recorded=False)
    assert host.logs == [(2, "after a")]
    host = FakeHost()
    run("t_logs", host=host, results=[ok(0, 2)], cancel=(3, "stop"), send_recorded=False)
    assert host.logs == []  # the cancel request is the newest entry, and `a` does not consume it


# ---- the determinism guard -----------------------------------------------------------------


@pytest.mark.parametrize("which", sorted(CHEATS))
def test_the_guard_refuses_clocks_and_randomness_in_workflow_code(which: str) -> None:
    with pytest.raises(NondeterminismError, match=re.escape(CHEATS[which][1])):
        run("t_cheat", which)
    assert_guard_restored()


def test_the_guard_is_lifted_after_every_kind_of_activation() -> None:
    run("t_greet", {"name": "a"})  # suspended
    assert_guard_restored()
    run("t_greet", {"name": "a"}, results=[ok(0, 1, "x")])  # completed
    assert_guard_restored()
    run("t_fail", "typed")  # failed
    assert_guard_restored()
    assert time.time() > 0
    assert datetime.datetime.now().year >= 2024


def test_the_guard_allows_what_is_deterministic() -> None:
    out = run("t_allowed")
    assert out["status"] == "completed"
    assert unpack(out["result"]) == {
        "constructed": "2024-01-02T00:00:00+00:00",
        "isinstance": True,
        "issubclass": True,
        "parsed": 3,
        "seeded": random.Random(42).random(),
    }


@pytest.mark.parametrize("which", ["datetime.now", "date.today", "time.time", "random.random"])
def test_the_guard_covers_names_the_workflow_s_module_bound_at_import(which: str) -> None:
    # `from datetime import datetime` at a module's top binds the class before any guard
    # runs; during the activation the module's own names point at the stand-ins.
    import tests.abi._bound_names_guest as guest

    before = dict(vars(guest))
    with pytest.raises(NondeterminismError, match="in workflow code: use workflow"):
        run("t_bound", which)
    assert vars(guest) == before  # restored
    assert guest.datetime is datetime.datetime and guest.clock is time.time
    assert run("t_bound", "constructed")["status"] == "completed"
    assert guest.READS["datetime.now"]().year >= 2024  # outside workflow code: the real clock


def test_an_async_workflow_or_activity_is_refused_where_it_is_declared() -> None:
    with _registry.isolated():
        with pytest.raises(
            TypeError, match="workflow 'flow' is an async function: Amber workflows and activities"
        ):

            @workflow.defn
            async def flow() -> None:
                return None

        with pytest.raises(TypeError, match="activity 'act' is an async function"):

            @activity.defn
            async def act() -> None:
                return None


def test_workflow_calls_outside_a_workflow_raise() -> None:
    with pytest.raises(RuntimeError, match="not in workflow code"):
        workflow.now()
    with pytest.raises(RuntimeError, match="not in an activity"):
        activity.info()


# ---- activities ----------------------------------------------------------------------------


@activity.defn(name="t_charge")
def t_charge(args: Any) -> Any:
    info = activity.info()
    card = args.get("card")
    if card == "declined":
        raise ApplicationError("declined", type="CardDeclined", non_retryable=True)
    if card == "buggy":
        return 1 / 0
    if card == "stop":
        raise CancelledError("asked to stop")
    activity.logger.info("charging %s", args["order"])
    return {
        "charge": f"ch-{args['order']}-{info.idempotency_key}",
        "attempt": info.attempt,
        "deadline": info.deadline_ms,
        "run": info.run_id,
        "name": info.activity,
        "clock_ok": time.time() > 0,  # activities are not guarded
    }


@activity.defn(name="t_poll")
def t_poll(args: Any) -> int:
    done: int = (activity.info().heartbeat_details or {}).get("poll", 0)
    while done < args["polls"]:
        done += 1
        if activity.heartbeat({"poll": done}):
            raise CancelledError("the run asked the poll to stop")
        activity.sleep(0.1)
    if activity.is_cancelled():
        raise CancelledError("the run asked the poll to stop")
    return done


@activity.defn(name="t_fetch")
def t_fetch(args: Any) -> Any:
    response = activity.http(
        "POST",
        args["url"],
        headers={"Content-Type": "application/json"},
        body=b'{"a":1}',
        timeout_ms=2000,
    )
    return {
        "status": response.status,
        "type": response.header("content-type"),
        "body": response.json(),
        "ok": response.ok,
    }


@activity.defn
def t_noargs() -> str:
    return "no args"


def test_an_activity_completes_with_its_result() -> None:
    host = FakeHost()
    out = amber.run_activity("t_charge", act_envelope("t_charge", {"order": "o-1"}), host)
    result = {
        "charge": "ch-o-1-run-1/3",
        "attempt": 1,
        "deadline": NOW + 30_000,
        "run": "run-1",
        "name": "t_charge",
        "clock_ok": True,
    }
    assert out == pack({"status": "completed", "result": pack(result)})
    assert host.logs == [(1, "charging o-1")]


@pytest.mark.parametrize(
    ("card", "error"),
    [
        ("declined", ["CardDeclined", "declined", True]),
        ("buggy", ["ZeroDivisionError", "division by zero", False]),
        ("stop", ["Cancelled", "asked to stop", True]),
    ],
)
def test_an_activity_failure_becomes_a_failed_envelope(card: str, error: list[Any]) -> None:
    out = amber.run_activity("t_charge", act_envelope("t_charge", {"card": card}), FakeHost())
    assert out == pack({"status": "failed", "error": error})


def test_an_activity_heartbeats_and_resumes_from_its_details() -> None:
    host = FakeHost()
    assert run_act("t_poll", {"polls": 2}, host) == {"status": "completed", "result": pack(2)}
    assert host.heartbeats == [pack({"poll": 1}), pack({"poll": 2})]
    assert host.sleeps == [100, 100]

    host = FakeHost()
    out = run_act("t_poll", {"polls": 3}, host, attempt=2, details={"poll": 2})
    assert unpack(out["result"]) == 3
    assert host.heartbeats == [pack({"poll": 3})]


@pytest.mark.parametrize("host", [FakeHost(stop_after=1), FakeHost(cancel=True)])
def test_an_activity_stops_when_the_run_asks(host: FakeHost) -> None:
    out = run_act("t_poll", {"polls": 1}, host)
    assert out == {
        "status": "failed",
        "error": ["Cancelled", "the run asked the poll to stop", True],
    }


def test_an_activity_makes_http_requests_through_the_host() -> None:
    response = {"status": 201, "headers": {"Content-Type": "application/json"}, "body": b'{"b":2}'}
    host = FakeHost(http_response=response)
    out = run_act("t_fetch", {"url": "http://127.0.0.1:8080/x"}, host)
    assert unpack(out["result"]) == {
        "status": 201,
        "type": "application/json",
        "body": {"b": 2},
        "ok": True,
    }
    request = {
        "method": "POST",
        "url": "http://127.0.0.1:8080/x",
        "headers": {"Content-Type": "application/json"},
        "body": b'{"a":1}',
        "timeout_ms": 2000,
    }
    assert host.requests == [pack(request)]
    c_order = c_key_order("amber_http.h", "amber_bytes amber__http_encode(")
    assert [key for key, _ in ordered(host.requests[0])] == c_order


@pytest.mark.parametrize(
    ("type", "non_retryable"),
    [
        ("HostNotAllowed", True),
        ("BadRequest", True),
        ("Timeout", False),
        ("ConnectionError", False),
    ],
)
def test_an_http_error_left_uncaught_fails_the_attempt(type: str, non_retryable: bool) -> None:
    host = FakeHost(http_response={"error": [type, "no way"]})
    out = run_act("t_fetch", {"url": "https://api.example.com/"}, host)
    assert out == {"status": "failed", "error": [type, "no way", non_retryable]}
    assert issubclass(HttpError, ApplicationError)


def test_a_zero_argument_activity_and_an_unknown_one() -> None:
    assert unpack(run_act("t_noargs")["result"]) == "no args"
    assert run_act("nope") == {
        "status": "failed",
        "error": ["UnknownActivity", "this module has no activity named 'nope'", True],
    }


def test_a_malformed_activity_envelope_raises() -> None:
    with pytest.raises(ValueError, match="'args' is required"):
        amber.run_activity("t_noargs", pack({"abi": 1}), FakeHost())


# ---- the manifest and names ----------------------------------------------------------------


def test_the_manifest_lists_what_the_decorators_registered() -> None:
    with _registry.isolated():

        @workflow.defn(name="orders")
        def orders(input: Any) -> None: ...

        @workflow.defn
        def Audit_2() -> None: ...

        @activity.defn(name="charge_payment")
        def charge(args: Any) -> None: ...

        @activity.defn
        def reserve(args: Any) -> None: ...

        @activity.defn(name="ship.v2-final")
        def ship(args: Any) -> None: ...

        assert amber.manifest() == {
            "abi": 1,
            "workflows": ["Audit_2", "orders"],
            "activities": ["charge_payment", "reserve", "ship.v2-final"],
            "await_next": ["delta"],  # a live instance reads only what history added
        }
        amber.declare(capabilities={"http": {"allow": ["127.0.0.1:8080", "*.example.com"]}})
        amber.declare(limits={"memory_mb": 64})
        manifest = amber.manifest()
        assert manifest["capabilities"] == {"http": {"allow": ["127.0.0.1:8080", "*.example.com"]}}
        assert manifest["limits"] == {"memory_mb": 64}
    assert "t_greet" in amber.manifest()["workflows"]  # the outer registry is back
    assert "orders" not in amber.manifest()["workflows"]


@pytest.mark.parametrize(
    "name", ["", "1abc", "a b", "x" * 129, "é", "a/b", "a:b", "-a", ".a", "a\n"]
)
def test_a_bad_name_is_refused_at_decoration(name: str) -> None:
    with _registry.isolated(), pytest.raises(ValueError, match="invalid"):
        workflow.defn(name=name)(lambda: None)
    with _registry.isolated(), pytest.raises(ValueError, match="invalid"):
        activity.defn(name=name)(lambda: None)


def test_names_at_the_limits_are_accepted() -> None:
    with _registry.isolated():
        workflow.defn(name="_" + "x" * 127)(lambda: None)
        activity.defn(name="a.b-c_D9")(lambda: None)
        assert amber.manifest()["workflows"] == ["_" + "x" * 127]


def test_a_duplicate_name_is_refused_but_kinds_are_separate() -> None:
    with _registry.isolated():
        workflow.defn(name="same")(lambda: None)
        activity.defn(name="same")(lambda: None)  # another export namespace
        with pytest.raises(ValueError, match="already defined"):
            workflow.defn(name="same")(lambda x: x)


def test_a_definition_takes_at_most_one_argument() -> None:
    with _registry.isolated(), pytest.raises(TypeError, match="at most one argument"):

        @workflow.defn
        def two(a: Any, b: Any) -> None: ...


@pytest.mark.parametrize(
    "capabilities",
    [{"http": {"allow": "127.0.0.1"}}, {"http": {"allow": [""]}}, {"http": []}],
)
def test_declare_refuses_a_malformed_http_capability(capabilities: dict[str, Any]) -> None:
    with _registry.isolated(), pytest.raises(ValueError, match="allow"):
        amber.declare(capabilities=capabilities)


def test_declare_refuses_what_json_cannot_hold() -> None:
    with _registry.isolated(), pytest.raises(TypeError, match="JSON"):
        amber.declare(limits={"x": b"bytes"})


def test_the_build_s_warm_up_runs_the_sdk_s_path_and_leaves_nothing_behind() -> None:
    """`amber build` calls `warm_up` in the entry module so the snapshot holds the SDK's path
    warm, a live instance's path included: it runs on a workflow and activity of its own, never
    the module's, and afterwards the registry and the SDK's per-activation state are as they
    were."""
    from amber_sdk import _activity, _entry, _guard, _replay, _warmup

    before = (set(_registry.current().workflows), set(_registry.current().activities))
    seen: list[str] = []
    original = _entry.run_workflow

    def spying(name: str, envelope: bytes, host: Any) -> bytes:
        out = original(name, envelope, host)
        seen.append(msgpack.unpackb(out)["status"])
        return out

    _entry.run_workflow = spying  # type: ignore[assignment]
    try:
        _warmup.warm_up(rounds=2)
    finally:
        _entry.run_workflow = original  # type: ignore[assignment]
    # Each round: a whole run from the top at each of its cuts, then one run on a live
    # instance (its waits answered with deltas) to its end.
    assert seen == ["suspended", "suspended", "completed", "completed"] * 2
    assert (set(_registry.current().workflows), set(_registry.current().activities)) == before
    assert _warmup._WORKFLOW not in _registry.current().workflows
    assert (_replay._current, _activity._current, _guard._depth) == (None, None, 0)
