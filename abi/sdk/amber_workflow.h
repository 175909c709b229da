/*
 * amber_workflow.h — the workflow side: the activation context, replay of recorded results,
 * awaiting (one handle or the first of several), cancellation, queries and outcomes.
 * The commands a workflow issues (activities, timers, signals, children, now, random) are in
 * amber_commands.h. Part of the C guest SDK; include "amber.h", not this file.
 *
 * Handles: every command gets the next command index (0, 1, 2, ...), and that index is its
 * handle. A command's result is the entry of the input's `results` whose `cmd` is the index.
 * The input's `recorded` says how many commands history holds: indices below it replay.
 *
 * Delivery seq: the `seq` of a command's result in the input envelope, i.e. the history
 * position at which the host recorded it. It is a property of the history alone, so every
 * replay of the same history sees the same order. A command without a result has none.
 *
 * Cancellation (the `cancel` entry, [seq, reason]): delivered to exactly one await — the
 * first await, in execution order, whose result is missing or has a delivery seq greater than
 * the cancel seq (for amber_await_any: the result it would return). That await returns
 * {ok = false, error_type = "Cancelled", error_message = reason} instead; the result it skipped
 * stays available to later awaits of the same handle. Every later await behaves normally.
 */
#ifndef AMBER_WORKFLOW_H
#define AMBER_WORKFLOW_H

#include "amber_envelope.h"

AMBER__IMPORT("await_results") void amber__host_await_results(int32_t ptr, int32_t len);
AMBER__IMPORT("await_next") int32_t amber__host_await_next(int32_t ptr, int32_t len);
AMBER__IMPORT("publish")
void amber__host_publish(int32_t name_ptr, int32_t name_len, int32_t val_ptr, int32_t val_len);

#define AMBER_PUBLISH_MAX 65536u /* largest value amber_publish accepts (bytes) */
#define AMBER_CANCELLED "Cancelled" /* error type of a delivered cancellation */
#define AMBER_AWAIT_CANCELLED 0xFFFFFFFFu /* amber_await_any's index when it returns Cancelled */

typedef struct amber_result {
    bool ok;
    amber_bytes value;         /* the payload when ok (activity, signal, child); empty for timers */
    const char *error_type;    /* NUL-terminated; "" when ok */
    const char *error_message; /* NUL-terminated; "" when ok */
} amber_result;

/* True when r is an error of the given type ("Cancelled", "TimerCancelled", ...). */
AMBER__FN bool amber_result_is(amber_result r, const char *type) {
    return !r.ok && amber_bytes_eq_str(amber_str(r.error_type), type);
}

/* True when r is a cancellation: the one delivered to this await, or a recorded "Cancelled"
 * error (an activity the host cancelled before it started). */
static inline bool amber_is_cancelled(amber_result r) { return amber_result_is(r, AMBER_CANCELLED); }

/* Command kinds (amber__shapes below says how each is written). */
enum {
    AMBER__CMD_ACTIVITY, AMBER__CMD_NOW, AMBER__CMD_RANDOM, AMBER__CMD_TIMER,
    AMBER__CMD_CANCEL_TIMER, AMBER__CMD_SIGNAL, AMBER__CMD_CHILD, AMBER__CMD_PATCHED,
    AMBER__CMD_APPROVAL,
};
/* The kinds amber_await accepts: the ones whose result is a value the workflow waits for. */
#define AMBER__AWAITABLE                                                                      \
    ((1u << AMBER__CMD_ACTIVITY) | (1u << AMBER__CMD_TIMER) | (1u << AMBER__CMD_SIGNAL) |     \
     (1u << AMBER__CMD_CHILD) | (1u << AMBER__CMD_APPROVAL))

typedef struct amber__command {
    uint8_t kind;
    amber_bytes name;    /* activity name, signal name, child workflow type, change id, action */
    amber_bytes id;      /* child workflow id */
    amber_bytes payload; /* activity args, random bytes, child input */
    amber_bytes options; /* encoded options map (activity: empty when none; child: always) */
    int64_t number;      /* now: the value; timer: duration ms; cancel_timer: the timer's index;
                            approval: expiry ms */
} amber__command;

