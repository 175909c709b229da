/*
 * amber.h — the C guest SDK for Amber, guest ABI v1 (see abi/README.md and abi/sdk/README.md).
 *
 * Header-only and freestanding (no libc). Include it in exactly ONE .c file per module: it
 * defines the exported `amber_alloc` and, through the macros below, the workflow/activity
 * exports. Build with `amber build` (tools/_build.py), which compiles with zig's clang for
 * wasm32-freestanding and writes the manifest into the `amber.manifest` custom section.
 *
 *     #include "amber.h"
 *
 *     AMBER_MANIFEST({"abi": 1, "workflows": ["greet"], "activities": ["hello"]})
 *
 *     AMBER_WORKFLOW(greet) {                       // receives amber_wf *wf, amber_bytes input
 *         amber_result r = amber_call_activity(wf, "hello", input);
 *         if (!r.ok) return amber_wf_fail(wf, r.error_type, r.error_message);
 *         return amber_wf_complete(wf, r.value);
 *     }
 *
 *     AMBER_ACTIVITY(hello) {                       // receives amber_act *act, amber_bytes args
 *         return amber_act_complete(act, args);
 *     }
 *
 * The SDK is split by concept; this header includes all of it:
 *     amber_base.h      bytes, log levels, the imports both kinds of code share
 *     amber_memory.h    bump allocator and the amber_alloc export
 *     amber_msgpack.h   msgpack writer and reader (payloads are msgpack documents)
 *     amber_envelope.h  plumbing shared by workflow and activity exports
 *     amber_workflow.h  workflow context, replay, await / await_any, cancellation, publish,
 *                       outcomes (complete, fail, cancelled, continue_as_new)
 *     amber_commands.h  activities and their options, timers, signals, children, now, random,
 *                       patch markers (amber_patched)
 *     amber_activity.h  activity context, heartbeats, cancellation, outcomes, sleep
 *     amber_http.h      HTTP requests from activities
 *
 * Replay: every workflow activation runs the workflow from the top in a fresh instance. An
 * await whose result is recorded returns it at once; the first await whose result is not
 * recorded ends the activation (the call does not return). So workflow code must be
 * deterministic: read the clock and randomness only through amber_now / amber_random, keep no
 * state outside the function, and issue the same commands in the same order for the same
 * results. Logging through amber_log is suppressed while replaying; amber_publish is not.
 *
 * Errors: malformed envelopes from the host, heap exhaustion inside the SDK and API misuse
 * (awaiting a handle that is not awaitable, oversized publish/heartbeat/random) trap with
 * `unreachable`. msgpack readers and fixed-buffer writers never trap: errors are sticky flags.
 *
 * Imports: only the host imports a module actually calls end up in it.
 */
#ifndef AMBER_H
#define AMBER_H

#include "amber_base.h"
#include "amber_memory.h"
#include "amber_msgpack.h"
#include "amber_envelope.h"
#include "amber_workflow.h"
#include "amber_commands.h"
#include "amber_activity.h"
#include "amber_http.h"

/* amber_log(wf or act, level, msg): logs from either kind of code. */
#define amber_log(ctx, level, msg)                                                            \
    _Generic((ctx), amber_wf *: amber_wf_log, amber_act *: amber_act_log)((ctx), (level), (msg))

/*
 * AMBER_MANIFEST({"abi": 1, "workflows": [...], "activities": [...]}) — the JSON is kept
 * verbatim between marker strings in the module's data; the build tool validates it and writes
 * it into the `amber.manifest` custom section (wasm-ld emits no custom sections from C).
 * Modules whose activities use HTTP add "capabilities": {"http": {"allow": [hosts...]}}.
 */
#define AMBER_MANIFEST(...)                                                                   \
    __attribute__((used)) static const char amber__manifest[] =                               \
        "\0AMBER_MANIFEST_V1_BEGIN\0" #__VA_ARGS__ "\0AMBER_MANIFEST_V1_END\0";

#endif /* AMBER_H */
