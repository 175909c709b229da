/*
 * amber_memory.h — the bump allocator behind every SDK allocation, and the `amber_alloc` export.
 * Part of the C guest SDK; include "amber.h", not this file.
 *
 * Nothing is ever freed: an instance lives for one activation. Pointers handed out by the SDK
 * stay valid for the whole activation.
 */
#ifndef AMBER_MEMORY_H
#define AMBER_MEMORY_H

#include "amber_base.h"

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

#endif /* AMBER_MEMORY_H */
