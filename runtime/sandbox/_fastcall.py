"""A fresh instance's exports, looked up by name and called through wasmtime's C API.

Use `exports(pre, store, instance)` where an activation needs a few exports of a new instance and
calls ABI functions with integer arguments; it gives the same externs, results and exceptions as
wasmtime-py's `Instance.exports(store)[name]` and `Func.__call__`, at a fraction of the cost.

Why: `Instance.exports` wraps every export of the instance where an activation needs three, and
`Func.__call__` looks up the function's type through the C API, builds type objects and converts
each value on every call, several times the cost of the call itself. Both sit on every
activation's path; `amber bench` prints what an activation costs (its sandbox breakdown).

How: through wasmtime-py's private ctypes bindings (`wasmtime._ffi`, `wasmtime._func`,
`wasmtime._extern`), which `wasmtime==50.0.1` in pyproject pins: one export is looked up with
`wasmtime_instance_export_get` and wrapped as `wrap_extern` does; a call builds its
`wasmtime_val_t` arrays itself and calls `wasmtime_func_call`, whose type check in wasmtime still
guards every call. The export's type is compared with the ABI signature once per `InstancePre`
and export name (`Func.__call__` would do it on every call); an export of another type goes
through `Func.__call__`, so its conversions and errors are wasmtime-py's own. A call ends
exactly as `Func.__call__` inside `enter_wasm` (wasmtime/_func.py) does: an error pointer becomes
`WasmtimeError._from_ptr`, a trap pointer `Trap._from_ptr`, and either way a Python exception a
host import raised (how a workflow suspends) comes out unchanged through `maybe_raise_last_exn`,
which reads the module global the host-import trampoline writes (wasmtime 50 reports a failed
host import as an error pointer; a guest trap comes as a trap pointer). A `FastExports` holds its
`Store` for as long as it lives: raw handles are only meaningful while their store is.

Fallback: `FAST` is decided once, at import. Under another major version of wasmtime-py, or if
any private name or ctypes layout used here is missing or shaped differently, `exports` is
`PublicExports`: the public API, same behaviour at the old cost. tests/runtime/test_fastcall.py
runs both against the same guests and checks that `FAST` holds on the pinned version; a wasmtime
upgrade must pass it before `_SUPPORTED_MAJOR` changes.

Rejected: `wasmtime_func_call_unchecked` (no type or arity check: a wrong signature would be
memory corruption rather than an error); keeping `Func` objects across activations (they belong
to one store, and every activation has a fresh store); reading and writing linear memory through
raw pointers (public `Memory.read`/`write` cost little next to a call: not worth more private
surface).
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable
from ctypes import POINTER, byref
from dataclasses import dataclass
from typing import Any, Final, Protocol

import wasmtime

from amber.abi import Signature
from amber.versions import WASMTIME_VERSION

__all__ = ["FAST", "FastExports", "InstanceExports", "PublicExports", "exports"]

_SUPPORTED_MAJOR: Final = "50"
"""The wasmtime-py major version whose private layout this module was checked against."""


class InstanceExports(Protocol):
    """The exports of one instance in one store, as an activation uses them."""

    def __getitem__(self, name: str) -> object:
        """The export `name` (a `wasmtime.Func`, `Memory`, …); `KeyError` if there is none."""
        ...

    def get(self, name: str) -> object | None:
        """The export `name`, or None if the instance has none."""
        ...

    def call(self, name: str, signature: Signature, *args: int) -> int:
        """Call the function export `name`, expected to have `signature`, with `args`.

        Returns its one result. Raises what `Func.__call__` raises: `wasmtime.Trap`,
        `wasmtime.WasmtimeError`, or the exception a host import raised, unchanged.
        """
        ...


class PublicExports:
    """wasmtime-py's public API: the reference behaviour, and the fallback."""

    __slots__ = ("_exports", "_store")

    def __init__(
        self, pre: wasmtime.InstancePre, store: wasmtime.Store, instance: wasmtime.Instance
    ) -> None:
        self._store = store
        self._exports = instance.exports(store)

    def __getitem__(self, name: str) -> object:
        return self._exports[name]

    def get(self, name: str) -> object | None:
        return self._exports.get(name)

    def call(self, name: str, signature: Signature, *args: int) -> int:
        result: int = self._exports[name](self._store, *args)  # type: ignore[operator]
        return result


