/*
 * Benchmark sample: workflow `chain` runs activity `add_one` k times in sequence.
 *
 * Input {"k": int, "value": int} → result {"value": value + k}. Each add_one call takes
 * {"value": n} and returns {"value": n + 1}. Activation i replays i results, so a whole run
 * costs O(k²) guest work: the shape that shows what replay costs.
 */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["chain"], "activities": ["add_one"]})

/* {"value": v} in buf (17 bytes are enough for any int64). */
static amber_bytes value_map(uint8_t *buf, uint32_t cap, int64_t v) {
    amber_writer w = amber_writer_fixed(buf, cap);
    amber_write_map(&w, 1);
    amber_write_str(&w, "value");
    amber_write_int(&w, v);
    return amber_writer_bytes(&w);
}

AMBER_WORKFLOW(chain) {
    int64_t k, value;
    uint8_t buf[24];
    if (!amber_map_get_int(input, "k", &k) || !amber_map_get_int(input, "value", &value) || k < 0)
        return amber_wf_fail(wf, "BadInput", "expected {k: int >= 0, value: int}");
    for (int64_t i = 0; i < k; i++) {
        amber_result r = amber_call_activity(wf, "add_one", value_map(buf, sizeof buf, value));
        if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
        if (!amber_map_get_int(r.value, "value", &value))
            return amber_wf_fail(wf, "BadResult", "add_one returned no value");
    }
    return amber_wf_complete(wf, value_map(buf, sizeof buf, value));
}

AMBER_ACTIVITY(add_one) {
    int64_t value;
    uint8_t buf[24];
    if (!amber_map_get_int(args, "value", &value))
        return amber_act_fail(act, "BadArgs", "expected {value: int}", true);
    if (value == INT64_MAX) return amber_act_fail(act, "Overflow", "value is INT64_MAX", true);
    return amber_act_complete(act, value_map(buf, sizeof buf, value + 1));
}
