/* libFuzzer target: an upstream's HTTP/1 response, as the proxy reads it
 * (gateway/proxy.c): the head through picohttpparser's phr_parse_response
 * with the proxy's header limit, then the rest of the input as a chunked
 * body through phr_decode_chunked, fed in two slices as a socket would.
 * Invariants: no crash; every header name and value lies inside the input;
 * the decoder never produces more bytes than it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <picohttpparser.h>

#define MAX_RESPONSE_HEADERS 100 /* as gateway/proxy.c */

static int inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
    return n == 0 || (p >= (const char *)data && p + n <= (const char *)data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct phr_header headers[MAX_RESPONSE_HEADERS];
    size_t num_headers = MAX_RESPONSE_HEADERS, msg_len, i;
    int minor, status;
    const char *msg;
    int head = phr_parse_response((const char *)data, size, &minor, &status, &msg, &msg_len, headers, &num_headers, 0);

    if (head < -2 || (size_t)(head > 0 ? head : 0) > size)
        __builtin_trap();
    if (head <= 0)
        return 0;
    if (num_headers > MAX_RESPONSE_HEADERS || status < 0 || status > 999 || !inside(msg, msg_len, data, size))
        __builtin_trap();
    for (i = 0; i != num_headers; ++i)
        if (!inside(headers[i].name, headers[i].name_len, data, size) ||
            !inside(headers[i].value, headers[i].value_len, data, size))
            __builtin_trap();

    /* the body: decoded in place, in two reads */
    size_t body_len = size - (size_t)head, split = body_len / 2, got = 0;
    char *body = malloc(body_len + 1);
    struct phr_chunked_decoder decoder;
    memcpy(body, data + head, body_len);
    memset(&decoder, 0, sizeof(decoder));
    for (int part = 0; part != 2; ++part) {
        size_t len = part == 0 ? split : body_len - split;
        char *p = body + (part == 0 ? 0 : split);
        size_t in = len;
        ssize_t r = phr_decode_chunked(&decoder, p, &len);
        if (len > in || r < -2)
            __builtin_trap();
        got += len;
        if (r != -2)
            break;
    }
    if (got > body_len)
        __builtin_trap();
    free(body);
    return 0;
}
