/*
 * Accepting client connections (accept.h): a bounded batch per wake-up, the
 * worker's and the client address's connection limits checked before TLS
 * or any read, the PROXY header read first on proxy_protocol listeners, and
 * each admitted connection counted until its socket closes.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "common/client_addr.h"
#include "common/netaddr.h"
#include "gateway/accept.h"
#include "gateway/proxy_protocol.h"
#include "common/loop_timeout.h"
#include "gateway/sni_peek.h"
#include "gateway/worker.h"

static gw_worker_t *worker_of(h2o_context_t *ctx)
{
    return H2O_STRUCT_FROM_MEMBER(gw_worker_t, ctx, ctx);
}

/* This worker's open client connections (limits.max_client_connections_per_worker), shown in /metrics. */
static atomic_uint_fast64_t *client_connections(gw_worker_t *w)
{
    return &w->server->metrics.workers[w->index].client_connections;
}

/* One accepted client connection, counted until its socket closes. */
typedef struct st_client_conn_t {
    gw_worker_t *worker;
    h2o_socket_t *sock;
    char addr[INET6_ADDRSTRLEN]; /* "": not counted per address (trusted listener, unknown, PROXY header not read yet) */
} client_conn_t;

static void on_client_close(void *data)
{
    client_conn_t *cc = data;

    /* the descriptor is still open (libh2o patch 0220): what the client
     * never received of the egress held for it is not billed */
    gw_proxy_client_closed(cc->worker->proxy, cc->sock);
    atomic_fetch_sub_explicit(client_connections(cc->worker), 1, memory_order_relaxed);
    if (cc->addr[0] != '\0')
        gw_conn_limit_release(cc->worker->server->client_conns, cc->worker->index, cc->addr);
    free(cc);
}

/* Counts the address of an admitted connection (cc) against
 * limits.max_connections_per_client: 0, or -1 when it is at its limit (the
 * caller closes the socket; cc->addr stays empty, nothing to give back). */
static int admit_address(gw_worker_t *w, client_conn_t *cc)
{
    gw_server_t *s = w->server;
    char addr[sizeof(cc->addr)];
    struct sockaddr_storage ss;
    socklen_t len;

    if ((len = h2o_socket_getpeername(cc->sock, (void *)&ss)) == 0 ||
        gw_netaddr_peer_text((void *)&ss, len, addr, sizeof(addr)) < 0)
        return 0; /* unknown: not limited */
    if (!gw_conn_limit_acquire(s->client_conns, w->index, addr)) {
        GW_COUNTER_ADD(&s->metrics.workers[w->index].refused_per_client, 1);
        return -1;
    }
    memcpy(cc->addr, addr, sizeof(addr));
    return 0;
}

/* Counts a new client connection against the worker's limit and, with
 * count_address, its address's: 0 when it may be served, -1 when it must be
 * closed. The peer of a trusted listener is the load balancer, not a client:
 * not counted per address there (requests are, by X-Forwarded-For: see the
 * pipeline); on a proxy_protocol listener the address is counted once the
 * header has named the client (on_proxy_header). */
static int admit(gw_worker_t *w, h2o_socket_t *sock, int count_address)
{
    gw_server_t *s = w->server;
    client_conn_t *cc;

    if (atomic_load_explicit(client_connections(w), memory_order_relaxed) >= s->config->limits.max_client_connections_per_worker) {
        GW_COUNTER_ADD(&s->metrics.workers[w->index].refused_per_worker, 1);
        return -1;
    }
    cc = h2o_mem_alloc(sizeof(*cc));
    memset(cc, 0, sizeof(*cc));
    cc->worker = w;
    cc->sock = sock;
    if (count_address && admit_address(w, cc) != 0) {
        free(cc);
        return -1;
    }
    atomic_fetch_add_explicit(client_connections(w), 1, memory_order_relaxed);
    sock->on_close.cb = on_client_close;
    sock->on_close.data = cc;
    return 0;
}

