"""In-process sandbox figures: one activity activation, and a workflow replaying 20 steps.

The performance targets set two figures that `amber bench` (real processes, a real database) cannot
isolate: a sandbox activation — a fresh `Store`, instantiated from the cached precompiled artifact,
one call with a small msgpack payload — at ≤ 150 µs median, with its breakdown; and a workflow
activation that replays a 20-step history at ≤ 2 ms. `measure_sandbox` measures both in this
process, with no database and no server, on the `chain` sample built from source. It reports figures
and asserts no threshold; a wrong outcome raises `WrongOutcome` instead of being timed.

The whole activation goes through the worker's own path: `run_activity` on a `RecordingSandbox`
over a `Sandbox`, whose engine loaded the module from the on-disk artifact (`deserialize_file`)
and keeps its `InstancePre`. `Sandbox._run` does its steps in one function, so the breakdown
times *equivalent* steps outside it — the same engine, the same `InstancePre`, the same limits,
the same wasmtime calls in the same order — and reports how far their sum falls short of the
whole (`unaccounted`: the runtime's Python bookkeeping around those calls). Timing inside
`Sandbox._run` would mean editing it, which a benchmark should not need.

The replayed history is made by running the chain for real, activation by activation: each new
`ScheduleActivity` becomes an `ActivityScheduled` event and the activity's outcome an
`ActivityCompleted` event, with the payloads the server appends (`Lifecycle.command_events_txn`,
`TaskService.complete_activity`). History is not read from a database: that is the server's cost,
measured by `amber bench`.
"""

from __future__ import annotations

import math
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

import wasmtime

from amber.abi import (
    ALLOC_EXPORT,
    ALLOC_SIGNATURE,
    ENTRY_SIGNATURE,
    MEMORY_EXPORT,
    ActivityInput,
    ActivityOutcome,
    ActivityStatus,
    ScheduleActivity,
    WorkflowStatus,
    decode_activity_output,
    encode_activity_input,
    pack,
)
from amber.history import (
    ActivityCompleted,
    ActivityScheduled,
    Event,
    EventType,
    Payload,
    RunStarted,
)
from amber.runtime.client import decode
from amber.runtime.model import SystemClock, idempotency_key, to_ms
from amber.runtime.replay import (
    ActivityAttempt,
    ActivityReport,
    ReplayMemo,
    WorkflowActivation,
    WorkflowStep,
    activate_workflow,
    run_activity,
)
from amber.runtime.sandbox import (
    ENGINE_FLAGS,
    ActivityHost,
    RecordingSandbox,
    Sandbox,
    SandboxEngine,
    SandboxLimits,
    StickySandbox,
    fresh_store,
    instance_exports,
)
from amber.runtime.worker import WorkerSettings
from amber.versions import WASMTIME_VERSION, ArtifactCache

from ._build import build_module

__all__ = ["REPLAY_STEPS", "WrongOutcome", "measure_sandbox"]

_CHAIN_SOURCE: Final = Path(__file__).resolve().parent.parent / "abi" / "samples" / "chain.c"
REPLAY_STEPS: Final = 20
"""Completed `add_one` activities in the replayed history (the targets' "20-step history")."""
_START_VALUE: Final = 1000
_RUN_ID: Final = "bench-sandbox-chain"
_ACTIVITY: Final = "add_one"
_U64: Final = (1 << 64) - 1
_EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""When the replayed run's events say they happened (nothing reads it back)."""
_ARTIFACT_LOADS: Final = 200
"""`deserialize_file` repetitions at most (each maps a file: enough for a median)."""


