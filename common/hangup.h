/*
 * Noticing that the client of a pending HTTP/1 request went away. h2o stops
 * reading an HTTP/1 connection once its request is complete, so a client
 * that closes while the gateway holds the request (waking its sandbox) goes
 * unseen until the answer is written. One epoll set per worker watches such
 * sockets for the peer's FIN or RST (EPOLLRDHUP, not EPOLLIN: bytes the
 * client sends stay unread for h2o), and is itself read by the h2o loop.
 * HTTP/2 needs none of this: h2o keeps reading it and disposes the request
 * of a reset stream or a closed connection.
 */
#ifndef GW_COMMON_HANGUP_H
#define GW_COMMON_HANGUP_H

#include <h2o.h>

typedef struct st_gw_hangup_t gw_hangup_t;
typedef struct st_gw_hangup_watch_t gw_hangup_watch_t;

/* Called once, from the loop, when the watched client hung up; the watch is
 * then no longer registered. */
typedef void (*gw_hangup_cb)(gw_hangup_watch_t *watch);

/* Embedded in what watches (zeroed); fill cb, then gw_hangup_watch. */
struct st_gw_hangup_watch_t {
    gw_hangup_cb cb;
    /* private */
    int fd; /* -1 or 0 with `on` clear: not registered */
    int on;
};

/* One per worker; NULL (with a message on stderr) when no epoll set can be
 * made: then requests are simply not watched. */
gw_hangup_t *gw_hangup_new(h2o_loop_t *loop);
/* Watches must all be removed first. NULL is a no-op. */
void gw_hangup_free(gw_hangup_t *h);

/* Watches the connection of `req` when it is HTTP/1 (returns 1); 0 when it
 * is not watched (HTTP/2, no socket, h NULL, or epoll refused it). */
int gw_hangup_watch(gw_hangup_t *h, gw_hangup_watch_t *watch, h2o_req_t *req);
/* Stops watching; a no-op when not watching. */
void gw_hangup_unwatch(gw_hangup_t *h, gw_hangup_watch_t *watch);

#endif
