/*
 * Frame tracking of HTTP WebSocket tunnels: headers are parsed as they
 * pass, payloads skipped by length, so the cost is per frame, not per byte.
 * Only a Pong from the client is looked into (at most 131 bytes), and only
 * when the gateway sends Pings.
 */
#include <stdio.h>
#include <string.h>
#include "upstream/ws_track.h"

void gw_ws_track_init(gw_ws_track_t *t, gw_ws_from_t from)
{
    memset(t, 0, sizeof(*t));
    gw_ws_parser_init(&t->parser, from);
    t->parser.boundaries_only = from == GW_WS_FROM_CLIENT;
    /* toward the client: frames compressed by permessage-deflate (RSV1) keep their boundaries, and the Pings */
    t->parser.rsv_ok = 1;
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

static uint16_t charge(gw_ws_track_t *t, const gw_ws_header_t *h, uint64_t now_ms)
{
    return t->budget.conf != NULL ? gw_ws_budget_charge(&t->budget, h, now_ms) : 0;
}

/* The frame whose header starts at `start` is over the budget. */
static gw_ws_track_result_t refuse(gw_ws_track_t *t, uint16_t code, size_t start, size_t *n)
{
    t->refused = code;
    t->scanned = start;
    *n = start;
    return GW_WS_TRACK_REFUSE;
}

/* A Pong starts at *pos, with drop_pongs. Returns what to answer (with
 * *n): PASS with *n = *pos while it is not whole or when it is the
 * gateway's but bytes come before it, DROP when it is the gateway's and
 * first in the input, REFUSE when the budget refuses it; or -1 when it is
 * the sandbox's (charged, *pos after it), -2 when the codec does not read it
 * as a Pong the gateway could have asked for (it is walked as any frame). */
static int walk_pong(gw_ws_track_t *t, const uint8_t *buf, size_t size, uint64_t now_ms, size_t *pos, size_t *n)
{
    uint8_t payload[GW_WS_MAX_CONTROL_PAYLOAD];
    size_t at = *pos, len;
    gw_ws_header_t h;
    uint16_t code;
    int hlen = gw_ws_header_decode(buf + at, size - at, GW_WS_FROM_CLIENT, &h, NULL, NULL), ours;

    if (hlen < 0)
        return -2;
    if (hlen == 0 || size - at < (size_t)hlen + h.payload_len) {
        t->scanned = *n = at;
        return GW_WS_TRACK_PASS;
    }
    len = (size_t)hlen + (size_t)h.payload_len;
    memcpy(payload, buf + at + hlen, (size_t)h.payload_len);
    gw_ws_mask(payload, (size_t)h.payload_len, h.mask, 0);
    if ((ours = gw_ws_pong_is_ours(payload, (size_t)h.payload_len)) && at != 0) {
        /* what comes before it goes first; it is charged when dropped */
        t->scanned = *n = at;
        return GW_WS_TRACK_PASS;
    }
    if ((code = charge(t, &h, now_ms)) != 0)
        return refuse(t, code, at, n);
    if (ours) {
        t->scanned = *n = len;
        return GW_WS_TRACK_DROP;
    }
    *pos = at + len; /* the sandbox's own Pong: it passes */
    return -1;
}

gw_ws_track_result_t gw_ws_track_from_client(gw_ws_track_t *t, const uint8_t *buf, size_t size, uint64_t now_ms, size_t *n)
{
    size_t pos = t->scanned, start, used;
    uint16_t code;
    int r;

    if (t->refused != 0) {
        *n = t->scanned;
        return GW_WS_TRACK_REFUSE;
    }
    while (pos < size && !t->broken) {
        if (t->payload_left != 0) {
            pos = walk_one(t, buf, size, pos);
            continue;
        }
        if (t->drop_pongs && t->parser.have == 0 && buf[pos] == (0x80 | GW_WS_OP_PONG) &&
            (r = walk_pong(t, buf, size, now_ms, &pos, n)) != -2) {
            if (r >= 0)
                return (gw_ws_track_result_t)r;
            continue;
        }
        /* a header held back from an earlier call is the input's bytes just before pos */
        start = pos - t->parser.have;
        switch (gw_ws_parse(&t->parser, buf + pos, size - pos, &used)) {
        case GW_WS_PARSE_DONE:
            break;
        case GW_WS_PARSE_NEED_MORE: /* it took the rest of the input */
            pos = size;
            continue;
        default: /* not for a client's headers, read for their length only */
            t->broken = 1;
            continue;
        }
        pos += used;
        t->payload_left = t->parser.header.payload_len;
        /* keepalives are not activity (CONTRACT.md, Activity) */
        t->in_data = t->parser.header.opcode != GW_WS_OP_PING && t->parser.header.opcode != GW_WS_OP_PONG;
        t->activity |= t->in_data;
        if ((code = charge(t, &t->parser.header, now_ms)) != 0)
            return refuse(t, code, start, n);
    }
    /* a header cut by the end of the input is held back: its bytes are the input's last */
    t->scanned = size;
    *n = t->broken ? size : size - t->parser.have;
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