typedef struct amber__slot {
    amber_bytes value; /* the recorded value, still msgpack-encoded */
    int64_t seq;       /* delivery seq: where in history the host recorded it */
    uint8_t present, status;
} amber__slot;

typedef struct amber_wf {
    amber_bytes run_id, workflow, input, query;
    amber__slot *slots; /* recorded results indexed by command index */
    uint32_t nslots;
    uint32_t recorded;  /* commands history records; 0 when the host did not say */
    bool has_recorded;  /* the input carried `recorded` (hosts before patch markers omit it) */
    int64_t newest_seq; /* highest seq among the results and the cancel request; -1: none */
    bool caught_up;     /* the workflow consumed the newest_seq entry (see amber_is_replaying) */
    bool cancel_requested, cancel_delivered;
    int64_t cancel_seq;
    const char *cancel_reason;
    amber__command *cmds;
    uint32_t ncmds, cap;
} amber_wf;

static inline amber_bytes amber_wf_run_id(const amber_wf *wf) { return wf->run_id; }
static inline amber_bytes amber_wf_type(const amber_wf *wf) { return wf->workflow; }
static inline amber_bytes amber_wf_input(const amber_wf *wf) { return wf->input; }

/* The query this activation answers (empty when it is a normal activation). Commands issued at
 * the end of history during a query are discarded by the host; branching on this is allowed
 * only to skip work, never to change the commands a replay issues. */
static inline amber_bytes amber_wf_query(const amber_wf *wf) { return wf->query; }

/* Whether this run's cancellation has reached the code: an await returned AMBER_CANCELLED
 * earlier in this activation. Deterministic: it answers the same at the same point of every
 * replay. (Whether a request merely exists in the input is not: a replay that runs after the
 * request was recorded would see it at points where the original run did not, and branch
 * differently. So the SDK does not expose that.) No side effect. */
static inline bool amber_cancel_requested(const amber_wf *wf) { return wf->cancel_delivered; }

/* The reason given with the cancellation, once amber_cancel_requested is true ("" before). */
static inline const char *amber_cancel_reason(const amber_wf *wf) {
    return wf->cancel_delivered ? wf->cancel_reason : "";
}

/* ---- reading the input envelope ---------------------------------------------------------- */

static inline void amber__wf_saw_seq(amber_wf *wf, int64_t seq) {
    if (seq > wf->newest_seq) wf->newest_seq = seq;
}

AMBER__FN void amber__wf_results(amber_wf *wf, amber_reader *r) {
    uint32_t n, maxcmd = 0;
    if (!amber_read_array(r, &n) || n > (1u << 24)) __builtin_trap();
    amber__slot *tmp = (amber__slot *)amber_heap_alloc(n * (uint32_t)sizeof(amber__slot));
    uint32_t *cmd_of = (uint32_t *)amber_heap_alloc(n * 4u);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        int64_t cmd, status;
        if (!amber_read_array(r, &len) || len != 4 || !amber_read_int(r, &cmd) ||
            !amber_read_int(r, &tmp[i].seq) || !amber_read_int(r, &status) ||
            !amber_read_raw(r, &tmp[i].value) || cmd < 0 || cmd >= (1 << 24) ||
            tmp[i].seq < 0 || (status != 0 && status != 1))
            __builtin_trap();
        tmp[i].status = (uint8_t)status;
        tmp[i].present = 1;
        cmd_of[i] = (uint32_t)cmd;
        if (cmd_of[i] > maxcmd) maxcmd = cmd_of[i];
        amber__wf_saw_seq(wf, tmp[i].seq);
    }
    wf->nslots = n ? maxcmd + 1u : 0u;
    wf->slots = (amber__slot *)amber_heap_alloc(wf->nslots * (uint32_t)sizeof(amber__slot));
    __builtin_memset(wf->slots, 0, wf->nslots * sizeof(amber__slot));
    for (uint32_t i = 0; i < n; i++) {
        if (wf->slots[cmd_of[i]].present) __builtin_trap(); /* two results for one command */
        wf->slots[cmd_of[i]] = tmp[i];
    }
}

