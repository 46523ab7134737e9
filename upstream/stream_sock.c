/*
 * An HTTP/2 stream as the client socket of a tunnel (stream_sock.h).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include <h2o/http1.h>
#include "upstream/stream_sock.h"
#include "common/engine.h"

struct st_gw_stream_sock_t {
    h2o_generator_t generator; /* first: h2o calls proceed and stop with it */
    h2o_req_t *req;            /* NULL once the stream is gone (stopped, or the request disposed) */
    h2o_socket_t *conn_sock;   /* the HTTP/2 connection's socket, while req is set */
    h2o_socket_t *inner;       /* the bridge's end of the socketpair; NULL once closed */
    h2o_buffer_t *to_tunnel;   /* the client's bytes being written to inner (one write_req's worth) */
    size_t sending;            /* bytes of inner->input handed to h2o_sendvec, until proceed */
    int in_flight;             /* a send awaits its proceed */
    int inner_eof;             /* the tunnel's end is closed: the stream ends once what it sent is out */
    int final_sent;            /* the stream's last send is out: h2o owns the rest */
    int client_done;           /* the client sent END_STREAM (or reset): no proceed_req any more */
    int refs;                  /* the tunnel, the request, the inner socket */
};

static void unref(gw_stream_sock_t *b)
{
    if (--b->refs != 0)
        return;
    h2o_buffer_dispose(&b->to_tunnel);
    free(b);
}

static void close_inner(gw_stream_sock_t *b)
{
    if (b->inner == NULL)
        return;
    h2o_socket_close(b->inner);
    b->inner = NULL;
    unref(b);
}

/* --- the tunnel's bytes to the client ------------------------------------ */

static void on_inner_read(h2o_socket_t *sock, const char *err);

/* Sends what inner holds (or the stream's end once inner is closed), unless
 * a send is in flight. */
static void flush_to_client(gw_stream_sock_t *b)
{
    h2o_sendvec_t vec;
    h2o_send_state_t state;

    if (b->req == NULL || b->in_flight || b->final_sent)
        return;
    if (b->inner != NULL && b->inner->input->size == 0 && !b->inner_eof)
        return;
    b->sending = b->inner != NULL ? b->inner->input->size : 0;
    /* h2o refers to the bytes until its proceed: the last ones go before an empty FINAL */
    state = b->inner_eof && b->sending == 0 ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS;
    h2o_sendvec_init_raw(&vec, b->sending != 0 ? b->inner->input->bytes : NULL, b->sending);
    if (b->inner != NULL)
        h2o_socket_read_stop(b->inner);
    if (state == H2O_SEND_STATE_FINAL) {
        b->final_sent = 1;
        /* the stream is h2o's to close now: the client's DATA is no longer taken */
        b->req->write_req.cb = NULL;
    } else {
        b->in_flight = 1;
    }
    h2o_sendvec(b->req, &vec, b->sending != 0 ? 1 : 0, state);
    if (state == H2O_SEND_STATE_FINAL)
        close_inner(b);
}

static void on_inner_read(h2o_socket_t *sock, const char *err)
{
    gw_stream_sock_t *b = sock->data;

    if (err != NULL) {
        /* the tunnel closed its end: what it wrote before goes, then END_STREAM */
        b->inner_eof = 1;
        h2o_socket_read_stop(sock);
        if (b->req == NULL) {
            close_inner(b);
            return;
        }
    }
    flush_to_client(b);
}

static void on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_stream_sock_t *b = (gw_stream_sock_t *)generator;

    (void)req;
    b->in_flight = 0;
    if (b->inner == NULL)
        return;
    h2o_buffer_consume(&b->inner->input, b->sending);
    b->sending = 0;
    if (b->inner->input->size != 0 || b->inner_eof)
        flush_to_client(b);
    else
        h2o_socket_read_start(b->inner, on_inner_read);
}

/* The client reset the stream, or its connection went: the tunnel sees its
 * client close. */
static void on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_stream_sock_t *b = (gw_stream_sock_t *)generator;

    (void)req;
    b->req = NULL;
    b->conn_sock = NULL;
    close_inner(b);
}

/* The request's pool is cleared: nothing of the stream may be touched. */
static void on_req_dispose(void *p)
{
    gw_stream_sock_t *b = *(gw_stream_sock_t **)p;

    b->req = NULL;
    b->conn_sock = NULL;
    /* the inner socket's reference goes without unref: the request's still holds b (and gcc -O3 then sees no free
     * before the last unref) */
    if (b->inner != NULL) {
        h2o_socket_close(b->inner);
        b->inner = NULL;
        --b->refs;
    }
    unref(b);
}

/* --- the client's bytes to the tunnel ------------------------------------ */

static int on_write_req(void *ctx, int is_end_stream);

