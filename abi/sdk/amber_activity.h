/*
 * amber_activity.h — the activity side: the attempt's context, heartbeats and cancellation,
 * outcomes, and the plain host calls an activity may make (clock, randomness, log, sleep).
 * HTTP is in amber_http.h. Part of the C guest SDK; include "amber.h", not this file.
 *
 * Activities are not replayed: every call here is a plain host call. An attempt runs at least
 * once and may run again (retries), so make external effects idempotent with
 * amber_act_idempotency_key.
 */
#ifndef AMBER_ACTIVITY_H
#define AMBER_ACTIVITY_H

#include "amber_envelope.h"

AMBER__IMPORT("sleep") void amber__host_sleep(int64_t ms);
AMBER__IMPORT("heartbeat") int32_t amber__host_heartbeat(int32_t ptr, int32_t len);
AMBER__IMPORT("cancel_requested") int32_t amber__host_cancel_requested(void);

#define AMBER_HEARTBEAT_MAX 65536u /* largest heartbeat details (bytes) */

typedef struct amber_act {
    amber_bytes run_id, activity, args, idempotency_key;
    amber_bytes heartbeat_details; /* from an earlier attempt; empty when none */
    int64_t attempt;               /* 1 for the first attempt */
    int64_t deadline_ms;           /* wall-clock deadline of this attempt, ms since the epoch */
} amber_act;

static inline amber_bytes amber_act_run_id(const amber_act *act) { return act->run_id; }
static inline amber_bytes amber_act_args(const amber_act *act) { return act->args; }
static inline int64_t amber_act_attempt(const amber_act *act) { return act->attempt; }
static inline int64_t amber_act_deadline_ms(const amber_act *act) { return act->deadline_ms; }
/* The same for every attempt of this activity in this run: use it to deduplicate effects. The
 * host sends it as the Idempotency-Key header of every amber_act_http request. */
static inline amber_bytes amber_act_idempotency_key(const amber_act *act) {
    return act->idempotency_key;
}
/* The details the last heartbeat of an earlier attempt carried (a msgpack document), or empty
 * bytes when there was none: where a retried attempt resumes from. */
static inline amber_bytes amber_act_heartbeat_details(const amber_act *act) {
    return act->heartbeat_details;
}

AMBER__FN void amber__act_begin(amber_act *act, int32_t ptr, int32_t len) {
    __builtin_memset(act, 0, sizeof *act);
    uint32_t n;
    amber_reader r = amber__envelope(ptr, len, &n);
    bool have_args = false;
    for (uint32_t i = 0; i < n; i++) {
        amber_bytes key;
        int64_t abi = 0;
        if (!amber_read_str(&r, &key)) __builtin_trap();
        if (amber_bytes_eq_str(key, "abi")) {
            if (!amber_read_int(&r, &abi) || abi != 1) __builtin_trap();
        } else if (amber_bytes_eq_str(key, "run_id")) {
            amber_read_str(&r, &act->run_id);
        } else if (amber_bytes_eq_str(key, "activity")) {
            amber_read_str(&r, &act->activity);
        } else if (amber_bytes_eq_str(key, "args")) {
            have_args = amber_read_bin(&r, &act->args);
        } else if (amber_bytes_eq_str(key, "attempt")) {
            amber_read_int(&r, &act->attempt);
        } else if (amber_bytes_eq_str(key, "idempotency_key")) {
            amber_read_str(&r, &act->idempotency_key);
        } else if (amber_bytes_eq_str(key, "deadline_ms")) {
            amber_read_int(&r, &act->deadline_ms);
        } else if (amber_bytes_eq_str(key, "heartbeat_details")) {
            amber_read_bin(&r, &act->heartbeat_details);
        } else {
            amber_read_skip(&r);
        }
    }
    if (r.error || !have_args) __builtin_trap();
}

