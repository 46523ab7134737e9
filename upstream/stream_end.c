/*
 * An HTTP/2 client's stream as a tunnel's end (tunnel_end.h), and the
 * hand-over of the client after the upgrade. No socketpair: the client's
 * DATA are copied from write_req to the end's input, and the next ones taken
 * (proceed_req, which opens the stream's window again) only while the tunnel
 * reads; the tunnel's bytes are copied to the end's output and handed to
 * h2o_send, and the write is done at the generator's proceed (one write's
 * worth held at most). Both buffers are freed whenever empty: an idle
 * tunnel's stream holds none. What the tunnel is told (bytes, the end of
 * the stream, a write done) it is told from the loop (a 0 ms timer), never
 * from within h2o's callbacks nor its own calls. A RST_STREAM or the
 * connection's close ends the end: its read and a write in flight report an
 * error. The tunnel closing its end ends the stream (END_STREAM) once what it
 * wrote is out.
 */
#include <stdlib.h>
#include <string.h>
#include <h2o.h>
#include <h2o/http1.h>
#include "upstream/tunnel_end.h"
#include "common/engine.h"

typedef struct st_stream_end_t {
    gw_tunnel_end_t super;
    h2o_generator_t generator; /* h2o calls proceed and stop with it */
    h2o_req_t *req;            /* NULL once the stream is gone (stopped, or the request disposed) */
    h2o_socket_t *conn_sock;   /* the HTTP/2 connection's socket, while req is set */
    h2o_loop_t *loop;
    h2o_buffer_t *input;  /* the client's bytes, for the tunnel */
    h2o_buffer_t *output; /* the tunnel's bytes, being sent (one write's worth) */
    size_t sending;       /* bytes of output handed to h2o_send, until proceed */
    gw_tunnel_end_cb read_cb, write_cb;
    h2o_timer_t defer; /* tells the tunnel from the loop */
    unsigned reading : 1;
    unsigned new_bytes : 1;    /* bytes arrived that the tunnel was not told of */
    unsigned proceed_owed : 1; /* write_req's last chunk is taken: proceed_req once the tunnel reads */
    unsigned client_done : 1;  /* the client ended its stream: its reads end once the bytes before are told */
    unsigned in_flight : 1;    /* a send awaits its proceed */
    unsigned writing : 1;      /* the tunnel's write awaits its callback */
    unsigned write_told : 1;   /* ... which is due (write_err: with an error) */
    unsigned write_err : 1;
    unsigned shut : 1;       /* the tunnel shut its writes (or closed): END_STREAM once nothing is in flight */
    unsigned final_sent : 1; /* the stream's last send is out: h2o owns the rest */
    unsigned closed : 1;     /* the tunnel is done with the end */
    int refs;                /* the tunnel's, the request's, one per callback running */
} stream_end_t;

static void unref(stream_end_t *e)
{
    if (--e->refs != 0)
        return;
    if (h2o_timer_is_linked(&e->defer))
        h2o_timer_unlink(&e->defer);
    h2o_buffer_dispose(&e->input);
    h2o_buffer_dispose(&e->output);
    free(e);
}

static int is_over(stream_end_t *e)
{
    return e->req == NULL || e->client_done || e->final_sent;
}

static void schedule(stream_end_t *e)
{
    if (!e->closed && !h2o_timer_is_linked(&e->defer))
        h2o_timer_link(e->loop, 0, &e->defer);
}

/* --- the tunnel's bytes to the client ------------------------------------ */

static void send_final(stream_end_t *e)
{
    h2o_req_t *req = e->req;

    e->final_sent = 1;
    /* the stream is h2o's to close now: the client's DATA are no longer taken */
    req->write_req.cb = NULL;
    h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
}

/* Hands what output holds to h2o, or the stream's end once shut, unless a send is in flight. */
static void flush(stream_end_t *e)
{
    h2o_iovec_t buf;

    if (e->req == NULL || e->in_flight || e->final_sent)
        return;
    if (e->output->size != 0) {
        e->sending = e->output->size;
        e->in_flight = 1;
        buf = h2o_iovec_init(e->output->bytes, e->sending);
        h2o_send(e->req, &buf, 1, H2O_SEND_STATE_IN_PROGRESS);
    } else if (e->shut) {
        send_final(e);
    }
}

