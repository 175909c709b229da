"""The Wasm-level types of every ABI v1 export and host import, as plain value-type names."""

from __future__ import annotations

Signature = tuple[tuple[str, ...], tuple[str, ...]]
"""(parameter types, result types), e.g. (("i32", "i32"), ("i64",))."""

HOST_MODULE = "amber"
ALLOC_EXPORT = "amber_alloc"
MEMORY_EXPORT = "memory"
ALLOC_SIGNATURE: Signature = (("i32",), ("i32",))
ENTRY_SIGNATURE: Signature = (("i32", "i32"), ("i64",))
"""Every `amber_workflow.<name>` and `amber_activity.<name>` export."""

HOST_IMPORTS: dict[str, Signature] = {
    "await_results": (("i32", "i32"), ()),
    "now": ((), ("i64",)),
    "random": (("i32", "i32"), ()),
    "log": (("i32", "i32", "i32"), ()),
    "sleep": (("i64",), ()),
    "publish": (("i32", "i32", "i32", "i32"), ()),
    "heartbeat": (("i32", "i32"), ("i32",)),
    "cancel_requested": ((), ("i32",)),
    "http_request": (("i32", "i32"), ("i32",)),
    "take": (("i32", "i32"), ()),
}
"""Everything a guest may import from module `amber`."""
