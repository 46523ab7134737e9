/*
 * The listeners' accept callbacks of a worker (gateway/worker.c starts them):
 * client listeners admit a connection against limits.max_client_connections_per_worker
 * and limits.max_connections_per_client (the PROXY header's address on a
 * proxy_protocol listener, once read) before h2o sees it; the admin
 * listener is not limited.
 */
#ifndef GW_GATEWAY_ACCEPT_H
#define GW_GATEWAY_ACCEPT_H

#include <h2o.h>

/* A listening socket on `loop` for `fd`, its data the accept context, reading with `cb`. */
h2o_socket_t *gw_accept_start_listener(h2o_loop_t *loop, int fd, h2o_accept_ctx_t *actx, h2o_socket_cb cb);

/* The read callbacks of a client listener (its accept context one of its
 * worker's gw_worker_t.accept_ctxs) and of the admin listener. */
void gw_accept_on_client(h2o_socket_t *listener, const char *err);
void gw_accept_on_admin(h2o_socket_t *listener, const char *err);

/* h2o's ctx->http2.on_client_stream_error (libh2o patch 0300), `data` the
 * worker whose context it is: the server reset a stream of `conn` for its
 * client's protocol error. Takes one from the client address's budget
 * (limits.max_stream_errors_per_client, across connections and workers);
 * returns 1 when there was none left (h2o then sends GOAWAY). A trusted
 * plain listener's peer is the balancer, every client at once: not counted. */
int gw_accept_on_stream_error(void *data, h2o_conn_t *conn);

#endif
