/*
 * Payments: activities that reach an external service over HTTP, with exactly-once effects.
 *
 * Workflow `pay`
 *   Input:  {"order_id": str, "amount_cents": int, "service": str}, where service is a base URL
 *           such as "http://127.0.0.1:8080". Calls `charge` once and completes with its result.
 *   Test hooks (optional): "activity": "slow_charge" calls that one instead, passing on "polls"
 *           and "poll_ms"; "options" (a map) is passed verbatim as the activity's options
 *           (timeouts, retry policy), so tests can provoke each kind of timeout.
 *
 * Activity `charge`: {"order_id", "amount_cents", "service"}
 *   POST <service>/charge with the JSON body {"order_id": ..., "amount_cents": ...}. The host
 *   adds the header Idempotency-Key: <the attempt's idempotency key>, which is the same for every
 *   attempt, so a service that honours it charges once however often the activity is retried.
 *   2xx → {"charge_id": <"charge_id" of the JSON response>, "status": <HTTP status>}.
 *   5xx and lost connections fail retryably; 4xx and refused requests fail non-retryably.
 *
 * Activity `slow_charge`: {"order_id", "amount_cents", "service", "polls"?, "poll_ms"?}
 *   Polls GET <service>/status `polls` times (default 10), heartbeating after each poll and
 *   sleeping poll_ms (default 100) in between, then charges like `charge`. Its heartbeat details
 *   {"poll": n} tell a retried attempt how many polls are done already. Stops with a
 *   non-retryable "Cancelled" when a heartbeat says the run asked it to.
 */
#include "amber.h"

AMBER_MANIFEST({
    "abi": 1,
    "workflows": ["pay"],
    "activities": ["charge", "slow_charge"],
    "capabilities": {"http": {"allow": ["127.0.0.1", "localhost"]}}
})

/* ---- workflow --------------------------------------------------------------------------- */

/* The keys of the workflow's input that are passed on to the activity, when present. */
static const char *const passed_on[] = {"order_id", "amount_cents", "service", "polls", "poll_ms"};
#define NPASSED (sizeof passed_on / sizeof passed_on[0])

