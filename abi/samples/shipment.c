/*
 * Shipment: the sample for durable semantics — a durable multi-day timer raced against a
 * signal, a query, compensation on cancellation, and child workflows.
 *
 * Workflow `shipment`
 *   Input:  {"shipment_id": str, "address": str, "deadline_days": int}
 *   Flow:   book_carrier, then whichever comes first of the signal "delivered"
 *           ({"signed_by": str}) and a timer of deadline_days days:
 *             delivered first → cancel the timer, notify_customer  → status "delivered"
 *             timer first     → escalate                           → status "late"
 *           Cancelled at any await → cancel_booking (when a booking was made; cancelled while
 *           booking, it first waits for book_carrier's own outcome), then the run closes as
 *           cancelled.
 *   Query:  "status" → {"status": "booking" | "in_transit" | "delivered" | "late" | "cancelled",
 *                       "booking": str (once booked)}
 *   Result: {"shipment_id", "status", "booking", and "signed_by" (delivered) or "ticket" (late)}
 *
 * Workflow `shipment_batch`
 *   Input:  {"batch_id": str, "address": str, "deadline_days": int}
 *   Starts two `shipment` children with workflow ids "<batch_id>-1" and "<batch_id>-2" (also
 *   their shipment ids). Parent-close policy "cancel": closing the batch cancels them.
 *   Result: {"batch_id", "shipments": [result of -1, result of -2]}
 *
 * The activities compute their results from their arguments (a real module would call a
 * carrier's API from them, see payments.c).
 */
#include "amber.h"

AMBER_MANIFEST({
    "abi": 1,
    "workflows": ["shipment", "shipment_batch"],
    "activities": ["book_carrier", "notify_customer", "escalate", "cancel_booking"]
})

/* ---- helpers ---------------------------------------------------------------------------- */

static void write_kv_str(amber_writer *w, const char *key, amber_bytes value) {
    amber_write_str(w, key);
    amber_write_str_bytes(w, value);
}

static void write_kv_int(amber_writer *w, const char *key, int64_t value) {
    amber_write_str(w, key);
    amber_write_int(w, value);
}

/* A single-key result map {key: prefix + id}. */
static amber_bytes id_result(const char *key, const char *prefix, amber_bytes id) {
    amber_bytes p = amber_str(prefix);
    amber_writer w = amber_writer_heap(32 + p.len + id.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, key);
    amber_write_str_header(&w, p.len + id.len);
    amber_write_raw(&w, p);
    amber_write_raw(&w, id);
    return amber_writer_bytes(&w);
}

/* ---- workflow: shipment ------------------------------------------------------------------ */

typedef struct shipment {
    amber_bytes id, address;
    amber_bytes booking; /* empty until book_carrier succeeded */
    int64_t deadline_days;
} shipment;

/* What the "status" query answers. Published on every activation, replaying or not: a query
 * replays the run and answers with the last value this code published. */
static void publish_status(amber_wf *wf, const shipment *s, const char *status) {
    amber_writer w = amber_writer_heap(64 + s->booking.len);
    amber_write_map(&w, s->booking.len ? 2 : 1);
    write_kv_str(&w, "status", amber_str(status));
    if (s->booking.len) write_kv_str(&w, "booking", s->booking);
    amber_publish(wf, "status", amber_writer_bytes(&w));
}

/* Calls activity name with {"shipment_id", "booking"} plus key: value when key is not NULL. */
static amber_result call_with_booking(amber_wf *wf, const char *name, const shipment *s,
                                      const char *key, amber_bytes value) {
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, key ? 3 : 2);
    write_kv_str(&w, "shipment_id", s->id);
    write_kv_str(&w, "booking", s->booking);
    if (key) write_kv_str(&w, key, value);
    return amber_call_activity(wf, name, amber_writer_bytes(&w));
}

/* Booking talks to a carrier: give it a minute per attempt and more attempts than the default,
 * but never retry an address the carrier rejected. */
static const char *const never_retry[] = {"InvalidAddress"};
static const amber_retry_policy booking_retry = {
    .initial_ms = 2000, .max_attempts = 10, .non_retryable = never_retry, .non_retryable_count = 1};
static const amber_activity_options booking_options = {.start_to_close_ms = AMBER_MINUTE_MS,
                                                       .retry = &booking_retry};

