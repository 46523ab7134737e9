/*
 * The client-to-server bytes of an RFB (VNC) session walked for a view-only
 * viewer (CONTRACT.md, Desktops; RFC 6143): the handshake (versions 3.3,
 * 3.7 and 3.8; security types None and VNC authentication) passes, then
 * every client message is sized from its header alone and either passed
 * (SetPixelFormat, SetEncodings, FramebufferUpdateRequest,
 * EnableContinuousUpdates, ClientFence) or dropped (KeyEvent, PointerEvent,
 * ClientCutText, xvp, SetDesktopSize, QEMU's key event), body and all, as
 * the bytes come: nothing is buffered beyond a message header (at most 9
 * bytes), whatever length a message declares. A type it cannot size ends
 * the walk. The ClientInit always says shared (1): a view-only viewer
 * cannot have the server disconnect the others. Server-to-client bytes are not parsed: only the first 16 are
 * looked at, where a 3.3 server names its security type. Pure.
 */
#ifndef GW_UPSTREAM_RFB_WALK_H
#define GW_UPSTREAM_RFB_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The server's version and, for 3.3, its security type (u32 at 12). */
#define GW_RFB_SERVER_HEAD 16

typedef struct st_gw_rfb_walk_t {
    uint8_t stage;    /* where the client stands (rfb_walk.c) */
    uint8_t version;  /* the client's minor version once it sent it: 3, 7 or 8 */
    uint8_t drop;     /* the message being walked is dropped */
    uint8_t head_len; /* bytes of the unit's head collected in head */
    uint8_t head_need;
    uint8_t head[12];
    uint64_t left;  /* bytes of the unit after its head still to walk */
    uint64_t drops; /* messages dropped so far (counted once sized) */
    uint8_t server[GW_RFB_SERVER_HEAD];
    uint8_t server_seen;
} gw_rfb_walk_t;

/* A walk at the start of a session (zeroed is the same). */
void gw_rfb_walk_init(gw_rfb_walk_t *w);

/* Walks the next `len` client bytes at buf: what passes is moved to buf's
 * start, in order (in place: never more than was walked). Returns the bytes
 * kept, or -1 with *why (a static sentence) when the client sent what the
 * walk cannot size (the tunnel closes 1002); after -1 the walk stays failed. */
ssize_t gw_rfb_walk_client(gw_rfb_walk_t *w, uint8_t *buf, size_t len, const char **why);

/* 1 while the walk still looks at the server's bytes (its first
 * GW_RFB_SERVER_HEAD). */
static inline int gw_rfb_walk_wants_server(const gw_rfb_walk_t *w)
{
    return w->server_seen < GW_RFB_SERVER_HEAD;
}

/* The server's next `len` bytes, as they go to the client (before the
 * client can have seen them). Only the first GW_RFB_SERVER_HEAD are kept.
 * Returns 0, or -1 when the server's first bytes are not an RFB greeting
 * ("RFB "): the port is not a VNC server. */
int gw_rfb_walk_server(gw_rfb_walk_t *w, const uint8_t *buf, size_t len);

#endif