static void on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    stream_end_t *e = H2O_STRUCT_FROM_MEMBER(stream_end_t, generator, generator);

    (void)req;
    e->in_flight = 0;
    h2o_buffer_consume(&e->output, e->sending);
    e->sending = 0;
    if (e->writing && e->output->size == 0) {
        /* h2o took the tunnel's bytes: its next write may come */
        e->writing = 0;
        e->write_told = 1;
        schedule(e);
    }
    ++e->refs;
    flush(e);
    unref(e);
}

/* The stream is gone (reset, the connection closed, the request disposed):
 * the tunnel's write in flight fails, its read ends. */
static void gone(stream_end_t *e)
{
    e->req = NULL;
    e->conn_sock = NULL;
    e->in_flight = 0;
    if (e->writing) {
        e->writing = 0;
        e->write_told = 1;
        e->write_err = 1;
    }
    schedule(e);
}

static void on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    (void)req;
    gone(H2O_STRUCT_FROM_MEMBER(stream_end_t, generator, generator));
}

/* The request's pool is cleared: nothing of the stream may be touched. */
static void on_req_dispose(void *p)
{
    stream_end_t *e = *(stream_end_t **)p;

    gone(e);
    unref(e);
}

/* --- the client's bytes to the tunnel ------------------------------------ */

static int on_write_req(void *ctx, int is_end_stream)
{
    stream_end_t *e = ctx;
    h2o_req_t *req = e->req;

    if (e->closed)
        return 0; /* dropped, and no more taken: the END_STREAM on its way closes the stream */
    if (req->entity.len != 0) {
        h2o_buffer_append(&e->input, req->entity.base, req->entity.len);
        e->new_bytes = 1;
    }
    if (is_end_stream)
        e->client_done = 1;
    else
        e->proceed_owed = 1;
    if (e->reading)
        schedule(e);
    return 0;
}

/* From the loop: the tunnel's write is done, the bytes or the end of the
 * client's stream are told to its read, and the client's next DATA are
 * taken while it reads. */
static void on_defer(h2o_timer_t *timer)
{
    stream_end_t *e = H2O_STRUCT_FROM_MEMBER(stream_end_t, defer, timer);

    ++e->refs;
    if (e->write_told) {
        e->write_told = 0;
        e->write_cb(&e->super, e->write_err ? h2o_socket_error_io : NULL);
    }
    if (!e->closed && e->reading && e->new_bytes) {
        e->new_bytes = 0;
        e->read_cb(&e->super, NULL);
        if (!e->closed && e->reading && is_over(e))
            schedule(e); /* the end, told next time */
    } else if (!e->closed && e->reading && is_over(e)) {
        e->read_cb(&e->super, e->req != NULL && !e->final_sent ? h2o_socket_error_closed : h2o_socket_error_io);
    }
    if (!e->closed && e->reading && e->proceed_owed && e->req != NULL && !e->final_sent && e->req->proceed_req != NULL) {
        e->proceed_owed = 0;
        e->req->proceed_req(e->req, NULL); /* may call on_write_req at once */
    }
    unref(e);
}

/* --- the end's operations -------------------------------------------------- */

static void stream_read_start(gw_tunnel_end_t *end, gw_tunnel_end_cb cb)
{
    stream_end_t *e = (stream_end_t *)end;

    e->read_cb = cb;
    e->reading = 1;
    if (e->new_bytes || e->proceed_owed || is_over(e))
        schedule(e);
}

static void stream_read_stop(gw_tunnel_end_t *end)
{
    ((stream_end_t *)end)->reading = 0;
}

static void stream_write(gw_tunnel_end_t *end, h2o_iovec_t *bufs, size_t bufcnt, gw_tunnel_end_cb cb)
{
    stream_end_t *e = (stream_end_t *)end;
    size_t i;

    e->write_cb = cb;
    if (e->req == NULL || e->shut) {
        e->write_told = 1;
        e->write_err = 1;
        schedule(e);
        return;
    }
    /* nothing of output is h2o's now (one write at a time; the 200's empty send refers to none) */
    for (i = 0; i != bufcnt; ++i)
        h2o_buffer_append(&e->output, bufs[i].base, bufs[i].len);
    e->writing = 1;
    if (e->output->size == 0) {
        e->writing = 0;
        e->write_told = 1;
        schedule(e);
        return;
    }
    ++e->refs;
    flush(e);
    unref(e);
}