static uint32_t book_carrier(amber_wf *wf, const shipment *s) {
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, 2);
    write_kv_str(&w, "shipment_id", s->id);
    write_kv_str(&w, "address", s->address);
    return amber_schedule_activity_opts(wf, "book_carrier", amber_writer_bytes(&w),
                                        &booking_options);
}

/* The saga's compensation, run after an await returned the cancellation. Awaits after that one
 * behave normally, so the compensating activity runs like any other. */
static amber_outcome compensate(amber_wf *wf, const shipment *s, amber_result cancelled) {
    if (s->booking.len) {
        amber_result r = call_with_booking(wf, "cancel_booking", s, NULL, (amber_bytes){0});
        if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    }
    publish_status(wf, s, "cancelled");
    return amber_wf_cancelled(wf, AMBER_CANCELLED, cancelled.error_message);
}

/* Completes with {"shipment_id", "status", "booking", key: value}. */
static amber_outcome finish(amber_wf *wf, const shipment *s, const char *status,
                            const char *key, amber_bytes value) {
    publish_status(wf, s, status);
    amber_writer w = amber_writer_heap(128 + value.len);
    amber_write_map(&w, 4);
    write_kv_str(&w, "shipment_id", s->id);
    write_kv_str(&w, "status", amber_str(status));
    write_kv_str(&w, "booking", s->booking);
    write_kv_str(&w, key, value);
    return amber_wf_complete(wf, amber_writer_bytes(&w));
}

AMBER_WORKFLOW(shipment) {
    shipment s = {0};
    if (!amber_map_get_str(input, "shipment_id", &s.id) ||
        !amber_map_get_str(input, "address", &s.address) ||
        !amber_map_get_int(input, "deadline_days", &s.deadline_days) || s.deadline_days < 0 ||
        s.deadline_days > 3650)
        return amber_wf_fail(wf, "BadInput",
                             "expected {shipment_id: str, address: str, deadline_days: 0..3650}");

    publish_status(wf, &s, "booking");
    uint32_t booking = book_carrier(wf, &s);
    amber_result booked = amber_await(wf, booking);
    if (amber_is_cancelled(booked)) {
        /* If the activity was already running, the carrier may book anyway: wait for its own
         * outcome (awaits after the one that got the cancellation behave normally; an activity
         * the host never started comes back as a "Cancelled" error), then undo what it did. */
        amber_result outcome = amber_await(wf, booking);
        if (outcome.ok) amber_map_get_str(outcome.value, "booking", &s.booking);
        return compensate(wf, &s, booked);
    }
    if (!booked.ok) return amber_wf_fail(wf, booked.error_type, booked.error_message);
    if (!amber_map_get_str(booked.value, "booking", &s.booking))
        return amber_wf_fail(wf, "BadResult", "book_carrier returned no booking");
    publish_status(wf, &s, "in_transit");

    /* Race a durable timer against the signal: amber_await_any returns whichever history
     * recorded first, so every replay takes the same branch. */
    enum { TIMER, DELIVERED };
    uint32_t waits[2], first;
    waits[TIMER] = amber_start_timer(wf, s.deadline_days * AMBER_DAY_MS);
    waits[DELIVERED] = amber_wait_signal(wf, "delivered");
    amber_result r = amber_await_any(wf, waits, 2, &first);
    if (amber_is_cancelled(r)) {
        amber_cancel_timer(wf, waits[TIMER]);
        return compensate(wf, &s, r);
    }
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);

    if (first == DELIVERED) {
        amber_cancel_timer(wf, waits[TIMER]);
        amber_bytes signed_by;
        if (!amber_map_get_str(r.value, "signed_by", &signed_by))
            return amber_wf_fail(wf, "BadSignal", "delivered: expected {signed_by: str}");
        amber_result n = call_with_booking(wf, "notify_customer", &s, "signed_by", signed_by);
        if (amber_is_cancelled(n)) return compensate(wf, &s, n);
        if (!n.ok) return amber_wf_fail(wf, n.error_type, n.error_message);
        return finish(wf, &s, "delivered", "signed_by", signed_by);
    }

    amber_bytes ticket;
    amber_result e = call_with_booking(wf, "escalate", &s, NULL, (amber_bytes){0});
    if (amber_is_cancelled(e)) return compensate(wf, &s, e);
    if (!e.ok) return amber_wf_fail(wf, e.error_type, e.error_message);
    if (!amber_map_get_str(e.value, "ticket", &ticket))
        return amber_wf_fail(wf, "BadResult", "escalate returned no ticket");
    return finish(wf, &s, "late", "ticket", ticket);
}

