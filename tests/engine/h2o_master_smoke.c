/*
 * The vendored h2o master (third_party/h2o-master, issue 40), linked and
 * run: a configuration with one handler, a context on an evloop, a timer
 * of master's timer wheel, one HTTP/1.1 request over a socketpair answered
 * through h2o_accept, and one HTTP/2 request (prior knowledge) that is
 * reset. It checks our patches on master too (patches/series): the handler
 * finds the accepted socket through get_socket (0001), the socket's
 * on_close runs while its descriptor is open (0220), and the HTTP/2
 * request sees the client's window and is reset with the code given
 * (0230), the server's SETTINGS leave out extended CONNECT when told to
 * (0003) and a :protocol is then a stream error (0530), a streamed request's trailers reach its handler in req->trailers
 * at the body's end (0540), a read callback sees the bytes of its own read (0002), and a
 * keep-alive HTTP/1.1 connection whose requests are answered a loop turn
 * later (as the gateway answers, once its sandbox has) makes no epoll_ctl
 * between requests (0200; epoll_ctl is counted through the linker's
 * --wrap). The library's own test, without the gateway (the unit and
 * engine suites). Prints h2o's version and exits 0, or names what failed
 * and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include <h2o/http2.h>
#include <h2o/version.h>

#define RESPONSE_MAX 1024
#define H2_STREAM_ID 1

static int timer_fired;
static h2o_socket_t *accepted;       /* the server side of the current socketpair */
static int accepted_fd = -1;         /* its descriptor */
static int socket_found;             /* the handler found `accepted` through get_socket (0001) */
static int closed_with_fd_open = -1; /* on_close found the descriptor open (1) or closed (0) (0220) */
static ssize_t h2_window = -1;       /* what h2o_http2_get_send_window said (0230) */
static h2o_req_t *h2_req;            /* the HTTP/2 request, reset from a timer */
static h2o_timer_t h2_reset_timer;
static h2o_req_t *later_req; /* an HTTP/1 request for /later, answered from a timer */
static h2o_timer_t later_timer;
static h2o_req_t *streamed_req;   /* the HTTP/2 POST to /trailers, its body streamed to the handler */
static h2o_timer_t proceed_timer; /* asks h2o for its body's next chunk, outside h2o's callback */
static int trailers_seen = -1;    /* at the body's end: x-trailer in req->trailers and not in req->headers (1) or not (0) */
static int epoll_ctl_calls;

/* every epoll_ctl of the library (-Wl,--wrap=epoll_ctl) */
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
    ++epoll_ctl_calls;
    return __real_epoll_ctl(epfd, op, fd, event);
}

static void on_timer(h2o_timer_t *timer)
{
    (void)timer;
    timer_fired = 1;
}

static void on_close(void *data)
{
    (void)data;
    closed_with_fd_open = fcntl(accepted_fd, F_GETFD) != -1;
}

/* Resets the HTTP/2 request outside its handler: h2o_http2_reset_request
 * disposes the request. */
static void on_h2_reset_timer(h2o_timer_t *timer)
{
    (void)timer;
    h2_window = h2o_http2_get_send_window(h2_req);
    h2o_http2_reset_request(h2_req, H2O_HTTP2_ERROR_CANCEL);
}

static void on_proceed_timer(h2o_timer_t *timer)
{
    (void)timer;
    streamed_req->proceed_req(streamed_req, NULL);
}

/* The streamed body's chunks (0540): at its end the trailers are in req->trailers; then the stream is reset, as h2_req is. */
static int on_write_req(void *ctx, int is_end_stream)
{
    h2o_req_t *req = ctx;

    if (!is_end_stream) {
        h2o_timer_link(req->conn->ctx->loop, 0, &proceed_timer);
        return 0;
    }
    trailers_seen = h2o_find_header_by_str(&req->trailers, H2O_STRLIT("x-trailer"), -1) != -1 &&
                    h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-trailer"), -1) == -1;
    h2_req = req;
    h2o_timer_link(req->conn->ctx->loop, 0, &h2_reset_timer);
    return 0;
}

static void answer(h2o_req_t *req)
{
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = sizeof("smoke\n") - 1; /* or master's HTTP/1 chunks the body */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain"));
    h2o_send_inline(req, H2O_STRLIT("smoke\n"));
}