class WrongOutcome(Exception):
    """The measured code gave a wrong result, so its timings would mean nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Timing:
    """Median and 99th percentile (nearest rank) of one measured operation."""

    median: float
    p99: float
    n: int

    @classmethod
    def of(cls, samples_ns: Sequence[int], unit_ns: float) -> _Timing:
        """Summarise `samples_ns` in units of `unit_ns` nanoseconds (1e3: µs, 1e6: ms)."""
        ordered = sorted(samples_ns)
        rank = max(math.ceil(0.99 * len(ordered)) - 1, 0)
        return cls(
            median=statistics.median(ordered) / unit_ns,
            p99=ordered[rank] / unit_ns,
            n=len(ordered),
        )

    def to_json(self, digits: int) -> dict[str, Any]:
        return {"median": round(self.median, digits), "p99": round(self.p99, digits), "n": self.n}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Chain:
    """The built `chain` module, and a sandbox that loaded it from its precompiled artifact."""

    digest: str
    size: int
    engine: SandboxEngine
    sandbox: RecordingSandbox
    activity_limits: SandboxLimits
    workflow_limits: SandboxLimits
    workflow: str = "chain"
    """Its workflow type (`chain_py` for the Python twin, `abi/samples/chain.py`)."""


def measure_stepwise(
    engine: SandboxEngine, digest: str, workflow: str, repetitions: int
) -> dict[str, Any]:
    """`run_step_by_step` figures for a chain-shaped module already loadable by `engine`
    (the Python chain: its activations from the top against on its live instance)."""
    clock = SystemClock()
    settings = WorkerSettings(worker_id="bench-sandbox")
    chain = _Chain(
        digest=digest,
        size=0,
        engine=engine,
        sandbox=RecordingSandbox(Sandbox(engine, clock, _no_fetch), clock),
        activity_limits=settings.activity_limits,
        workflow_limits=settings.workflow_limits,
        workflow=workflow,
    )
    return _stepwise_figures(chain, repetitions)


def measure_sandbox(
    repetitions: int = 2000, replay_repetitions: int = 200, work_dir: Path | None = None
) -> dict[str, Any]:
    """Time a sandbox activation (with its breakdown) and a 20-step replay; JSON-able figures.

    Use it to check the in-process targets without a database: it takes a few seconds
    (mostly building the guest). Each measurement is preceded by an uncounted warm-up of a tenth
    of its repetitions. `work_dir` keeps the built module and artifact cache for inspection (a
    temporary directory otherwise). Raises `WrongOutcome` if an activation gives a wrong result.
    """
    if repetitions < 1 or replay_repetitions < 1:
        raise ValueError("repetitions and replay_repetitions must be at least 1")
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        return _measure(work_dir, repetitions, replay_repetitions)
    with tempfile.TemporaryDirectory(prefix="amber-bench-sandbox-") as tmp:
        return _measure(Path(tmp), repetitions, replay_repetitions)


def _measure(work: Path, repetitions: int, replay_repetitions: int) -> dict[str, Any]:
    built = build_module(_CHAIN_SOURCE, work / "chain.wasm")
    wasm = built.output.read_bytes()
    artifacts = work / "artifacts"
    _precompile(artifacts, built.sha256, wasm)
    engine = SandboxEngine(artifacts)
    try:
        settings = WorkerSettings(worker_id="bench-sandbox")
        clock = SystemClock()  # the worker's
        chain = _Chain(
            digest=built.sha256,
            size=built.size,
            engine=engine,
            # No fetch: the module must come from the artifact written by `_precompile`.
            sandbox=RecordingSandbox(Sandbox(engine, clock, _no_fetch), clock),
            activity_limits=settings.activity_limits,
            workflow_limits=settings.workflow_limits,
        )
        activation = _activation_figures(chain, repetitions)
        replay = _replay_figures(chain, replay_repetitions)
        stepwise = _stepwise_figures(chain, replay_repetitions * 4)
        loads = _artifact_loads(artifacts, engine.engine, chain.digest, repetitions)
    finally:
        engine.close()
    return {
        "activation_us": activation,
        "replay_20_steps_ms": replay,
        "run_step_by_step": stepwise,
        "artifact_load_us": loads.to_json(2)
        | {"method": "versions.ArtifactCache.load on a cache hit (Module.deserialize_file)"},
        "module": {"source": "abi/samples/chain.c", "sha256": chain.digest, "bytes": chain.size},
        "wasmtime_version": WASMTIME_VERSION,
        "engine_flags": ENGINE_FLAGS,
        "python": platform.python_version(),
    }


def _precompile(artifacts: Path, digest: str, wasm: bytes) -> None:
    """Compile once and write the artifact, as the first worker on a machine does."""
    engine = SandboxEngine(artifacts)
    try:
        engine.load(digest, lambda: wasm)
    finally:
        engine.close()


def _no_fetch(digest: str) -> bytes:
    raise RuntimeError(f"module {digest[:12]} missed the artifact cache; the figures would be off")


def _warmup(repetitions: int) -> int:
    return max(repetitions // 10, 1)


# -- one activity activation ------------------------------------------------------------------


def _attempt(chain: _Chain, cmd: int, value: int) -> ActivityAttempt:
    """An `add_one({"value": value})` attempt as the worker builds it from a leased task."""
    args = pack({"value": value})
    key = idempotency_key(_RUN_ID, cmd)
    limits = chain.activity_limits
    return ActivityAttempt(
        digest=chain.digest,
        cmd=cmd,
        input=ActivityInput(
            run_id=_RUN_ID,
            activity=_ACTIVITY,
            args=args,
            attempt=1,
            idempotency_key=key,
            deadline_ms=to_ms(SystemClock().now()) + int(limits.deadline_s * 1000),
        ),
        limits=limits,
        host=ActivityHost(
            idempotency_key=key,
            http=chain.sandbox.http_policy(chain.digest),
            heartbeat=lambda details: False,
            cancel_requested=lambda: False,
        ),
    )


def _check_added_one(outcome: ActivityOutcome, value: int) -> None:
    """The activity completed with `{"value": value + 1}`."""
    completed = outcome.status is ActivityStatus.COMPLETED
    if not completed or decode(outcome.result) != {"value": value + 1}:
        raise WrongOutcome(f"add_one({value}) ended {outcome.status.value}: {outcome!r}")


def _activation_figures(chain: _Chain, repetitions: int) -> dict[str, Any]:
    warmup = _warmup(repetitions)
    attempts = [_attempt(chain, i % REPLAY_STEPS, i) for i in range(warmup + repetitions)]
    samples: list[int] = []
    report: ActivityReport | None = None
    for i, attempt in enumerate(attempts):
        began = time.perf_counter_ns()
        report = run_activity(chain.sandbox, attempt)
        ended = time.perf_counter_ns()
        _check_added_one(report.outcome, i)
        if i >= warmup:
            samples.append(ended - began)
    assert report is not None
    whole = _Timing.of(samples, 1e3)
    parts = _breakdown(chain, [a.input for a in attempts], warmup)
    summed = sum(parts.values())
    breakdown = {name: round(us, 2) for name, us in parts.items()}
    return whole.to_json(2) | {
        "warmup": warmup,
        "breakdown_us": breakdown
        | {"sum_of_parts": round(summed, 2), "unaccounted": round(whole.median - summed, 2)},
        "breakdown_method": (
            "medians of the steps Sandbox._run and run_activity take, timed one by one outside"
            " them with the same engine, InstancePre and limits (the runtime does them in one"
            " function); unaccounted = whole median - sum of parts: the runtime's bookkeeping"
            " around them (host-call state, activation lock, RecordingSandbox, RawOutput,"
            " ActivationStats), and noise, since medians do not add exactly"
        ),
        "input_bytes": len(encode_activity_input(attempts[-1].input)),
        "fuel_used": report.stats.fuel_used,
        "memory_bytes": report.stats.memory_bytes,
        "host_calls": report.stats.host_calls,
    }


_PARTS: Final = (
    "encode_input",
    "store",
    "instantiate",
    "exports",
    "copy_in",
    "guest_call",
    "copy_out",
    "accounting",
    "decode_output",
    "drop_store",
)
"""The steps of `Sandbox._run` (and `run_activity`), in order, as the breakdown names them."""


def _breakdown(chain: _Chain, inputs: Sequence[ActivityInput], warmup: int) -> dict[str, float]:
    """Median µs of each step in `_PARTS` over `inputs` (the first `warmup` not counted)."""
    pre = chain.engine.load(chain.digest, lambda: _no_fetch(chain.digest)).pre
    assert pre is not None  # the chain is a C guest
    samples: dict[str, list[int]] = {name: [] for name in _PARTS}
    with chain.engine.activation_lock:  # as `Sandbox.run`: the guest must not run concurrently
        for i, request in enumerate(inputs):
            steps = _equivalent_activation(chain, pre, request, i)
            if i >= warmup:
                for name, ns in zip(_PARTS, steps, strict=True):
                    samples[name].append(ns)
    return {name: statistics.median(ns) / 1e3 for name, ns in samples.items()}


def _equivalent_activation(
    chain: _Chain, pre: wasmtime.InstancePre, request: ActivityInput, value: int
) -> list[int]:
    """Run `Sandbox._run`'s wasmtime calls for one activity; the ns each step took, in order.

    The guest makes no host calls (checked on the real path: `host_calls` is 0), so no host
    state is routed to it here; a host call would fail the activation.
    """
    limits, clock = chain.activity_limits, time.perf_counter_ns
    marks = [clock()]
    envelope = encode_activity_input(request)
    marks.append(clock())
    store = fresh_store(chain.engine.engine, limits)
    marks.append(clock())
    instance = pre.instantiate(store)
    marks.append(clock())
    exports = instance_exports(pre, store, instance)
    memory, alloc = exports[MEMORY_EXPORT], exports[ALLOC_EXPORT]
    entry_name = "amber_activity." + _ACTIVITY
    entry = exports.get(entry_name)
    assert isinstance(memory, wasmtime.Memory)
    assert isinstance(alloc, wasmtime.Func) and isinstance(entry, wasmtime.Func)
    marks.append(clock())
    size = len(envelope)
    ptr = exports.call(ALLOC_EXPORT, ALLOC_SIGNATURE, size) & 0xFFFF_FFFF
    if ptr == 0 or ptr + size > memory.data_len(store):
        raise WrongOutcome(f"amber_alloc could not provide {size} bytes")
    memory.write(store, envelope, ptr)
    marks.append(clock())
    packed = exports.call(entry_name, ENTRY_SIGNATURE, ptr, size) & _U64
    marks.append(clock())
    out_ptr, out_len = packed >> 32, packed & 0xFFFF_FFFF
    if out_len > limits.max_output_bytes or out_ptr + out_len > memory.data_len(store):
        raise WrongOutcome(f"output [{out_ptr}, {out_ptr + out_len}) out of bounds")
    output = bytes(memory.read(store, out_ptr, out_ptr + out_len))
    marks.append(clock())
    _ = (limits.fuel - store.get_fuel(), memory.data_len(store))
    marks.append(clock())
    outcome = decode_activity_output(output)
    marks.append(clock())
    del exports, memory, alloc, entry, instance, store
    marks.append(clock())
    _check_added_one(outcome, value)
    return [after - before for before, after in pairwise(marks)]


# -- a workflow activation replaying 20 completed steps ---------------------------------------


def _event(seq: int, payload: Payload, digest: str) -> Event:
    return Event.of(
        run_id=_RUN_ID,
        seq=seq,
        payload=payload,
        digest=digest,
        created_at=_EPOCH + timedelta(milliseconds=seq),
    )


def _chain_activation(chain: _Chain, events: tuple[Event, ...]) -> WorkflowActivation:
    """The `chain` run with k = 20 at the point `events` have reached, as the worker builds it."""
    return WorkflowActivation(
        run_id=_RUN_ID,
        workflow_type=chain.workflow,
        digest=chain.digest,
        input=pack({"k": REPLAY_STEPS, "value": _START_VALUE}),
        events=events,
        limits=chain.workflow_limits,
    )


def _chain_history(chain: _Chain) -> tuple[Event, ...]:
    """The history of a `chain` run up to its last activity's completion, made by running it.

    Each workflow activation must issue exactly one new `add_one`; it becomes the events the
    server appends for it (`ActivityScheduled`, then `ActivityCompleted` with the result of
    running that activity in the sandbox).
    """
    started = RunStarted(
        workflow_type=chain.workflow,
        workflow_id=_RUN_ID,
        tenant="",
        input=_chain_activation(chain, ()).input,
    )
    events = [_event(1, started, chain.digest)]
    for _ in range(REPLAY_STEPS):
        step = activate_workflow(chain.sandbox, _chain_activation(chain, tuple(events)))
        if step.status is not WorkflowStatus.SUSPENDED or len(step.new_commands) != 1:
            raise WrongOutcome(
                f"a chain activation ended {step.status.value} with"
                f" {len(step.new_commands)} new commands, not one add_one"
            )
        [command] = step.new_commands
        if not isinstance(command, ScheduleActivity) or command.name != _ACTIVITY:
            raise WrongOutcome(f"the chain issued {command!r}, not add_one")
        cmd = step.first_new_cmd
        scheduled = ActivityScheduled(
            cmd=cmd, name=command.name, args=command.args, options=command.options
        )
        events.append(_event(len(events) + 1, scheduled, chain.digest))
        value = decode(command.args)["value"]
        report = run_activity(chain.sandbox, _attempt(chain, cmd, value))
        _check_added_one(report.outcome, value)
        assert report.outcome.result is not None
        completed = ActivityCompleted(cmd=cmd, result=report.outcome.result, attempt=1)
        events.append(_event(len(events) + 1, completed, chain.digest))
    return tuple(events)


def _check_replay(step: WorkflowStep, expected: int) -> None:
    """The activation completed the run with `{"value": expected}` and issued nothing new."""
    if step.status is not WorkflowStatus.COMPLETED or step.new_commands:
        raise WrongOutcome(
            f"the replay ended {step.status.value} with {len(step.new_commands)} new commands"
        )
    if decode(step.result) != {"value": expected}:
        raise WrongOutcome(f"the replay completed with {decode(step.result)!r}, not {expected}")


def _replay_figures(chain: _Chain, repetitions: int) -> dict[str, Any]:
    events = _chain_history(chain)
    replay = _chain_activation(chain, events)
    warmup = _warmup(repetitions)
    whole: list[int] = []
    inside: list[int] = []
    step: WorkflowStep | None = None
    for i in range(warmup + repetitions):
        began = time.perf_counter_ns()
        step = activate_workflow(chain.sandbox, replay)
        ended = time.perf_counter_ns()
        _check_replay(step, _START_VALUE + REPLAY_STEPS)
        if i >= warmup:
            whole.append(ended - began)
            inside.append(round(step.stats.duration_s * 1e9))
    assert step is not None
    timing, sandbox = _Timing.of(whole, 1e6), _Timing.of(inside, 1e6)
    return timing.to_json(3) | {
        "warmup": warmup,
        "steps": REPLAY_STEPS,
        "events": len(events),
        "breakdown_ms": {
            "sandbox_run": round(sandbox.median, 3),
            "outside_sandbox": round(timing.median - sandbox.median, 3),
        },
        "breakdown_method": (
            "sandbox_run = median of the activation's own duration_s (Sandbox._run: store,"
            " instantiate, guest replay, copy out); outside_sandbox = whole median - that"
            " (projecting the history, encoding the input envelope, decoding and checking the"
            " commands)"
        ),
        "fuel_used": step.stats.fuel_used,
        "memory_bytes": step.stats.memory_bytes,
    }


# -- a run activated step by step: from the top, or going on in a live instance ------------------


def _stepwise_figures(chain: _Chain, repetitions: int) -> dict[str, Any]:
    """A 20-step `chain` run activated as a worker activates it: after each result, once from
    the top in a fresh instance and once on a live instance (`StickySandbox`) going on from its
    last wait. Per activation, as `activate_workflow` sees it (envelope, sandbox, checks)."""
    events = _chain_history(chain)
    # After each result: where a worker activates the workflow.
    cuts = [
        n for n in range(2, len(events) + 1) if events[n - 1].type is EventType.ACTIVITY_COMPLETED
    ]
    clock = SystemClock()
    fresh = Sandbox(chain.engine, clock, _no_fetch)
    sticky = StickySandbox(Sandbox(chain.engine, clock, _no_fetch), chain.engine.activation_lock)
    memos = {"fresh": ReplayMemo(), "sticky": ReplayMemo()}  # as a worker keeps them
    timings: dict[str, list[int]] = {"fresh": [], "sticky": []}
    fuel: dict[str, list[int]] = {"fresh": [], "sticky": []}
    runs = max(1, repetitions // len(cuts))
    try:
        for r in range(_warmup(runs) + runs):
            run_id = f"{_RUN_ID}-{r}"
            history = tuple(replace(e, run_id=run_id) for e in events)
            for name, runner in (("fresh", fresh), ("sticky", sticky)):
                for n in cuts:
                    activation = replace(_chain_activation(chain, history[:n]), run_id=run_id)
                    began = time.perf_counter_ns()
                    step = activate_workflow(runner, activation, memo=memos[name])
                    ended = time.perf_counter_ns()
                    if n == len(events):
                        _check_replay(step, _START_VALUE + REPLAY_STEPS)
                    if r >= _warmup(runs):
                        timings[name].append(ended - began)
                        fuel[name].append(step.stats.fuel_used)
    finally:
        sticky.close()
    medians = {name: _Timing.of(samples, 1e3) for name, samples in timings.items()}
    return {
        "fresh_us": medians["fresh"].to_json(1),
        "sticky_us": medians["sticky"].to_json(1),
        "sticky_over_fresh": round(medians["sticky"].median / medians["fresh"].median, 3),
        "fuel_median": {name: int(statistics.median(used)) for name, used in fuel.items()},
        "fuel_note": "the guest's own work per activation, whatever the machine's speed (the"
        " first activation of each run, which starts its instance, included)",
        "activations_per_run": len(cuts),
        "sticky_hits": sticky.hits,
        "sticky_misses": sticky.misses,
        "method": (
            "per workflow activation of a 20-step chain run, each result in turn: fresh ="
            " Sandbox (new store, instantiate, replay from the top); sticky = StickySandbox"
            " (the run's live instance goes on from its last wait; the first activation of a"
            " run starts it)"
        ),
    }


# -- loading the precompiled artifact -----------------------------------------------------------


def _artifact_loads(artifacts: Path, engine: wasmtime.Engine, digest: str, reps: int) -> _Timing:
    """What a worker pays once per module version after a restart (not per activation)."""
    cache = ArtifactCache(artifacts, engine, ENGINE_FLAGS)
    fetch = lambda: _no_fetch(digest)  # noqa: E731
    samples: list[int] = []
    for i in range(min(reps, _ARTIFACT_LOADS) + 1):
        began = time.perf_counter_ns()
        module = cache.load(digest, fetch)
        ended = time.perf_counter_ns()
        del module
        if i:  # the first load warms the page cache
            samples.append(ended - began)
    return _Timing.of(samples, 1e3)
