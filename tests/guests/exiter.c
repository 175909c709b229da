/*
 * A guest that ends the process hosting it, for the surgical pool's tests. It imports the
 * test-only host import `test_exit`, so it validates and links only where the host process has
 * AMBER_TEST_HOST_IMPORTS=1 (tests/conftest.py sets it).
 *
 *   exit_on (activity)  logs "exit_on"; when args has "heartbeat": true, heartbeats with args as
 *                       details (failing with a non-retryable "Cancelled" if the run asked it
 *                       to stop); when args has "exit": true, calls test_exit(3), which never
 *                       returns. Otherwise completes with its args as the result.
 *   exit_wf (workflow)  calls exit_on once with the workflow's input and completes with its
 *                       result (fails with the activity's error if it failed).
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["exit_wf"], "activities": ["exit_on"]})

__attribute__((import_module("amber"), import_name("test_exit"))) void amber_test_exit(int32_t code);

static bool flag(amber_bytes args, const char *key) {
    bool on = false;
    return amber_map_get_bool(args, key, &on) && on;
}

AMBER_ACTIVITY(exit_on) {
    amber_act_log(act, AMBER_INFO, "exit_on");
    if (flag(args, "heartbeat") && (amber_act_heartbeat(act, args) || amber_act_cancel_requested(act)))
        return amber_act_fail(act, "Cancelled", "the run asked exit_on to stop", true);
    if (flag(args, "exit")) amber_test_exit(3);
    return amber_act_complete(act, args);
}

AMBER_WORKFLOW(exit_wf) {
    amber_result r = amber_call_activity(wf, "exit_on", input);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}