/* A TLS listener's connection whose ClientHello is read and its certificate looked up (gateway/sni_peek.h). */
static void on_client_hello(h2o_socket_t *sock, void *data)
{
    h2o_accept(data, sock);
}

/* An admitted connection to h2o; on a TLS listener with custom-domain certificates, once its SNI is peeked. */
static void accept_admitted(gw_worker_t *w, h2o_accept_ctx_t *actx, h2o_socket_t *sock)
{
    if (actx->ssl_ctx != NULL && w->cert_fetch != NULL) {
        if (w->client_hello_timeout == NULL) /* the first such connection of this worker */
            w->client_hello_timeout = gw_loop_timeout_acquire(actx->ctx->loop, w->server->globalconf.handshake_timeout);
        gw_sni_peek_read(sock, w->client_hello_timeout, w->cert_fetch, &w->server->metrics.workers[w->index].client_hello,
                         on_client_hello, actx);
    } else {
        h2o_accept(actx, sock);
    }
}

/* A proxy_protocol listener's connection whose header is read: its peer is
 * now the client the balancer named (gateway/proxy_protocol.h). */
static void on_proxy_header(h2o_socket_t *sock, void *data)
{
    h2o_accept_ctx_t *actx = data;
    gw_worker_t *w = worker_of(actx->ctx);

    if (admit_address(w, sock->on_close.data) != 0) {
        h2o_socket_close(sock);
        return;
    }
    accept_admitted(w, actx, sock);
}

/* The admin listener (worker 0's admin context): not limited. */
void gw_accept_on_admin(h2o_socket_t *listener, const char *err)
{
    h2o_socket_t *sock;

    if (err != NULL)
        return;
    for (int i = 0; i != 16; ++i) {
        if ((sock = h2o_evloop_socket_accept(listener)) == NULL)
            break;
        h2o_accept(listener->data, sock);
    }
}

/* A client listener; its accept context is one of its worker's. */
void gw_accept_on_client(h2o_socket_t *listener, const char *err)
{
    h2o_accept_ctx_t *actx = listener->data;
    gw_worker_t *w = worker_of(actx->ctx);
    const gw_config_listen_t *l = w->server->config->listen + (actx - w->accept_ctxs);
    h2o_socket_t *sock;

    if (err != NULL)
        return;
    /* accept a bounded batch per wake-up so one listener cannot starve the loop */
    for (int i = 0; i != 16; ++i) {
        if ((sock = h2o_evloop_socket_accept(listener)) == NULL)
            break;
        if (admit(w, sock, !l->trusted && !l->proxy_protocol) != 0) {
            /* over a limit: closed before TLS, nothing read */
            h2o_socket_close(sock);
            continue;
        }
        if (l->proxy_protocol)
            gw_proxy_protocol_read(sock, w->proxy_header_timeout, &w->server->metrics.workers[w->index].proxy_header,
                                   on_proxy_header, actx);
        else
            accept_admitted(w, actx, sock);
    }
}

h2o_socket_t *gw_accept_start_listener(h2o_loop_t *loop, int fd, h2o_accept_ctx_t *actx, h2o_socket_cb cb)
{
    h2o_socket_t *sock = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    sock->data = actx;
    h2o_socket_read_start(sock, cb);
    return sock;
}

int gw_accept_on_stream_error(void *data, h2o_conn_t *conn)
{
    gw_worker_t *w = data;
    gw_server_t *s = w->server;
    const gw_config_t *c = s->config;
    char addr[INET6_ADDRSTRLEN];
    size_t i;

    if (s->stream_errors == NULL)
        return 0;
    for (i = 0; i != c->num_listen; ++i)
        if (conn->hosts == s->listener_hosts[i] && c->listen[i].trusted && !c->listen[i].proxy_protocol)
            return 0;
    if (gw_client_addr_text(conn, addr, sizeof(addr)) < 0)
        return 0;
    return gw_rate_limit_take_burst(s->stream_errors, addr, (uint32_t)c->limits.stream_errors_per_client_per_s,
                                    (uint32_t)c->limits.max_stream_errors_per_client, gw_rate_limit_now_ns()) != 0;
}
