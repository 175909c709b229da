/* Durable-semantics probe: every workflow command, await_any, cancellation delivery, patch
 * markers and the outcomes through a scripted workflow; heartbeats and HTTP through two
 * activities. Built by tests/abi/conftest.py, driven by tests/abi/test_sdk_durable.py and
 * tests/abi/test_patched.py. */
#include "amber.h"

AMBER_MANIFEST({"abi": 1, "workflows": ["script"], "activities": ["beat", "fetch"],
                "capabilities": {"http": {"allow": ["127.0.0.1"]}}})

/* ---- durable commands: a scripted workflow --------------------------------------------- */

/*
 * `script`: input {"steps": [[op, ...], ...]} runs the steps in order and completes with the
 * trace of what they observed, unless a step ends the run. Handles are command indices.
 *   ["activity", name, args: bin, options: map?]    ["activity_opts", name, args, {fields}]
 *   ["timer", ms]   ["sleep", ms]   ["cancel_timer", handle]   ["signal", name]
 *   ["child", type, id, input: bin, policy|nil, version|nil]
 *   ["await", handle]        trace += [handle, ok, type, message, value]
 *   ["any", [handle, ...]]   trace += [index (-1: cancelled), ok, type, message, value]
 *   ["cancel_requested"]     trace += [requested, reason]
 *   ["replaying"]            trace += [amber_is_replaying]
 *   ["patched", change_id]   trace += [amber_patched]
 *   ["publish", name, value: bin]   ["log", message]
 *   ["cancelled", type|nil, message|nil]   ["continue_as_new", input: bin]
 */
static const char *opt_cstr(amber_reader *r) {
    amber_bytes b;
    if (amber_peek(r) == AMBER_T_NIL) return amber_read_nil(r), (const char *)NULL;
    return amber_read_str(r, &b) ? amber_cstr(b) : NULL;
}

static const char *read_cstr(amber_reader *r) {
    amber_bytes b = {0};
    amber_read_str(r, &b);
    return amber_cstr(b);
}

static void trace_result(amber_writer *t, int64_t index, amber_result res) {
    amber_write_array(t, 5);
    amber_write_int(t, index);
    amber_write_bool(t, res.ok);
    amber_write_str(t, res.error_type);
    amber_write_str(t, res.error_message);
    amber_write_bin(t, res.value);
}

/* amber_activity_options from a map with the ABI's keys (to test the struct's encoding). */
static amber_activity_options *read_options(amber_bytes m) {
    amber_activity_options *o = amber_heap_alloc(sizeof *o);
    __builtin_memset(o, 0, sizeof *o);
    amber_map_get_int(m, "start_to_close_ms", &o->start_to_close_ms);
    amber_map_get_int(m, "schedule_to_close_ms", &o->schedule_to_close_ms);
    amber_map_get_int(m, "schedule_to_start_ms", &o->schedule_to_start_ms);
    amber_map_get_int(m, "heartbeat_ms", &o->heartbeat_ms);
    amber_bytes retry;
    if (!amber_map_get_raw(m, "retry", &retry)) return o;
    amber_retry_policy *p = amber_heap_alloc(sizeof *p);
    __builtin_memset(p, 0, sizeof *p);
    amber_map_get_int(retry, "initial_ms", &p->initial_ms);
    amber_map_get_int(retry, "max_interval_ms", &p->max_interval_ms);
    amber_map_get_int(retry, "max_attempts", &p->max_attempts);
    amber_reader doc = amber_reader_new(retry), v;
    if (amber_map_find(&doc, "coefficient", &v)) amber_read_double(&v, &p->coefficient);
    uint32_t n;
    if (amber_map_find(&doc, "non_retryable", &v) && amber_read_array(&v, &n) && n <= 16) {
        const char **types = amber_heap_alloc(n * sizeof *types);
        for (uint32_t i = 0; i < n; i++) types[i] = read_cstr(&v);
        p->non_retryable = types;
        p->non_retryable_count = n;
    }
    o->retry = p;
    return o;
}

