/*
 * The client side of a tunnel (a WebSocket, a TCP tunnel) after the
 * hand-over, whichever the client spoke: an HTTP/1.1 upgrade hands the
 * client's own socket over (h2o_http1_upgrade); an HTTP/2 extended CONNECT
 * (RFC 8441) keeps its stream, and a bridge makes the stream look like a
 * socket: one end of a socketpair is given to the tunnel, the other is
 * relayed to the stream (the client's DATA in through write_req and
 * proceed_req, the tunnel's bytes out with h2o_sendvec under the
 * generator's proceed). So tunnel.c and tcp_tunnel.c run unchanged over
 * HTTP/2: Pings, frame budgets, idle and stall timeouts, revocation.
 *
 * Back-pressure: the bridge holds at most one write_req's worth from the
 * client (then proceed_req, which opens the stream's window again) and one
 * read of the socketpair towards it (until h2o's proceed); the socketpair's
 * buffers are bounded like a tunnel's sockets. A RST_STREAM or the
 * connection's close closes the bridge's end: the tunnel sees its client
 * close. The tunnel closing its end ends the stream (END_STREAM).
 */
#ifndef GW_UPSTREAM_STREAM_SOCK_H
#define GW_UPSTREAM_STREAM_SOCK_H

#include <stdint.h>
#include <h2o.h>

typedef struct st_gw_stream_sock_t gw_stream_sock_t;

/* h2o_http1_upgrade's callback: the client's socket (NULL: the hand-over
 * failed), and the bytes of its input that were the request's */
typedef void (*gw_client_upgrade_cb)(void *data, h2o_socket_t *client, size_t reqsize);

/* Answers req (whose res holds the 101 and its headers) and hands the
 * client over to cb. HTTP/1.1: h2o_http1_upgrade, *bridge set to NULL.
 * HTTP/2 (req->is_tunnel_req): the 101 becomes a 200 without the
 * upgrade's own headers (Upgrade, Connection, Sec-WebSocket-Accept, RFC
 * 8441 5), cb is called before this returns with the bridge's socket, and
 * *bridge is set (NULL with cb's client NULL when no socketpair could be
 * had: the stream is reset). `socket_buffer` bounds the socketpair's kernel
 * buffers (0: the kernel's default). */
void gw_client_upgrade(h2o_req_t *req, int socket_buffer, gw_client_upgrade_cb cb, void *data, gw_stream_sock_t **bridge);

/* The socket whose TCP acknowledgements bill the bytes written to the
 * bridge's socket (the HTTP/2 connection's), NULL once the stream is gone:
 * bytes written then never reach the client. */
h2o_socket_t *gw_stream_sock_billing_socket(gw_stream_sock_t *bridge);

/* The tunnel is done with the bridge (it closed, or is about to close, the
 * socket it was given). NULL is a no-op. */
void gw_stream_sock_release(gw_stream_sock_t *bridge);

#endif