static void on_later_timer(h2o_timer_t *timer)
{
    (void)timer;
    answer(later_req);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    socket_found = req->conn->callbacks->get_socket != NULL && req->conn->callbacks->get_socket(req->conn) == accepted;
    if (req->version >= 0x200 && req->proceed_req != NULL) {
        /* a body that streams (only /trailers has one): its first chunk is req->entity */
        streamed_req = req;
        req->write_req.cb = on_write_req;
        req->write_req.ctx = req;
        h2o_timer_link(req->conn->ctx->loop, 0, &proceed_timer);
    } else if (req->version >= 0x200) {
        h2_req = req;
        h2o_timer_link(req->conn->ctx->loop, 0, &h2_reset_timer);
    } else if (h2o_memis(req->path.base, req->path.len, H2O_STRLIT("/later"))) {
        later_req = req;
        h2o_timer_link(req->conn->ctx->loop, 1, &later_timer);
    } else {
        answer(req);
    }
    return 0;
}

/* Runs `loop` until `*done` or 200 turns of at most 10 ms; 0 when done. */
static int run_until(h2o_loop_t *loop, const int *done)
{
    int turns;

    for (turns = 0; !*done && turns != 200; ++turns)
        if (h2o_evloop_run(loop, 10) != 0 && errno != EINTR)
            return -1;
    return *done ? 0 : -1;
}

/* Reads what the server wrote to `fd` (non-blocking) into `buf`; sets
 * *done once the body is in. */
static void read_answer(int fd, char *buf, size_t *len, int *done)
{
    ssize_t n;

    while (*len < RESPONSE_MAX - 1 && (n = read(fd, buf + *len, RESPONSE_MAX - 1 - *len)) > 0)
        *len += (size_t)n;
    buf[*len] = '\0';
    *done = strstr(buf, "\r\n\r\nsmoke\n") != NULL;
}

static size_t last_reads[2];
static uint64_t total_read;
static int reads;

static void on_read(h2o_socket_t *sock, const char *err)
{
    if (err != NULL || reads == 2)
        return;
    last_reads[reads++] = sock->bytes_last_read;
    total_read = sock->bytes_read;
}

/* Two writes to a socket, each read on its own: each read callback sees its
 * own count (0002), bytes_read the total. */
static int read_twice(h2o_loop_t *loop)
{
    int fds[2], turns, ok;
    h2o_socket_t *sock;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        return -1;
    sock = h2o_evloop_socket_create(loop, fds[0], 0);
    h2o_socket_read_start(sock, on_read);
    if (write(fds[1], "abc", 3) != 3)
        return -1;
    for (turns = 0; reads == 0 && turns != 200; ++turns)
        h2o_evloop_run(loop, 10);
    if (write(fds[1], "defgh", 5) != 5)
        return -1;
    for (turns = 0; reads == 1 && turns != 200; ++turns)
        h2o_evloop_run(loop, 10);
    ok = reads == 2 && last_reads[0] == 3 && last_reads[1] == 5 && total_read == 8;
    if (!ok)
        fprintf(stderr, "smoke: reads %d, last reads %zu and %zu (want 3 and 5), total %llu (want 8)\n", reads, last_reads[0],
                last_reads[1], (unsigned long long)total_read);
    h2o_socket_close(sock);
    close(fds[1]);
    return ok ? 0 : -1;
}

/* Accepts the server side of a new socketpair, writes `request` on the
 * client side; returns the client side's descriptor, -1 on failure. */
static int connect_pair(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx, const void *request, size_t len)
{
    int fds[2];

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        return -1;
    accepted_fd = fds[0];
    accepted = h2o_evloop_socket_create(loop, fds[0], 0);
    accepted->on_close.cb = on_close;
    h2o_accept(accept_ctx, accepted);
    if (write(fds[1], request, len) != (ssize_t)len) {
        close(fds[1]);
        return -1;
    }
    return fds[1];
}

