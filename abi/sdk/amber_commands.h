/*
 * amber_commands.h — the commands a workflow issues: activities (with options), timers,
 * signals, child workflows, the recorded `now` and `random`, patch markers and approvals.
 * Part of the C guest SDK; include "amber.h", not this file.
 *
 * Issuing a command never calls the host: it appends to the command list the activation hands
 * back, and returns the command's handle (its index) for amber_await / amber_await_any. Names,
 * payloads and options are copied, so stack buffers are fine.
 */
#ifndef AMBER_COMMANDS_H
#define AMBER_COMMANDS_H

#include "amber_workflow.h"

/* ---- activities -------------------------------------------------------------------------- */

/* Retry policy of an activity. Zero fields are left out, so the host's defaults apply: 1 s
 * initial interval, coefficient 2.0, maximum interval 100 x initial, 5 attempts. */
typedef struct amber_retry_policy {
    int64_t initial_ms;
    double coefficient;
    int64_t max_interval_ms;
    int64_t max_attempts;                /* 1: no retries */
    const char *const *non_retryable;    /* error types never retried */
    uint32_t non_retryable_count;
} amber_retry_policy;

/* Activity options (abi/README.md, "Workflow output"). Zero fields are left out. */
typedef struct amber_activity_options {
    int64_t start_to_close_ms;    /* one attempt, from start to result */
    int64_t schedule_to_close_ms; /* all attempts together, from scheduling to result */
    int64_t schedule_to_start_ms; /* waiting in the queue */
    int64_t heartbeat_ms;         /* longest gap between amber_act_heartbeat calls */
    const amber_retry_policy *retry;
} amber_activity_options;

static inline void amber__write_kv_int(amber_writer *w, const char *key, int64_t v) {
    amber_write_str(w, key);
    amber_write_int(w, v);
}

/* Writes the retry policy's map (only its non-zero fields). */
AMBER__FN void amber__write_retry(amber_writer *w, const amber_retry_policy *p) {
    amber_write_map(w, (p->initial_ms != 0) + (p->coefficient != 0) + (p->max_interval_ms != 0) +
                           (p->max_attempts != 0) + (p->non_retryable_count != 0));
    if (p->initial_ms) amber__write_kv_int(w, "initial_ms", p->initial_ms);
    if (p->coefficient != 0) {
        amber_write_str(w, "coefficient");
        amber_write_double(w, p->coefficient);
    }
    if (p->max_interval_ms) amber__write_kv_int(w, "max_interval_ms", p->max_interval_ms);
    if (p->max_attempts) amber__write_kv_int(w, "max_attempts", p->max_attempts);
    if (p->non_retryable_count) {
        amber_write_str(w, "non_retryable");
        amber_write_array(w, p->non_retryable_count);
        for (uint32_t i = 0; i < p->non_retryable_count; i++)
            amber_write_str(w, p->non_retryable[i]);
    }
}

/* The options map as the ABI encodes it, with keys in a fixed order (so replays issue the same
 * bytes). Empty bytes when o is NULL or sets nothing: the command then has no options. */
AMBER__FN amber_bytes amber_activity_options_encode(const amber_activity_options *o) {
    uint32_t n = o ? (o->start_to_close_ms != 0) + (o->schedule_to_close_ms != 0) +
                         (o->schedule_to_start_ms != 0) + (o->heartbeat_ms != 0) +
                         (o->retry != NULL)
                   : 0;
    if (n == 0) return amber_bytes_of(NULL, 0);
    amber_writer w = amber_writer_heap(128);
    amber_write_map(&w, n);
    if (o->start_to_close_ms) amber__write_kv_int(&w, "start_to_close_ms", o->start_to_close_ms);
    if (o->schedule_to_close_ms)
        amber__write_kv_int(&w, "schedule_to_close_ms", o->schedule_to_close_ms);
    if (o->schedule_to_start_ms)
        amber__write_kv_int(&w, "schedule_to_start_ms", o->schedule_to_start_ms);
    if (o->heartbeat_ms) amber__write_kv_int(&w, "heartbeat_ms", o->heartbeat_ms);
    if (o->retry) {
        amber_write_str(&w, "retry");
        amber__write_retry(&w, o->retry);
    }
    return amber_writer_bytes(&w);
}

