"""The host-function trampoline's string converters against wasmtime-py's own, on types read
from a real component: the same C values out, the same Python values in."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import pytest
import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import Component, Linker
from wasmtime.component._types import OptionType, String

from amber.runtime.sandbox import _fasthost

_WAT = """(component
  (core module $m
    (memory (export "mem") 1)
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) i32.const 0)
    (func (export "f") (param i32 i32) (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (func (export "f") (param "s" string) (result (option string))
    (canon lift (core func $i "f") (memory (core memory $i "mem"))
      (realloc (core func $i "realloc")))))"""

TEXTS = ["", "envelope", "".join(map(chr, range(256))), "\u20ac and \U0001f600", "x" * 70_000]


@pytest.fixture(scope="module")
def types() -> Iterator[tuple[Any, Any]]:
    """The parameter and result types of `f: func(s: string) -> option<string>`."""
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    instance = Linker(engine).instantiate(store, Component(engine, _WAT))
    func = instance.get_func(store, "f")
    assert func is not None
    fty = func.type(store)
    yield fty.params[0][1], fty.result


def _lowered(convert: Any, value: Any) -> tuple[int, bytes | None]:
    """What a converter wrote: the value's kind and, for a `some`, the string's bytes."""
    slot = ffi.wasmtime_component_val_t()
    convert(None, value, ctypes.pointer(slot))
    try:
        option = slot.of.option
        if not option:
            return slot.kind, None
        inner = option.contents
        assert inner.kind == ffi.WASMTIME_COMPONENT_STRING.value
        return slot.kind, ctypes.string_at(inner.of.string.data, inner.of.string.size)
    finally:
        ffi.wasmtime_component_val_delete(ctypes.byref(slot))


def test_the_pinned_wasmtime_gets_the_string_converters(types: tuple[Any, Any]) -> None:
    param, result = types
    assert _fasthost.FAST
    assert type(param) is String and type(result) is OptionType
    assert _fasthost._is_string(param) and _fasthost._is_option_of_string(result)
    assert not _fasthost._is_option_of_string(param)


@pytest.mark.parametrize("value", [None, *TEXTS], ids=lambda v: "none" if v is None else len(v))
def test_an_optional_string_result_is_lowered_as_wasmtime_py_lowers_it(
    types: tuple[Any, Any], value: str | None
) -> None:
    _, result = types
    fast = _fasthost._OptionalStringResult()
    assert _lowered(fast.convert_to_c, value) == _lowered(result.convert_to_c, value)


@pytest.mark.parametrize("value", [5, b"bytes", ["a"]])
def test_an_optional_string_result_refuses_what_wasmtime_py_refuses(
    types: tuple[Any, Any], value: object
) -> None:
    _, result = types
    for convert in (result.convert_to_c, _fasthost._OptionalStringResult().convert_to_c):
        with pytest.raises(ValueError, match="not valid for this variant"):
            convert(None, value, ctypes.pointer(ffi.wasmtime_component_val_t()))


@pytest.mark.parametrize("value", TEXTS, ids=len)
def test_a_string_parameter_is_lifted_as_wasmtime_py_lifts_it(
    types: tuple[Any, Any], value: str
) -> None:
    param, _ = types
    lifted = []
    for convert in (param.convert_from_c, _fasthost._StringParam().convert_from_c):
        slot = ffi.wasmtime_component_val_t()
        param.convert_to_c(None, value, ctypes.pointer(slot))
        lifted.append(convert(slot))  # each frees the string it lifted
    assert lifted == [value, value]