/* "cancel": [seq: int, reason: str] */
AMBER__FN void amber__wf_cancel(amber_wf *wf, amber_reader *r) {
    uint32_t n;
    amber_bytes reason;
    if (!amber_read_array(r, &n) || n != 2 || !amber_read_int(r, &wf->cancel_seq) ||
        !amber_read_str(r, &reason) || wf->cancel_seq < 0)
        __builtin_trap();
    wf->cancel_requested = true;
    wf->cancel_reason = amber_cstr(reason);
    amber__wf_saw_seq(wf, wf->cancel_seq);
}

AMBER__FN void amber__wf_begin(amber_wf *wf, int32_t ptr, int32_t len) {
    __builtin_memset(wf, 0, sizeof *wf);
    wf->newest_seq = -1;
    uint32_t n;
    amber_reader r = amber__envelope(ptr, len, &n);
    bool have_input = false, have_results = false;
    for (uint32_t i = 0; i < n; i++) {
        amber_bytes key;
        int64_t abi = 0;
        if (!amber_read_str(&r, &key)) __builtin_trap();
        if (amber_bytes_eq_str(key, "abi")) {
            if (!amber_read_int(&r, &abi) || abi != 1) __builtin_trap();
        } else if (amber_bytes_eq_str(key, "run_id")) {
            amber_read_str(&r, &wf->run_id);
        } else if (amber_bytes_eq_str(key, "workflow")) {
            amber_read_str(&r, &wf->workflow);
        } else if (amber_bytes_eq_str(key, "input")) {
            have_input = amber_read_bin(&r, &wf->input);
        } else if (amber_bytes_eq_str(key, "results")) {
            amber__wf_results(wf, &r);
            have_results = true;
        } else if (amber_bytes_eq_str(key, "recorded")) {
            int64_t recorded;
            if (!amber_read_int(&r, &recorded) || recorded < 0 || recorded > (1 << 24))
                __builtin_trap();
            wf->recorded = (uint32_t)recorded;
            wf->has_recorded = true;
        } else if (amber_bytes_eq_str(key, "cancel")) {
            amber__wf_cancel(wf, &r);
        } else if (amber_bytes_eq_str(key, "query")) {
            amber_read_str(&r, &wf->query);
        } else {
            amber_read_skip(&r);
        }
    }
    if (r.error || !have_input || !have_results) __builtin_trap();
    /* A result for a command history does not record: the host's bug. */
    if (wf->has_recorded && wf->nslots > wf->recorded) __builtin_trap();
}

/* A later input envelope of the same run, handed to a live instance (see amber__wf_wait):
 * history only grows, so its results and cancel request replace the ones read so far, and the
 * code goes on exactly as a replay from the top would reach this point. */
AMBER__FN void amber__wf_refresh(amber_wf *wf, int32_t ptr, int32_t len) {
    int64_t newest = wf->newest_seq;
    uint32_t n;
    amber_reader r = amber__envelope(ptr, len, &n);
    bool have_results = false;
    wf->has_recorded = false;
    for (uint32_t i = 0; i < n; i++) {
        amber_bytes key;
        if (!amber_read_str(&r, &key)) __builtin_trap();
        if (amber_bytes_eq_str(key, "results")) {
            amber__wf_results(wf, &r);
            have_results = true;
        } else if (amber_bytes_eq_str(key, "recorded")) {
            int64_t recorded;
            if (!amber_read_int(&r, &recorded) || recorded < 0 || recorded > (1 << 24))
                __builtin_trap();
            wf->recorded = (uint32_t)recorded;
            wf->has_recorded = true;
        } else if (amber_bytes_eq_str(key, "cancel")) {
            if (wf->cancel_requested) amber_read_skip(&r); /* recorded once, never changes */
            else amber__wf_cancel(wf, &r);
        } else {
            amber_read_skip(&r); /* run, workflow, input: the same run's */
        }
    }
    if (r.error || !have_results) __builtin_trap();
    if (wf->has_recorded && wf->nslots > wf->recorded) __builtin_trap();
    if (wf->newest_seq == newest) return;
    /* A newer entry, not consumed yet — unless it is the marker of a now, random or patched
     * command this instance issued before it waited (recorded since): a replay from the top
     * reads that marker on its way here, and so has caught up with it. */
    wf->caught_up = false;
    for (uint32_t i = 0; i < wf->ncmds && i < wf->nslots; i++) {
        uint8_t kind = wf->cmds[i].kind;
        bool marker = kind == AMBER__CMD_NOW || kind == AMBER__CMD_RANDOM ||
                      kind == AMBER__CMD_PATCHED;
        if (marker && wf->slots[i].present && wf->slots[i].seq == wf->newest_seq) {
            wf->caught_up = true;
            return;
        }
    }
}

