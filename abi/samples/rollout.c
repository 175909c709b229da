/*
 * Rollout: the sample for versions and rollout — one source, three versions of the workflow
 * `onboard`, chosen at build time with -DROLLOUT_V=1|2|3 (default 1).
 *
 * Input:  {"user": str}
 * v1:     create_account → publish "status" = "waiting" → signal "go" (any payload)
 *         → send_welcome. Positions: 0 create_account, 1 signal, 2 send_welcome.
 * v2:     v1 plus, after the signal, `if (amber_patched(wf, "add-audit")) audit_log`. New runs
 *         audit (positions 2 patched, 3 audit_log, 4 send_welcome); a v1 history that already
 *         holds send_welcome at position 2 replays on v2 with patched = false and does not.
 * v3:     send_welcome BEFORE the signal, without a patch: an incompatible change (a v1 history
 *         waiting on the signal at position 1 diverges there).
 * Result: {"user", "account", "welcomed": true, "audited": bool}
 *
 * Every variant declares and exports the same workflow and activities, so the versions differ
 * only in code. The activities compute their results from their arguments.
 */
#include "amber.h"

#ifndef ROLLOUT_V
#define ROLLOUT_V 1
#elif ROLLOUT_V < 1 || ROLLOUT_V > 3
#error "ROLLOUT_V must be 1, 2 or 3"
#endif

AMBER_MANIFEST({"abi": 1, "workflows": ["onboard"],
                "activities": ["create_account", "send_welcome", "audit_log"]})

/* A one-key map {key: value}. */
static amber_bytes one_str(const char *key, amber_bytes value) {
    amber_writer w = amber_writer_heap(32 + value.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, key);
    amber_write_str_bytes(&w, value);
    return amber_writer_bytes(&w);
}

static amber_bytes one_true(const char *key) {
    amber_writer w = amber_writer_heap(32);
    amber_write_map(&w, 1);
    amber_write_str(&w, key);
    amber_write_bool(&w, true);
    return amber_writer_bytes(&w);
}

/* ---- workflow ---------------------------------------------------------------------------- */

static amber_outcome stop(amber_wf *wf, amber_result r) {
    if (amber_is_cancelled(r)) return amber_wf_cancelled(wf, NULL, r.error_message);
    return amber_wf_fail(wf, r.error_type, r.error_message);
}

AMBER_WORKFLOW(onboard) {
    amber_bytes user, account;
    if (!amber_map_get_str(input, "user", &user))
        return amber_wf_fail(wf, "BadInput", "expected {user: str}");

    amber_result r = amber_call_activity(wf, "create_account", one_str("user", user));
    if (!r.ok) return stop(wf, r);
    if (!amber_map_get_str(r.value, "account", &account))
        return amber_wf_fail(wf, "BadResult", "create_account returned no account");
    amber_writer waiting = amber_writer_heap(16);
    amber_write_str(&waiting, "waiting");
    amber_publish(wf, "status", amber_writer_bytes(&waiting));

    bool audited = false;
#if ROLLOUT_V == 3 /* welcome first: commands reordered without a patch */
    amber_result welcome = amber_call_activity(wf, "send_welcome", one_str("account", account));
    if (!welcome.ok) return stop(wf, welcome);
#endif
    amber_result go = amber_await_signal(wf, "go");
    if (!go.ok) return stop(wf, go);
#if ROLLOUT_V == 2 /* new code, guarded: histories that got past here on v1 skip it */
    if (amber_patched(wf, "add-audit")) {
        amber_result logged = amber_call_activity(wf, "audit_log", one_str("account", account));
        if (!logged.ok) return stop(wf, logged);
        audited = true;
    }
#endif
#if ROLLOUT_V != 3
    amber_result welcome = amber_call_activity(wf, "send_welcome", one_str("account", account));
    if (!welcome.ok) return stop(wf, welcome);
#endif
    bool welcomed = false;
    amber_map_get_bool(welcome.value, "sent", &welcomed);

    amber_writer w = amber_writer_heap(64 + user.len + account.len);
    amber_write_map(&w, 4);
    amber_write_str(&w, "user");
    amber_write_str_bytes(&w, user);
    amber_write_str(&w, "account");
    amber_write_str_bytes(&w, account);
    amber_write_str(&w, "welcomed");
    amber_write_bool(&w, welcomed);
    amber_write_str(&w, "audited");
    amber_write_bool(&w, audited);
    return amber_wf_complete(wf, amber_writer_bytes(&w));
}

/* ---- activities -------------------------------------------------------------------------- */

/* {"user": str} → {"account": "acct-<user>"} */
AMBER_ACTIVITY(create_account) {
    amber_bytes user;
    if (!amber_map_get_str(args, "user", &user))
        return amber_act_fail(act, "BadArgs", "expected {user: str}", true);
    amber_writer w = amber_writer_heap(32 + user.len);
    amber_write_map(&w, 1);
    amber_write_str(&w, "account");
    amber_write_str_header(&w, 5 + user.len);
    amber_write_raw(&w, amber_str("acct-"));
    amber_write_raw(&w, user);
    return amber_act_complete(act, amber_writer_bytes(&w));
}

/* {"account": str} → {"sent": true} */
AMBER_ACTIVITY(send_welcome) {
    amber_bytes account;
    if (!amber_map_get_str(args, "account", &account))
        return amber_act_fail(act, "BadArgs", "expected {account: str}", true);
    return amber_act_complete(act, one_true("sent"));
}

/* {"account": str} → {"logged": true} */
AMBER_ACTIVITY(audit_log) {
    amber_bytes account;
    if (!amber_map_get_str(args, "account", &account))
        return amber_act_fail(act, "BadArgs", "expected {account: str}", true);
    return amber_act_complete(act, one_true("logged"));
}