static void stream_shutdown(gw_tunnel_end_t *end)
{
    stream_end_t *e = (stream_end_t *)end;

    e->shut = 1;
    ++e->refs;
    flush(e);
    schedule(e); /* a read ends now */
    unref(e);
}

static void stream_close(gw_tunnel_end_t *end)
{
    stream_end_t *e = (stream_end_t *)end;

    e->closed = 1;
    e->reading = 0;
    e->writing = 0;
    e->write_told = 0;
    if (h2o_timer_is_linked(&e->defer))
        h2o_timer_unlink(&e->defer);
    e->shut = 1;
    flush(e); /* the tunnel's reference, given back below, keeps e through it */
    unref(e); /* the tunnel's */
}

static const gw_tunnel_end_ops_t stream_ops = {stream_read_start, stream_read_stop, stream_write, stream_shutdown, stream_close};

h2o_socket_t *gw_tunnel_end_billing_socket(gw_tunnel_end_t *end)
{
    return end->ops == &stream_ops ? ((stream_end_t *)end)->conn_sock : NULL;
}

/* --- the hand-over -------------------------------------------------------- */

typedef struct st_http1_upgrade_t {
    gw_client_upgrade_cb cb;
    void *data;
} http1_upgrade_t;

static void on_http1_upgrade(void *data, h2o_socket_t *sock, size_t reqsize)
{
    http1_upgrade_t u = *(http1_upgrade_t *)data;

    free(data);
    u.cb(u.data, sock != NULL ? gw_tunnel_end_socket(sock) : NULL, reqsize);
}

static void strip_upgrade_headers(h2o_req_t *req)
{
    static const char *const names[] = {"upgrade", "connection", "sec-websocket-accept"};
    size_t i;
    ssize_t at;

    for (i = 0; i != sizeof(names) / sizeof(names[0]); ++i)
        while ((at = h2o_find_header_by_str(&req->res.headers, names[i], strlen(names[i]), -1)) != -1)
            h2o_delete_header(&req->res.headers, at);
}

void gw_client_upgrade(h2o_req_t *req, gw_client_upgrade_cb cb, void *data)
{
    stream_end_t *e, **slot;

    if (req->version < 0x200) {
        http1_upgrade_t *u = h2o_mem_alloc(sizeof(*u));
        u->cb = cb;
        u->data = data;
        h2o_http1_upgrade(req, NULL, 0, on_http1_upgrade, u);
        return;
    }
    req->res.status = 200;
    req->res.reason = "OK";
    strip_upgrade_headers(req);

    e = h2o_mem_alloc(sizeof(*e));
    memset(e, 0, sizeof(*e));
    e->super.ops = &stream_ops;
    e->super.input = &e->input;
    e->generator.proceed = on_proceed;
    e->generator.stop = on_stop;
    e->req = req;
    e->conn_sock = gw_conn_socket(req->conn);
    e->loop = req->conn->ctx->loop;
    h2o_timer_init(&e->defer, on_defer);
    h2o_buffer_init(&e->input, &h2o_socket_buffer_prototype);
    h2o_buffer_init(&e->output, &h2o_socket_buffer_prototype);
    e->refs = 3; /* the tunnel's, the request's, this call's */
    slot = h2o_mem_alloc_shared(&req->pool, sizeof(*slot), on_req_dispose);
    *slot = e;

    /* the 200 goes out at once (an empty send); the tunnel's bytes follow under proceed */
    h2o_start_response(req, &e->generator);
    e->in_flight = 1;
    h2o_send(req, NULL, 0, H2O_SEND_STATE_IN_PROGRESS);

    /* what h2o holds already (as lib/core/proxy.c takes it) is in the input at the start; the client's next DATA
     * are taken once the tunnel reads */
    if (e->req != NULL) {
        if (req->entity.len != 0)
            h2o_buffer_append(&e->input, req->entity.base, req->entity.len);
        if (req->proceed_req != NULL) {
            req->write_req.cb = on_write_req;
            req->write_req.ctx = e;
            e->proceed_owed = 1;
        } else {
            e->client_done = 1;
        }
    }
    cb(data, &e->super, 0);
    unref(e);
}
