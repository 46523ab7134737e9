/* libFuzzer target: an upstream's HTTP/1 response, as the proxy reads it
 * (upstream/http1_head.c): the head through gw_http1_response_parse, its
 * framing and the headers that would reach the client, then the rest of the
 * input as the body through gw_http1_body_decode, fed in two slices as a
 * socket would. Invariants: no crash; every header name and value lies
 * inside the input; decoding never produces more bytes than it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/http1_head.h"

static int inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
    return n == 0 || (p >= (const char *)data && p + n <= (const char *)data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_http1_response_t res;
    gw_http1_body_t body;
    h2o_mem_pool_t pool;
    h2o_headers_t out = {NULL, 0, 0};
    size_t i;

    if (gw_http1_response_parse((const char *)data, size, &res) != GW_HTTP1_HEAD_COMPLETE)
        return 0;
    if (res.size == 0 || res.size > size || res.num_headers > GW_HTTP1_MAX_RESPONSE_HEADERS || res.status < 100 ||
        res.status > 599 || !inside(res.reason.base, res.reason.len, data, size))
        __builtin_trap();
    for (i = 0; i != res.num_headers; ++i)
        if (!inside(res.headers[i].name, res.headers[i].name_len, data, size) ||
            !inside(res.headers[i].value, res.headers[i].value_len, data, size))
            __builtin_trap();
    if (gw_http1_response_framing(&res, &body) != 0)
        return 0;
    h2o_mem_init_pool(&pool);
    gw_http1_response_headers(&pool, &out, &res, 1, NULL);
    if (out.size > res.num_headers)
        __builtin_trap();
    h2o_mem_clear_pool(&pool);

    /* the body: decoded in place, in two reads */
    size_t body_len = size - res.size, split = body_len / 2, got = 0;
    char *buf = malloc(body_len + 1);
    memcpy(buf, data + res.size, body_len);
    for (int part = 0; part != 2; ++part) {
        size_t len = part == 0 ? split : body_len - split, in = len;
        int r = gw_http1_body_decode(&body, buf + (part == 0 ? 0 : split), &len);
        if (len > in || r < -1 || r > 1)
            __builtin_trap();
        got += len;
        if (r != 0)
            break;
    }
    if (got > body_len)
        __builtin_trap();
    free(buf);
    return 0;
}
