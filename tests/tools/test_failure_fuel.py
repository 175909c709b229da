"""How a failure's fuel is shown: exact for every reason but a deadline kill, whose count is a
lower bound, because wasmtime does not write its fuel counter back when it interrupts a guest
at an epoch deadline (pinned below on the real engine)."""

from __future__ import annotations

import threading

import pytest
import wasmtime

from amber.tools import _output as out

SPIN = '(module (func (export "spin") (loop $l (br $l))))'


def test_a_deadline_kill_s_fuel_reads_as_a_lower_bound_and_the_rest_as_counted() -> None:
    assert out.fuel_text("deadline", 5510) == ">=5510"
    assert out.fuel_text("out_of_fuel", 10**9) == "1000000000"
    assert out.fuel_text("trap", 0) == "0"
    assert out.fuel_text("trap", None) == "-"
    assert not out.fuel_exact("deadline")
    assert all(out.fuel_exact(r) for r in ("trap", "out_of_fuel", "memory_limit", "abi_violation"))


def test_wasmtime_loses_the_fuel_count_of_a_guest_interrupted_at_its_deadline() -> None:
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    engine = wasmtime.Engine(config)
    store = wasmtime.Store(engine)
    store.set_fuel(10**15)
    store.set_epoch_deadline(1)
    spin = wasmtime.Instance(store, wasmtime.Module(engine, SPIN), []).exports(store)["spin"]
    assert isinstance(spin, wasmtime.Func)
    timer = threading.Timer(0.2, engine.increment_epoch)
    timer.start()
    with pytest.raises(wasmtime.Trap):
        spin(store)
    # 0.2 s of a loop is hundreds of millions of instructions; the store counts (next to) none.
    assert 10**15 - store.get_fuel() < 10**6