/* Issues an activity command whose options are an already-encoded msgpack map (empty bytes: no
 * options, the 3-element command). Use it to pass options through from an input document. */
AMBER__FN uint32_t amber_schedule_activity_raw(amber_wf *wf, const char *name, amber_bytes args,
                                               amber_bytes options) {
    if (options.len) {
        amber_reader r = amber_reader_new(options);
        if (amber_peek(&r) != AMBER_T_MAP || !amber_read_skip(&r) || !amber_reader_done(&r))
            __builtin_trap(); /* not one msgpack map */
    }
    uint32_t i = amber__wf_push(wf, AMBER__CMD_ACTIVITY);
    wf->cmds[i].name = amber_bytes_copy(amber_str(name));
    wf->cmds[i].payload = amber_bytes_copy(args);
    wf->cmds[i].options = amber_bytes_copy(options);
    return i;
}

/* Issues an activity command and returns its handle for amber_await. */
static inline uint32_t amber_schedule_activity(amber_wf *wf, const char *name, amber_bytes args) {
    return amber_schedule_activity_raw(wf, name, args, amber_bytes_of(NULL, 0));
}

/* Issues an activity command with timeouts and a retry policy (options may be NULL). */
static inline uint32_t amber_schedule_activity_opts(amber_wf *wf, const char *name,
                                                    amber_bytes args,
                                                    const amber_activity_options *options) {
    return amber_schedule_activity_raw(wf, name, args, amber_activity_options_encode(options));
}

static inline amber_result amber_call_activity(amber_wf *wf, const char *name, amber_bytes args) {
    return amber_await(wf, amber_schedule_activity(wf, name, args));
}

static inline amber_result amber_call_activity_opts(amber_wf *wf, const char *name,
                                                    amber_bytes args,
                                                    const amber_activity_options *options) {
    return amber_await(wf, amber_schedule_activity_opts(wf, name, args, options));
}

/* ---- timers ------------------------------------------------------------------------------ */

#define AMBER_SECOND_MS 1000LL
#define AMBER_MINUTE_MS (60LL * AMBER_SECOND_MS)
#define AMBER_HOUR_MS (60LL * AMBER_MINUTE_MS)
#define AMBER_DAY_MS (24LL * AMBER_HOUR_MS)

/* Starts a durable timer of ms milliseconds (>= 0) and returns its handle. Awaiting it yields
 * ok (no value) when it fires, or the error "TimerCancelled" once amber_cancel_timer ran. */
AMBER__FN uint32_t amber_start_timer(amber_wf *wf, int64_t ms) {
    if (ms < 0) __builtin_trap();
    uint32_t i = amber__wf_push(wf, AMBER__CMD_TIMER);
    wf->cmds[i].number = ms;
    return i;
}

/*
 * Cancels the timer behind timer (a handle from amber_start_timer): issues a `cancel_timer`
 * command; the timer's result becomes the error "TimerCancelled" unless it had fired already.
 * Always issue it where the code says so, even when the timer has a result: deciding from the
 * results would issue different commands on a replay that sees the timer's later result.
 */
AMBER__FN void amber_cancel_timer(amber_wf *wf, uint32_t timer) {
    if (timer >= wf->ncmds || wf->cmds[timer].kind != AMBER__CMD_TIMER) __builtin_trap();
    uint32_t i = amber__wf_push(wf, AMBER__CMD_CANCEL_TIMER);
    wf->cmds[i].number = timer;
}

/* Waits ms milliseconds on a durable timer. Not ok only when the await got the cancellation. */
static inline amber_result amber_sleep(amber_wf *wf, int64_t ms) {
    return amber_await(wf, amber_start_timer(wf, ms));
}

/* ---- signals ----------------------------------------------------------------------------- */

