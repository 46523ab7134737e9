/*
 * Frame tracking of HTTP WebSocket tunnels: headers are parsed as they
 * pass, payloads skipped by length, so the cost is per frame, not per byte.
 * Only a Pong from the client is looked into (at most 131 bytes).
 */
#include <stdio.h>
#include <string.h>
#include "upstream/ws_track.h"

void gw_ws_track_init(gw_ws_track_t *t, gw_ws_from_t from)
{
    memset(t, 0, sizeof(*t));
    gw_ws_parser_init(&t->parser, from);
}

/* Walks [pos, size) up to the next frame start; returns the new pos. */
static size_t walk_one(gw_ws_track_t *t, const uint8_t *buf, size_t size, size_t pos)
{
    size_t used;

    if (t->payload_left != 0) {
        size_t k = t->payload_left < size - pos ? (size_t)t->payload_left : size - pos;
        t->payload_left -= k;
        t->activity |= t->in_data;
        return pos + k;
    }
    switch (gw_ws_parse(&t->parser, buf + pos, size - pos, &used)) {
    case GW_WS_PARSE_ERROR:
        t->broken = 1;
        t->activity = 1; /* what passes untracked cannot be told from activity */
        return size;
    case GW_WS_PARSE_DONE:
        t->payload_left = t->parser.header.payload_len;
        t->in_data = t->parser.header.opcode != GW_WS_OP_PING && t->parser.header.opcode != GW_WS_OP_PONG;
        t->activity |= t->in_data;
        break;
    default:
        break;
    }
    return pos + used;
}

int gw_ws_track_to_client(gw_ws_track_t *t, const uint8_t *buf, size_t size)
{
    size_t pos = t->scanned;

    while (pos < size && !t->broken)
        pos = walk_one(t, buf, size, pos);
    t->scanned = size;
    return !t->broken && t->payload_left == 0 && t->parser.have == 0;
}

int gw_ws_pong_is_ours(const uint8_t *payload, size_t len)
{
    size_t plen = sizeof(GW_WS_PING_PREFIX) - 1;
    return len >= plen && memcmp(payload, GW_WS_PING_PREFIX, plen) == 0;
}

gw_ws_track_result_t gw_ws_track_from_client(gw_ws_track_t *t, const uint8_t *buf, size_t size, size_t *n)
{
    size_t pos = t->scanned;
    uint8_t payload[GW_WS_MAX_CONTROL_PAYLOAD];
    gw_ws_header_t h;
    int hlen;

    while (pos < size && !t->broken) {
        if (t->payload_left != 0 || t->parser.have != 0 || buf[pos] != (0x80 | GW_WS_OP_PONG)) {
            pos = walk_one(t, buf, size, pos);
            continue;
        }
        /* a Pong starts at pos: held back until whole */
        if ((hlen = gw_ws_header_decode(buf + pos, size - pos, GW_WS_FROM_CLIENT, &h, NULL, NULL)) < 0) {
            t->broken = 1;
            break;
        }
        if (hlen == 0 || size - pos < (size_t)hlen + h.payload_len) {
            t->scanned = pos;
            *n = pos;
            return GW_WS_TRACK_PASS;
        }
        memcpy(payload, buf + pos + hlen, (size_t)h.payload_len);
        gw_ws_mask(payload, (size_t)h.payload_len, h.mask, 0);
        if (gw_ws_pong_is_ours(payload, (size_t)h.payload_len)) {
            t->scanned = pos + (size_t)hlen + (size_t)h.payload_len;
            *n = pos == 0 ? t->scanned : pos;
            if (pos != 0)
                t->scanned = pos;
            return pos == 0 ? GW_WS_TRACK_DROP : GW_WS_TRACK_PASS;
        }
        pos += (size_t)hlen + (size_t)h.payload_len; /* the sandbox's own Pong: it passes */
    }
    t->scanned = size;
    *n = size;
    return GW_WS_TRACK_PASS;
}

int gw_ws_track_take_activity(gw_ws_track_t *t)
{
    int activity = t->activity || t->broken;

    t->activity = 0;
    return activity;
}

void gw_ws_track_consumed(gw_ws_track_t *t, size_t n)
{
    t->scanned = n < t->scanned ? t->scanned - n : 0;
}

size_t gw_ws_ping_encode(uint8_t *dst, uint64_t seq)
{
    char payload[GW_WS_PING_MAX - 2 + 1];
    int n = snprintf(payload, sizeof(payload), GW_WS_PING_PREFIX "%llu", (unsigned long long)seq);
    size_t h = gw_ws_header_encode(dst, 1, GW_WS_OP_PING, (size_t)n, NULL);

    memcpy(dst + h, payload, (size_t)n);
    return h + (size_t)n;
}