AMBER_WORKFLOW(script) {
    amber_reader doc = amber_reader_new(input), steps;
    uint32_t nsteps, ntrace = 0;
    if (!amber_map_find(&doc, "steps", &steps) || !amber_read_array(&steps, &nsteps))
        return amber_wf_fail(wf, "BadInput", "expected {steps: [...]}");
    amber_writer t = amber_writer_heap(256);
    for (uint32_t i = 0; i < nsteps; i++) {
        uint32_t n;
        amber_bytes op, b, raw;
        int64_t x;
        if (!amber_read_array(&steps, &n) || !amber_read_str(&steps, &op))
            return amber_wf_fail(wf, "BadInput", "a step is [op, ...]");
        amber_reader *r = &steps;
        if (amber_bytes_eq_str(op, "activity")) {
            const char *name = read_cstr(r);
            amber_read_bin(r, &b);
            raw.len = 0;
            if (n > 3) amber_read_raw(r, &raw);
            amber_schedule_activity_raw(wf, name, b, raw);
        } else if (amber_bytes_eq_str(op, "activity_opts")) {
            const char *name = read_cstr(r);
            amber_read_bin(r, &b);
            amber_read_raw(r, &raw);
            amber_schedule_activity_opts(wf, name, b, read_options(raw));
        } else if (amber_bytes_eq_str(op, "timer") || amber_bytes_eq_str(op, "sleep")) {
            amber_read_int(r, &x);
            if (amber_bytes_eq_str(op, "timer")) {
                amber_start_timer(wf, x);
                continue;
            }
            int64_t handle = wf->ncmds; /* the timer amber_sleep starts */
            trace_result(&t, handle, amber_sleep(wf, x));
            ntrace++;
        } else if (amber_bytes_eq_str(op, "cancel_timer")) {
            amber_read_int(r, &x);
            amber_cancel_timer(wf, (uint32_t)x);
        } else if (amber_bytes_eq_str(op, "signal")) {
            amber_wait_signal(wf, read_cstr(r));
        } else if (amber_bytes_eq_str(op, "child")) {
            amber_bytes type, id;
            amber_read_str(r, &type);
            amber_read_str(r, &id);
            amber_read_bin(r, &b);
            amber_child_options o = {opt_cstr(r), NULL};
            o.version = opt_cstr(r);
            amber_start_child(wf, amber_cstr(type), id, b, &o);
        } else if (amber_bytes_eq_str(op, "await")) {
            amber_read_int(r, &x);
            trace_result(&t, x, amber_await(wf, (uint32_t)x));
            ntrace++;
        } else if (amber_bytes_eq_str(op, "any")) {
            uint32_t count, index;
            amber_read_array(r, &count);
            uint32_t *handles = amber_heap_alloc(count * 4u + 4u);
            for (uint32_t k = 0; k < count; k++) amber_read_int(r, &x), handles[k] = (uint32_t)x;
            amber_result res = amber_await_any(wf, handles, count, &index);
            trace_result(&t, index == AMBER_AWAIT_CANCELLED ? -1 : (int64_t)index, res);
            ntrace++;
        } else if (amber_bytes_eq_str(op, "cancel_requested")) {
            amber_write_array(&t, 2);
            amber_write_bool(&t, amber_cancel_requested(wf));
            amber_write_str(&t, amber_cancel_reason(wf));
            ntrace++;
        } else if (amber_bytes_eq_str(op, "replaying")) {
            amber_write_array(&t, 1);
            amber_write_bool(&t, amber_is_replaying(wf));
            ntrace++;
        } else if (amber_bytes_eq_str(op, "patched")) {
            amber_write_array(&t, 1);
            amber_write_bool(&t, amber_patched(wf, read_cstr(r)));
            ntrace++;
        } else if (amber_bytes_eq_str(op, "publish")) {
            const char *name = read_cstr(r);
            amber_read_bin(r, &b);
            amber_publish(wf, name, b);
        } else if (amber_bytes_eq_str(op, "log")) {
            amber_log(wf, AMBER_INFO, read_cstr(r));
        } else if (amber_bytes_eq_str(op, "cancelled")) {
            const char *type = opt_cstr(r);
            return amber_wf_cancelled(wf, type, opt_cstr(r));
        } else if (amber_bytes_eq_str(op, "continue_as_new")) {
            amber_read_bin(r, &b);
            return amber_wf_continue_as_new(wf, b);
        } else {
            return amber_wf_fail(wf, "BadInput", amber_cstr(op));
        }
        if (steps.error) return amber_wf_fail(wf, "BadInput", "malformed step");
    }
    amber_writer out = amber_writer_heap(t.len + 8);
    amber_write_array(&out, ntrace);
    amber_write_raw(&out, amber_writer_bytes(&t));
    return amber_wf_complete(wf, amber_writer_bytes(&out));
}