AMBER__FN amber_outcome amber_act_complete(amber_act *act, amber_bytes result) {
    (void)act;
    amber_writer w = amber_writer_heap(result.len + 48u);
    amber_write_map(&w, 2);
    amber_write_str(&w, "status");
    amber_write_str(&w, "completed");
    amber_write_str(&w, "result");
    amber_write_bin(&w, result);
    return amber__outcome(&w);
}

/* Fails this attempt; the host retries it unless non_retryable (or the retry policy names the
 * type as non-retryable). When the run asked the activity to stop (amber_act_heartbeat returned
 * true), failing with "Cancelled", non-retryable, is the usual answer. */
AMBER__FN amber_outcome amber_act_fail(amber_act *act, const char *type, const char *message,
                                       bool non_retryable) {
    (void)act;
    amber_bytes t = amber_str(type), m = amber_str(message);
    amber_writer w = amber_writer_heap(t.len + m.len + 48u);
    amber_write_map(&w, 2);
    amber_write_str(&w, "status");
    amber_write_str(&w, "failed");
    amber_write_str(&w, "error");
    amber_write_array(&w, 3);
    amber_write_str_bytes(&w, t);
    amber_write_str_bytes(&w, m);
    amber_write_bool(&w, non_retryable);
    return amber__outcome(&w);
}

/*
 * Reports progress: resets the heartbeat timeout and hands details (a msgpack document of at
 * most AMBER_HEARTBEAT_MAX bytes, or empty bytes) to the next attempt should this one fail.
 * Returns true when the run asked this activity to stop: wind down and fail with "Cancelled".
 */
AMBER__FN bool amber_act_heartbeat(amber_act *act, amber_bytes details) {
    (void)act;
    if (details.len > AMBER_HEARTBEAT_MAX) __builtin_trap();
    return amber__host_heartbeat(AMBER__PTR(details.ptr), (int32_t)details.len) != 0;
}

/* Whether the run asked this activity to stop (as last seen through the worker's heartbeats),
 * without heartbeating. */
static inline bool amber_act_cancel_requested(amber_act *act) {
    (void)act;
    return amber__host_cancel_requested() != 0;
}

/* The host's wall clock (not recorded: activities are not replayed). */
static inline int64_t amber_act_now(amber_act *act) {
    (void)act;
    return amber__host_now();
}

/* len random bytes from the host's CSPRNG, in chunks of at most AMBER_RANDOM_MAX. */
AMBER__FN void amber_act_random(amber_act *act, uint8_t *out, uint32_t len) {
    (void)act;
    for (uint32_t done = 0; done < len;) {
        uint32_t n = len - done < AMBER_RANDOM_MAX ? len - done : AMBER_RANDOM_MAX;
        amber__host_random(AMBER__PTR(out + done), (int32_t)n);
        done += n;
    }
}

static inline void amber_act_log(amber_act *act, int level, const char *msg) {
    (void)act;
    amber__log(level, msg);
}

/* Blocks for ms within the attempt's budget; sleeping past the deadline fails the attempt. */
static inline void amber_act_sleep(amber_act *act, int64_t ms) {
    (void)act;
    amber__host_sleep(ms);
}

/*
 * AMBER_ACTIVITY(name) { body } defines the export `amber_activity.<name>`. The body sees
 * `amber_act *act` and `amber_bytes args`, and returns amber_act_complete or amber_act_fail.
 */
#define AMBER_ACTIVITY(name)                                                                  \
    static amber_outcome amber__act_body_##name(amber_act *act, amber_bytes args);            \
    __attribute__((export_name("amber_activity." #name)))                                     \
    int64_t amber__act_export_##name(int32_t ptr, int32_t len) {                              \
        amber_act act_;                                                                       \
        amber__act_begin(&act_, ptr, len);                                                    \
        return amber__act_body_##name(&act_, act_.args).packed;                               \
    }                                                                                         \
    static amber_outcome amber__act_body_##name(amber_act *act, amber_bytes args)

#endif /* AMBER_ACTIVITY_H */