static int serve_http1(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    static const char request[] = "GET / HTTP/1.1\r\nHost: smoke\r\nConnection: close\r\n\r\n";
    char answer[RESPONSE_MAX];
    size_t len = 0;
    int fd, done = 0, turns;

    if ((fd = connect_pair(loop, accept_ctx, request, sizeof(request) - 1)) == -1)
        return -1;
    for (turns = 0; !(done && closed_with_fd_open != -1) && turns != 200; ++turns) {
        if (h2o_evloop_run(loop, 10) != 0 && errno != EINTR)
            break;
        read_answer(fd, answer, &len, &done);
    }
    close(fd);
    if (!done || strncmp(answer, "HTTP/1.1 200 OK\r\n", 17) != 0) {
        fprintf(stderr, "smoke: no 200 answer, got %zu bytes: %.200s\n", len, answer);
        return -1;
    }
    if (!socket_found || closed_with_fd_open != 1) {
        fprintf(stderr, "smoke: HTTP/1: get_socket %s the accepted socket; on_close %s\n", socket_found ? "gave" : "did not give",
                closed_with_fd_open == 1 ? "ran with the descriptor open" : "did not run with the descriptor open");
        return -1;
    }
    return 0;
}

/* Sends `request` on `fd` (unless NULL: already sent) and runs the loop until its answer is in and a few turns
 * more (the socket state changes the answer made); 0 when answered. */
static int ask(h2o_loop_t *loop, int fd, const char *request)
{
    char buf[RESPONSE_MAX];
    size_t len = 0;
    int done = 0, turns;

    if (request != NULL && write(fd, request, strlen(request)) != (ssize_t)strlen(request))
        return -1;
    for (turns = 0; !done && turns != 200; ++turns) {
        h2o_evloop_run(loop, 10);
        read_answer(fd, buf, &len, &done);
    }
    for (turns = 0; turns != 3; ++turns)
        h2o_evloop_run(loop, 0);
    return done ? 0 : -1;
}

/* Two keep-alive requests on one connection, each answered a loop turn
 * later: the server socket stops reading while a request is handled and
 * reads again after its answer, and that costs no epoll_ctl (0200; 2 per
 * request without it). */
static int serve_keepalive(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    static const char request[] = "GET /later HTTP/1.1\r\nHost: smoke\r\n\r\n";
    int fd, calls = -1, turns;

    closed_with_fd_open = -1;
    if ((fd = connect_pair(loop, accept_ctx, request, sizeof(request) - 1)) == -1)
        return -1;
    if (ask(loop, fd, NULL) == 0) {
        calls = epoll_ctl_calls;
        calls = ask(loop, fd, request) == 0 ? epoll_ctl_calls - calls : -1;
    }
    close(fd);
    /* the server sees the client leave and disposes the connection (no timer may stay linked) */
    for (turns = 0; closed_with_fd_open == -1 && turns != 200; ++turns)
        h2o_evloop_run(loop, 10);
    if (calls != 0) {
        fprintf(stderr, "smoke: a keep-alive request %s\n", calls < 0 ? "was not answered" : "made epoll_ctl calls");
        if (calls > 0)
            fprintf(stderr, "smoke: %d epoll_ctl calls between two keep-alive requests (want 0)\n", calls);
        return -1;
    }
    return 0;
}

/* 1 when `buf` holds a whole RST_STREAM frame for H2_STREAM_ID with
 * `code`, walking the frames from the start. */
static int has_rst_stream(const uint8_t *buf, size_t len, uint32_t code)
{
    size_t at = 0, flen;

    while (at + 9 <= len) {
        flen = (size_t)buf[at] << 16 | (size_t)buf[at + 1] << 8 | buf[at + 2];
        if (at + 9 + flen > len)
            break;
        if (buf[at + 3] == 3 && flen == 4 && (buf[at + 5] & 0x7f) == 0 && buf[at + 6] == 0 && buf[at + 7] == 0 &&
            buf[at + 8] == H2_STREAM_ID &&
            ((uint32_t)buf[at + 9] << 24 | (uint32_t)buf[at + 10] << 16 | (uint32_t)buf[at + 11] << 8 | buf[at + 12]) == code)
            return 1;
        at += 9 + flen;
    }
    return 0;
}