static void on_inner_written(h2o_socket_t *sock, const char *err)
{
    gw_stream_sock_t *b = sock->data;
    h2o_req_t *req = b->req;

    h2o_buffer_consume(&b->to_tunnel, b->to_tunnel->size);
    if (err != NULL) {
        /* the tunnel closed its end: its read of inner ends the stream */
        return;
    }
    if (b->client_done) {
        shutdown(h2o_socket_get_fd(sock), SHUT_WR); /* END_STREAM is the client's close (RFC 8441 4) */
        return;
    }
    if (req != NULL && req->proceed_req != NULL)
        req->proceed_req(req, NULL);
}

/* h2o has the client's DATA in req->entity: copied, written to the tunnel,
 * and taken (proceed_req) once the tunnel has it. */
static int on_write_req(void *ctx, int is_end_stream)
{
    gw_stream_sock_t *b = ctx;
    h2o_req_t *req = b->req;
    h2o_iovec_t buf;

    if (b->inner == NULL)
        return -1; /* the tunnel is gone: h2o resets the stream */
    if (is_end_stream)
        b->client_done = 1;
    if (req->entity.len == 0) {
        if (is_end_stream)
            shutdown(h2o_socket_get_fd(b->inner), SHUT_WR);
        else if (req->proceed_req != NULL)
            req->proceed_req(req, NULL);
        return 0;
    }
    h2o_buffer_append(&b->to_tunnel, req->entity.base, req->entity.len);
    buf = h2o_iovec_init(b->to_tunnel->bytes, b->to_tunnel->size);
    h2o_socket_write(b->inner, &buf, 1, on_inner_written);
    return 0;
}

/* --- the hand-over -------------------------------------------------------- */

static void strip_upgrade_headers(h2o_req_t *req)
{
    static const char *const names[] = {"upgrade", "connection", "sec-websocket-accept"};
    size_t i;
    ssize_t at;

    for (i = 0; i != sizeof(names) / sizeof(names[0]); ++i)
        while ((at = h2o_find_header_by_str(&req->res.headers, names[i], strlen(names[i]), -1)) != -1)
            h2o_delete_header(&req->res.headers, at);
}

static void bound_buffers(int fd, int bytes)
{
    if (bytes <= 0)
        return;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

void gw_client_upgrade(h2o_req_t *req, int socket_buffer, gw_client_upgrade_cb cb, void *data, gw_stream_sock_t **bridge)
{
    h2o_loop_t *loop = req->conn->ctx->loop;
    gw_stream_sock_t *b, **slot;
    int fds[2];
    h2o_socket_t *outer;

    *bridge = NULL;
    if (req->version < 0x200) {
        h2o_http1_upgrade(req, NULL, 0, cb, data);
        return;
    }
    req->res.status = 200;
    req->res.reason = "OK";
    strip_upgrade_headers(req);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
        h2o_send_error_503(req, "Service Unavailable", "no socket for the tunnel", 0);
        cb(data, NULL, 0);
        return;
    }
    bound_buffers(fds[0], socket_buffer);
    bound_buffers(fds[1], socket_buffer);

    b = h2o_mem_alloc(sizeof(*b));
    memset(b, 0, sizeof(*b));
    b->generator.proceed = on_proceed;
    b->generator.stop = on_stop;
    b->req = req;
    b->conn_sock = gw_conn_socket(req->conn);
    h2o_buffer_init(&b->to_tunnel, &h2o_socket_buffer_prototype);
    b->refs = 3;
    b->inner = h2o_evloop_socket_create(loop, fds[0], 0);
    b->inner->data = b;
    outer = h2o_evloop_socket_create(loop, fds[1], 0);
    slot = h2o_mem_alloc_shared(&req->pool, sizeof(*slot), on_req_dispose);
    *slot = b;
    *bridge = b;

    /* the 200 goes out at once (an empty send); the tunnel's bytes follow under proceed */
    h2o_start_response(req, &b->generator);
    b->in_flight = 1;
    h2o_send(req, NULL, 0, H2O_SEND_STATE_IN_PROGRESS);

    /* the client's DATA from now on; what came before the 200 is in req->entity already */
    req->write_req.cb = on_write_req;
    req->write_req.ctx = b;
    if (req->proceed_req == NULL)
        b->client_done = 1;
    cb(data, outer, 0);
    /* what h2o holds already is the first chunk (as lib/core/proxy.c takes it): written, then proceed_req */
    if (b->inner != NULL && b->req != NULL)
        on_write_req(b, b->client_done);
}

h2o_socket_t *gw_stream_sock_billing_socket(gw_stream_sock_t *bridge)
{
    return bridge->conn_sock;
}

void gw_stream_sock_release(gw_stream_sock_t *bridge)
{
    if (bridge != NULL)
        unref(bridge);
}
