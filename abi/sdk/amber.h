/*
 * amber.h — the C guest SDK for Amber, guest ABI v1 (see abi/README.md).
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
 * Payloads (workflow input, activity args, results) are msgpack documents; use amber_writer to
 * build them and amber_reader / amber_map_get_* to read them.
 *
 * Replay: every workflow activation runs the workflow from the top in a fresh instance. An
 * await whose result is recorded returns it at once; the first await whose result is not
 * recorded ends the activation (the call does not return). So workflow code must be
 * deterministic: read the clock and randomness only through amber_now / amber_random, keep no
 * state outside the function, and issue the same commands in the same order for the same
 * results. Logging through amber_log is suppressed while replaying.
 *
 * Errors: malformed envelopes from the host, heap exhaustion inside the SDK and API misuse
 * (awaiting a handle that is not an activity) trap with `unreachable`. msgpack readers and
 * writers never trap: errors are sticky flags (`error`) checked by the caller.
 *
 * Memory: a bump allocator over memory.grow; nothing is ever freed (an instance lives for one
 * activation). Pointers handed out by the SDK stay valid for the whole activation.
 */
#ifndef AMBER_H
#define AMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Non-trivial helpers stay out of line: inlining them at every call site triples module size. */
#define AMBER__FN static __attribute__((unused, noinline))

/* ------------------------------------------------------------------------------------------ */
/* Basic types                                                                                 */

typedef struct amber_bytes {
    const uint8_t *ptr;
    uint32_t len;
} amber_bytes;

/* What an export returns: the output envelope's location, packed as (ptr << 32) | len. */
typedef struct amber_outcome {
    int64_t packed;
} amber_outcome;

enum { AMBER_DEBUG = 0, AMBER_INFO = 1, AMBER_WARN = 2, AMBER_ERROR = 3 };

#define AMBER_RANDOM_MAX 1024u /* largest amber_random request (one host call, one command) */