/* ---- replay state ------------------------------------------------------------------------ */

/* The recorded result of command i, or NULL. */
static inline const amber__slot *amber__wf_slot(const amber_wf *wf, uint32_t i) {
    return i < wf->nslots && wf->slots[i].present ? &wf->slots[i] : NULL;
}

static inline void amber__wf_consumed(amber_wf *wf, uint32_t i) {
    const amber__slot *s = amber__wf_slot(wf, i);
    if (s && s->seq == wf->newest_seq) wf->caught_up = true;
}

/*
 * True while the code runs a stretch an earlier activation already ran, so side effects such as
 * logging are skipped. With the input's `recorded` count (hosts that speak patch markers send
 * it), at any point in the code:
 *   - fewer than `recorded` commands issued so far: replaying (an earlier activation issued the
 *     next recorded command, so it ran this code);
 *   - more than `recorded` issued: not replaying (the code has issued a command history does not
 *     hold yet, so no earlier activation got here);
 *   - exactly `recorded` issued: replaying until the workflow consumes the newest entry of its
 *     history — the result with the highest seq (consumed by awaiting it, or by amber_now /
 *     amber_random / amber_patched reading it) or the cancel request when that is newer
 *     (consumed by its delivery). A history with no entries is not replaying here.
 * Without `recorded` (an older host) only the last rule applies, to the whole activation: a
 * workflow that never consumes the newest result (a fire-and-forget activity, the loser of an
 * amber_await_any) then stays "replaying" to the end, and code that re-runs after the newest
 * result was consumed but before the last recorded command counts as new.
 * Remaining limit: between the last recorded command and the next new one, the newest result
 * may be one the code never consumes (it counts as replaying there), and when several results
 * arrive between two activations the code between the older ones counts as replaying, so its
 * log lines are lost. Use it for logging and metrics only, never to decide which commands to
 * issue, and never to skip amber_publish.
 */
static inline bool amber_is_replaying(const amber_wf *wf) {
    if (wf->has_recorded && wf->ncmds != wf->recorded) return wf->ncmds < wf->recorded;
    return wf->newest_seq >= 0 && !wf->caught_up;
}

/* Appends a zeroed command of the given kind; returns its index. Invalidates command pointers. */
AMBER__FN uint32_t amber__wf_push(amber_wf *wf, uint8_t kind) {
    if (wf->ncmds == wf->cap) {
        uint32_t cap = wf->cap ? wf->cap * 2u : 16u;
        if (cap > (1u << 24)) __builtin_trap();
        amber__command *n = (amber__command *)amber_heap_alloc(cap * (uint32_t)sizeof *n);
        if (wf->ncmds) __builtin_memcpy(n, wf->cmds, wf->ncmds * sizeof *n);
        wf->cmds = n;
        wf->cap = cap;
    }
    amber__command *c = &wf->cmds[wf->ncmds];
    __builtin_memset(c, 0, sizeof *c);
    c->kind = kind;
    return wf->ncmds++;
}

/* ---- output envelope --------------------------------------------------------------------- */

/* Which amber__command fields each kind's array carries after its tag, always in this order. */
enum { AMBER__F_NAME = 1, AMBER__F_ID = 2, AMBER__F_PAYLOAD = 4, AMBER__F_NUMBER = 8,
       AMBER__F_OPTIONS = 16 };
