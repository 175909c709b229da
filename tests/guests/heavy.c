/*
 * A guest that computes for as long as it is asked to, for the tests of the background lane
 * (an activity that uses up its fuel slice runs again, on its whole budget, at low priority).
 *
 *   count_to (activity)  counts a volatile counter up to args "n", then completes with
 *                        {"n": n}: a heavy activity that ends when its budget allows it to.
 *   heavy_wf (workflow)  calls count_to once with the workflow's input and completes with its
 *                        result (fails with the activity's error if it failed).
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["heavy_wf"], "activities": ["count_to"]})

AMBER_ACTIVITY(count_to) {
    int64_t n = 0;
    if (!amber_map_get_int(args, "n", &n) || n < 0)
        return amber_act_fail(act, "BadInput", "expected {\"n\": a count}", true);
    volatile int64_t counter = 0;
    while (counter < n) counter++;
    return amber_act_complete(act, args);
}

AMBER_WORKFLOW(heavy_wf) {
    amber_result r = amber_call_activity(wf, "count_to", input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}
