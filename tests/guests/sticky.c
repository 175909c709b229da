/*
 * Shapes that test sticky instances (tests/runtime/test_sticky.py) against a replay from the top.
 *
 * probe_wait: schedules an activity and a signal wait, reads the clock, then awaits the first
 * of the two and logs. When the signal is already buffered, the report that records these
 * commands makes the clock's marker the newest entry of history: a replay from the top reads
 * it before the await (so is no longer "replaying" there, and logs), and a live instance going
 * on from the await must agree.
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["probe_wait"], "activities": ["echo"]})

AMBER_WORKFLOW(probe_wait) {
    uint32_t a = amber_schedule_activity(wf, "echo", input);
    uint32_t s = amber_wait_signal(wf, "x");
    (void)amber_now(wf);
    uint32_t handles[2] = {a, s}, index;
    amber_result r = amber_await_any(wf, handles, 2, &index);
    amber_wf_log(wf, 1, "after the first await");
    r = amber_await(wf, index == 0 ? s : a);
    amber_wf_log(wf, 1, "after the second await");
    (void)r;
    return amber_wf_complete(wf, input);
}

AMBER_ACTIVITY(echo) { return amber_act_complete(act, args); }
