/*
 * amber_envelope.h — plumbing shared by workflow and activity exports: reading the input
 * envelope's header, packing the output envelope's location, reading [type, message] pairs.
 * Part of the C guest SDK; include "amber.h", not this file.
 *
 * A malformed envelope from the host is the host's bug: the SDK traps (`unreachable`).
 */
#ifndef AMBER_ENVELOPE_H
#define AMBER_ENVELOPE_H

#include "amber_msgpack.h"

/* The export's return value for the envelope in w. */
static inline amber_outcome amber__outcome(const amber_writer *w) {
    if (w->error) __builtin_trap(); /* heap writers only fail by trapping; keep it that way */
    amber_outcome o = {(int64_t)(((uint64_t)(uintptr_t)w->buf << 32) | w->len)};
    return o;
}

/* Parses the map header of an envelope at ptr/len; the reader is left at the first key. */
AMBER__FN amber_reader amber__envelope(int32_t ptr, int32_t len, uint32_t *n) {
    amber_reader r = amber_reader_new(amber_bytes_of((const void *)(uintptr_t)ptr, (uint32_t)len));
    if (len < 0 || !amber_read_map(&r, n)) __builtin_trap();
    return r;
}

/* Reads an error value [type: str, message: str, ...] into two NUL-terminated copies. */
AMBER__FN bool amber__read_error(amber_reader *r, const char **type, const char **message) {
    uint32_t n;
    amber_bytes t, m;
    if (!amber_read_array(r, &n) || n < 2 || !amber_read_str(r, &t) || !amber_read_str(r, &m))
        return false;
    for (uint32_t i = 2; i < n; i++) amber_read_skip(r);
    *type = amber_cstr(t);
    *message = amber_cstr(m);
    return !r->error;
}

#endif /* AMBER_ENVELOPE_H */
