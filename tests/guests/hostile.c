/*
 * Misbehaving workflows and activities for the host's sandbox tests. One module, built with
 * tools/_build.py like any guest. What each export does:
 *
 *   spin (workflow, activity)  loops forever on a volatile counter: only fuel or the epoch
 *                              deadline stops it.
 *   hog (workflow, activity)   grows memory 1 MiB at a time and writes to every new page; when
 *                              memory.grow fails (the store's memory limit) it traps with
 *                              `unreachable` at once, so the last grow shows the limit was hit.
 *   nap (activity)             calls the `sleep` host import for 600 000 ms (10 minutes), past
 *                              any sane activation deadline; completes with {"slept": true}.
 *   nap_briefly (activity)     sleeps 3 s, then completes with {"slept": true}.
 *   garbage (workflow, activity) returns (ptr, len) of bytes that are not valid msgpack.
 *   badptr (activity)          returns ptr 0xFFFF0000, len 0x10000: past the end of memory.
 *   boom (workflow, activity)  traps with `unreachable` straight away.
 *   crash_on (activity)        echoes its args as its result, but when the args map has
 *                              "crash": true it logs two lines and traps with
 *                              `unreachable` (built with AMBER_VARIANT_FIXED: never traps —
 *                              the "fixed version" of triage tests).
 *   sleepy_wf (workflow)       calls the `sleep` host import (10 ms) from a workflow, which the
 *                              host must refuse as an ABI violation.
 *   awaits (activity)          calls `await_results` from an activity (an ABI violation) with a
 *                              well-formed suspended envelope.
 *   good (workflow)            calls crash_on once with the workflow's input and completes with
 *                              its result (fails with the activity's error if it failed).
 *   call (workflow)            input {"activity": str, "args": any}: calls that activity by name
 *                              (which need not exist) and completes with its result.
 *   fanout (workflow)          input {"n": int}: schedules n crash_on activities, then awaits the
 *                              first (the host caps new commands per activation).
 *   idle (workflow)            suspends through await_results having issued nothing, so it
 *                              awaits nothing (the host refuses this as an ABI violation).
 *   publish_then_trap (workflow) publishes "status" = "about to fail", then traps: a query still
 *                              answers from what was published before the trap.
 *   countdown (workflow)       input {"n": int, "linger_ms": int}: continues as new with n-1
 *                              until n is 0, then sleeps linger_ms (if given) and completes
 *                              with {"done": true}.
 *   sleeper (workflow)         input {"ms": int}: a durable timer of that length, then completes
 *                              with {"slept": ms}.
 *   family (workflow)          input {"policy": str, "child_id": str, "child_input": any}: starts
 *                              a `shipment` child with that parent-close policy and completes
 *                              with the child's result (fails with its error).
 *   diverge (workflow)         deliberately nondeterministic: its first command is crash_on
 *                              when history holds no command yet, `boom` when it does, so its
 *                              second activation diverges from its own history at command 0.
 *   chatty (workflow)          input {"n": int}: records n `now` markers (history limit tests),
 *                              then waits for signal "stop".
 */
#include "amber.h"

AMBER_MANIFEST({
    "abi": 1,
    "workflows": ["spin", "hog", "garbage", "boom", "sleepy_wf", "good", "call", "fanout", "idle",
                  "publish_then_trap", "countdown", "sleeper", "family", "chatty", "diverge"],
    "activities": ["spin", "hog", "nap", "nap_briefly", "garbage", "badptr", "boom", "crash_on", "awaits"]
})

#define EXPORT(name) __attribute__((export_name(name))) int64_t

static void spin_forever(void) {
    volatile uint32_t counter = 0;
    for (;;) counter++;
}

static void hog_forever(void) {
    for (;;) {
        size_t first = __builtin_wasm_memory_grow(0, 16); /* 16 pages = 1 MiB */
        if (first == (size_t)-1) __builtin_trap();
        volatile uint8_t *p = (volatile uint8_t *)(first * 65536u);
        for (uint32_t off = 0; off < 16u * 65536u; off += 4096u) p[off] = 0xAB;
    }
}

