/*
 * Poison pills, for the benchmark's isolation phase (and as a catalogue of what the sandbox
 * stops): workflow `poisoned` calls one activity that never completes.
 *
 * Input {"kind": "trap" | "fuel" | "memory"}:
 *   trap    activity `trap_now`  traps with `unreachable` at once.
 *   fuel    activity `burn`      loops on a volatile counter until its fuel runs out.
 *   memory  activity `hoard`     grows linear memory 1 MiB at a time, touching every page, until
 *                                `memory.grow` fails at the store's limit; then it traps.
 * Each crash has one fingerprint per kind (same code, step and fault), so the first run of a kind
 * is poisoned after its crashes and the next ones at their first.
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["poisoned"], "activities": ["trap_now", "burn", "hoard"]})

AMBER_WORKFLOW(poisoned) {
    amber_bytes kind;
    if (!amber_map_get_str(input, "kind", &kind))
        return amber_wf_fail(wf, "BadInput", "expected {\"kind\": \"trap\" | \"fuel\" | \"memory\"}");
    const char *activity = amber_bytes_eq_str(kind, "fuel")     ? "burn"
                           : amber_bytes_eq_str(kind, "memory") ? "hoard"
                                                                 : "trap_now";
    amber_result r = amber_call_activity(wf, activity, input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}

AMBER_ACTIVITY(trap_now) {
    (void)act, (void)args;
    __builtin_trap();
}

AMBER_ACTIVITY(burn) {
    (void)act, (void)args;
    volatile uint32_t counter = 0;
    for (;;) counter++;
}

AMBER_ACTIVITY(hoard) {
    (void)act, (void)args;
    for (;;) {
        size_t first = __builtin_wasm_memory_grow(0, 16); /* 16 pages = 1 MiB */
        if (first == (size_t)-1) __builtin_trap();
        volatile uint8_t *p = (volatile uint8_t *)(first * 65536u);
        for (uint32_t off = 0; off < 16u * 65536u; off += 4096u) p[off] = 0xAB;
    }
}
