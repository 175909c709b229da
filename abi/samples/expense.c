/*
 * Expense: the sample for human approval — a payment that waits, durably, for people to approve
 * it, with a timeout path.
 *
 * Workflow `expense`
 *   Input:  {"expense_id": str, "amount_cents": int,
 *            "policy": {"approvers": [str], "roles": [str], "required": int},
 *            "expires_ms": int, "prepare_first": bool (optional)}
 *   Flow:   requests an approval of "pay expense <expense_id>"; with prepare_first it runs the
 *           activity `prepare` before it waits (decisions arriving meanwhile are kept); then
 *             approved → `pay`        → status "paid"
 *             rejected →                status "rejected"
 *             expired  → `escalate`   → status "escalated" (the timeout path)
 *   Result: {"expense_id", "status", "outcome", "decisions": the approval's decisions}
 *
 * The activities compute their results from their arguments.
 */
#include "amber.h"

AMBER_MANIFEST({
    "abi": 1,
    "workflows": ["expense"],
    "activities": ["prepare", "pay", "escalate"]
})

/* "pay expense <id>" */
static amber_bytes action_of(amber_bytes id) {
    amber_bytes prefix = amber_str("pay expense ");
    uint8_t *buf = (uint8_t *)amber_heap_alloc(prefix.len + id.len);
    __builtin_memcpy(buf, prefix.ptr, prefix.len);
    __builtin_memcpy(buf + prefix.len, id.ptr, id.len);
    return amber_bytes_of(buf, prefix.len + id.len);
}

static amber_bytes id_args(amber_bytes id) {
    amber_writer w = amber_writer_heap(32 + id.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, "expense_id");
    amber_write_str_bytes(&w, id);
    return amber_writer_bytes(&w);
}

static amber_bytes result_of(amber_bytes id, const char *status, amber_bytes outcome,
                             amber_bytes decisions) {
    amber_writer w = amber_writer_heap(96 + id.len + outcome.len + decisions.len);
    amber_write_map(&w, 4);
    amber_write_str(&w, "expense_id");
    amber_write_str_bytes(&w, id);
    amber_write_str(&w, "status");
    amber_write_str(&w, status);
    amber_write_str(&w, "outcome");
    amber_write_str_bytes(&w, outcome);
    amber_write_str(&w, "decisions");
    amber_write_raw(&w, decisions);
    return amber_writer_bytes(&w);
}

AMBER_WORKFLOW(expense) {
    amber_bytes id;
    int64_t expires_ms = 0;
    if (!amber_map_get_str(input, "expense_id", &id) ||
        !amber_map_get_int(input, "expires_ms", &expires_ms))
        return amber_wf_fail(wf, "BadInput", "expected expense_id, expires_ms and policy");
    amber_reader r = amber_reader_new(input), policy_value;
    amber_bytes policy;
    if (!amber_map_find(&r, "policy", &policy_value) || !amber_read_raw(&policy_value, &policy))
        return amber_wf_fail(wf, "BadInput", "expected a policy map");
    bool prepare_first = false;
    amber_map_get_bool(input, "prepare_first", &prepare_first);

    uint32_t approval = amber_request_approval_raw(wf, action_of(id), policy, expires_ms);
    if (prepare_first) {
        amber_result prepared = amber_call_activity(wf, "prepare", id_args(id));
        if (!prepared.ok) return amber_wf_fail(wf, prepared.error_type, prepared.error_message);
    }
    amber_result decided = amber_await(wf, approval);
    if (!decided.ok) return amber_wf_fail(wf, decided.error_type, decided.error_message);

    amber_bytes outcome;
    if (!amber_map_get_str(decided.value, "outcome", &outcome))
        return amber_wf_fail(wf, "BadResult", "the approval result has no outcome");
    amber_reader d = amber_reader_new(decided.value), decisions_value;
    amber_bytes decisions = amber_bytes_of((const uint8_t *)"\x90", 1); /* [] */
    if (amber_map_find(&d, "decisions", &decisions_value))
        amber_read_raw(&decisions_value, &decisions);

    const char *status = "rejected";
    if (amber_bytes_eq(outcome, amber_str("approved"))) {
        amber_result paid = amber_call_activity(wf, "pay", id_args(id));
        if (!paid.ok) return amber_wf_fail(wf, paid.error_type, paid.error_message);
        status = "paid";
    } else if (amber_bytes_eq(outcome, amber_str("expired"))) {
        amber_result escalated = amber_call_activity(wf, "escalate", id_args(id));
        if (!escalated.ok) return amber_wf_fail(wf, escalated.error_type, escalated.error_message);
        status = "escalated";
    }
    return amber_wf_complete(wf, result_of(id, status, outcome, decisions));
}

AMBER_ACTIVITY(prepare) { return amber_act_complete(act, args); }
AMBER_ACTIVITY(pay) { return amber_act_complete(act, args); }
AMBER_ACTIVITY(escalate) { return amber_act_complete(act, args); }
