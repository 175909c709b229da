/*
 * amber_base.h — basic types, byte-string helpers and the host imports both kinds of code use.
 * Part of the C guest SDK; include "amber.h", not this file (see amber.h for the overview).
 */
#ifndef AMBER_BASE_H
#define AMBER_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Non-trivial helpers stay out of line: inlining them at every call site triples module size.
 * They are static, so a helper the module never calls is dropped together with any host import
 * only it uses: a module imports exactly what it uses. */
#define AMBER__FN static __attribute__((unused, noinline))

/* Declares a host function from module "amber" (see the import table in abi/README.md). */
#define AMBER__IMPORT(n) __attribute__((import_module("amber"), import_name(n)))

/* A guest pointer as the i32 the host imports take. */
#define AMBER__PTR(p) ((int32_t)(uintptr_t)(p))

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

/* Host imports used by workflows and activities alike. */
AMBER__IMPORT("now") int64_t amber__host_now(void);
AMBER__IMPORT("random") void amber__host_random(int32_t ptr, int32_t len);
AMBER__IMPORT("log") void amber__host_log(int32_t level, int32_t ptr, int32_t len);
/* Copies the envelope the host holds (after http_request or await_next) into ptr/len. */
AMBER__IMPORT("take") void amber__host_take(int32_t ptr, int32_t len);

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

/* Case-insensitive (ASCII) comparison, for names such as HTTP header names. */
AMBER__FN bool amber_bytes_eq_nocase(amber_bytes a, amber_bytes b) {
    if (a.len != b.len) return false;
    for (uint32_t i = 0; i < a.len; i++) {
        uint8_t x = a.ptr[i], y = b.ptr[i];
        if (x >= 'A' && x <= 'Z') x = (uint8_t)(x + 32);
        if (y >= 'A' && y <= 'Z') y = (uint8_t)(y + 32);
        if (x != y) return false;
    }
    return true;
}

/* The offset of the first occurrence of needle in hay at or after from, or -1. */
AMBER__FN int64_t amber_bytes_find(amber_bytes hay, amber_bytes needle, uint32_t from) {
    if (needle.len > hay.len) return -1;
    for (uint32_t i = from; i <= hay.len - needle.len; i++) {
        uint32_t k = 0; /* no memcmp: there is no libc to call */
        while (k < needle.len && hay.ptr[i + k] == needle.ptr[k]) k++;
        if (k == needle.len) return i;
    }
    return -1;
}

/* b without its first `from` bytes (empty when from >= b.len). */
static inline amber_bytes amber_bytes_from(amber_bytes b, uint32_t from) {
    return from >= b.len ? amber_bytes_of(b.ptr, 0) : amber_bytes_of(b.ptr + from, b.len - from);
}

static inline void amber__log(int level, const char *msg) {
    amber__host_log(level, AMBER__PTR(msg), (int32_t)amber__strlen(msg));
}

#endif /* AMBER_BASE_H */
