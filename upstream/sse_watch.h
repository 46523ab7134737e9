/*
 * Keepalives are not activity (CONTRACT.md, "Activity"): a server-sent
 * event stream's comment lines (":" lines, the heartbeats MCP servers and
 * others send) are metered but do not make their sandbox active; any other
 * line does. A state machine over the body bytes as they pass (any split,
 * CRLF, LF or CR line ends): nothing is copied, nothing else is parsed.
 */
#ifndef GW_UPSTREAM_SSE_WATCH_H
#define GW_UPSTREAM_SSE_WATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_gw_sse_watch_t {
    uint8_t state; /* where the last byte left the stream (sse_watch.c) */
} gw_sse_watch_t;

/* A stream at its start. */
void gw_sse_watch_init(gw_sse_watch_t *w);

/* Walks the next `len` bytes of the (decoded) body; returns 1 when they
 * hold a byte of a line that is not a comment and not blank (an event's
 * field: data, event, id, retry or any other), 0 when only comments, line
 * ends and the bytes of lines already reported. */
int gw_sse_watch_feed(gw_sse_watch_t *w, const char *buf, size_t len);

struct st_gw_exchange_t;

/* The response of `ex` is an event stream: from now on its bytes are billed
 * without activity, and its sandbox is made active by the events it
 * carries, as they arrive from the app (the first `len` body bytes, at
 * `buf`, are walked now). Not for an exchange already without activity. */
void gw_exchange_watch_events(struct st_gw_exchange_t *ex, const char *buf, size_t len);

/* `len` more body bytes of a watched exchange, decoded, at `buf`. */
void gw_exchange_events_seen(struct st_gw_exchange_t *ex, const char *buf, size_t len);

#endif
