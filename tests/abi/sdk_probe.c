/* SDK probe: exercises amber.h features the samples do not (recorded randomness, replay
 * detection, the msgpack reader and writer on edge cases). Built by tests/abi/test_sdk.py. */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["probe", "fanout", "rand_len"],
                "activities": ["echo", "skip", "write_all", "rand", "info", "lookup"]})

/* random(8), now, echo({"r": bin, "t": int}) → {"r", "t", "echo"} */
AMBER_WORKFLOW(probe) {
    (void)input;
    uint8_t r[8];
    amber_random(wf, r, sizeof r);
    int64_t t = amber_now(wf);
    amber_log(wf, AMBER_INFO, "start");
    amber_writer w = amber_writer_heap(64);
    amber_write_map(&w, 2);
    amber_write_str(&w, "r");
    amber_write_bin(&w, amber_bytes_of(r, sizeof r));
    amber_write_str(&w, "t");
    amber_write_int(&w, t);
    amber_result e = amber_call_activity(wf, "echo", amber_writer_bytes(&w));
    amber_log(wf, AMBER_INFO, "after echo");
    if (!e.ok) return amber_wf_fail(wf, e.error_type, e.error_message);
    amber_writer out = amber_writer_heap(64);
    amber_write_map(&out, 3);
    amber_write_str(&out, "r");
    amber_write_bin(&out, amber_bytes_of(r, sizeof r));
    amber_write_str(&out, "t");
    amber_write_int(&out, t);
    amber_write_str(&out, "echo");
    amber_write_raw(&out, e.value);
    return amber_wf_complete(wf, amber_writer_bytes(&out));
}

/* Schedules echo "a" then "b", awaits b first, then a; logs after each. */
AMBER_WORKFLOW(fanout) {
    (void)input;
    uint8_t a[] = {0xa1, 'a'}, b[] = {0xa1, 'b'};
    uint32_t ha = amber_schedule_activity(wf, "echo", amber_bytes_of(a, 2));
    uint32_t hb = amber_schedule_activity(wf, "echo", amber_bytes_of(b, 2));
    amber_await(wf, hb);
    amber_log(wf, AMBER_INFO, "got b");
    amber_await(wf, ha);
    amber_log(wf, AMBER_INFO, "got a");
    return amber_wf_complete(wf, amber_bytes_of(a, 2));
}

/* {"n": int} → n recorded random bytes as bin */
AMBER_WORKFLOW(rand_len) {
    int64_t n = 0;
    static uint8_t buf[2048];
    if (!amber_map_get_int(input, "n", &n) || n < 0 || n > 2048)
        return amber_wf_fail(wf, "BadInput", "n");
    amber_random(wf, buf, (uint32_t)n);
    amber_writer w = amber_writer_heap(16 + (uint32_t)n);
    amber_write_bin(&w, amber_bytes_of(buf, (uint32_t)n));
    return amber_wf_complete(wf, amber_writer_bytes(&w));
}

AMBER_ACTIVITY(echo) { return amber_act_complete(act, args); }

/* Skips one msgpack value in args: {"ok": the value was complete and nothing followed} */
AMBER_ACTIVITY(skip) {
    amber_reader r = amber_reader_new(args);
    bool ok = amber_read_skip(&r) && amber_reader_done(&r);
    uint8_t buf[8];
    amber_writer w = amber_writer_fixed(buf, sizeof buf);
    amber_write_map(&w, 1);
    amber_write_str(&w, "ok");
    amber_write_bool(&w, ok);
    return amber_act_complete(act, amber_writer_bytes(&w));
}

static void write_fill(amber_writer *w, bool bin, uint32_t n) {
    uint8_t *p = (uint8_t *)amber_heap_alloc(n);
    for (uint32_t i = 0; i < n; i++) p[i] = (uint8_t)('a' + i % 26);
    if (bin) amber_write_bin(w, amber_bytes_of(p, n));
    else amber_write_str_bytes(w, amber_bytes_of(p, n));
}

/* Every encoding boundary, as one array; the test compares it with msgpack-python. */
AMBER_ACTIVITY(write_all) {
    (void)args;
    static const int64_t ints[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295LL,
                                   4294967296LL, INT64_MAX, -1, -32, -33, -128, -129,
                                   -32768, -32769, INT32_MIN, (int64_t)INT32_MIN - 1, INT64_MIN};
    static const uint32_t lens[] = {0, 31, 32, 255, 256, 65535, 65536};
    const uint32_t nints = sizeof ints / sizeof ints[0], nlens = sizeof lens / sizeof lens[0];
    amber_writer w = amber_writer_heap(16);
    amber_write_array(&w, 3 + nints + 2 * nlens + 8);
    amber_write_nil(&w);
    amber_write_bool(&w, true);
    amber_write_bool(&w, false);
    for (uint32_t i = 0; i < nints; i++) amber_write_int(&w, ints[i]);
    for (uint32_t i = 0; i < nlens; i++) write_fill(&w, false, lens[i]);
    for (uint32_t i = 0; i < nlens; i++) write_fill(&w, true, lens[i]);
    uint32_t sizes[] = {15, 16, 65535, 65536};
    for (uint32_t i = 0; i < 4; i++) { /* arrays of nils */
        amber_write_array(&w, sizes[i]);
        for (uint32_t j = 0; j < sizes[i]; j++) amber_write_nil(&w);
    }
    for (uint32_t i = 0; i < 4; i++) { /* maps {0: nil, 1: nil, ...} */
        amber_write_map(&w, sizes[i]);
        for (uint32_t j = 0; j < sizes[i]; j++) {
            amber_write_uint(&w, j);
            amber_write_nil(&w);
        }
    }
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* {"n": int} → n bytes of amber_act_random */
AMBER_ACTIVITY(rand) {
    int64_t n = 0;
    if (!amber_map_get_int(args, "n", &n) || n < 0 || n > 100000)
        return amber_act_fail(act, "BadArgs", "n", true);
    uint8_t *p = (uint8_t *)amber_heap_alloc((uint32_t)n);
    amber_act_random(act, p, (uint32_t)n);
    amber_writer w = amber_writer_heap(16 + (uint32_t)n);
    amber_write_bin(&w, amber_bytes_of(p, (uint32_t)n));
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* The activity's context: {"run_id", "activity", "key", "attempt", "deadline_ms", "now"} */
AMBER_ACTIVITY(info) {
    (void)args;
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, 6);
    amber_write_str(&w, "run_id");
    amber_write_str_bytes(&w, amber_act_run_id(act));
    amber_write_str(&w, "activity");
    amber_write_str_bytes(&w, act->activity);
    amber_write_str(&w, "key");
    amber_write_str_bytes(&w, amber_act_idempotency_key(act));
    amber_write_str(&w, "attempt");
    amber_write_int(&w, amber_act_attempt(act));
    amber_write_str(&w, "deadline_ms");
    amber_write_int(&w, amber_act_deadline_ms(act));
    amber_write_str(&w, "now");
    amber_write_int(&w, amber_act_now(act));
    amber_act_log(act, AMBER_DEBUG, "info");
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* The raw msgpack value under key "k" of the args map, or nil when missing. */
AMBER_ACTIVITY(lookup) {
    amber_reader map = amber_reader_new(args), v;
    amber_bytes raw;
    if (amber_map_find(&map, "k", &v) && amber_read_raw(&v, &raw))
        return amber_act_complete(act, raw);
    static const uint8_t nil[] = {0xc0};
    return amber_act_complete(act, amber_bytes_of(nil, 1));
}