/* ---- heartbeats and HTTP ----------------------------------------------------------------- */

/* {"n": int, "size"?: int}: heartbeats {"i": i} n times (or `size` bytes of details once),
 * stopping when asked to → {"details": <previous attempt's details>, "stopped_at": i | -1,
 * "cancel_requested": bool} */
AMBER_ACTIVITY(beat) {
    int64_t n = 0, size = -1, stopped_at = -1;
    amber_map_get_int(args, "n", &n);
    if (amber_map_get_int(args, "size", &size)) {
        uint8_t *p = amber_heap_alloc((uint32_t)size);
        __builtin_memset(p, 0xc0, (uint32_t)size);
        amber_act_heartbeat(act, amber_bytes_of(p, (uint32_t)size));
    }
    for (int64_t i = 0; i < n && stopped_at < 0; i++) {
        uint8_t buf[16];
        amber_writer d = amber_writer_fixed(buf, sizeof buf);
        amber_write_map(&d, 1);
        amber_write_str(&d, "i");
        amber_write_int(&d, i);
        if (amber_act_heartbeat(act, amber_writer_bytes(&d))) stopped_at = i;
    }
    amber_writer w = amber_writer_heap(64);
    amber_write_map(&w, 3);
    amber_write_str(&w, "details");
    amber_write_bin(&w, amber_act_heartbeat_details(act));
    amber_write_str(&w, "stopped_at");
    amber_write_int(&w, stopped_at);
    amber_write_str(&w, "cancel_requested");
    amber_write_bool(&w, amber_act_cancel_requested(act));
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* {"method", "url", "headers"?: {str: str}, "body"?: bin, "timeout_ms"?: int} → amber_act_http →
 * {"ok", "status", "body", "content_type" (looked up as "content-type"), "error": [type, msg]} */
AMBER_ACTIVITY(fetch) {
    amber_http_request req = {0};
    amber_bytes method = {0}, ct = {0};
    amber_map_get_str(args, "method", &method);
    req.method = amber_cstr(method);
    amber_map_get_str(args, "url", &req.url);
    amber_map_get_bin(args, "body", &req.body);
    amber_map_get_int(args, "timeout_ms", &req.timeout_ms);
    amber_reader doc = amber_reader_new(args), v;
    uint32_t n;
    if (amber_map_find(&doc, "headers", &v) && amber_read_map(&v, &n)) {
        amber_http_header *h = amber_heap_alloc(n * sizeof *h + 1);
        for (uint32_t i = 0; i < n; i++) h[i].name = read_cstr(&v), h[i].value = read_cstr(&v);
        req.headers = h;
        req.header_count = n;
    }
    amber_http_response resp;
    bool ok = amber_act_http(act, &req, &resp);
    amber_http_get_header(&resp, "content-type", &ct);
    amber_writer w = amber_writer_heap(128 + resp.body.len);
    amber_write_map(&w, 5);
    amber_write_str(&w, "ok");
    amber_write_bool(&w, ok);
    amber_write_str(&w, "status");
    amber_write_int(&w, resp.status);
    amber_write_str(&w, "body");
    amber_write_bin(&w, resp.body);
    amber_write_str(&w, "content_type");
    amber_write_str_bytes(&w, ct);
    amber_write_str(&w, "error");
    amber_write_array(&w, 2);
    amber_write_str(&w, resp.error_type);
    amber_write_str(&w, resp.error_message);
    return amber_act_complete(act, amber_writer_bytes(&w));
}