def _probe() -> bool:
    """Whether the private names and ctypes layouts `FastExports` relies on are as expected."""
    try:
        from wasmtime import _ffi, _func

        if WASMTIME_VERSION.split(".")[0] != _SUPPORTED_MAJOR:
            return False
        val_fields = {f[0]: f[1] for f in _ffi.wasmtime_val_t._fields_}
        union_fields = {f[0]: f[1] for f in _ffi.wasmtime_valunion_t._fields_}
        extern_fields = {f[0]: f[1] for f in _ffi.wasmtime_extern_t._fields_}
        return (
            callable(_ffi.wasmtime_instance_export_get)
            and callable(_ffi.wasmtime_func_call)
            and callable(_func.maybe_raise_last_exn)
            and hasattr(_func, "LAST_EXCEPTION")
            and val_fields.get("of") is _ffi.wasmtime_valunion_t
            and union_fields.get("i32") is ctypes.c_int32
            and union_fields.get("i64") is ctypes.c_int64
            and extern_fields.get("of") is _ffi.wasmtime_extern_union_t
            and wasmtime.Instance.__annotations__.get("_instance") is _ffi.wasmtime_instance_t
            and wasmtime.Func.__annotations__.get("_func") is _ffi.wasmtime_func_t
            and all(
                callable(getattr(owner, name, None))
                for owner, name in (
                    (wasmtime.Store, "_context"),
                    (wasmtime.Func, "_from_raw"),
                    (wasmtime.Memory, "_from_raw"),
                    (wasmtime.Trap, "_from_ptr"),
                    (wasmtime.WasmtimeError, "_from_ptr"),
                )
            )
        )
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


FAST: Final = _probe()
"""True when calls go through the C API (`FastExports`), False on the public-API fallback."""

if FAST:
    from wasmtime import _extern, _ffi, _func

    _I32: Final[int] = _ffi.WASMTIME_I32.value
    _I64: Final[int] = _ffi.WASMTIME_I64.value
    _KINDS: Final[dict[str, int]] = {"i32": _I32, "i64": _I64}
    _EXTERN_FUNC: Final[int] = _ffi.WASMTIME_EXTERN_FUNC.value
    _EXTERN_MEMORY: Final[int] = _ffi.WASMTIME_EXTERN_MEMORY.value
    _TrapPointer: Any = POINTER(_ffi.wasm_trap_t)


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to pass a signature's arguments: the value kinds, and array types built once."""

    kinds: tuple[int, ...]
    params: Callable[[], Any]
    results: Callable[[], Any]


_plans: dict[Signature, _Plan] = {}
_checked: weakref.WeakKeyDictionary[wasmtime.InstancePre, dict[tuple[str, Signature], bool]] = (
    weakref.WeakKeyDictionary()
)
"""Per module: whether an export has the signature it was called with (a module's export types
are fixed, so once is enough)."""


def _plan(signature: Signature) -> _Plan | None:
    """The plan for a signature of i32/i64 parameters and one i32/i64 result, else None."""
    plan = _plans.get(signature)
    if plan is None:
        params, results = signature
        if len(results) != 1 or not set(params) | set(results) <= _KINDS.keys():
            return None
        plan = _Plan(
            kinds=tuple(_KINDS[p] for p in params),
            params=_ffi.wasmtime_val_t * len(params),
            results=_ffi.wasmtime_val_t * 1,
        )
        _plans[signature] = plan
    return plan