/* Waits for the next signal named name (signals are buffered: one sent before this command was
 * issued counts) and returns the handle; awaiting it yields the signal's payload. Each call
 * consumes one signal, in the order the host received them. */
AMBER__FN uint32_t amber_wait_signal(amber_wf *wf, const char *name) {
    uint32_t i = amber__wf_push(wf, AMBER__CMD_SIGNAL);
    wf->cmds[i].name = amber_bytes_copy(amber_str(name));
    return i;
}

static inline amber_result amber_await_signal(amber_wf *wf, const char *name) {
    return amber_await(wf, amber_wait_signal(wf, name));
}

/* ---- child workflows --------------------------------------------------------------------- */

/* Child options; NULL fields are left out (the host's defaults apply). */
typedef struct amber_child_options {
    const char *parent_close_policy; /* "terminate" (default), "cancel" or "abandon" */
    const char *version;             /* module digest to pin; default: the type's current */
} amber_child_options;

/* Starts child workflow `type` with workflow_id (must be new; derive it from the input or
 * results, never from anything else) and input; returns the handle. Awaiting it yields the
 * child's result, or ChildFailed / ChildCancelled / ChildTerminated / ChildTimedOut. */
AMBER__FN uint32_t amber_start_child(amber_wf *wf, const char *type, amber_bytes workflow_id,
                                     amber_bytes input, const amber_child_options *options) {
    const char *policy = options ? options->parent_close_policy : NULL;
    const char *version = options ? options->version : NULL;
    amber_writer w = amber_writer_heap(64);
    amber_write_map(&w, (policy != NULL) + (version != NULL));
    if (policy) {
        amber_write_str(&w, "parent_close_policy");
        amber_write_str(&w, policy);
    }
    if (version) {
        amber_write_str(&w, "version");
        amber_write_str(&w, version);
    }
    uint32_t i = amber__wf_push(wf, AMBER__CMD_CHILD);
    wf->cmds[i].name = amber_bytes_copy(amber_str(type));
    wf->cmds[i].id = amber_bytes_copy(workflow_id);
    wf->cmds[i].payload = amber_bytes_copy(input);
    wf->cmds[i].options = amber_writer_bytes(&w);
    return i;
}

/* ---- recorded values --------------------------------------------------------------------- */

/* Milliseconds since the Unix epoch, recorded in history: replays see the same value. */
AMBER__FN int64_t amber_now(amber_wf *wf) {
    uint32_t i = amber__wf_push(wf, AMBER__CMD_NOW);
    const amber__slot *s = amber__wf_slot(wf, i);
    if (s) {
        amber_reader r = amber_reader_new(s->value);
        if (s->status != 0 || !amber_read_int(&r, &wf->cmds[i].number)) amber__wf_suspend(wf);
        amber__wf_consumed(wf, i);
    } else {
        wf->cmds[i].number = amber__host_now();
    }
    return wf->cmds[i].number;
}

/* len (<= AMBER_RANDOM_MAX) random bytes, recorded in history. A replay asking for a different
 * length than was recorded traps (the host compares only the command kind). */
AMBER__FN void amber_random(amber_wf *wf, uint8_t *out, uint32_t len) {
    if (len > AMBER_RANDOM_MAX) __builtin_trap();
    uint32_t i = amber__wf_push(wf, AMBER__CMD_RANDOM);
    const amber__slot *s = amber__wf_slot(wf, i);
    if (s) {
        amber_reader r = amber_reader_new(s->value);
        amber_bytes v;
        if (s->status != 0 || !amber_read_bin(&r, &v)) amber__wf_suspend(wf);
        if (v.len != len) __builtin_trap();
        if (len) __builtin_memcpy(out, v.ptr, len);
        amber__wf_consumed(wf, i);
    } else {
        amber__host_random(AMBER__PTR(out), (int32_t)len);
    }
    wf->cmds[i].payload = amber_bytes_copy(amber_bytes_of(out, len));
}

/* ---- patch markers ----------------------------------------------------------------------- */

