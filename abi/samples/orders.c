/*
 * Order processing: the sample workflow `orders` and its activities.
 *
 * Input: {"order_id": str, "sku": str, "quantity": int, "amount_cents": int, "card"?: str}
 * Flow:  now (placed_at) → reserve_inventory → charge_payment → ship_order → send_confirmation.
 *        A declined card (charge_payment fails with PaymentDeclined) is compensated with
 *        release_inventory and the run completes with status "payment_declined".
 * Result: {"order_id", "status": "shipped", "reservation", "charge", "tracking", "placed_at"}
 *
 * Test hooks: card "declined" fails charge_payment non-retryably; card "flaky" fails it
 * (retryably, GatewayTimeout) on the first attempt. Compiled with -DAMBER_VARIANT_REORDERED the
 * workflow charges before it reserves: a code change that breaks replay of existing runs. With
 * -DAMBER_VARIANT_STRICT too, it traps on a charge result without its "charge" (as Python code
 * indexing the result would raise), before the host can compare its commands with history.
 */
#include "amber.h"

AMBER_MANIFEST({
    "abi": 1,
    "workflows": ["orders"],
    "activities": ["reserve_inventory", "charge_payment", "ship_order", "send_confirmation",
                   "release_inventory"]
})

/* ---- helpers ---------------------------------------------------------------------------- */

static void write_prefixed(amber_writer *w, const char *prefix, amber_bytes s) {
    amber_bytes p = amber_str(prefix);
    amber_write_str_header(w, p.len + s.len);
    amber_write_raw(w, p);
    amber_write_raw(w, s);
}

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
    amber_writer w = amber_writer_heap(64 + id.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, key);
    write_prefixed(&w, prefix, id);
    return amber_writer_bytes(&w);
}

/* ---- workflow --------------------------------------------------------------------------- */

typedef struct order {
    amber_bytes order_id, sku, card;
    int64_t quantity, amount_cents;
} order;

static amber_result reserve(amber_wf *wf, const order *o) {
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, 3);
    write_kv_str(&w, "order_id", o->order_id);
    write_kv_str(&w, "sku", o->sku);
    write_kv_int(&w, "quantity", o->quantity);
    return amber_call_activity(wf, "reserve_inventory", amber_writer_bytes(&w));
}

static amber_result charge(amber_wf *wf, const order *o) {
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, 3);
    write_kv_str(&w, "order_id", o->order_id);
    write_kv_int(&w, "amount_cents", o->amount_cents);
    write_kv_str(&w, "card", o->card);
    return amber_call_activity(wf, "charge_payment", amber_writer_bytes(&w));
}

/* Calls name with {"order_id": ..., key: value}. */
static amber_result call_with(amber_wf *wf, const char *name, const order *o, const char *key,
                              amber_bytes value) {
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, 2);
    write_kv_str(&w, "order_id", o->order_id);
    write_kv_str(&w, key, value);
    return amber_call_activity(wf, name, amber_writer_bytes(&w));
}

AMBER_WORKFLOW(orders) {
    order o = {0};
    o.card = amber_str("visa");
    if (!amber_map_get_str(input, "order_id", &o.order_id) ||
        !amber_map_get_str(input, "sku", &o.sku) ||
        !amber_map_get_int(input, "quantity", &o.quantity) ||
        !amber_map_get_int(input, "amount_cents", &o.amount_cents))
        return amber_wf_fail(wf, "BadInput",
                             "expected {order_id: str, sku: str, quantity: int, amount_cents: int}"
                             " and optionally card: str");
    amber_map_get_str(input, "card", &o.card);

    int64_t placed_at = amber_now(wf);
    amber_log(wf, AMBER_INFO, "order placed");

    amber_bytes reservation = {0}, charge_id = {0};
#ifdef AMBER_VARIANT_REORDERED
    amber_result c = charge(wf, &o);
#ifdef AMBER_VARIANT_STRICT
    if (c.ok && !amber_map_get_str(c.value, "charge", &charge_id)) __builtin_trap();
#endif
    amber_result r = reserve(wf, &o);
#else
    amber_result r = reserve(wf, &o);
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    amber_result c = charge(wf, &o);
#endif
    if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
    if (!amber_map_get_str(r.value, "reservation", &reservation))
        return amber_wf_fail(wf, "BadResult", "reserve_inventory returned no reservation");

    amber_writer out = amber_writer_heap(256);
    if (!c.ok) {
        if (!amber_bytes_eq_str(amber_str(c.error_type), "PaymentDeclined"))
            return amber_wf_fail(wf, c.error_type, c.error_message);
        amber_log(wf, AMBER_WARN, "payment declined; releasing inventory");
        amber_result rel = call_with(wf, "release_inventory", &o, "reservation", reservation);
        if (!rel.ok) return amber_wf_fail(wf, rel.error_type, rel.error_message);
        amber_write_map(&out, 4);
        write_kv_str(&out, "order_id", o.order_id);
        write_kv_str(&out, "status", amber_str("payment_declined"));
        write_kv_str(&out, "reservation", reservation);
        write_kv_int(&out, "placed_at", placed_at);
        return amber_wf_complete(wf, amber_writer_bytes(&out));
    }
    if (!amber_map_get_str(c.value, "charge", &charge_id))
        return amber_wf_fail(wf, "BadResult", "charge_payment returned no charge");

    amber_bytes tracking;
    amber_result s = call_with(wf, "ship_order", &o, "reservation", reservation);
    if (!s.ok) return amber_wf_fail(wf, s.error_type, s.error_message);
    if (!amber_map_get_str(s.value, "tracking", &tracking))
        return amber_wf_fail(wf, "BadResult", "ship_order returned no tracking");

    amber_result sent = call_with(wf, "send_confirmation", &o, "tracking", tracking);
    if (!sent.ok) return amber_wf_fail(wf, sent.error_type, sent.error_message);
    amber_log(wf, AMBER_INFO, "order shipped");

    amber_write_map(&out, 6);
    write_kv_str(&out, "order_id", o.order_id);
    write_kv_str(&out, "status", amber_str("shipped"));
    write_kv_str(&out, "reservation", reservation);
    write_kv_str(&out, "charge", charge_id);
    write_kv_str(&out, "tracking", tracking);
    write_kv_int(&out, "placed_at", placed_at);
    return amber_wf_complete(wf, amber_writer_bytes(&out));
}

