/*
 * Frame boundaries of an HTTP WebSocket tunnel's two byte streams, found
 * with the frame codec without copying or altering a byte: toward the
 * client, whether the bytes written so far end between frames (where the
 * gateway may put its keep-alive Ping); from the client, the Pongs that
 * answer the gateway's Pings (never forwarded to the sandbox), and each
 * frame charged to the tunnel's budget (ws_budget.h).
 */
#ifndef GW_UPSTREAM_WS_TRACK_H
#define GW_UPSTREAM_WS_TRACK_H

#include <stddef.h>
#include <stdint.h>
#include "common/ws_frame.h"
#include "upstream/ws_budget.h"

/* The payload of the gateway's Pings starts with this: a Pong that echoes it is the gateway's. */
#define GW_WS_PING_PREFIX "lizard-ping "
/* The longest Ping frame gw_ws_ping_encode writes. */
#define GW_WS_PING_MAX (2 + 32)

typedef struct st_gw_ws_track_t {
    gw_ws_parser_t parser;
    uint64_t payload_left; /* of the frame being walked */
    size_t scanned;        /* bytes at the start of the input already walked */
    int broken;            /* the stream is not WebSocket as the codec reads it: tracking stopped, bytes pass as they are */
    /* from the client: */
    int drop_pongs;        /* the gateway sends Pings: its Pongs are dropped (gw_ws_track_from_client) */
    gw_ws_budget_t budget; /* budget.conf NULL: frames are not charged */
    uint16_t refused;      /* the close code of the frame the budget refused; 0: none */
    /* keepalives are not activity (CONTRACT.md, Activity): the frame walked is not a Ping or Pong, and a byte of
     * such a frame (or of a broken stream) was walked since gw_ws_track_take_activity */
    int in_data, activity;
} gw_ws_track_t;

typedef enum en_gw_ws_track_t {
    GW_WS_TRACK_PASS = 0, /* forward the first n bytes (n may be 0: wait for more) */
    GW_WS_TRACK_DROP,     /* the first n bytes are the gateway's Pong: consume them, forward nothing */
    GW_WS_TRACK_REFUSE    /* the frame at n is over the budget (t->refused says how): the first n bytes (whole frames
                             and the payload of the one in progress) may go, nothing after them */
} gw_ws_track_result_t;

/* From the client (GW_WS_FROM_CLIENT), only the frames' lengths are read:
 * what else a client's frame says is the sandbox's to judge, and nothing
 * it sends stops the walk. From the server, the frames are checked, but
 * for the reserved bits (an extension the ends negotiated, such as
 * permessage-deflate). */
void gw_ws_track_init(gw_ws_track_t *t, gw_ws_from_t from);

/* Toward the client: walks input bytes not walked yet; returns 1 when all
 * `size` bytes end between two frames, else 0 (and 0 once broken). */
int gw_ws_track_to_client(gw_ws_track_t *t, const uint8_t *buf, size_t size);

/* From the client: walks input bytes not walked yet and says what to do
 * with the start of the input (*n bytes). A frame header cut by the end of
 * the input is held back until it is whole; with drop_pongs a Pong is held
 * back until it is whole and the gateway's own (GW_WS_PING_PREFIX)
 * dropped. With a budget each frame is charged once, at now_ms, as its
 * header (a Pong: the whole frame) is walked; once one is refused the
 * answer stays GW_WS_TRACK_REFUSE. */
gw_ws_track_result_t gw_ws_track_from_client(gw_ws_track_t *t, const uint8_t *buf, size_t size, uint64_t now_ms, size_t *n);

/* 1 when bytes walked since the last call belong to frames other than
 * Ping and Pong (the sandbox's activity), else 0; starts over. */
int gw_ws_track_take_activity(gw_ws_track_t *t);

/* The first n bytes of the input were written or dropped (consumed). */
void gw_ws_track_consumed(gw_ws_track_t *t, size_t n);

/* Writes the gateway's Ping number `seq` (unmasked) to dst
 * (GW_WS_PING_MAX bytes); returns its length. */
size_t gw_ws_ping_encode(uint8_t *dst, uint64_t seq);

/* 1 when an (unmasked) Pong payload answers a gateway's Ping. */
int gw_ws_pong_is_ours(const uint8_t *payload, size_t len);

#endif