static inline uint32_t amber__strlen(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

static inline amber_bytes amber_bytes_of(const void *ptr, uint32_t len) {
    amber_bytes b = {(const uint8_t *)ptr, len};
    return b;
}

/* The bytes of a NUL-terminated string (without the NUL). */
static inline amber_bytes amber_str(const char *s) { return amber_bytes_of(s, amber__strlen(s)); }

AMBER__FN bool amber_bytes_eq(amber_bytes a, amber_bytes b) {
    if (a.len != b.len) return false;
    for (uint32_t i = 0; i < a.len; i++)
        if (a.ptr[i] != b.ptr[i]) return false;
    return true;
}

static inline bool amber_bytes_eq_str(amber_bytes a, const char *s) {
    return amber_bytes_eq(a, amber_str(s));
}

/* ------------------------------------------------------------------------------------------ */
/* Host imports (module "amber"). Only the ones a module calls end up imported.                */

#define AMBER__IMPORT(n) __attribute__((import_module("amber"), import_name(n)))
AMBER__IMPORT("await_results") void amber__host_await_results(int32_t ptr, int32_t len);
AMBER__IMPORT("now") int64_t amber__host_now(void);
AMBER__IMPORT("random") void amber__host_random(int32_t ptr, int32_t len);
AMBER__IMPORT("log") void amber__host_log(int32_t level, int32_t ptr, int32_t len);
AMBER__IMPORT("sleep") void amber__host_sleep(int64_t ms);
#undef AMBER__IMPORT

#define AMBER__PTR(p) ((int32_t)(uintptr_t)(p))

/* ------------------------------------------------------------------------------------------ */
/* Memory: bump allocator                                                                      */

extern unsigned char __heap_base; /* provided by wasm-ld: first byte after data and stack */
static uintptr_t amber__heap_next;

/* size bytes aligned to 8, or NULL when memory cannot grow. */
AMBER__FN void *amber__alloc_raw(uint32_t size) {
    if (amber__heap_next == 0) amber__heap_next = (uintptr_t)&__heap_base;
    uint64_t start = ((uint64_t)amber__heap_next + 7u) & ~(uint64_t)7u;
    uint64_t end = start + size;
    uint64_t limit = (uint64_t)__builtin_wasm_memory_size(0) * 65536u;
    if (end > 0xFFFFFFFFull) return NULL;
    if (end > limit) {
        size_t pages = (size_t)((end - limit + 65535u) / 65536u);
        if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return NULL;
    }
    amber__heap_next = (uintptr_t)end;
    return (void *)(uintptr_t)start;
}

/* Exported for the host, which writes the input envelope into the buffer it gets here. */
__attribute__((export_name("amber_alloc"))) int32_t amber_alloc(int32_t size) {
    if (size < 0) return 0;
    return AMBER__PTR(amber__alloc_raw((uint32_t)size));
}

/* Heap memory for guest code; traps when the memory limit is reached. */
static inline void *amber_heap_alloc(uint32_t size) {
    void *p = amber__alloc_raw(size);
    if (p == NULL) __builtin_trap();
    return p;
}

AMBER__FN amber_bytes amber_bytes_copy(amber_bytes b) {
    uint8_t *p = (uint8_t *)amber_heap_alloc(b.len);
    if (b.len) __builtin_memcpy(p, b.ptr, b.len);
    return amber_bytes_of(p, b.len);
}

/* A NUL-terminated heap copy of b (msgpack strings are not NUL-terminated). */
AMBER__FN const char *amber_cstr(amber_bytes b) {
    char *p = (char *)amber_heap_alloc(b.len + 1u);
    if (b.len) __builtin_memcpy(p, b.ptr, b.len);
    p[b.len] = '\0';
    return p;
}

/* ------------------------------------------------------------------------------------------ */
/* msgpack writer                                                                              */

typedef struct amber_writer {
    uint8_t *buf;
    uint32_t len, cap;
    bool growable; /* heap writers grow (trapping when memory runs out); fixed ones set error */
    bool error;    /* sticky: set when a fixed buffer was too small */
} amber_writer;

/* A writer over a caller-owned buffer (for instance on the stack). */
static inline amber_writer amber_writer_fixed(uint8_t *buf, uint32_t cap) {
    amber_writer w = {buf, 0, cap, false, false};
    return w;
}

/* A writer on the heap that grows as needed. */
AMBER__FN amber_writer amber_writer_heap(uint32_t initial_cap) {
    if (initial_cap < 16u) initial_cap = 16u;
    amber_writer w = {(uint8_t *)amber_heap_alloc(initial_cap), 0, initial_cap, true, false};
    return w;
}

static inline bool amber_writer_ok(const amber_writer *w) { return !w->error; }

/* What was written so far; check amber_writer_ok first. */
static inline amber_bytes amber_writer_bytes(const amber_writer *w) {
    return amber_bytes_of(w->buf, w->len);
}

AMBER__FN bool amber__w_reserve(amber_writer *w, uint32_t n) {
    if (w->error) return false;
    if (w->cap - w->len >= n) return true;
    if (!w->growable) {
        w->error = true;
        return false;
    }
    uint64_t need = (uint64_t)w->len + n, cap = (uint64_t)w->cap * 2u;
    if (cap < need) cap = need;
    if (cap > 0x7FFFFFFFull) __builtin_trap();
    if ((uintptr_t)(w->buf + w->cap) == amber__heap_next) {
        /* Last allocation: extend it in place. */
        amber_heap_alloc((uint32_t)(cap - w->cap));
    } else {
        uint8_t *nb = (uint8_t *)amber_heap_alloc((uint32_t)cap);
        if (w->len) __builtin_memcpy(nb, w->buf, w->len);
        w->buf = nb;
    }
    w->cap = (uint32_t)cap;
    return true;
}

AMBER__FN void amber__w_put(amber_writer *w, const void *src, uint32_t n) {
    if (!amber__w_reserve(w, n)) return;
    if (n) __builtin_memcpy(w->buf + w->len, src, n);
    w->len += n;
}

/* A marker byte followed by n big-endian bytes of v. */
AMBER__FN void amber__w_be(amber_writer *w, uint8_t marker, uint64_t v, uint32_t n) {
    uint8_t b[9];
    b[0] = marker;
    for (uint32_t i = 0; i < n; i++) b[1 + i] = (uint8_t)(v >> (8u * (n - 1u - i)));
    amber__w_put(w, b, n + 1u);
}

static inline void amber_write_nil(amber_writer *w) { amber__w_be(w, 0xc0, 0, 0); }

static inline void amber_write_bool(amber_writer *w, bool v) {
    amber__w_be(w, v ? 0xc3 : 0xc2, 0, 0);
}

AMBER__FN void amber_write_uint(amber_writer *w, uint64_t v) {
    if (v <= 0x7f) amber__w_be(w, (uint8_t)v, 0, 0);
    else if (v <= 0xff) amber__w_be(w, 0xcc, v, 1);
    else if (v <= 0xffff) amber__w_be(w, 0xcd, v, 2);
    else if (v <= 0xffffffffull) amber__w_be(w, 0xce, v, 4);
    else amber__w_be(w, 0xcf, v, 8);
}

AMBER__FN void amber_write_int(amber_writer *w, int64_t v) {
    if (v >= 0) amber_write_uint(w, (uint64_t)v);
    else if (v >= -32) amber__w_be(w, (uint8_t)(int8_t)v, 0, 0);
    else if (v >= INT8_MIN) amber__w_be(w, 0xd0, (uint64_t)v, 1);
    else if (v >= INT16_MIN) amber__w_be(w, 0xd1, (uint64_t)v, 2);
    else if (v >= INT32_MIN) amber__w_be(w, 0xd2, (uint64_t)v, 4);
    else amber__w_be(w, 0xd3, (uint64_t)v, 8);
}

/* A length header: the fixed form (fix | n) when n <= fixmax (fixmax < 0: none), else the
 * 8-bit (m8, 0: none), 16-bit or 32-bit form. */
AMBER__FN void amber__w_header(amber_writer *w, uint32_t n, uint8_t fix, int32_t fixmax,
                               uint8_t m8, uint8_t m16, uint8_t m32) {
    if ((int64_t)n <= fixmax) amber__w_be(w, (uint8_t)(fix | n), 0, 0);
    else if (m8 && n <= 0xff) amber__w_be(w, m8, n, 1);
    else if (n <= 0xffff) amber__w_be(w, m16, n, 2);
    else amber__w_be(w, m32, n, 4);
}

/* Header of a str of len bytes; follow it with amber_write_raw calls totalling len bytes. */
static inline void amber_write_str_header(amber_writer *w, uint32_t len) {
    amber__w_header(w, len, 0xa0, 31, 0xd9, 0xda, 0xdb);
}

static inline void amber_write_raw(amber_writer *w, amber_bytes raw) {
    amber__w_put(w, raw.ptr, raw.len);
}

AMBER__FN void amber_write_str_bytes(amber_writer *w, amber_bytes s) {
    amber_write_str_header(w, s.len);
    amber_write_raw(w, s);
}

AMBER__FN void amber_write_str(amber_writer *w, const char *s) {
    amber_write_str_bytes(w, amber_str(s));
}

AMBER__FN void amber_write_bin(amber_writer *w, amber_bytes b) {
    amber__w_header(w, b.len, 0, -1, 0xc4, 0xc5, 0xc6);
    amber_write_raw(w, b);
}

/* An array header; write the n elements next. */
static inline void amber_write_array(amber_writer *w, uint32_t n) {
    amber__w_header(w, n, 0x90, 15, 0, 0xdc, 0xdd);
}

/* A map header; write n keys and values next, alternating. */
static inline void amber_write_map(amber_writer *w, uint32_t n) {
    amber__w_header(w, n, 0x80, 15, 0, 0xde, 0xdf);
}

/* ------------------------------------------------------------------------------------------ */
/* msgpack reader                                                                              */

typedef struct amber_reader {
    const uint8_t *p, *end;
    bool error; /* sticky: truncated input, a type mismatch or an invalid byte */
} amber_reader;

/* AMBER_T_INVALID: at the end, after an error, or the never-valid byte 0xc1. */
typedef enum amber_type {
    AMBER_T_INVALID, AMBER_T_NIL, AMBER_T_BOOL, AMBER_T_INT, AMBER_T_FLOAT,
    AMBER_T_STR, AMBER_T_BIN, AMBER_T_ARRAY, AMBER_T_MAP, AMBER_T_EXT,
} amber_type;

static inline amber_reader amber_reader_new(amber_bytes b) {
    amber_reader r = {b.ptr, b.ptr + b.len, false};
    return r;
}

/* True when everything was read without error. */
static inline bool amber_reader_done(const amber_reader *r) { return !r->error && r->p == r->end; }

static inline bool amber__r_fail(amber_reader *r) {
    r->error = true;
    return false;
}

/* The next n bytes, or NULL (and error) when fewer remain. */
AMBER__FN const uint8_t *amber__r_take(amber_reader *r, uint64_t n) {
    if (r->error || n > (uint64_t)(r->end - r->p)) {
        r->error = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

AMBER__FN bool amber__r_be(amber_reader *r, uint32_t n, uint64_t *out) {
    const uint8_t *p = amber__r_take(r, n);
    if (!p) return false;
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; i++) v = (v << 8) | p[i];
    *out = v;
    return true;
}

/*
 * Markers 0xc0..0xdf: type, and for skipping: bytes of length/count that follow (lb), fixed
 * payload bytes (fix), and what the count counts (per: 0 payload bytes, 1 array items, 2 map
 * keys and values).
 */
typedef struct amber__marker {
    uint8_t type, lb, fix, per;
} amber__marker;
static const amber__marker amber__markers[32] = {
    {AMBER_T_NIL, 0, 0, 0},   {AMBER_T_INVALID, 0, 0, 0}, {AMBER_T_BOOL, 0, 0, 0},  /* c0-c2 */
    {AMBER_T_BOOL, 0, 0, 0},  {AMBER_T_BIN, 1, 0, 0},     {AMBER_T_BIN, 2, 0, 0},   /* c3-c5 */
    {AMBER_T_BIN, 4, 0, 0},   {AMBER_T_EXT, 1, 1, 0},     {AMBER_T_EXT, 2, 1, 0},   /* c6-c8 */
    {AMBER_T_EXT, 4, 1, 0},   {AMBER_T_FLOAT, 0, 4, 0},   {AMBER_T_FLOAT, 0, 8, 0}, /* c9-cb */
    {AMBER_T_INT, 0, 1, 0},   {AMBER_T_INT, 0, 2, 0},     {AMBER_T_INT, 0, 4, 0},   /* cc-ce */
    {AMBER_T_INT, 0, 8, 0},   {AMBER_T_INT, 0, 1, 0},     {AMBER_T_INT, 0, 2, 0},   /* cf-d1 */
    {AMBER_T_INT, 0, 4, 0},   {AMBER_T_INT, 0, 8, 0},     {AMBER_T_EXT, 0, 2, 0},   /* d2-d4 */
    {AMBER_T_EXT, 0, 3, 0},   {AMBER_T_EXT, 0, 5, 0},     {AMBER_T_EXT, 0, 9, 0},   /* d5-d7 */
    {AMBER_T_EXT, 0, 17, 0},  {AMBER_T_STR, 1, 0, 0},     {AMBER_T_STR, 2, 0, 0},   /* d8-da */
    {AMBER_T_STR, 4, 0, 0},   {AMBER_T_ARRAY, 2, 0, 1},   {AMBER_T_ARRAY, 4, 0, 1}, /* db-dd */
    {AMBER_T_MAP, 2, 0, 2},   {AMBER_T_MAP, 4, 0, 2},                               /* de-df */
};

AMBER__FN amber_type amber_peek(const amber_reader *r) {
    if (r->error || r->p >= r->end) return AMBER_T_INVALID;
    uint8_t b = *r->p;
    if (b <= 0x7f || b >= 0xe0) return AMBER_T_INT;
    if (b <= 0x8f) return AMBER_T_MAP;
    if (b <= 0x9f) return AMBER_T_ARRAY;
    if (b <= 0xbf) return AMBER_T_STR;
    return (amber_type)amber__markers[b - 0xc0].type;
}

/* Consumes the type byte when it has type t; else sets error. */
AMBER__FN bool amber__r_expect(amber_reader *r, amber_type t, uint8_t *b) {
    if (amber_peek(r) != t) return amber__r_fail(r);
    *b = *r->p++;
    return true;
}

static inline bool amber_read_nil(amber_reader *r) {
    uint8_t b;
    return amber__r_expect(r, AMBER_T_NIL, &b);
}

AMBER__FN bool amber_read_bool(amber_reader *r, bool *out) {
    uint8_t b;
    if (!amber__r_expect(r, AMBER_T_BOOL, &b)) return false;
    *out = b == 0xc3;
    return true;
}

AMBER__FN bool amber_read_int(amber_reader *r, int64_t *out) {
    uint8_t b;
    uint64_t v;
    if (!amber__r_expect(r, AMBER_T_INT, &b)) return false;
    if (b <= 0x7f) v = b;
    else if (b >= 0xe0) v = (uint64_t)(int64_t)(int8_t)b;
    else {
        uint32_t n = 1u << ((b - 0xcc) & 3); /* 0xcc..0xcf and 0xd0..0xd3: 1, 2, 4, 8 bytes */
        if (!amber__r_be(r, n, &v)) return false;
        if (b >= 0xd0) { /* signed: sign-extend from n bytes */
            uint32_t shift = 64u - 8u * n;
            v = (uint64_t)((int64_t)(v << shift) >> shift);
        } else if (v > (uint64_t)INT64_MAX) {
            return amber__r_fail(r);
        }
    }
    *out = (int64_t)v;
    return true;
}

/* Header of a sized type: a fixed form fix_lo..fix_lo|fix_mask (none when fix_mask is 0), then
 * markers first, first+1, first+2 followed by a 1-, 2- or 4-byte length. */
AMBER__FN bool amber__r_sized(amber_reader *r, amber_type t, uint8_t fix_lo, uint8_t fix_mask,
                              uint8_t first, uint64_t *len) {
    uint8_t b;
    if (!amber__r_expect(r, t, &b)) return false;
    if (fix_mask && b >= fix_lo && b <= (uint8_t)(fix_lo | fix_mask)) {
        *len = b & fix_mask;
        return true;
    }
    return amber__r_be(r, 1u << (b - first), len);
}

AMBER__FN bool amber_read_str(amber_reader *r, amber_bytes *out) {
    uint64_t n;
    if (!amber__r_sized(r, AMBER_T_STR, 0xa0, 0x1f, 0xd9, &n)) return false;
    const uint8_t *p = amber__r_take(r, n);
    if (!p) return false;
    *out = amber_bytes_of(p, (uint32_t)n);
    return true;
}

AMBER__FN bool amber_read_bin(amber_reader *r, amber_bytes *out) {
    uint64_t n;
    if (!amber__r_sized(r, AMBER_T_BIN, 0, 0, 0xc4, &n)) return false;
    const uint8_t *p = amber__r_take(r, n);
    if (!p) return false;
    *out = amber_bytes_of(p, (uint32_t)n);
    return true;
}

/* Reads an array header; the n elements follow. */
AMBER__FN bool amber_read_array(amber_reader *r, uint32_t *n) {
    uint64_t v;
    if (!amber__r_sized(r, AMBER_T_ARRAY, 0x90, 0x0f, 0xdb, &v)) return false;
    *n = (uint32_t)v;
    return true;
}

/* Reads a map header; n key/value pairs follow. */
AMBER__FN bool amber_read_map(amber_reader *r, uint32_t *n) {
    uint64_t v;
    if (!amber__r_sized(r, AMBER_T_MAP, 0x80, 0x0f, 0xdd, &v)) return false;
    *n = (uint32_t)v;
    return true;
}

/* Skips one value with everything nested in it (iteratively: no recursion on hostile input). */
AMBER__FN bool amber_read_skip(amber_reader *r) {
    uint64_t pending = 1;
    while (pending > 0) {
        if (amber_peek(r) == AMBER_T_INVALID) return amber__r_fail(r);
        uint8_t b = *r->p++;
        uint64_t payload = 0, n = 0;
        pending--;
        if (b <= 0x7f || b >= 0xe0) continue;
        if (b <= 0x8f) pending += 2u * (b & 0x0fu);
        else if (b <= 0x9f) pending += b & 0x0fu;
        else if (b <= 0xbf) payload = b & 0x1fu;
        else {
            const amber__marker *m = &amber__markers[b - 0xc0];
            if (m->lb && !amber__r_be(r, m->lb, &n)) return false;
            if (m->per) pending += m->per * n;
            else payload = n + m->fix;
        }
        if (!amber__r_take(r, payload)) return false;
        /* Every pending value needs at least one byte: fail fast on absurd counts. */
        if (pending > (uint64_t)(r->end - r->p)) return amber__r_fail(r);
    }
    return true;
}

/* Reads one whole value and returns its encoded bytes (for passing a value on unchanged). */
AMBER__FN bool amber_read_raw(amber_reader *r, amber_bytes *out) {
    const uint8_t *start = r->p;
    if (!amber_read_skip(r)) return false;
    *out = amber_bytes_of(start, (uint32_t)(r->p - start));
    return true;
}

/*
 * Finds key in the map at *map (which is not advanced). On success *value is a reader
 * positioned at the key's value. Returns false when the key is missing or the map is malformed.
 */
AMBER__FN bool amber_map_find(const amber_reader *map, const char *key, amber_reader *value) {
    amber_reader r = *map;
    uint32_t n;
    amber_bytes want = amber_str(key), k;
    if (!amber_read_map(&r, &n)) return false;
    for (uint32_t i = 0; i < n; i++) {
        if (amber_peek(&r) == AMBER_T_STR) {
            if (!amber_read_str(&r, &k)) return false;
            if (amber_bytes_eq(k, want)) {
                *value = r;
                return true;
            }
        } else if (!amber_read_skip(&r)) {
            return false;
        }
        if (!amber_read_skip(&r)) return false;
    }
    return false;
}

/* Convenience lookups in a msgpack map document: false when missing or of another type. */
AMBER__FN bool amber_map_get_int(amber_bytes doc, const char *key, int64_t *out) {
    amber_reader r = amber_reader_new(doc), v;
    return amber_map_find(&r, key, &v) && amber_read_int(&v, out);
}

AMBER__FN bool amber_map_get_bool(amber_bytes doc, const char *key, bool *out) {
    amber_reader r = amber_reader_new(doc), v;
    return amber_map_find(&r, key, &v) && amber_read_bool(&v, out);
}

AMBER__FN bool amber_map_get_str(amber_bytes doc, const char *key, amber_bytes *out) {
    amber_reader r = amber_reader_new(doc), v;
    return amber_map_find(&r, key, &v) && amber_read_str(&v, out);
}

AMBER__FN bool amber_map_get_bin(amber_bytes doc, const char *key, amber_bytes *out) {
    amber_reader r = amber_reader_new(doc), v;
    return amber_map_find(&r, key, &v) && amber_read_bin(&v, out);
}

/* ------------------------------------------------------------------------------------------ */
/* Shared plumbing                                                                             */

static inline amber_outcome amber__outcome(const amber_writer *w) {
    if (w->error) __builtin_trap(); /* heap writers only fail by trapping; keep it that way */
    amber_outcome o = {(int64_t)(((uint64_t)(uintptr_t)w->buf << 32) | w->len)};
    return o;
}

/* Parses the map header of the input envelope; a malformed envelope is the host's bug: trap. */
AMBER__FN amber_reader amber__envelope(int32_t ptr, int32_t len, uint32_t *n) {
    amber_reader r = amber_reader_new(amber_bytes_of((const void *)(uintptr_t)ptr, (uint32_t)len));
    if (len < 0 || !amber_read_map(&r, n)) __builtin_trap();
    return r;
}

AMBER__FN void amber__log(int level, const char *msg) {
    uint32_t n = amber__strlen(msg);
    amber__host_log(level, AMBER__PTR(msg), (int32_t)n);
}

/* ------------------------------------------------------------------------------------------ */
/* Workflows                                                                                   */

typedef struct amber_result {
    bool ok;
    amber_bytes value;         /* the activity's result payload when ok */
    const char *error_type;    /* NUL-terminated; "" when ok */
    const char *error_message; /* NUL-terminated; "" when ok */
} amber_result;

enum { AMBER__CMD_ACTIVITY, AMBER__CMD_NOW, AMBER__CMD_RANDOM };

typedef struct amber__command {
    uint8_t kind;
    amber_bytes name;    /* activity name */
    amber_bytes payload; /* activity args, random bytes */
    int64_t number;      /* now */
} amber__command;

typedef struct amber__slot {
    amber_bytes value; /* the recorded value, still msgpack-encoded */
    uint8_t present, status;
} amber__slot;

typedef struct amber_wf {
    amber_bytes run_id, workflow, input;
    amber__slot *slots; /* recorded results indexed by command index */
    uint32_t nslots;
    uint32_t newest;    /* command index of the result with the highest seq */
    bool has_newest, caught_up;
    amber__command *cmds;
    uint32_t ncmds, cap;
} amber_wf;

static inline amber_bytes amber_wf_run_id(const amber_wf *wf) { return wf->run_id; }
static inline amber_bytes amber_wf_type(const amber_wf *wf) { return wf->workflow; }
static inline amber_bytes amber_wf_input(const amber_wf *wf) { return wf->input; }

AMBER__FN void amber__wf_results(amber_wf *wf, amber_reader *r) {
    uint32_t n, maxcmd = 0;
    if (!amber_read_array(r, &n) || n > (1u << 24)) __builtin_trap();
    amber__slot *tmp = (amber__slot *)amber_heap_alloc(n * (uint32_t)sizeof(amber__slot));
    uint32_t *cmd_of = (uint32_t *)amber_heap_alloc(n * 4u);
    int64_t best_seq = -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        int64_t cmd, seq, status;
        if (!amber_read_array(r, &len) || len != 4 || !amber_read_int(r, &cmd) ||
            !amber_read_int(r, &seq) || !amber_read_int(r, &status) ||
            !amber_read_raw(r, &tmp[i].value) || cmd < 0 || cmd >= (1 << 24) ||
            (status != 0 && status != 1))
            __builtin_trap();
        tmp[i].status = (uint8_t)status;
        tmp[i].present = 1;
        cmd_of[i] = (uint32_t)cmd;
        if (cmd_of[i] > maxcmd) maxcmd = cmd_of[i];
        if (seq > best_seq) {
            best_seq = seq;
            wf->newest = (uint32_t)cmd;
            wf->has_newest = true;
        }
    }
    wf->nslots = n ? maxcmd + 1u : 0u;
    wf->slots = (amber__slot *)amber_heap_alloc(wf->nslots * (uint32_t)sizeof(amber__slot));
    __builtin_memset(wf->slots, 0, wf->nslots * sizeof(amber__slot));
    for (uint32_t i = 0; i < n; i++) {
        if (wf->slots[cmd_of[i]].present) __builtin_trap(); /* two results for one command */
        wf->slots[cmd_of[i]] = tmp[i];
    }
}

AMBER__FN void amber__wf_begin(amber_wf *wf, int32_t ptr, int32_t len) {
    __builtin_memset(wf, 0, sizeof *wf);
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
        } else {
            amber_read_skip(&r);
        }
    }
    if (r.error || !have_input || !have_results) __builtin_trap();
}