/* A map header claiming 3 entries, a str key, then 0xc1 (never valid in msgpack). */
static const uint8_t junk[] = {0x83, 0xa6, 's', 't', 'a', 't', 'u', 's', 0xc1, 0xc1};

static int64_t junk_outcome(void) {
    return (int64_t)(((uint64_t)(uintptr_t)junk << 32) | sizeof junk);
}

/* ---- workflows -------------------------------------------------------------------------- */

EXPORT("amber_workflow.spin") wf_spin(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    spin_forever();
    return 0;
}

EXPORT("amber_workflow.hog") wf_hog(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    hog_forever();
    return 0;
}

EXPORT("amber_workflow.garbage") wf_garbage(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    return junk_outcome();
}

EXPORT("amber_workflow.boom") wf_boom(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    __builtin_trap();
}

AMBER_WORKFLOW(sleepy_wf) {
    amber__host_sleep(10); /* the SDK only offers sleep to activities; call the import directly */
    return amber_wf_complete(wf, input);
}

AMBER_WORKFLOW(good) {
    amber_result r = amber_call_activity(wf, "crash_on", input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}

AMBER_WORKFLOW(diverge) {
    const char *first = wf->has_recorded && wf->recorded > 0 ? "boom" : "crash_on";
    amber_result r = amber_call_activity(wf, first, input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}

AMBER_WORKFLOW(call) {
    amber_bytes name;
    if (!amber_map_get_str(input, "activity", &name))
        return amber_wf_fail(wf, "BadInput", "expected {\"activity\": str, \"args\": any}");
    amber_reader r = amber_reader_new(input), v;
    static const uint8_t nil[] = {0xc0};
    amber_bytes args = amber_bytes_of(nil, sizeof nil);
    if (amber_map_find(&r, "args", &v)) amber_read_raw(&v, &args);
    amber_result res = amber_call_activity(wf, amber_cstr(name), args);
    if (!res.ok) return amber_wf_fail(wf, res.error_type, res.error_message);
    return amber_wf_complete(wf, res.value);
}

AMBER_WORKFLOW(fanout) {
    int64_t n = 0;
    amber_map_get_int(input, "n", &n);
    static const uint8_t args[] = {0x80}; /* {} */
    uint32_t first = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = amber_schedule_activity(wf, "crash_on", amber_bytes_of(args, sizeof args));
        if (i == 0) first = h;
    }
    amber_result res = amber_await(wf, first);
    return amber_wf_complete(wf, res.value);
}

EXPORT("amber_workflow.idle") wf_idle(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    /* {"status": "suspended", "commands": []} */
    static const uint8_t env[] = {0x82, 0xa6, 's', 't', 'a', 't', 'u', 's', 0xa9, 's', 'u',
                                  's', 'p', 'e', 'n', 'd', 'e', 'd', 0xa8, 'c', 'o', 'm',
                                  'm', 'a', 'n', 'd', 's', 0x90};
    amber__host_await_results(AMBER__PTR(env), (int32_t)sizeof env);
    __builtin_trap();
}

AMBER_WORKFLOW(publish_then_trap) {
    (void)input;
    static const uint8_t status[] = {0xad, 'a', 'b', 'o', 'u', 't', ' ', 't', 'o', ' ',
                                     'f', 'a', 'i', 'l'}; /* "about to fail" */
    amber_publish(wf, "status", amber_bytes_of(status, sizeof status));
    __builtin_trap();
}

AMBER_WORKFLOW(countdown) {
    int64_t n = 0, linger_ms = 0;
    amber_map_get_int(input, "n", &n);
    amber_map_get_int(input, "linger_ms", &linger_ms);
    if (n > 0) {
        amber_writer w = amber_writer_heap(32);
        amber_write_map(&w, 2);
        amber_write_str(&w, "n");
        amber_write_int(&w, n - 1);
        amber_write_str(&w, "linger_ms");
        amber_write_int(&w, linger_ms);
        return amber_wf_continue_as_new(wf, amber_writer_bytes(&w));
    }
    if (linger_ms > 0) {
        amber_result r = amber_sleep(wf, linger_ms);
        if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    }
    static const uint8_t done[] = {0x81, 0xa4, 'd', 'o', 'n', 'e', 0xc3}; /* {"done": true} */
    return amber_wf_complete(wf, amber_bytes_of(done, sizeof done));
}

AMBER_WORKFLOW(sleeper) {
    int64_t ms = 0;
    amber_map_get_int(input, "ms", &ms);
    amber_result r = amber_sleep(wf, ms);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    amber_writer w = amber_writer_heap(16);
    amber_write_map(&w, 1);
    amber_write_str(&w, "slept");
    amber_write_int(&w, ms);
    return amber_wf_complete(wf, amber_writer_bytes(&w));
}

AMBER_WORKFLOW(family) {
    amber_bytes policy, child_id, child_input;
    if (!amber_map_get_str(input, "policy", &policy) ||
        !amber_map_get_str(input, "child_id", &child_id) ||
        !amber_map_get_raw(input, "child_input", &child_input))
        return amber_wf_fail(wf, "BadInput", "expected {policy, child_id, child_input}");
    amber_child_options options = {.parent_close_policy = amber_cstr(policy)};
    uint32_t child = amber_start_child(wf, "shipment", child_id, child_input, &options);
    amber_result r = amber_await(wf, child);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}

AMBER_WORKFLOW(chatty) {
    int64_t n = 0;
    amber_map_get_int(input, "n", &n);
    for (int64_t i = 0; i < n; i++) (void)amber_now(wf);
    amber_result r = amber_await_signal(wf, "stop");
    return amber_wf_complete(wf, r.value);
}

/* ---- activities ------------------------------------------------------------------------- */

EXPORT("amber_activity.spin") act_spin(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    spin_forever();
    return 0;
}

EXPORT("amber_activity.hog") act_hog(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    hog_forever();
    return 0;
}

AMBER_ACTIVITY(nap_briefly) {
    (void)args;
    amber_act_sleep(act, 3000);
    static const uint8_t slept[] = {0x81, 0xa5, 's', 'l', 'e', 'p', 't', 0xc3};
    return amber_act_complete(act, amber_bytes_of(slept, sizeof slept));
}

AMBER_ACTIVITY(nap) {
    (void)args;
    amber_act_sleep(act, 600000);
    /* {"slept": true} */
    static const uint8_t slept[] = {0x81, 0xa5, 's', 'l', 'e', 'p', 't', 0xc3};
    return amber_act_complete(act, amber_bytes_of(slept, sizeof slept));
}

EXPORT("amber_activity.garbage") act_garbage(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    return junk_outcome();
}

EXPORT("amber_activity.badptr") act_badptr(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    return (int64_t)(((uint64_t)0xFFFF0000u << 32) | 0x10000u);
}

EXPORT("amber_activity.boom") act_boom(int32_t ptr, int32_t len) {
    (void)ptr, (void)len;
    __builtin_trap();
}

AMBER_ACTIVITY(crash_on) {
    bool crash = false;
#ifndef AMBER_VARIANT_FIXED
    if (amber_map_get_bool(args, "crash", &crash) && crash) {
        amber_log(act, 2, "crash_on: asked to crash");
        amber_log(act, 3, "crash_on: trapping now");
        __builtin_trap();
    }
#endif
    (void)crash;
    return amber_act_complete(act, args);
}

AMBER_ACTIVITY(awaits) {
    (void)args;
    /* {"status": "suspended", "commands": []} */
    static const uint8_t env[] = {0x82, 0xa6, 's', 't', 'a', 't', 'u', 's', 0xa9, 's', 'u',
                                  's', 'p', 'e', 'n', 'd', 'e', 'd', 0xa8, 'c', 'o', 'm',
                                  'm', 'a', 'n', 'd', 's', 0x90};
    amber__host_await_results(AMBER__PTR(env), (int32_t)sizeof env);
    return amber_act_fail(act, "Unreachable", "await_results returned", true);
}
