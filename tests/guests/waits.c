/*
 * A guest whose activity waits in a host call, for the tests of guests giving up their places
 * while they wait (a sleep uses no CPU, so other guests run meanwhile).
 *
 *   wait_then_log (activity)  args {"ms": int}: sleeps ms, then logs "after the wait" and
 *                             completes with its args: a host call after the wait that went
 *                             to another activation would be missing from this one's output.
 *   wait_then_count (activity) args {"ms": int, "n": int}: sleeps ms, then counts a volatile
 *                             counter up to n and completes with its args: a wait, then work
 *                             past any slice.
 *   waits_wf (workflow)       calls wait_then_log once with the workflow's input and completes
 *                             with its result.
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["waits_wf"],
                "activities": ["wait_then_log", "wait_then_count"]})

AMBER_ACTIVITY(wait_then_log) {
    int64_t ms = 0;
    if (!amber_map_get_int(args, "ms", &ms) || ms < 0)
        return amber_act_fail(act, "BadInput", "expected {\"ms\": a duration}", true);
    amber_act_sleep(act, ms);
    amber_act_log(act, 1, "after the wait");
    return amber_act_complete(act, args);
}

AMBER_ACTIVITY(wait_then_count) {
    int64_t ms = 0, n = 0;
    if (!amber_map_get_int(args, "ms", &ms) || ms < 0 || !amber_map_get_int(args, "n", &n))
        return amber_act_fail(act, "BadInput", "expected {\"ms\": a duration, \"n\": a count}",
                              true);
    amber_act_sleep(act, ms);
    volatile int64_t counter = 0;
    while (counter < n) counter++;
    return amber_act_complete(act, args);
}

AMBER_WORKFLOW(waits_wf) {
    amber_result r = amber_call_activity(wf, "wait_then_log", input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}