/* 1 when the server's first SETTINGS frame (not an ACK) in `buf` has the setting `id`. */
static int settings_has(const uint8_t *buf, size_t len, unsigned id)
{
    size_t at = 0, flen, i;

    while (at + 9 <= len) {
        flen = (size_t)buf[at] << 16 | (size_t)buf[at + 1] << 8 | buf[at + 2];
        if (at + 9 + flen > len)
            break;
        if (buf[at + 3] == 4 && (buf[at + 4] & 1) == 0) {
            for (i = 0; i + 6 <= flen; i += 6)
                if (((unsigned)buf[at + 9 + i] << 8 | buf[at + 10 + i]) == id)
                    return 1;
            return 0;
        }
        at += 9 + flen;
    }
    return 0;
}

/* Sends `request` (an HTTP/2 connection's first bytes) on a new connection and runs the loop until the answer (at most
 * RESPONSE_MAX bytes, in answer and *len) has RST_STREAM(`code`) for H2_STREAM_ID; then closes the connection and runs the
 * loop until the server has disposed of it. 1 when the reset was seen, 0 when not, -1 when no connection was had. */
static int h2_until_reset(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx, const uint8_t *request, size_t request_len, uint32_t code,
                          uint8_t *answer, size_t *len)
{
    ssize_t n;
    int fd, done = 0, turns;

    *len = 0;
    closed_with_fd_open = -1;
    if ((fd = connect_pair(loop, accept_ctx, request, request_len)) == -1)
        return -1;
    for (turns = 0; !done && turns != 200; ++turns) {
        if (h2o_evloop_run(loop, 10) != 0 && errno != EINTR)
            break;
        while (*len < RESPONSE_MAX && (n = read(fd, answer + *len, RESPONSE_MAX - *len)) > 0)
            *len += (size_t)n;
        done = has_rst_stream(answer, *len, code);
    }
    close(fd);
    /* the server sees the client leave and disposes the connection (no timer may stay linked) */
    for (turns = 0; closed_with_fd_open == -1 && turns != 200; ++turns)
        if (h2o_evloop_run(loop, 10) != 0 && errno != EINTR)
            break;
    return done;
}

