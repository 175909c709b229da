"""The in-process sandbox figures (issue 7's activation and replay targets), in a reduced form.

`measure_sandbox` runs once for the module with a few repetitions; the tests check the shape of
what it returns and that every figure is a positive number — never a timing against a target.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from amber.abi import WorkflowStatus
from amber.runtime.model._tasks import ActivationStats
from amber.runtime.replay._replay import WorkflowStep
from amber.tools._bench_sandbox import REPLAY_STEPS, WrongOutcome, _check_replay, measure_sandbox

REPETITIONS, REPLAY_REPETITIONS = 20, 5
BREAKDOWN = (
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


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-sandbox")


@pytest.fixture(scope="module")
def figures(work: Path) -> dict[str, Any]:
    return measure_sandbox(REPETITIONS, REPLAY_REPETITIONS, work_dir=work)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _summary(figure: dict[str, Any], n: int) -> None:
    assert figure["n"] == n
    assert _positive(figure["median"]) and _positive(figure["p99"])
    assert figure["p99"] >= figure["median"]


def test_the_activation_is_timed_with_its_breakdown(figures: dict[str, Any]) -> None:
    activation = figures["activation_us"]
    _summary(activation, REPETITIONS)
    assert activation["warmup"] >= 1
    breakdown = activation["breakdown_us"]
    assert set(breakdown) == {*BREAKDOWN, "sum_of_parts", "unaccounted"}
    for part in BREAKDOWN:
        assert _positive(breakdown[part]), part
    assert breakdown["sum_of_parts"] == pytest.approx(
        sum(breakdown[part] for part in BREAKDOWN), abs=0.1
    )
    assert isinstance(breakdown["unaccounted"], float)
    assert "Sandbox._run" in activation["breakdown_method"]
    assert activation["host_calls"] == 0
    assert _positive(activation["fuel_used"]) and _positive(activation["input_bytes"])


def test_the_replay_of_twenty_steps_is_timed(figures: dict[str, Any]) -> None:
    replay = figures["replay_20_steps_ms"]
    _summary(replay, REPLAY_REPETITIONS)
    assert replay["steps"] == REPLAY_STEPS
    assert replay["events"] == 1 + 2 * REPLAY_STEPS  # started, then scheduled + completed each
    assert _positive(replay["breakdown_ms"]["sandbox_run"])
    assert isinstance(replay["breakdown_ms"]["outside_sandbox"], float)
    assert _positive(replay["fuel_used"])


def test_the_rest_of_the_figures_are_reported(figures: dict[str, Any], work: Path) -> None:
    _summary(figures["artifact_load_us"], REPETITIONS)
    assert figures["wasmtime_version"] and figures["engine_flags"] and figures["python"]
    assert figures["module"]["bytes"] == (work / "chain.wasm").stat().st_size
    assert list((work / "artifacts").glob(f"{figures['module']['sha256']}.*.cwasm"))
    assert json.loads(json.dumps(figures)) == figures


def test_a_wrong_replay_outcome_raises_instead_of_being_timed() -> None:
    def step(status: WorkflowStatus, value: int) -> WorkflowStep:
        return WorkflowStep(
            expected_last_seq=41,
            first_new_cmd=REPLAY_STEPS,
            new_commands=(),
            status=status,
            result=msgpack.packb({"value": value}),
            error=None,
            stats=ActivationStats(fuel_used=1, memory_bytes=1, host_calls=0, duration_s=0.001),
        )

    _check_replay(step(WorkflowStatus.COMPLETED, 1020), 1020)
    with pytest.raises(WrongOutcome, match="1019"):
        _check_replay(step(WorkflowStatus.COMPLETED, 1019), 1020)
    with pytest.raises(WrongOutcome, match="suspended"):
        _check_replay(step(WorkflowStatus.SUSPENDED, 1020), 1020)


def test_repetitions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        measure_sandbox(0, 1)