static const struct amber__shape {
    const char *tag;
    uint8_t fields;
} amber__shapes[] = {
    [AMBER__CMD_ACTIVITY] = {"activity", AMBER__F_NAME | AMBER__F_PAYLOAD | AMBER__F_OPTIONS},
    [AMBER__CMD_NOW] = {"now", AMBER__F_NUMBER},
    [AMBER__CMD_RANDOM] = {"random", AMBER__F_PAYLOAD},
    [AMBER__CMD_TIMER] = {"timer", AMBER__F_NUMBER},
    [AMBER__CMD_CANCEL_TIMER] = {"cancel_timer", AMBER__F_NUMBER},
    [AMBER__CMD_SIGNAL] = {"signal", AMBER__F_NAME},
    [AMBER__CMD_CHILD] = {"child", AMBER__F_NAME | AMBER__F_ID | AMBER__F_PAYLOAD |
                                       AMBER__F_OPTIONS},
    [AMBER__CMD_PATCHED] = {"patched", AMBER__F_NAME},
    [AMBER__CMD_APPROVAL] = {"approval", AMBER__F_NAME | AMBER__F_NUMBER | AMBER__F_OPTIONS},
};

/* One command as the array the ABI defines: [tag, name?, id?, payload?, number?, options?]. */
AMBER__FN void amber__wf_write_command(amber_writer *w, const amber__command *c) {
    uint32_t f = amber__shapes[c->kind].fields;
    if (c->options.len == 0) f &= ~(uint32_t)AMBER__F_OPTIONS; /* activity without options */
    amber_write_array(w, 1u + (uint32_t)__builtin_popcount(f));
    amber_write_str(w, amber__shapes[c->kind].tag);
    if (f & AMBER__F_NAME) amber_write_str_bytes(w, c->name);
    if (f & AMBER__F_ID) amber_write_str_bytes(w, c->id);
    if (f & AMBER__F_PAYLOAD) amber_write_bin(w, c->payload);
    if (f & AMBER__F_NUMBER) amber_write_int(w, c->number);
    if (f & AMBER__F_OPTIONS) amber_write_raw(w, c->options);
}

/* {"status", "commands", and `extra` more entries the caller writes next}. */
AMBER__FN amber_writer amber__wf_output(const amber_wf *wf, const char *status, uint32_t extra,
                                        uint32_t extra_bytes) {
    uint32_t size = 64u + extra_bytes;
    for (uint32_t i = 0; i < wf->ncmds; i++) {
        const amber__command *c = &wf->cmds[i];
        size += 32u + c->name.len + c->id.len + c->payload.len + c->options.len;
    }
    amber_writer w = amber_writer_heap(size);
    amber_write_map(&w, 2u + extra);
    amber_write_str(&w, "status");
    amber_write_str(&w, status);
    amber_write_str(&w, "commands");
    amber_write_array(&w, wf->ncmds);
    for (uint32_t i = 0; i < wf->ncmds; i++) amber__wf_write_command(&w, &wf->cmds[i]);
    return w;
}

/* Hands every command issued so far to the host, which ends the activation. */
__attribute__((noreturn)) AMBER__FN void amber__wf_suspend(const amber_wf *wf) {
    amber_writer w = amber__wf_output(wf, "suspended", 0, 0);
    amber__host_await_results(AMBER__PTR(w.buf), (int32_t)w.len);
    __builtin_trap(); /* await_results never returns */
}

/* Hands every command issued so far to the host and waits for history to grow. A host that
 * keeps this instance for the run (a sticky instance) returns the run's next input envelope
 * here, and the code goes on; otherwise the activation ends inside await_next, as in
 * amber__wf_suspend, and the next one replays from the top. */
AMBER__FN void amber__wf_wait(amber_wf *wf) {
    amber_writer w = amber__wf_output(wf, "suspended", 0, 0);
    int32_t len = amber__host_await_next(AMBER__PTR(w.buf), (int32_t)w.len);
    if (len <= 0) __builtin_trap();
    void *buf = amber_heap_alloc((uint32_t)len);
    amber__host_take(AMBER__PTR(buf), len);
    amber__wf_refresh(wf, AMBER__PTR(buf), len);
}