/* ---- activities ------------------------------------------------------------------------- */

/* {"order_id", "sku", "quantity"} → {"reservation": "rsv-<order_id>"} */
AMBER_ACTIVITY(reserve_inventory) {
    amber_bytes order_id, sku;
    int64_t quantity;
    if (!amber_map_get_str(args, "order_id", &order_id) || !amber_map_get_str(args, "sku", &sku) ||
        !amber_map_get_int(args, "quantity", &quantity))
        return amber_act_fail(act, "BadArgs", "expected {order_id, sku, quantity}", true);
    if (quantity <= 0) return amber_act_fail(act, "InvalidQuantity", "quantity must be > 0", true);
    return amber_act_complete(act, id_result("reservation", "rsv-", order_id));
}

/* {"order_id", "amount_cents", "card"} → {"charge": "ch-<order_id>-<idempotency key>"} */
AMBER_ACTIVITY(charge_payment) {
    amber_bytes order_id, card;
    int64_t amount;
    if (!amber_map_get_str(args, "order_id", &order_id) ||
        !amber_map_get_str(args, "card", &card) ||
        !amber_map_get_int(args, "amount_cents", &amount))
        return amber_act_fail(act, "BadArgs", "expected {order_id, amount_cents, card}", true);
    if (amber_bytes_eq_str(card, "declined"))
        return amber_act_fail(act, "PaymentDeclined", "the card was declined", true);
    if (amber_bytes_eq_str(card, "flaky") && amber_act_attempt(act) < 2)
        return amber_act_fail(act, "GatewayTimeout", "the payment gateway timed out", false);
    if (amount <= 0) return amber_act_fail(act, "InvalidAmount", "amount_cents must be > 0", true);

    amber_bytes key = amber_act_idempotency_key(act);
    amber_writer w = amber_writer_heap(64 + order_id.len + key.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, "charge");
    amber_write_str_header(&w, 3 + order_id.len + 1 + key.len);
    amber_write_raw(&w, amber_str("ch-"));
    amber_write_raw(&w, order_id);
    amber_write_raw(&w, amber_str("-"));
    amber_write_raw(&w, key);
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* {"order_id", "reservation"} → {"tracking": "trk-<order_id>"} */
AMBER_ACTIVITY(ship_order) {
    amber_bytes order_id, reservation;
    if (!amber_map_get_str(args, "order_id", &order_id) ||
        !amber_map_get_str(args, "reservation", &reservation))
        return amber_act_fail(act, "BadArgs", "expected {order_id, reservation}", true);
    return amber_act_complete(act, id_result("tracking", "trk-", order_id));
}

/* {"order_id", "tracking"} → {"sent": true} */
AMBER_ACTIVITY(send_confirmation) {
    amber_bytes order_id, tracking;
    if (!amber_map_get_str(args, "order_id", &order_id) ||
        !amber_map_get_str(args, "tracking", &tracking))
        return amber_act_fail(act, "BadArgs", "expected {order_id, tracking}", true);
    amber_act_log(act, AMBER_INFO, "confirmation sent");
    static const uint8_t sent[] = {0x81, 0xa4, 's', 'e', 'n', 't', 0xc3}; /* {"sent": true} */
    return amber_act_complete(act, amber_bytes_of(sent, sizeof sent));
}

/* {"order_id", "reservation"} → {"released": true} */
AMBER_ACTIVITY(release_inventory) {
    amber_bytes order_id, reservation;
    if (!amber_map_get_str(args, "order_id", &order_id) ||
        !amber_map_get_str(args, "reservation", &reservation))
        return amber_act_fail(act, "BadArgs", "expected {order_id, reservation}", true);
    static const uint8_t released[] = {0x81, 0xa8, 'r', 'e', 'l', 'e', 'a', 's', 'e', 'd', 0xc3};
    return amber_act_complete(act, amber_bytes_of(released, sizeof released));
}