/*
 * Whether this run takes the new path of the code change change_id. Use it to change what a
 * workflow does without breaking runs that started on the old code:
 *
 *     if (amber_patched(wf, "add-audit")) amber_call_activity(wf, "audit_log", args);
 *
 * At the next command index i (abi/README.md, "Patch markers"):
 *   1. history recorded a `patched` marker with this change id at i: consumes it, true;
 *   2. else, if i < the input's `recorded` (history holds another command at i: the run
 *      started on code without the patch): false, and nothing is issued;
 *   3. else (new ground): issues ["patched", change_id], true.
 * A host that does not send `recorded` (one that predates patch markers) makes rule 2 never
 * apply: every call on new ground issues a marker, which such a host refuses.
 * Call it once per change id and keep the answer: each call is a position of its own, so a
 * second call can answer differently on a history written by other code. Keep the call in the
 * code while runs that recorded its marker are open: removing it is non-determinism at that
 * position (recorded `patched`, issued something else).
 */
AMBER__FN bool amber_patched(amber_wf *wf, const char *change_id) {
    amber_bytes id = amber_str(change_id);
    uint32_t i = wf->ncmds;
    const amber__slot *s = amber__wf_slot(wf, i);
    amber_bytes marker;
    amber_reader r = amber_reader_new(s ? s->value : amber_bytes_of(NULL, 0));
    bool marked = s && s->status == 0 && amber_read_str(&r, &marker) && amber_bytes_eq(marker, id);
    if (!marked && i < wf->recorded) return false;
    amber__wf_push(wf, AMBER__CMD_PATCHED);
    wf->cmds[i].name = amber_bytes_copy(id);
    if (marked) amber__wf_consumed(wf, i);
    return true;
}

/* ---- human approval --------------------------------------------------------------------- */

/* Who may approve: any `required` (0 means 1) of the named approvers or of the members of the
 * named roles (role membership is checked again when each decision arrives). */
typedef struct amber_approval_policy {
    const char *const *approvers;
    uint32_t approver_count;
    const char *const *roles;
    uint32_t role_count;
    int64_t required;
} amber_approval_policy;

/* Requests an approval with the policy already encoded as a msgpack map
 * {"approvers": [str], "roles": [str], "required": int}; see amber_request_approval. */
AMBER__FN uint32_t amber_request_approval_raw(amber_wf *wf, amber_bytes action,
                                              amber_bytes policy, int64_t expires_ms) {
    if (expires_ms <= 0) __builtin_trap();
    uint32_t i = amber__wf_push(wf, AMBER__CMD_APPROVAL);
    wf->cmds[i].name = amber_bytes_copy(action);
    wf->cmds[i].number = expires_ms;
    wf->cmds[i].options = amber_bytes_copy(policy);
    return i;
}

/*
 * Asks people to approve `action` (shown to them verbatim) and returns the handle. The run waits
 * durably — no worker holds it — until the policy is met, someone rejects, or expires_ms pass.
 * Awaiting it yields ok with a map {"outcome": "approved" | "rejected" | "expired",
 * "decisions": [{"approver", "approve", "comment", "at_ms"}]}: an expiry is the workflow's
 * timeout path, not an error. Decisions that arrive before the workflow awaits are kept.
 */
AMBER__FN uint32_t amber_request_approval(amber_wf *wf, const char *action,
                                          const amber_approval_policy *policy,
                                          int64_t expires_ms) {
    amber_writer w = amber_writer_heap(64);
    amber_write_map(&w, 3);
    amber_write_str(&w, "approvers");
    amber_write_array(&w, policy->approver_count);
    for (uint32_t k = 0; k < policy->approver_count; k++) amber_write_str(&w, policy->approvers[k]);
    amber_write_str(&w, "roles");
    amber_write_array(&w, policy->role_count);
    for (uint32_t k = 0; k < policy->role_count; k++) amber_write_str(&w, policy->roles[k]);
    amber__write_kv_int(&w, "required", policy->required ? policy->required : 1);
    return amber_request_approval_raw(wf, amber_str(action), amber_writer_bytes(&w), expires_ms);
}

#endif /* AMBER_COMMANDS_H */
