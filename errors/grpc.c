/*
 * gRPC answers to gRPC requests (CONTRACT.md, Long calls): an error the
 * gateway produces for a request whose content-type is application/grpc or
 * application/grpc+<x> is a Trailers-Only response, HTTP 200 with
 * grpc-status and grpc-message in the head and no body, so that a gRPC
 * client reports the gateway's code and message instead of "Received http2
 * header with status: 502".
 */
#include <string.h>
#include "common/engine.h"
#include "errors/errors.h"

/* gRPC status codes (grpc/doc/statuscodes.md) */
#define GRPC_DEADLINE_EXCEEDED 4
#define GRPC_NOT_FOUND 5
#define GRPC_PERMISSION_DENIED 7
#define GRPC_RESOURCE_EXHAUSTED 8
#define GRPC_UNAVAILABLE 14
#define GRPC_UNAUTHENTICATED 16

/* A message longer than this is cut (the gateway's are about 500 bytes). */
#define MAX_MESSAGE_LEN 2048

int gw_error_is_grpc(h2o_req_t *req)
{
    static const char type[] = "application/grpc";
    size_t n = sizeof(type) - 1;
    ssize_t i;
    h2o_iovec_t v;

    /* gRPC calls are POSTs: any other method (most requests) is told apart without a header lookup */
    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")) ||
        (i = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1)) == -1)
        return 0;
    v = req->headers.entries[i].value;
    return v.len >= n && h2o_lcstris(v.base, n, type, n) && (v.len == n || v.base[n] == '+' || v.base[n] == ';');
}

int gw_error_grpc_status(int http_status)
{
    switch (http_status) {
    case 401:
        return GRPC_UNAUTHENTICATED;
    case 403:
        return GRPC_PERMISSION_DENIED;
    case 404:
        return GRPC_NOT_FOUND;
    case 429:
        return GRPC_RESOURCE_EXHAUSTED;
    case 504:
        return GRPC_DEADLINE_EXCEEDED;
    default:
        return GRPC_UNAVAILABLE;
    }
}

h2o_iovec_t gw_error_grpc_percent_encode(h2o_mem_pool_t *pool, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out;
    size_t i, n = 0;

    if (len > MAX_MESSAGE_LEN)
        len = MAX_MESSAGE_LEN;
    out = gw_pool_alloc(pool, len * 3 + 1);
    /* the spec's Percent-Byte-Unencoded: 0x20-0x7E except '%'; everything else (UTF-8 included) as %XX */
    for (i = 0; i != len; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c <= 0x7e && c != '%') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return h2o_iovec_init(out, n);
}

void gw_error_send_grpc(h2o_req_t *req, int http_status, const char *message, size_t len)
{
    char *status = gw_pool_alloc(&req->pool, 4);
    int code = gw_error_grpc_status(http_status);
    h2o_iovec_t encoded = gw_error_grpc_percent_encode(&req->pool, message, len);
    size_t n = 0;

    if (code >= 10)
        status[n++] = (char)('0' + code / 10);
    status[n++] = (char)('0' + code % 10);
    req->res.status = 200;
    req->res.reason = "OK";
    /* headers already there (a Set-Cookie that clears a bad cookie) stay; the error's own do not apply */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/grpc"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("grpc-status"), 0, NULL, status, n);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("grpc-message"), 0, NULL, encoded.base, encoded.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_send_inline(req, "", 0);
}
