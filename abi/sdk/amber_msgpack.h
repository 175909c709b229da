/*
 * amber_msgpack.h — a msgpack writer and reader for payloads and envelopes.
 * Part of the C guest SDK; include "amber.h", not this file.
 *
 * Readers and fixed-buffer writers never trap: errors are sticky flags (`error`) that the
 * caller checks. Heap writers grow as needed and trap only when memory runs out.
 */
#ifndef AMBER_MSGPACK_H
#define AMBER_MSGPACK_H

#include "amber_memory.h"

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

/* A float64 (msgpack has no other way to say "2.0" as opposed to "2"). */
AMBER__FN void amber_write_double(amber_writer *w, double v) {
    uint64_t bits;
    __builtin_memcpy(&bits, &v, 8);
    amber__w_be(w, 0xcb, bits, 8);
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

/* A float32 or float64 as a double (ints are not converted: check amber_peek first). */
AMBER__FN bool amber_read_double(amber_reader *r, double *out) {
    uint8_t b;
    uint64_t v;
    if (!amber__r_expect(r, AMBER_T_FLOAT, &b) || !amber__r_be(r, b == 0xca ? 4 : 8, &v))
        return false;
    if (b == 0xca) {
        uint32_t bits = (uint32_t)v;
        float f;
        __builtin_memcpy(&f, &bits, 4);
        *out = f;
    } else {
        __builtin_memcpy(out, &v, 8);
    }
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

/* The encoded value under key, whatever its type (to pass a nested document on unchanged). */
AMBER__FN bool amber_map_get_raw(amber_bytes doc, const char *key, amber_bytes *out) {
    amber_reader r = amber_reader_new(doc), v;
    return amber_map_find(&r, key, &v) && amber_read_raw(&v, out);
}

#endif /* AMBER_MSGPACK_H */