/* An outcome with an optional "result" (bin) and "error" ([type, message]). */
AMBER__FN amber_outcome amber__wf_finish(amber_wf *wf, const char *status, const amber_bytes *result,
                                         const char *type, const char *message) {
    amber_bytes t = amber_str(type ? type : ""), m = amber_str(message ? message : "");
    uint32_t extra = (result ? 1u : 0u) + (type ? 1u : 0u);
    amber_writer w =
        amber__wf_output(wf, status, extra, (result ? result->len : 0u) + t.len + m.len + 32u);
    if (result) {
        amber_write_str(&w, "result");
        amber_write_bin(&w, *result);
    }
    if (type) {
        amber_write_str(&w, "error");
        amber_write_array(&w, 2);
        amber_write_str_bytes(&w, t);
        amber_write_str_bytes(&w, m);
    }
    return amber__outcome(&w);
}

/* Ends the workflow successfully with result (a msgpack payload). */
static inline amber_outcome amber_wf_complete(amber_wf *wf, amber_bytes result) {
    return amber__wf_finish(wf, "completed", &result, NULL, NULL);
}

/* Ends the workflow with an application error; the run is closed, not retried. */
static inline amber_outcome amber_wf_fail(amber_wf *wf, const char *type, const char *message) {
    return amber__wf_finish(wf, "failed", NULL, type, message ? message : "");
}

/* Closes the run as cancelled, typically after compensation. type and message are optional
 * (NULL): with neither, no error is recorded; with only a message, the type is "Cancelled". */
static inline amber_outcome amber_wf_cancelled(amber_wf *wf, const char *type,
                                               const char *message) {
    if (!type && message) type = AMBER_CANCELLED;
    return amber__wf_finish(wf, "cancelled", NULL, type, message);
}

/* Closes this run and starts a new run of the same type and workflow id, on the same module
 * version, with new_input as its input and a fresh history. Use it to keep histories short. */
static inline amber_outcome amber_wf_continue_as_new(amber_wf *wf, amber_bytes new_input) {
    return amber__wf_finish(wf, "continue_as_new", &new_input, NULL, NULL);
}

/* ---- awaiting ---------------------------------------------------------------------------- */

static inline void amber__wf_check_awaitable(const amber_wf *wf, uint32_t handle) {
    if (handle >= wf->ncmds || !((AMBER__AWAITABLE >> wf->cmds[handle].kind) & 1u))
        __builtin_trap();
}

/* Whether the pending cancellation goes to an await whose result is s (NULL: missing). */
static inline bool amber__wf_cancel_due(const amber_wf *wf, const amber__slot *s) {
    return wf->cancel_requested && !wf->cancel_delivered && (!s || s->seq > wf->cancel_seq);
}

AMBER__FN amber_result amber__wf_deliver_cancel(amber_wf *wf) {
    wf->cancel_delivered = true;
    if (wf->cancel_seq == wf->newest_seq) wf->caught_up = true;
    amber_result res = {false, {0, 0}, AMBER_CANCELLED, wf->cancel_reason};
    return res;
}

/* The recorded result of handle (which must be present). A value of the wrong kind (the code no
 * longer matches its history) suspends, so the host can report the non-determinism at this
 * command's position. */
AMBER__FN amber_result amber__wf_resolve(amber_wf *wf, uint32_t handle) {
    const amber__slot *s = &wf->slots[handle];
    amber_result res = {false, {0, 0}, "", ""};
    amber_reader r = amber_reader_new(s->value);
    if (s->status != 0) {
        if (!amber__read_error(&r, &res.error_type, &res.error_message)) amber__wf_suspend(wf);
    } else if (wf->cmds[handle].kind == AMBER__CMD_TIMER) {
        res.ok = true; /* nil: the timer fired */
    } else {
        if (!amber_read_bin(&r, &res.value)) amber__wf_suspend(wf);
        res.ok = true;
    }
    amber__wf_consumed(wf, handle);
    return res;
}