static int serve_http2(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    /* the preface, an empty SETTINGS, and HEADERS (END_STREAM, END_HEADERS) on stream 1 with :method GET, :scheme http,
     * :path / (static table indexes 2, 6, 4) and :authority smoke (literal, name index 1) */
    static const uint8_t request[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                     "\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                                     "\x00\x00\x0a\x01\x05\x00\x00\x00\x01\x82\x86\x84\x41\x05smoke";
    uint8_t answer[RESPONSE_MAX];
    size_t len;
    int done;

    socket_found = 0;
    if ((done = h2_until_reset(loop, accept_ctx, request, sizeof(request) - 1, H2O_HTTP2_ERROR_CANCEL * -1, answer, &len)) == -1)
        return -1;
    if (settings_has(answer, len, H2O_HTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL)) {
        fprintf(stderr, "smoke: HTTP/2: SETTINGS_ENABLE_CONNECT_PROTOCOL advertised with http2.no_extended_connect set\n");
        return -1;
    }
    if (!done || !socket_found || h2_window != 65535 || closed_with_fd_open != 1) {
        fprintf(
            stderr,
            "smoke: HTTP/2: RST_STREAM(CANCEL) %s, get_socket %s the accepted socket, send window %zd (want 65535), on_close %s\n",
            done ? "seen" : "not seen", socket_found ? "gave" : "did not give", h2_window,
            closed_with_fd_open == 1 ? "ran with the descriptor open" : "did not run with the descriptor open");
        return -1;
    }
    return 0;
}

/* An extended CONNECT (:protocol websocket) on a connection that did not offer it (http2.no_extended_connect) is malformed:
 * RST_STREAM(PROTOCOL_ERROR), and the handler never sees it (0530). */
static int refuse_extended_connect(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    /* the preface, an empty SETTINGS, and HEADERS (END_HEADERS, the stream left open) on stream 1 with :method CONNECT
     * (literal, name index 2), :scheme http, :path /, :authority smoke and :protocol websocket (literal, new name) */
    static const uint8_t request[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                     "\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                                     "\x00\x00\x27\x01\x04\x00\x00\x00\x01"
                                     "\x42\x07"
                                     "CONNECT\x86\x84\x41\x05smoke\x00\x09:protocol\x09websocket";
    uint8_t answer[RESPONSE_MAX];
    size_t len;
    int done;

    h2_req = NULL;
    if ((done = h2_until_reset(loop, accept_ctx, request, sizeof(request) - 1, H2O_HTTP2_ERROR_PROTOCOL * -1, answer, &len)) == -1)
        return -1;
    if (!done || h2_req != NULL) {
        fprintf(stderr, "smoke: HTTP/2: an extended CONNECT not offered got %s%s\n",
                done ? "RST_STREAM(PROTOCOL_ERROR)" : "no RST_STREAM(PROTOCOL_ERROR)",
                h2_req != NULL ? " and reached the handler" : "");
        return -1;
    }
    return 0;
}

/* A POST whose body streams to the handler (its first DATA frame does not end the stream) and ends with trailers: the
 * handler finds them in req->trailers, not req->headers, when its write_req sees the body's end (0540). */
static int streamed_trailers(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    /* the preface, an empty SETTINGS; HEADERS (END_HEADERS) on stream 1 with :method POST, :scheme http, :path /trailers
     * (literal, name index 4) and :authority smoke; DATA "hi"; HEADERS (END_STREAM, END_HEADERS) with x-trailer: 1 (literal,
     * new name) */
    static const uint8_t request[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                     "\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                                     "\x00\x00\x14\x01\x04\x00\x00\x00\x01\x83\x86\x44\x09/trailers\x41\x05smoke"
                                     "\x00\x00\x02\x00\x00\x00\x00\x00\x01hi"
                                     "\x00\x00\x0d\x01\x05\x00\x00\x00\x01\x00\x09x-trailer\x01\x31";
    uint8_t answer[RESPONSE_MAX];
    size_t len;
    int done;

    if ((done = h2_until_reset(loop, accept_ctx, request, sizeof(request) - 1, H2O_HTTP2_ERROR_CANCEL * -1, answer, &len)) == -1)
        return -1;
    if (!done || trailers_seen != 1) {
        fprintf(stderr, "smoke: HTTP/2: a streamed body's trailers %s (its stream %s)\n",
                trailers_seen == -1 ? "never ended the body for the handler"
                : trailers_seen     ? "reached req->trailers"
                                    : "were not in req->trailers (or were in req->headers)",
                done ? "reset" : "not reset");
        return -1;
    }
    return 0;
}

int main(void)
{
    h2o_globalconf_t conf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_timer_t timer;
    h2o_loop_t *loop = h2o_evloop_create();
    h2o_hostconf_t *host;
    h2o_pathconf_t *path;
    h2o_handler_t *handler;

    h2o_config_init(&conf);
    conf.http2.no_extended_connect = 1; /* 0003 and 0530: extended CONNECT not offered */
    host = h2o_config_register_host(&conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    path = h2o_config_register_path(host, "/", 0);
    handler = h2o_create_handler(path, sizeof(h2o_handler_t));
    handler->on_req = on_req;
    handler->supports_request_streaming = 1; /* only /trailers has a body (0540) */
    h2o_context_init(&ctx, loop, &conf);
    memset(&accept_ctx, 0, sizeof(accept_ctx));
    accept_ctx.ctx = &ctx;
    accept_ctx.hosts = conf.hosts;

    h2o_timer_init(&timer, on_timer);
    h2o_timer_init(&h2_reset_timer, on_h2_reset_timer);
    h2o_timer_init(&later_timer, on_later_timer);
    h2o_timer_init(&proceed_timer, on_proceed_timer);
    h2o_timer_link(loop, 1, &timer);
    if (run_until(loop, &timer_fired) != 0) {
        fprintf(stderr, "smoke: the timer did not fire\n");
        return 1;
    }
    if (serve_http1(loop, &accept_ctx) != 0 || serve_http2(loop, &accept_ctx) != 0 ||
        refuse_extended_connect(loop, &accept_ctx) != 0 || streamed_trailers(loop, &accept_ctx) != 0 || read_twice(loop) != 0 ||
        serve_keepalive(loop, &accept_ctx) != 0)
        return 1;
    printf("h2o %s (libh2o %s): context, loop, timer, one HTTP/1.1 request, one HTTP/2 request reset, keep-alive\n", H2O_VERSION,
           H2O_LIBRARY_VERSION);
    h2o_context_dispose(&ctx);
    h2o_config_dispose(&conf);
    h2o_evloop_destroy(loop); /* frees the closed sockets: LeakSanitizer sees none */
    return 0;
}
