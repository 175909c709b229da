"""The Wasm-level types of every ABI v1 export and host import, as plain value-type names."""

from __future__ import annotations

import os

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
    "await_next": (("i32", "i32"), ("i32",)),
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

TEST_HOST_IMPORTS_ENV = "AMBER_TEST_HOST_IMPORTS"
"""Set to "1" in a process to let its modules import `TEST_HOST_IMPORTS` (tests only)."""

TEST_HOST_IMPORTS: dict[str, Signature] = {
    "test_exit": (("i32",), ()),
}
"""Host imports that exist only for tests, and only where `TEST_HOST_IMPORTS_ENV` is "1".

`test_exit(code)` ends the hosting process at once (`os._exit`): how tests crash the process
that runs a guest.
"""


def allowed_host_imports() -> dict[str, Signature]:
    """What a guest may import from module `amber` in this process.

    `HOST_IMPORTS`, plus `TEST_HOST_IMPORTS` when the environment enables them. Use this (not
    `HOST_IMPORTS`) wherever imports are checked or defined, so validation and the linker agree.
    """
    if os.environ.get(TEST_HOST_IMPORTS_ENV) == "1":
        return {**HOST_IMPORTS, **TEST_HOST_IMPORTS}
    return dict(HOST_IMPORTS)
