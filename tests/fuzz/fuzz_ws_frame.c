/* libFuzzer target: WebSocket frame headers (common/ws_frame.c). The first
 * byte picks the side (client, server, either) and a chunk size; the rest
 * is a stream of frames, walked header by header (payloads skipped) once
 * whole and once in chunks (one byte at a time for chunk 1). Invariants: no
 * crash, both walks see the same headers and end in the same state, every
 * header found encodes back to the same fields, and masking twice restores
 * the payload. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/ws_frame.h"

#define MAX_HEADERS 512

/* field by field: the struct has padding */
static int header_eq(const gw_ws_header_t *a, const gw_ws_header_t *b)
{
    return a->fin == b->fin && a->opcode == b->opcode && a->masked == b->masked && memcmp(a->mask, b->mask, 4) == 0 &&
           a->payload_len == b->payload_len;
}

typedef struct {
    gw_ws_header_t headers[MAX_HEADERS];
    size_t count;
    int error;       /* 1 after GW_WS_PARSE_ERROR */
    uint16_t code;   /* its close code */
    size_t consumed; /* bytes walked before the error or the end */
} walk_t;

static void walk(const uint8_t *data, size_t size, gw_ws_from_t from, size_t chunk, walk_t *w)
{
    gw_ws_parser_t p;
    uint64_t skip = 0;
    size_t off = 0;

    memset(w, 0, sizeof(*w));
    gw_ws_parser_init(&p, from);
    while (off < size && !w->error) {
        size_t n = chunk < size - off ? chunk : size - off, used;
        const uint8_t *src = data + off;
        while (n != 0) {
            if (skip != 0) {
                size_t k = skip < n ? (size_t)skip : n;
                skip -= k, src += k, n -= k, off += k;
                continue;
            }
            gw_ws_parse_t r = gw_ws_parse(&p, src, n, &used);
            if (r == GW_WS_PARSE_ERROR) {
                if (p.error == NULL || (p.close_code != GW_WS_CLOSE_PROTOCOL_ERROR && p.close_code != GW_WS_CLOSE_TOO_BIG))
                    __builtin_trap();
                w->error = 1, w->code = p.close_code;
                break;
            }
            if (used > n || (r == GW_WS_PARSE_NEED_MORE && used != n))
                __builtin_trap();
            src += used, n -= used, off += used;
            if (r == GW_WS_PARSE_DONE) {
                if (w->count < MAX_HEADERS)
                    w->headers[w->count] = p.header;
                ++w->count;
                skip = p.header.payload_len;
            }
        }
    }
    w->consumed = off;
}

static void check_header(const gw_ws_header_t *h, gw_ws_from_t from)
{
    uint8_t buf[GW_WS_MAX_HEADER];
    gw_ws_header_t back;
    size_t n = gw_ws_header_encode(buf, h->fin, h->opcode, h->payload_len, h->masked ? h->mask : NULL);

    if (gw_ws_header_decode(buf, n, from, &back, NULL, NULL) != (int)n || !header_eq(&back, h))
        __builtin_trap();
    if (h->opcode >= GW_WS_OP_CLOSE && (!h->fin || h->payload_len > GW_WS_MAX_CONTROL_PAYLOAD))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static walk_t whole, pieces;
    static const gw_ws_from_t sides[3] = {GW_WS_FROM_SERVER, GW_WS_FROM_CLIENT, GW_WS_FROM_EITHER};
    gw_ws_from_t from;
    size_t chunk, i;

    if (size < 1)
        return 0;
    from = sides[data[0] % 3];
    chunk = 1 + (data[0] / 3) % 16;
    ++data, --size;
    walk(data, size, from, size, &whole);
    walk(data, size, from, chunk, &pieces);
    if (whole.count != pieces.count || whole.error != pieces.error || whole.code != pieces.code)
        __builtin_trap();
    for (i = 0; i != whole.count && i != MAX_HEADERS; ++i) {
        if (!header_eq(&whole.headers[i], &pieces.headers[i]))
            __builtin_trap();
        check_header(&whole.headers[i], from);
    }
    if (size >= 4) {
        uint8_t *copy = malloc(size);
        memcpy(copy, data, size);
        gw_ws_mask(copy, size, data, data[1]);
        gw_ws_mask(copy, size, data, data[1]);
        if (memcmp(copy, data, size) != 0)
            __builtin_trap();
        free(copy);
    }
    /* close payloads: what parses re-encodes to the same bytes */
    if (size <= GW_WS_MAX_CONTROL_PAYLOAD) {
        const uint8_t *reason;
        size_t rlen;
        uint16_t code;
        uint8_t out[GW_WS_MAX_CONTROL_PAYLOAD];
        if (gw_ws_close_parse(data, size, &code, &reason, &rlen) == 0 && size >= 2 &&
            (gw_ws_close_encode(out, code, (const char *)reason, rlen) != size || memcmp(out, data, size) != 0))
            __builtin_trap();
    }
    return 0;
}
