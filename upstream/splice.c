/*
 * Zero-copy response bodies (see splice.h). Once what came with the head is
 * sent the buffered way (response.c) and h2o has written it, the body moves
 * sandbox socket -> pipe -> client socket with splice(2): the upstream
 * socket stays h2o's, polled without reading (h2o_socket_dont_read), and the
 * client's write readiness comes from a duplicate of its descriptor (h2o's
 * own socket belongs to the HTTP/1 connection). Every byte that reaches the
 * client socket is billed as it is written (delivery.h, against the client
 * socket's stream position), the upstream idle and client stall timeouts
 * and the buffer budgets hold as on the buffered path (the pipe's bytes are
 * what the response holds), and the end of the body goes through
 * response.c's final send, so h2o ends the response (keep-alive, or the
 * close after an error) as it would have.
 */
#define _GNU_SOURCE /* splice, pipe2, F_SETPIPE_SZ */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include "common/engine.h"
#include "upstream/exchange.h"

/* A body shorter than this goes the buffered way: a pipe and a duplicate
 * descriptor cost more system calls than they save. */
#define SPLICE_MIN_BYTES (256 * 1024)
/* The pipe asked for; Linux's default is 64 KiB. Pipe pages are a per-user
 * budget (fs.pipe-user-pages-soft): a refusal keeps the default. */
#define SPLICE_PIPE_BYTES (256 * 1024)
/* The upstream socket's receive buffer while it is spliced from: the small
 * one of the buffered path (gw_proxy_new) bounds what one read pulls into
 * the gateway's memory, which a splice never does; a larger TCP window lets
 * the app send ahead into the kernel. Set back before the connection is
 * pooled. */
#define SPLICE_UPSTREAM_RCVBUF (1024 * 1024)
/* Body bytes one wake-up moves before the loop serves others: the next
 * batch waits for readiness again (level-triggered, so at once when ready). */
#define SPLICE_BATCH_BYTES (1024 * 1024)

static void pump(gw_exchange_t *ex);

int gw_splice_eligible(gw_exchange_t *ex)
{
    h2o_req_t *req = ex->req;
    h2o_socket_t *client;

    if (!ex->proxy->conf.splice || req->version != 0x101 || ex->res.body.framing != GW_HTTP1_LENGTH ||
        ex->res.body.bytes_left < SPLICE_MIN_BYTES)
        return 0;
    /* the client's body still streams to the app (request_body.h): the buffered way ends it with the response */
    if (ex->up_req.streaming && !ex->up_req.done)
        return 0;
    /* an ostream filter would see none of the spliced bytes */
    if (req->_ostr_top == NULL || req->_ostr_top->next != NULL)
        return 0;
    if ((client = gw_exchange_client_socket(ex)) == NULL || client->ssl != NULL)
        return 0;
    ex->splice.client = client;
    return 1;
}

size_t gw_splice_held(const gw_exchange_t *ex)
{
    return ex->splice.in_pipe;
}

void gw_splice_stop(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;

    s->wanted = 0;
    if (!s->active)
        return;
    s->active = 0;
    s->watching = 0;
    h2o_socket_close(s->watch);
    s->watch = NULL;
    close(s->pipe_fds[0]);
    close(s->pipe_fds[1]);
    s->in_pipe = 0;
    if (ex->sock != NULL) {
        h2o_socket_read_stop(ex->sock);
        h2o_socket_dont_read(ex->sock, 0);
    }
}

/* The body is over at the upstream (complete, or cut short): the
 * connection goes back to the pool or is closed (response.c). */
static void release(gw_exchange_t *ex, int complete)
{
    setsockopt(h2o_socket_get_fd(ex->sock), SOL_SOCKET, SO_RCVBUF, &ex->proxy->rcvbuf, sizeof(ex->proxy->rcvbuf));
    h2o_socket_read_stop(ex->sock);
    h2o_socket_dont_read(ex->sock, 0);
    gw_exchange_release_upstream(ex, complete);
}

/* Everything spliced is at the client socket, or the client is gone: h2o
 * ends the response with the final send. Last use of ex. */
static void end(gw_exchange_t *ex)
{
    if (ex->sock != NULL)
        release(ex, 0);
    gw_splice_stop(ex);
    gw_exchange_stop_waiting(ex);
    gw_exchange_account(ex);
    gw_exchange_send(ex);
}

static void on_io_timeout(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);

    /* the app went silent mid-body: the client sees a truncated response */
    ex->res.body_error = 1;
    gw_cut_note(ex->req, GW_CUT_IDLE_TIMEOUT);
    end(ex);
}

static void on_upstream_ready(h2o_socket_t *sock, const char *err)
{
    (void)err; /* splice(2) reports it */
    pump(sock->data);
}

static void on_client_ready(h2o_socket_t *watch, const char *err)
{
    gw_exchange_t *ex = watch->data;

    (void)err;
    ex->splice.watching = 0;
    gw_exchange_stop_waiting(ex);
    pump(ex);
}

/* Nothing in the pipe and nothing to read yet: wait for the app, within
 * its idle timeout. */
static void wait_upstream(gw_exchange_t *ex)
{
    gw_exchange_set_silence(ex, GW_SILENCE_BODY, on_io_timeout);
    h2o_socket_read_start(ex->sock, on_upstream_ready);
    gw_exchange_account(ex);
}

/* The client socket is full: wait for it, within the client stall timeout,
 * as a send in flight would (the buffer budgets may reset the response). */
