"""wasmtime's pooling allocator for the engine: instances take a slot reserved up front, and a
slot's linear memory stays mapped for the next instance.

Use `pooled_config(instances)` when creating the process's engine: `instances` is how many
instances (a Python guest's component or a C guest's module) may be alive at once in the
process — every live and kept instance of `StickySandbox` and `WarmActivities`, plus the
activations running (`pool_instances`). Beyond it an instantiation fails (`POOL_FULL` in
wasmtime's message), which the sandbox reports as `SandboxBusy` (`instantiating`), a retryable
host condition, never as the guest's fault.

Why: with the default allocator every activation maps a fresh linear memory and unmaps it at
the end. For a Python guest that is CPython's heap: about 450 copy-on-write page faults and an
unmap of the pages it touched, measured as 1.1-1.2 ms of system time of a 2.3-2.5 ms fresh
activation. From a pool, a fresh activation of a trivial Python workflow measured 1.3-1.8 ms
and a C guest's activation 41 µs instead of 78 µs (`amber bench` prints both). Guest semantics
do not change: memory and table limits are still the store's, an instance still starts from
its module's image, and fuel counts are the same.

A freed slot's linear memory is given back to the kernel (`madvise`), none of it kept resident
(`KEEP_RESIDENT_BYTES`). Keeping pages resident spares the next instance its page faults, but
wasmtime then resets them with `memset` when the slot is freed, and keeps them in every slot
ever used, not only in the `WARM_SLOTS` it keeps warm: with 16 MiB kept, 40 live Python
instances closed left the process at 589 MiB of RSS (87 MiB with none kept), for good, and the
`memset` made a fresh activation with its store's release slower, not faster (5.9-6.2 ms
against 5.5-6.0 ms on a slowed machine, where both are 3× the figures above). A worker's memory
would have grown to its peak concurrency times 16 MiB and stayed there.

How: wasmtime-py's `Config` does not wrap the pooling allocator, but its ctypes bindings
(`wasmtime._ffi`, pinned with the version in pyproject) hold the C API's
`wasmtime_pooling_allocation_*` functions; they are called here, once per engine.

Sizes: per instance of `instances`, 2 linear memories, 16 core instances (CPython's component
holds about 15) and 4 tables; each memory slot reserves `MAX_MEMORY_BYTES` of address space
(the largest memory a budget may allow, 4 GiB) plus guard pages, which is address space only.
More than `MAX_POOLED_INSTANCES` would reserve more address space than is sensible (and more
than a 47-bit address space has for a few engines at once), so such a process keeps the default
allocator.

Fallback: where any of those names is missing (another wasmtime-py), the engine keeps the
default allocator, and everything works as before at the old cost. Rejected: deleting stores on
a background thread instead (measured slower: the unmap then contends with the next
activation's page faults for the process's memory map).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import wasmtime

from amber.runtime.model import SandboxBusy

MAX_MEMORY_BYTES: Final = 4 * 1024 * 1024 * 1024
"""The largest linear memory a slot may hold (a budget's `memory_mb` may go up to 4096)."""
KEEP_RESIDENT_BYTES: Final = 0
"""Bytes of a freed slot's linear memory kept resident (see the module docstring: none)."""
WARM_SLOTS: Final = 4
"""Freed slots that keep their module's image mapped for the next instance of the same module
(4 to 100 measured alike for activations one after the other, which reuse the slot the last
one freed)."""
TABLE_ELEMENTS: Final = 100_000
"""The largest table a slot may hold (the store's limits, 10,000 elements for a C guest and
65,536 for a Python one, are below it). Larger slots cost more to reset: with 2^20 a fresh
Python activation measured 1.7 ms against 1.4."""
TABLE_KEEP: Final = 1024 * 1024
"""Bytes of a freed table slot kept resident (a whole table of `TABLE_ELEMENTS`)."""
MAX_POOLED_INSTANCES: Final = 1024


def pool_instances(*, sticky_runs: int, warm_runs: int, slots: int) -> int:
    """How many instances a worker's process may hold at once: twice its live workflow
    instances (those it dropped may still be unwinding on their threads), its kept activity
    instances, and the activations running beside them, with a margin."""
    return 2 * sticky_runs + warm_runs + slots + 16


DEFAULT_INSTANCES: Final = pool_instances(sticky_runs=64, warm_runs=16, slots=16)
"""A worker's defaults (`STICKY_RUNS`, `WARM_RUNS`, 16 slots): 176."""
POOL_FULL: Final = "maximum concurrent limit of"
"""What wasmtime says when an instantiation finds the pool full."""


def pooled_config(config: wasmtime.Config, instances: int) -> bool:
    """Set `config` to the pooling allocator sized for `instances` live instances; False (and
    `config` unchanged) where it cannot: too many instances, or bindings not found."""
    if not 1 <= instances <= MAX_POOLED_INSTANCES:
        return False
    try:
        from wasmtime import _ffi as ffi

        pool = ffi.wasmtime_pooling_allocation_config_new()
        settings = (
            (ffi.wasmtime_pooling_allocation_config_total_component_instances_set, instances),
            (ffi.wasmtime_pooling_allocation_config_total_core_instances_set, 16 * instances),
            (ffi.wasmtime_pooling_allocation_config_total_memories_set, 2 * instances),
            (ffi.wasmtime_pooling_allocation_config_total_tables_set, 4 * instances),
            # Stacks serve async calls only, which Amber never makes; the default 1,000 are
            # mapped up front (2 GB, which a child's RLIMIT_DATA refuses).
            (ffi.wasmtime_pooling_allocation_config_total_stacks_set, 1),
            (ffi.wasmtime_pooling_allocation_config_max_core_instances_per_component_set, 64),
            (ffi.wasmtime_pooling_allocation_config_max_memories_per_component_set, 64),
            (ffi.wasmtime_pooling_allocation_config_max_tables_per_component_set, 64),
            (ffi.wasmtime_pooling_allocation_config_max_memory_size_set, MAX_MEMORY_BYTES),
            (ffi.wasmtime_pooling_allocation_config_table_elements_set, TABLE_ELEMENTS),
            (
                ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set,
                KEEP_RESIDENT_BYTES,
            ),
            (ffi.wasmtime_pooling_allocation_config_max_unused_warm_slots_set, WARM_SLOTS),
            (ffi.wasmtime_pooling_allocation_config_table_keep_resident_set, TABLE_KEEP),
            (ffi.wasmtime_pooling_allocation_config_max_component_instance_size_set, 1 << 20),
            (ffi.wasmtime_pooling_allocation_config_max_core_instance_size_set, 1 << 20),
        )
        strategy = ffi.wasmtime_pooling_allocation_strategy_set
        delete = ffi.wasmtime_pooling_allocation_config_delete
    except (ImportError, AttributeError):
        return False
    try:
        for setter, value in settings:
            setter(pool, value)
        strategy(config.ptr(), pool)
    finally:
        delete(pool)
    return True


@contextmanager
def instantiating() -> Iterator[None]:
    """Around an instantiation: a full pool raises `SandboxBusy`, a retryable host condition,
    where wasmtime reports it as a trap (which would read as the guest's fault)."""
    try:
        yield
    except (wasmtime.WasmtimeError, wasmtime.Trap) as exc:
        if POOL_FULL not in str(exc):
            raise
        first = str(exc).strip().splitlines()[0]
        raise SandboxBusy(f"no room for another guest instance in this process: {first}") from exc
