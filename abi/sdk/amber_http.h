/*
 * amber_http.h — HTTP requests from activities, through the `http_request` and `take` host
 * imports. Part of the C guest SDK; include "amber.h", not this file.
 *
 * The module must allow the hosts it calls in its manifest:
 *     "capabilities": {"http": {"allow": ["api.example.com", "127.0.0.1:8080"]}}
 * The host adds `Idempotency-Key: <amber_act_idempotency_key>` unless the request sets that
 * header, and runs the request within the attempt's remaining wall-clock budget (and
 * timeout_ms when shorter). Bodies are capped at 4 MiB each way.
 */
#ifndef AMBER_HTTP_H
#define AMBER_HTTP_H

#include "amber_activity.h"

AMBER__IMPORT("http_request") int32_t amber__host_http_request(int32_t ptr, int32_t len);

#define AMBER_HTTP_BODY_MAX (4u << 20) /* largest request or response body (bytes) */

typedef struct amber_http_header {
    const char *name, *value;
} amber_http_header;

typedef struct amber_http_request {
    const char *method;               /* "GET" (also when NULL), "POST", ... */
    amber_bytes url;                  /* http:// or https:// */
    const amber_http_header *headers; /* headers[0..header_count) */
    uint32_t header_count;
    amber_bytes body;   /* sent when non-empty */
    int64_t timeout_ms; /* 0: the attempt's remaining budget */
} amber_http_request;

typedef struct amber_http_response {
    int64_t status;    /* the HTTP status (any status: 404 and 503 are responses too) */
    amber_bytes headers; /* the msgpack map {name: value}; look names up with amber_http_get_header */
    amber_bytes body;
    /* When amber_act_http returned false: HostNotAllowed, Timeout, ConnectionError or
     * BadRequest, and a message; "" otherwise. */
    const char *error_type, *error_message;
} amber_http_response;

/* The request map the host expects: method, url, and headers, body, timeout_ms when set. */
AMBER__FN amber_bytes amber__http_encode(const amber_http_request *req) {
    if (req->body.len > AMBER_HTTP_BODY_MAX) __builtin_trap();
    uint32_t size = 96u + req->url.len + req->body.len;
    for (uint32_t i = 0; i < req->header_count; i++)
        size += 16u + amber__strlen(req->headers[i].name) + amber__strlen(req->headers[i].value);
    amber_writer w = amber_writer_heap(size);
    amber_write_map(&w, 2u + (req->header_count > 0) + (req->body.len > 0) + (req->timeout_ms > 0));
    amber_write_str(&w, "method");
    amber_write_str(&w, req->method ? req->method : "GET");
    amber_write_str(&w, "url");
    amber_write_str_bytes(&w, req->url);
    if (req->header_count) {
        amber_write_str(&w, "headers");
        amber_write_map(&w, req->header_count);
        for (uint32_t i = 0; i < req->header_count; i++) {
            amber_write_str(&w, req->headers[i].name);
            amber_write_str(&w, req->headers[i].value);
        }
    }
    if (req->body.len) {
        amber_write_str(&w, "body");
        amber_write_bin(&w, req->body);
    }
    if (req->timeout_ms > 0) {
        amber_write_str(&w, "timeout_ms");
        amber_write_int(&w, req->timeout_ms);
    }
    return amber_writer_bytes(&w);
}

/* Fills resp from the response envelope; traps when the host sent something malformed. */
AMBER__FN bool amber__http_decode(amber_bytes envelope, amber_http_response *resp) {
    uint32_t n;
    amber_reader r = amber_reader_new(envelope);
    bool have_status = false, have_error = false;
    if (!amber_read_map(&r, &n)) __builtin_trap();
    for (uint32_t i = 0; i < n; i++) {
        amber_bytes key;
        if (!amber_read_str(&r, &key)) __builtin_trap();
        if (amber_bytes_eq_str(key, "status")) {
            have_status = amber_read_int(&r, &resp->status);
        } else if (amber_bytes_eq_str(key, "headers")) {
            if (amber_peek(&r) != AMBER_T_MAP) __builtin_trap();
            amber_read_raw(&r, &resp->headers);
        } else if (amber_bytes_eq_str(key, "body")) {
            amber_read_bin(&r, &resp->body);
        } else if (amber_bytes_eq_str(key, "error")) {
            have_error = amber__read_error(&r, &resp->error_type, &resp->error_message);
        } else {
            amber_read_skip(&r);
        }
    }
    if (r.error || !amber_reader_done(&r) || have_status == have_error) __builtin_trap();
    return have_status;
}

/*
 * Performs req. Returns true when a response came back, whatever its status (check
 * resp->status), and false when the request failed before that (resp->error_type says why).
 * The response's bytes live on the SDK heap for the rest of the activation.
 */
AMBER__FN bool amber_act_http(amber_act *act, const amber_http_request *req,
                              amber_http_response *resp) {
    (void)act;
    static const uint8_t empty_map[] = {0x80};
    __builtin_memset(resp, 0, sizeof *resp);
    resp->headers = amber_bytes_of(empty_map, 1);
    resp->error_type = resp->error_message = "";
    amber_bytes request = amber__http_encode(req);
    int32_t len = amber__host_http_request(AMBER__PTR(request.ptr), (int32_t)request.len);
    if (len <= 0) __builtin_trap(); /* an envelope is never empty; size is the memory limit's job */
    uint8_t *buf = (uint8_t *)amber_heap_alloc((uint32_t)len);
    amber__host_take(AMBER__PTR(buf), len);
    return amber__http_decode(amber_bytes_of(buf, (uint32_t)len), resp);
}

/* The value of response header name (compared case-insensitively), or false when absent. */
AMBER__FN bool amber_http_get_header(const amber_http_response *resp, const char *name,
                                     amber_bytes *value) {
    uint32_t n;
    amber_reader r = amber_reader_new(resp->headers);
    amber_bytes want = amber_str(name), k;
    if (!amber_read_map(&r, &n)) return false;
    for (uint32_t i = 0; i < n; i++) {
        if (!amber_read_str(&r, &k)) return false;
        if (amber_bytes_eq_nocase(k, want)) return amber_read_str(&r, value);
        if (!amber_read_skip(&r)) return false;
    }
    return false;
}

/* Whether a response's status is 2xx. */
static inline bool amber_http_success(const amber_http_response *resp) {
    return resp->status >= 200 && resp->status <= 299;
}

#endif /* AMBER_HTTP_H */