/* The recorded result of command i, or NULL. */
static inline const amber__slot *amber__wf_slot(const amber_wf *wf, uint32_t i) {
    return i < wf->nslots && wf->slots[i].present ? &wf->slots[i] : NULL;
}

static inline void amber__wf_consumed(amber_wf *wf, uint32_t i) {
    if (wf->has_newest && i == wf->newest) wf->caught_up = true;
}

/*
 * True while the workflow has not yet consumed (awaited, or read through amber_now /
 * amber_random) the newest recorded result, i.e. the result with the highest seq. Until then
 * the code is re-running a stretch an earlier activation already ran, so side effects such as
 * logging are skipped. A fresh run (no results) is never replaying. Known limits: a workflow
 * that never consumes the newest result (for instance a fire-and-forget activity) stays
 * "replaying" to the end of the activation, and when several results arrive between two
 * activations the code between the older ones counts as replaying, so its log lines are lost.
 * Use it for logging and metrics only, never to decide which commands to issue.
 */
static inline bool amber_is_replaying(const amber_wf *wf) {
    return wf->has_newest && !wf->caught_up;
}

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

/* Output envelope: {"status", "commands", and "result" (completed) or "error" (failed)}. */
AMBER__FN amber_writer amber__wf_output(const amber_wf *wf, const char *status, uint32_t extra) {
    uint32_t size = 64u + extra;
    for (uint32_t i = 0; i < wf->ncmds; i++)
        size += 24u + wf->cmds[i].name.len + wf->cmds[i].payload.len;
    amber_writer w = amber_writer_heap(size);
    amber_write_map(&w, extra ? 3 : 2);
    amber_write_str(&w, "status");
    amber_write_str(&w, status);
    amber_write_str(&w, "commands");
    amber_write_array(&w, wf->ncmds);
    for (uint32_t i = 0; i < wf->ncmds; i++) {
        const amber__command *c = &wf->cmds[i];
        if (c->kind == AMBER__CMD_ACTIVITY) {
            amber_write_array(&w, 3);
            amber_write_str(&w, "activity");
            amber_write_str_bytes(&w, c->name);
            amber_write_bin(&w, c->payload);
        } else if (c->kind == AMBER__CMD_NOW) {
            amber_write_array(&w, 2);
            amber_write_str(&w, "now");
            amber_write_int(&w, c->number);
        } else {
            amber_write_array(&w, 2);
            amber_write_str(&w, "random");
            amber_write_bin(&w, c->payload);
        }
    }
    return w;
}