AMBER_WORKFLOW(pay) {
    amber_bytes order_id, service, activity = amber_str("charge"), options = {0}, raw;
    int64_t amount;
    if (!amber_map_get_str(input, "order_id", &order_id) ||
        !amber_map_get_int(input, "amount_cents", &amount) ||
        !amber_map_get_str(input, "service", &service))
        return amber_wf_fail(wf, "BadInput",
                             "expected {order_id: str, amount_cents: int, service: str}");
    amber_map_get_str(input, "activity", &activity);
    if (!amber_bytes_eq_str(activity, "charge") && !amber_bytes_eq_str(activity, "slow_charge"))
        return amber_wf_fail(wf, "BadInput", "activity must be charge or slow_charge");
    /* Options pass through verbatim; the host validates them when it records the command. */
    if (amber_map_get_raw(input, "options", &options)) {
        amber_reader r = amber_reader_new(options);
        if (amber_peek(&r) == AMBER_T_NIL) options.len = 0;
        else if (amber_peek(&r) != AMBER_T_MAP)
            return amber_wf_fail(wf, "BadInput", "options must be a map");
    }

    /* A msgpack map starts with its size: count the keys present, then copy them. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < NPASSED; i++) n += amber_map_get_raw(input, passed_on[i], &raw);
    amber_writer args = amber_writer_heap(128 + service.len);
    amber_write_map(&args, n);
    for (uint32_t i = 0; i < NPASSED; i++) {
        if (!amber_map_get_raw(input, passed_on[i], &raw)) continue;
        amber_write_str(&args, passed_on[i]);
        amber_write_raw(&args, raw);
    }

    uint32_t h = amber_schedule_activity_raw(wf, amber_cstr(activity),
                                             amber_writer_bytes(&args), options);
    amber_result r = amber_await(wf, h);
    if (amber_is_cancelled(r)) return amber_wf_cancelled(wf, AMBER_CANCELLED, r.error_message);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    return amber_wf_complete(wf, r.value);
}

/* ---- minimal JSON, by hand ---------------------------------------------------------------- */

/* Appends the decimal digits of v. */
static void put_int(amber_writer *w, int64_t v) {
    uint8_t buf[20];
    uint32_t n = sizeof buf;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do buf[--n] = (uint8_t)('0' + u % 10); while (u /= 10);
    if (v < 0) buf[--n] = '-';
    amber_write_raw(w, amber_bytes_of(buf + n, sizeof buf - n));
}

/* Appends s as a JSON string (escaping quotes, backslashes and control characters). */
static void put_json_string(amber_writer *w, amber_bytes s) {
    static const char hex[] = "0123456789abcdef";
    amber_write_raw(w, amber_str("\""));
    for (uint32_t i = 0; i < s.len; i++) {
        uint8_t c = s.ptr[i], esc[6] = {'\\', c, '0', '0', 0, 0};
        if (c == '"' || c == '\\') amber_write_raw(w, amber_bytes_of(esc, 2));
        else if (c >= 0x20) amber_write_raw(w, amber_bytes_of(&c, 1));
        else {
            esc[1] = 'u', esc[4] = (uint8_t)hex[c >> 4], esc[5] = (uint8_t)hex[c & 15];
            amber_write_raw(w, amber_bytes_of(esc, 6));
        }
    }
    amber_write_raw(w, amber_str("\""));
}

/* The string value of "key" in a flat JSON object, found by text search: enough for the
 * payment service's responses (no escapes in the value). */
static bool find_json_string(amber_bytes json, const char *quoted_key, amber_bytes *out) {
    amber_bytes key = amber_str(quoted_key);
    int64_t at = amber_bytes_find(json, key, 0);
    if (at < 0) return false;
    uint32_t i = (uint32_t)at + key.len, start;
    while (i < json.len && (json.ptr[i] == ' ' || json.ptr[i] == ':')) i++;
    if (i >= json.len || json.ptr[i] != '"') return false;
    for (start = ++i; i < json.len && json.ptr[i] != '"'; i++)
        if (json.ptr[i] == '\\') return false;
    if (i >= json.len) return false;
    *out = amber_bytes_of(json.ptr + start, i - start);
    return true;
}

/* ---- activities ------------------------------------------------------------------------- */

typedef struct payment {
    amber_bytes order_id, service;
    int64_t amount_cents;
} payment;

static bool read_payment(amber_bytes args, payment *p) {
    return amber_map_get_str(args, "order_id", &p->order_id) &&
           amber_map_get_int(args, "amount_cents", &p->amount_cents) &&
           amber_map_get_str(args, "service", &p->service);
}

/* service + path, without doubling the slash. */
static amber_bytes url(const payment *p, const char *path) {
    amber_bytes base = p->service;
    if (base.len && base.ptr[base.len - 1] == '/') base.len--;
    amber_writer w = amber_writer_heap(base.len + 16);
    amber_write_raw(&w, base);
    amber_write_raw(&w, amber_str(path));
    return amber_writer_bytes(&w);
}

/* The request never got a response: retry what may be transient, not what never will work. */
static amber_outcome request_failed(amber_act *act, const amber_http_response *resp) {
    bool permanent = amber_bytes_eq_str(amber_str(resp->error_type), "HostNotAllowed") ||
                     amber_bytes_eq_str(amber_str(resp->error_type), "BadRequest");
    return amber_act_fail(act, resp->error_type, resp->error_message, permanent);
}

/* A non-2xx answer: the service's fault (5xx) is retried, the request's (4xx) is not. */
static amber_outcome status_failed(amber_act *act, const amber_http_response *resp) {
    amber_writer m = amber_writer_heap(64);
    amber_write_raw(&m, amber_str("the payment service answered HTTP "));
    put_int(&m, resp->status);
    const char *message = amber_cstr(amber_writer_bytes(&m));
    if (resp->status >= 500) return amber_act_fail(act, "PaymentServiceError", message, false);
    return amber_act_fail(act, "PaymentRejected", message, true);
}

static amber_outcome charge(amber_act *act, const payment *p) {
    amber_writer body = amber_writer_heap(64 + p->order_id.len);
    amber_write_raw(&body, amber_str("{\"order_id\":"));
    put_json_string(&body, p->order_id);
    amber_write_raw(&body, amber_str(",\"amount_cents\":"));
    put_int(&body, p->amount_cents);
    amber_write_raw(&body, amber_str("}"));

    const amber_http_header json = {"Content-Type", "application/json"};
    amber_http_request req = {.method = "POST", .url = url(p, "/charge"), .headers = &json,
                              .header_count = 1, .body = amber_writer_bytes(&body)};
    amber_http_response resp;
    if (!amber_act_http(act, &req, &resp)) return request_failed(act, &resp);
    if (!amber_http_success(&resp)) return status_failed(act, &resp);

    amber_bytes charge_id;
    if (!find_json_string(resp.body, "\"charge_id\"", &charge_id))
        return amber_act_fail(act, "BadResponse", "no charge_id in the response", true);
    amber_writer w = amber_writer_heap(64 + charge_id.len);
    amber_write_map(&w, 2);
    amber_write_str(&w, "charge_id");
    amber_write_str_bytes(&w, charge_id);
    amber_write_str(&w, "status");
    amber_write_int(&w, resp.status);
    return amber_act_complete(act, amber_writer_bytes(&w));
}

AMBER_ACTIVITY(charge) {
    payment p;
    if (!read_payment(args, &p))
        return amber_act_fail(act, "BadArgs", "expected {order_id, amount_cents, service}", true);
    return charge(act, &p);
}

AMBER_ACTIVITY(slow_charge) {
    payment p;
    int64_t polls = 10, poll_ms = 100, done = 0;
    if (!read_payment(args, &p))
        return amber_act_fail(act, "BadArgs", "expected {order_id, amount_cents, service}", true);
    amber_map_get_int(args, "polls", &polls);
    amber_map_get_int(args, "poll_ms", &poll_ms);
    /* A retried attempt resumes after the polls the previous attempt reported. */
    amber_map_get_int(amber_act_heartbeat_details(act), "poll", &done);

    amber_http_request status = {.method = "GET", .url = url(&p, "/status")};
    for (; done < polls; done++) {
        amber_http_response resp;
        if (!amber_act_http(act, &status, &resp)) return request_failed(act, &resp);
        uint8_t buf[16];
        amber_writer details = amber_writer_fixed(buf, sizeof buf);
        amber_write_map(&details, 1);
        amber_write_str(&details, "poll");
        amber_write_int(&details, done + 1);
        if (amber_act_heartbeat(act, amber_writer_bytes(&details)))
            return amber_act_fail(act, "Cancelled", "the run asked the charge to stop", true);
        amber_act_sleep(act, poll_ms);
    }
    /* Between heartbeats, the last word on cancellation without reporting progress. */
    if (amber_act_cancel_requested(act))
        return amber_act_fail(act, "Cancelled", "the run asked the charge to stop", true);
    return charge(act, &p);
}
