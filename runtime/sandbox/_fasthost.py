"""A host function's type read once, not on every call a component makes to it.

Why: wasmtime-py 50's trampoline for component host functions (`func_impl` in
`wasmtime/component/_linker.py`) builds the function's `FuncType` from its C handle on every
call and converts its parameter and result types into Python objects again: 8 µs a call
measured here (5.6 for the parameters, 2.4 for the result). A Python guest's fresh activation
makes about a dozen host calls (CPython's start asks for random bytes ten times) and every step
of a live instance one (`await-next`).

How: the trampoline is replaced by one that keeps, per registered function (its slot in
wasmtime-py's `FUNCTIONS` table), the parameter and result types read at its first call, then
converts values exactly as the original does. The types wasmtime-py builds own their C handles,
so they outlive the call. A slot's entry is dropped when wasmtime-py frees the slot (its
`func_finalize`, also replaced, then calls the original), and an entry is only used for the very
function object it was read for. Both replacements are installed before any linker defines a
function (at import of `amber.runtime.sandbox`).

Strings too: wasmtime-py lowers an `option<string>` result by asking the option type for its
payload type on every call (two C calls and a new Python type object), and lifts a `string`
parameter through a ctypes array type and a `bytearray`. Every step of a live instance lifts
`await-next`'s envelope and lowers its answer: measured in place, 27 and 29 µs a step, most of
it cold caches after the guest's run, so less Python to go through is what helps. Parameters of
type `string` and results of type `option<string>` (with a `string` payload) get converters
doing the same C work directly; other types keep wasmtime-py's. tests/runtime/test_fasthost.py
compares both converters' C values and Python results.

Check and fallback: only under wasmtime-py's pinned major version and when every private name
used exists; otherwise nothing is patched and the original trampoline runs. tests/runtime
checks that `FAST` holds on the pinned version, and every component test runs through it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Final

from amber.versions import WASMTIME_VERSION

try:  # read once here: the string converters below run on every host call that takes them
    from wasmtime import _ffi as _ffi
    from wasmtime.component._types import OptionType as _OptionType
    from wasmtime.component._types import String as _String
except ImportError:  # another wasmtime-py: `_install` patches nothing, so nothing uses them
    pass

_SUPPORTED_MAJOR: Final = "50"


def _install() -> bool:
    if WASMTIME_VERSION.split(".")[0] != _SUPPORTED_MAJOR:
        return False
    try:
        from wasmtime import _ffi as ffi
        from wasmtime.component import _linker
        from wasmtime.component._enter import catch_exceptions
        from wasmtime.component._types import FuncType

        functions = _linker.FUNCTIONS
        callback_type = ffi.wasmtime_component_func_callback_t
        original_finalize = _linker.func_finalize
        finalize_type = type(original_finalize)
        _linker.func_impl  # noqa: B018 - the name replaced below must exist
    except (ImportError, AttributeError):
        return False
    types: dict[int, tuple[Any, list[Any], Any]] = {}

    def read_types(idx: int, func: Any, ty_raw: Any, store: Any) -> tuple[list[Any], Any]:
        known = types.get(idx)
        if known is None or known[0] is not func:
            with FuncType._from_ptr(ty_raw, owner=store) as fty:
                params = [_StringParam() if _is_string(ty) else ty for _, ty in fty.params]
                result = fty.result
                if _is_option_of_string(result):
                    result = _OptionalStringResult()
                known = (func, params, result)
            types[idx] = known
        return known[1], known[2]

    @callback_type  # type: ignore[untyped-decorator]
    def func_impl(
        idx: Any, context: Any, ty_raw: Any, args: Any, nargs: int, results: Any, nresults: int
    ) -> Any:
        def run(store: Any) -> None:
            slot = idx or 0
            func = functions.get(slot)
            params, result_ty = read_types(slot, func, ty_raw, store)
            assert len(params) == nargs
            assert nresults == (0 if result_ty is None else 1)
            result = func(store, *[ty.convert_from_c(args[i]) for i, ty in enumerate(params)])
            if result_ty is None:
                assert result is None
            else:
                result_ty.convert_to_c(store, result, results)

        return catch_exceptions(context, run)

    @finalize_type  # type: ignore[untyped-decorator]
    def func_finalize(idx: Any) -> None:
        types.pop(idx or 0, None)
        original_finalize(idx)

    _linker.func_impl = func_impl
    _linker.func_finalize = func_finalize
    return True


def _is_string(ty: Any) -> bool:
    return type(ty) is _String


def _is_option_of_string(ty: Any) -> bool:
    return type(ty) is _OptionType and _is_string(ty.payload)


class _StringParam:
    """`String.convert_from_c` without the ctypes array type and the `bytearray`."""

    __slots__ = ()

    def convert_from_c(self, c: Any) -> str:
        ffi = _ffi
        if c.kind != ffi.WASMTIME_COMPONENT_STRING.value:
            raise TypeError("expected a string value")
        vec = c.of.string
        try:
            return ctypes.string_at(vec.data, vec.size).decode("utf-8")
        finally:
            ffi.wasm_byte_vec_delete(ctypes.byref(c.of.string))


class _OptionalStringResult:
    """`OptionType.convert_to_c` for an `option<string>`, without asking the type for its
    payload type on every call."""

    __slots__ = ()

    def convert_to_c(self, _store: Any, val: str | None, ptr: Any) -> None:
        ffi = _ffi
        if val is None:
            option = None
        else:
            if not isinstance(val, str):  # wasmtime-py takes a str subclass too
                raise ValueError("value not valid for this variant")
            data = val.encode("utf-8")
            raw = ffi.wasmtime_component_val_t()
            raw.kind = ffi.WASMTIME_COMPONENT_STRING
            ffi.wasm_byte_vec_new_uninitialized(ctypes.byref(raw.of.string), len(data))
            ctypes.memmove(raw.of.string.data, data, len(data))
            option = ffi.wasmtime_component_val_new(ctypes.byref(raw))
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_OPTION
        ptr.contents.of.option = option


FAST: Final = _install()
"""Whether component host functions keep their types between calls (else wasmtime-py's own
trampoline)."""