def _signature_of(func: wasmtime.Func, store: wasmtime.Store) -> Signature:
    ty = func.type(store)
    return tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results)


class FastExports:
    """Exports looked up one by one and called through `wasmtime_func_call`.

    Behaves as `PublicExports` (see the module docstring for how, and why this exists).
    """

    __slots__ = ("_checked", "_found", "_instance", "_store")

    def __init__(
        self, pre: wasmtime.InstancePre, store: wasmtime.Store, instance: wasmtime.Instance
    ) -> None:
        self._store = store  # the raw handles below are only valid while it lives
        self._instance = instance
        checked = _checked.get(pre)
        if checked is None:
            checked = _checked[pre] = {}
        self._checked = checked
        self._found: dict[str, object] = {}

    def __getitem__(self, name: str) -> object:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: str) -> object | None:
        found = self._found.get(name)
        if found is not None:
            return found
        raw = name.encode("utf-8")
        item = _ffi.wasmtime_extern_t()
        if not _ffi.wasmtime_instance_export_get(
            self._store._context(), byref(self._instance._instance), raw, len(raw), byref(item)
        ):
            return None
        kind: int = item.kind  # type: ignore[assignment]  # ctypes reads a c_uint8 field as int
        # As `wrap_extern`, whose import and kind tests this skips for the two common kinds.
        if kind == _EXTERN_FUNC:
            found = wasmtime.Func._from_raw(item.of.func)
        elif kind == _EXTERN_MEMORY:
            found = wasmtime.Memory._from_raw(item.of.memory)
        else:
            found = _extern.wrap_extern(item)
        self._found[name] = found
        return found

    def call(self, name: str, signature: Signature, *args: int) -> int:
        func = self[name]
        if not isinstance(func, wasmtime.Func):
            raise TypeError(f"{type(func).__name__!r} object is not callable")
        store = self._store
        key = (name, signature)
        matches = self._checked.get(key)
        if matches is None:
            matches = self._checked[key] = _signature_of(func, store) == signature
        plan = _plan(signature) if matches else None
        if plan is None:
            result: int = func(store, *args)
            return result
        return _call(store, func, plan, args)


def _call(store: wasmtime.Store, func: wasmtime.Func, plan: _Plan, args: tuple[int, ...]) -> int:
    """`Func.__call__` for a function whose type is known to match `plan`."""
    count = len(plan.kinds)
    if len(args) != count:  # Func.__call__'s own check and messages
        many = "many" if len(args) > count else "few"
        raise wasmtime.WasmtimeError(
            f"too {many} parameters provided: given {len(args)}, expected {count}"
        )
    params = plan.params()
    for i, kind in enumerate(plan.kinds):
        param = params[i]
        param.kind = kind
        if kind == _I32:
            param.of.i32 = args[i]
        else:
            param.of.i64 = args[i]
    results = plan.results()
    trap = _TrapPointer()
    # The structure of `enter_wasm`, so that which exception wins, and its context, are the same.
    # i32/i64 values hold no GC references: nothing to unroot afterwards.
    try:
        error = _ffi.wasmtime_func_call(
            store._context(), byref(func._func), params, count, results, 1, byref(trap)
        )
        if error:
            raise wasmtime.WasmtimeError._from_ptr(error)
        if trap:
            trapped = wasmtime.Trap._from_ptr(trap)
            _func.maybe_raise_last_exn()
            raise trapped
    except wasmtime.WasmtimeError:
        _func.maybe_raise_last_exn()
        raise
    result = results[0]
    value: int = result.of.i32 if result.kind == _I32 else result.of.i64
    return value


exports: Callable[[wasmtime.InstancePre, wasmtime.Store, wasmtime.Instance], InstanceExports] = (
    FastExports if FAST else PublicExports
)
"""The exports of a new instance: `FastExports` where `FAST`, else `PublicExports`."""