/*
 * The result of the command behind handle (an activity, timer, signal or child). If history does
 * not hold it yet, the activation ends here: the workflow is suspended and re-run from the top
 * once a result is recorded. May instead return the run's cancellation (amber_is_cancelled),
 * once per run; see the top of this file.
 */
AMBER__FN amber_result amber_await(amber_wf *wf, uint32_t handle) {
    amber__wf_check_awaitable(wf, handle);
    for (;;) {
        const amber__slot *s = amber__wf_slot(wf, handle);
        if (amber__wf_cancel_due(wf, s)) return amber__wf_deliver_cancel(wf);
        if (s) return amber__wf_resolve(wf, handle);
        amber__wf_wait(wf);
    }
}

/*
 * The result of whichever of handles[0..n) was delivered first: among those with a recorded
 * result, the one with the smallest delivery seq (ties, impossible in a valid history, go to the
 * earlier position in handles). *index (when not NULL) receives its position in handles.
 * Suspends when none has a result. Returns the run's cancellation instead (with *index =
 * AMBER_AWAIT_CANCELLED) when it is pending and nothing was delivered before the cancel seq.
 * The other handles stay pending: await them later, or cancel them (timers).
 */
AMBER__FN amber_result amber_await_any(amber_wf *wf, const uint32_t *handles, uint32_t n,
                                       uint32_t *index) {
    if (n == 0) __builtin_trap();
    for (uint32_t i = 0; i < n; i++) amber__wf_check_awaitable(wf, handles[i]);
    for (;;) {
        const amber__slot *first = NULL;
        uint32_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            const amber__slot *s = amber__wf_slot(wf, handles[i]);
            if (s && (!first || s->seq < first->seq)) {
                first = s;
                at = i;
            }
        }
        if (amber__wf_cancel_due(wf, first)) {
            if (index) *index = AMBER_AWAIT_CANCELLED;
            return amber__wf_deliver_cancel(wf);
        }
        if (first) {
            if (index) *index = at;
            return amber__wf_resolve(wf, handles[at]);
        }
        amber__wf_wait(wf);
    }
}

/* ---- queries and logging ----------------------------------------------------------------- */

/*
 * Sets the value (a msgpack document, at most AMBER_PUBLISH_MAX bytes) that queries named name
 * answer with; the last call before the activation ends wins. Nothing is recorded, so call it
 * on every activation, replaying or not: a query replays the run and answers with what this
 * replay published.
 */
AMBER__FN void amber_publish(amber_wf *wf, const char *name, amber_bytes value) {
    (void)wf;
    if (value.len > AMBER_PUBLISH_MAX) __builtin_trap();
    amber_bytes n = amber_str(name);
    amber__host_publish(AMBER__PTR(n.ptr), (int32_t)n.len, AMBER__PTR(value.ptr),
                        (int32_t)value.len);
}

/* Logs msg unless replaying (see amber_is_replaying). */
AMBER__FN void amber_wf_log(amber_wf *wf, int level, const char *msg) {
    if (!amber_is_replaying(wf)) amber__log(level, msg);
}

/*
 * AMBER_WORKFLOW(name) { body } defines the export `amber_workflow.<name>`. The body sees
 * `amber_wf *wf` and `amber_bytes input`, and returns one of amber_wf_complete, amber_wf_fail,
 * amber_wf_cancelled or amber_wf_continue_as_new.
 */
#define AMBER_WORKFLOW(name)                                                                  \
    static amber_outcome amber__wf_body_##name(amber_wf *wf, amber_bytes input);              \
    __attribute__((export_name("amber_workflow." #name)))                                     \
    int64_t amber__wf_export_##name(int32_t ptr, int32_t len) {                               \
        amber_wf wf_;                                                                         \
        amber__wf_begin(&wf_, ptr, len);                                                      \
        return amber__wf_body_##name(&wf_, wf_.input).packed;                                 \
    }                                                                                         \
    static amber_outcome amber__wf_body_##name(amber_wf *wf, amber_bytes input)

#endif /* AMBER_WORKFLOW_H */