/* Hands every command issued so far to the host, which ends the activation. */
__attribute__((noreturn)) AMBER__FN void amber__wf_suspend(const amber_wf *wf) {
    amber_writer w = amber__wf_output(wf, "suspended", 0);
    amber__host_await_results(AMBER__PTR(w.buf), (int32_t)w.len);
    __builtin_trap(); /* await_results never returns */
}

/* Ends the workflow successfully with result (a msgpack payload). */
AMBER__FN amber_outcome amber_wf_complete(amber_wf *wf, amber_bytes result) {
    amber_writer w = amber__wf_output(wf, "completed", result.len + 16u);
    amber_write_str(&w, "result");
    amber_write_bin(&w, result);
    return amber__outcome(&w);
}

/* Ends the workflow with an application error; the run is closed, not retried. */
AMBER__FN amber_outcome amber_wf_fail(amber_wf *wf, const char *type, const char *message) {
    amber_bytes t = amber_str(type), m = amber_str(message);
    amber_writer w = amber__wf_output(wf, "failed", t.len + m.len + 32u);
    amber_write_str(&w, "error");
    amber_write_array(&w, 2);
    amber_write_str_bytes(&w, t);
    amber_write_str_bytes(&w, m);
    return amber__outcome(&w);
}

/* Issues an activity command and returns its handle (the command index) for amber_await.
 * name and args are copied, so stack buffers are fine. */
