/*
 * One end of a tunnel (tunnel.c, tcp_tunnel.c): what the tunnel reads from
 * and writes to, whichever it is. A socket end is an h2o_socket_t (the
 * sandbox's connection; an HTTP/1.1 client's, handed over by
 * h2o_http1_upgrade). A stream end is an HTTP/2 client's stream after an
 * extended CONNECT (RFC 8441): the client's DATA arrive through write_req
 * and proceed_req, the tunnel's bytes leave with h2o_send under the
 * generator's proceed; no descriptor, no socket buffer of its own.
 *
 * The rules a tunnel relies on hold for both: a read callback comes from
 * the loop, never from within a call to the end; a write's callback once the
 * bytes are taken (by the kernel, by h2o: then the stream's window has room
 * for the next ones), and at most one write is in flight; the end's input
 * grows only while it is read (a stream end takes the client's next DATA,
 * proceed_req, only while it is read: the stream's window is the
 * back-pressure); an error (the peer's close or reset) is reported to a read
 * after the bytes before it, and to a write in flight.
 */
#ifndef GW_UPSTREAM_TUNNEL_END_H
#define GW_UPSTREAM_TUNNEL_END_H

#include <h2o.h>

typedef struct st_gw_tunnel_end_t gw_tunnel_end_t;

/* err NULL: bytes arrived (read) or were taken (write); otherwise the end is
 * over (h2o_socket_error_closed: the peer closed, or ended its stream) */
typedef void (*gw_tunnel_end_cb)(gw_tunnel_end_t *end, const char *err);

typedef struct st_gw_tunnel_end_ops_t {
    void (*read_start)(gw_tunnel_end_t *end, gw_tunnel_end_cb cb);
    void (*read_stop)(gw_tunnel_end_t *end);
    /* the bufs may be referred to until cb; one write at a time */
    void (*write)(gw_tunnel_end_t *end, h2o_iovec_t *bufs, size_t bufcnt, gw_tunnel_end_cb cb);
    /* no more bytes to the peer (a socket's SHUT_WR; a stream's END_STREAM, after which its reads end too) */
    void (*shutdown)(gw_tunnel_end_t *end);
    /* the owner is done with the end: it is closed (a stream's END_STREAM once what it was given is out) and freed */
    void (*close)(gw_tunnel_end_t *end);
} gw_tunnel_end_ops_t;

struct st_gw_tunnel_end_t {
    const gw_tunnel_end_ops_t *ops;
    h2o_buffer_t **input; /* what was read and not consumed yet (h2o_buffer_consume it) */
    h2o_socket_t *sock;   /* a socket end's socket (its fd, splice, TLS); NULL: a stream end */
    void *data;           /* the owner's */
};

/* Wraps `sock` (whose input may hold bytes already): the end owns it from
 * now on, and sock->data is the end's. */
gw_tunnel_end_t *gw_tunnel_end_socket(h2o_socket_t *sock);

static inline void gw_tunnel_end_read_start(gw_tunnel_end_t *end, gw_tunnel_end_cb cb)
{
    end->ops->read_start(end, cb);
}

static inline void gw_tunnel_end_read_stop(gw_tunnel_end_t *end)
{
    end->ops->read_stop(end);
}

static inline void gw_tunnel_end_write(gw_tunnel_end_t *end, h2o_iovec_t *bufs, size_t bufcnt, gw_tunnel_end_cb cb)
{
    end->ops->write(end, bufs, bufcnt, cb);
}

static inline void gw_tunnel_end_shutdown(gw_tunnel_end_t *end)
{
    end->ops->shutdown(end);
}

static inline void gw_tunnel_end_close(gw_tunnel_end_t *end)
{
    end->ops->close(end);
}

/* --- the client's end after the upgrade (stream_end.c) --------------------- */

/* The hand-over's callback: the client's end (NULL: the hand-over failed),
 * and the bytes of its input that were the request's */
typedef void (*gw_client_upgrade_cb)(void *data, gw_tunnel_end_t *client, size_t reqsize);

/* Answers req (whose res holds the 101 and its headers) and hands the
 * client over to cb. HTTP/1.1: h2o_http1_upgrade, the client's socket as a
 * socket end once the 101 is written. HTTP/2 (req->is_tunnel_req): the 101
 * becomes a 200 without the upgrade's own headers (Upgrade, Connection,
 * Sec-WebSocket-Accept, RFC 8441 5), and cb is called with a stream end
 * before this returns. */
void gw_client_upgrade(h2o_req_t *req, gw_client_upgrade_cb cb, void *data);

/* The socket whose TCP acknowledgements bill the bytes written to a stream
 * end (the HTTP/2 connection's); NULL once the stream is gone (bytes given
 * then never reach the client) and for a socket end (its own socket bills). */
h2o_socket_t *gw_tunnel_end_billing_socket(gw_tunnel_end_t *end);

#endif
