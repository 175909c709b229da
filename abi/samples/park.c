/*
 * Benchmark sample: workflow `park` waits — the shape of a run parked on a human or a calendar.
 *
 * Input {"days": int 0..3650} → races a durable timer of `days` days against the signal "go"
 * (any payload); result {"woke_by": "timer" | "signal"}. A parked run does no work until one of
 * them fires, so `amber bench` uses it to measure what waiting costs: database rows only, no
 * worker memory.
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["park"], "activities": []})

AMBER_WORKFLOW(park) {
    int64_t days;
    if (!amber_map_get_int(input, "days", &days) || days < 0 || days > 3650)
        return amber_wf_fail(wf, "BadInput", "expected {days: 0..3650}");
    enum { TIMER, GO };
    uint32_t waits[2], first;
    waits[TIMER] = amber_start_timer(wf, days * AMBER_DAY_MS);
    waits[GO] = amber_wait_signal(wf, "go");
    amber_result r = amber_await_any(wf, waits, 2, &first);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    if (first == GO) amber_cancel_timer(wf, waits[TIMER]);
    uint8_t buf[32];
    amber_writer w = amber_writer_fixed(buf, sizeof buf);
    amber_write_map(&w, 1);
    amber_write_str(&w, "woke_by");
    amber_write_str(&w, first == GO ? "signal" : "timer");
    return amber_wf_complete(wf, amber_writer_bytes(&w));
}