AMBER__FN uint32_t amber_schedule_activity(amber_wf *wf, const char *name, amber_bytes args) {
    uint32_t i = amber__wf_push(wf, AMBER__CMD_ACTIVITY);
    wf->cmds[i].name = amber_bytes_copy(amber_str(name));
    wf->cmds[i].payload = amber_bytes_copy(args);
    return i;
}

/*
 * The result of the activity behind handle. If history does not hold it yet, the activation
 * ends here (the workflow is suspended and re-run from the top once the result is recorded).
 * A recorded value of the wrong kind (the code no longer matches its history) also suspends,
 * so the host can report the non-determinism at this command's position.
 */
AMBER__FN amber_result amber_await(amber_wf *wf, uint32_t handle) {
    if (handle >= wf->ncmds || wf->cmds[handle].kind != AMBER__CMD_ACTIVITY) __builtin_trap();
    const amber__slot *s = amber__wf_slot(wf, handle);
    if (!s) amber__wf_suspend(wf);
    amber_result res = {false, {0, 0}, "", ""};
    amber_reader r = amber_reader_new(s->value);
    if (s->status == 0) {
        if (!amber_read_bin(&r, &res.value)) amber__wf_suspend(wf);
        res.ok = true;
    } else {
        uint32_t n;
        amber_bytes t, m;
        if (!amber_read_array(&r, &n) || n < 2 || !amber_read_str(&r, &t) ||
            !amber_read_str(&r, &m))
            amber__wf_suspend(wf);
        res.error_type = amber_cstr(t);
        res.error_message = amber_cstr(m);
    }
    amber__wf_consumed(wf, handle);
    return res;
}