/* ---- workflow: shipment_batch ------------------------------------------------------------ */

AMBER_WORKFLOW(shipment_batch) {
    amber_bytes batch_id, address;
    int64_t days;
    if (!amber_map_get_str(input, "batch_id", &batch_id) ||
        !amber_map_get_str(input, "address", &address) ||
        !amber_map_get_int(input, "deadline_days", &days))
        return amber_wf_fail(wf, "BadInput",
                             "expected {batch_id: str, address: str, deadline_days: int}");

    static const amber_child_options cancel_with_parent = {.parent_close_policy = "cancel"};
    uint32_t children[2];
    for (uint32_t i = 0; i < 2; i++) {
        /* Child ids come from the input only, so a replay starts the very same children. */
        amber_writer id = amber_writer_heap(batch_id.len + 2);
        amber_write_raw(&id, batch_id);
        amber_write_raw(&id, amber_bytes_of(i == 0 ? "-1" : "-2", 2));
        amber_writer in = amber_writer_heap(96 + batch_id.len + address.len);
        amber_write_map(&in, 3);
        write_kv_str(&in, "shipment_id", amber_writer_bytes(&id));
        write_kv_str(&in, "address", address);
        write_kv_int(&in, "deadline_days", days);
        children[i] = amber_start_child(wf, "shipment", amber_writer_bytes(&id),
                                        amber_writer_bytes(&in), &cancel_with_parent);
    }

    amber_writer out = amber_writer_heap(256);
    amber_write_map(&out, 2);
    write_kv_str(&out, "batch_id", batch_id);
    amber_write_str(&out, "shipments");
    amber_write_array(&out, 2);
    for (uint32_t i = 0; i < 2; i++) {
        amber_result r = amber_await(wf, children[i]);
        /* Closing as cancelled cancels both children (their parent-close policy). */
        if (amber_is_cancelled(r)) return amber_wf_cancelled(wf, AMBER_CANCELLED, r.error_message);
        if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
        amber_write_raw(&out, r.value);
    }
    return amber_wf_complete(wf, amber_writer_bytes(&out));
}

/* ---- activities ------------------------------------------------------------------------- */

/* {"shipment_id", "address"} → {"booking": "bk-<shipment_id>"} */
AMBER_ACTIVITY(book_carrier) {
    amber_bytes id, address;
    if (!amber_map_get_str(args, "shipment_id", &id) ||
        !amber_map_get_str(args, "address", &address))
        return amber_act_fail(act, "BadArgs", "expected {shipment_id, address}", true);
    if (address.len == 0) return amber_act_fail(act, "InvalidAddress", "address is empty", true);
    return amber_act_complete(act, id_result("booking", "bk-", id));
}

/* {"shipment_id", "booking", "signed_by"} → {"notified": true} */
AMBER_ACTIVITY(notify_customer) {
    amber_bytes id, booking, signed_by;
    if (!amber_map_get_str(args, "shipment_id", &id) ||
        !amber_map_get_str(args, "booking", &booking) ||
        !amber_map_get_str(args, "signed_by", &signed_by))
        return amber_act_fail(act, "BadArgs", "expected {shipment_id, booking, signed_by}", true);
    static const uint8_t notified[] = {0x81, 0xa8, 'n', 'o', 't', 'i', 'f', 'i', 'e', 'd', 0xc3};
    return amber_act_complete(act, amber_bytes_of(notified, sizeof notified));
}

/* {"shipment_id", "booking"} → {"ticket": "esc-<shipment_id>"} */
AMBER_ACTIVITY(escalate) {
    amber_bytes id, booking;
    if (!amber_map_get_str(args, "shipment_id", &id) ||
        !amber_map_get_str(args, "booking", &booking))
        return amber_act_fail(act, "BadArgs", "expected {shipment_id, booking}", true);
    return amber_act_complete(act, id_result("ticket", "esc-", id));
}

/* {"shipment_id", "booking"} → {"cancelled": "<booking>"} */
AMBER_ACTIVITY(cancel_booking) {
    amber_bytes id, booking;
    if (!amber_map_get_str(args, "shipment_id", &id) ||
        !amber_map_get_str(args, "booking", &booking))
        return amber_act_fail(act, "BadArgs", "expected {shipment_id, booking}", true);
    return amber_act_complete(act, id_result("cancelled", "", booking));
}