static void wait_client(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    gw_splice_t *s = &ex->splice;

    /* waiting for the client is not the app's idleness */
    gw_exchange_clear_timer(ex);
    if (ex->sock != NULL)
        h2o_socket_read_stop(ex->sock);
    if (!s->watching) {
        s->watching = 1;
        h2o_socket_notify_write(s->watch, on_client_ready);
    }
    if (!h2o_linklist_is_linked(&ex->waiting)) {
        if (p->client_stall_timeout.enabled)
            gw_timer_link(p->ctx->loop, p->client_stall_timeout.timeout, &ex->stall_timer);
        h2o_linklist_insert(&p->waiting, &ex->waiting);
    }
    gw_exchange_account(ex);
}

/* Moves pipe -> client socket. Returns the bytes moved, 0 when the socket
 * is full, -1 when the client is gone. */
static ssize_t to_client(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;
    ssize_t n;

    while ((n = splice(s->pipe_fds[0], NULL, h2o_socket_get_fd(s->client), NULL, s->in_pipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE)) ==
               -1 &&
           errno == EINTR)
        ;
    if (n < 0)
        return errno == EAGAIN ? 0 : -1;
    if (n == 0)
        return -1;
    s->in_pipe -= (size_t)n;
    /* the client socket's stream position, which delivery.c bills
     * acknowledged bytes against, and h2o's count of the body */
    s->client->bytes_written += (size_t)n;
    ex->req->bytes_sent += (size_t)n;
    GW_PROXY_COUNT(ex->proxy, spliced_bytes, (uint64_t)n);
    gw_proxy_add_egress(ex->proxy, s->client, ex->sandbox_id, ex->no_activity, (uint64_t)n, 1);
    return n;
}

/* Moves upstream socket -> pipe, at most what is left of the body. Returns
 * 1 when bytes moved or the upstream is over (then released), 0 when
 * nothing can move now (no bytes, or the pipe is full). */
static int from_upstream(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;
    size_t want = s->pipe_size - s->in_pipe;
    ssize_t n;

    if (want > ex->res.body.bytes_left)
        want = ex->res.body.bytes_left;
    /* the pipe is full (pump tops it up when the client socket takes none
     * of it): a splice(2) of 0 bytes returns 0, which is not the app's end */
    if (want == 0)
        return 0;
    while ((n = splice(h2o_socket_get_fd(ex->sock), NULL, s->pipe_fds[1], NULL, want, SPLICE_F_NONBLOCK | SPLICE_F_MOVE)) == -1 &&
           errno == EINTR)
        ;
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0) {
        /* the app closed (or its connection failed) before the end of its
         * Content-Length: the client sees the truncation */
        ex->res.body_error = 1;
        ex->res.body.keepalive = 0;
        gw_cut_note(ex->req, GW_CUT_UPSTREAM_RESET);
        release(ex, 0);
        return 1;
    }
    s->in_pipe += (size_t)n;
    if ((ex->res.body.bytes_left -= (size_t)n) == 0)
        release(ex, 1);
    return 1;
}

/* Moves what can move now, then waits for what stops it, or ends the
 * response (then it was the last use of ex). */
static void pump(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;
    size_t moved = 0;
    ssize_t n;

    for (;;) {
        if (s->in_pipe != 0) {
            if ((n = to_client(ex)) < 0) {
                ex->res.body_error = 1;
                end(ex);
                return;
            }
            if (n == 0) {
                /* fill the pipe while the client catches up */
                if (ex->sock != NULL)
                    from_upstream(ex);
                wait_client(ex);
                return;
            }
            if ((moved += (size_t)n) >= SPLICE_BATCH_BYTES && s->in_pipe != 0) {
                wait_client(ex);
                return;
            }
            continue;
        }
        if (ex->sock == NULL) {
            end(ex);
            return;
        }
        if (moved >= SPLICE_BATCH_BYTES || !from_upstream(ex)) {
            wait_upstream(ex);
            return;
        }
    }
}

/* A pipe and the duplicate descriptor to watch the client with; -1 when
 * either cannot be had (descriptors exhausted): the body goes the buffered
 * way then. */
static int open_pipe(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;
    int fd, size;

    if (pipe2(s->pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return -1;
    if ((fd = fcntl(h2o_socket_get_fd(s->client), F_DUPFD_CLOEXEC, 0)) == -1) {
        close(s->pipe_fds[0]);
        close(s->pipe_fds[1]);
        return -1;
    }
    (void)fcntl(s->pipe_fds[1], F_SETPIPE_SZ, SPLICE_PIPE_BYTES);
    size = fcntl(s->pipe_fds[1], F_GETPIPE_SZ);
    s->pipe_size = size > 0 ? (size_t)size : 4096;
    s->watch = h2o_evloop_socket_create(ex->proxy->ctx->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    s->watch->data = ex;
    return 0;
}

int gw_splice_try(gw_exchange_t *ex)
{
    gw_splice_t *s = &ex->splice;

    if (!s->wanted || ex->sock == NULL || ex->sock->input->size != 0 || ex->sending.buf->size != 0 || ex->rest->size != 0)
        return 0;
    s->wanted = 0;
    if (ex->res.body_error || h2o_socket_is_writing(s->client) || open_pipe(ex) != 0)
        return 0;
    s->active = 1;
    s->in_pipe = 0;
    GW_PROXY_COUNT(ex->proxy, spliced_responses, 1);
    h2o_socket_read_stop(ex->sock);
    h2o_socket_dont_read(ex->sock, 1);
    setsockopt(h2o_socket_get_fd(ex->sock), SOL_SOCKET, SO_RCVBUF, &(int){SPLICE_UPSTREAM_RCVBUF}, sizeof(int));
    ex->sock->data = ex;
    pump(ex);
    return 1;
}