static inline amber_result amber_call_activity(amber_wf *wf, const char *name, amber_bytes args) {
    return amber_await(wf, amber_schedule_activity(wf, name, args));
}

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

/* len (≤ AMBER_RANDOM_MAX) random bytes, recorded in history. A replay asking for a different
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

/* Logs msg unless replaying (see amber_is_replaying). */
AMBER__FN void amber_wf_log(amber_wf *wf, int level, const char *msg) {
    if (!amber_is_replaying(wf)) amber__log(level, msg);
}

/*
 * AMBER_WORKFLOW(name) { body } defines the export `amber_workflow.<name>`. The body sees
 * `amber_wf *wf` and `amber_bytes input`, and returns amber_wf_complete or amber_wf_fail.
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

/* ------------------------------------------------------------------------------------------ */
/* Activities                                                                                  */

typedef struct amber_act {
    amber_bytes run_id, activity, args, idempotency_key;
    int64_t attempt;     /* 1 for the first attempt */
    int64_t deadline_ms; /* wall-clock deadline of this attempt, ms since the epoch */
} amber_act;

static inline amber_bytes amber_act_run_id(const amber_act *act) { return act->run_id; }
static inline amber_bytes amber_act_args(const amber_act *act) { return act->args; }
static inline int64_t amber_act_attempt(const amber_act *act) { return act->attempt; }
static inline int64_t amber_act_deadline_ms(const amber_act *act) { return act->deadline_ms; }
/* The same for every attempt of this activity in this run: use it to deduplicate effects. */
static inline amber_bytes amber_act_idempotency_key(const amber_act *act) {
    return act->idempotency_key;
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

/* Fails this attempt; the host retries it unless non_retryable. */
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

/* amber_log(wf or act, level, msg): logs from either kind of code. */
#define amber_log(ctx, level, msg)                                                            \
    _Generic((ctx), amber_wf *: amber_wf_log, amber_act *: amber_act_log)((ctx), (level), (msg))

/* ------------------------------------------------------------------------------------------ */
/* Manifest                                                                                    */

/*
 * AMBER_MANIFEST({"abi": 1, "workflows": [...], "activities": [...]}) — the JSON is kept
 * verbatim between marker strings in the module's data; the build tool validates it and writes
 * it into the `amber.manifest` custom section (wasm-ld emits no custom sections from C).
 */
#define AMBER_MANIFEST(...)                                                                   \
    __attribute__((used)) static const char amber__manifest[] =                               \
        "\0AMBER_MANIFEST_V1_BEGIN\0" #__VA_ARGS__ "\0AMBER_MANIFEST_V1_END\0";

#endif /* AMBER_H */
