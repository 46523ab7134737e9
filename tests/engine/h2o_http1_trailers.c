/*
 * libh2o patch 0550 on the vendored h2o master, without the gateway: the trailer section of an HTTP/1.1 chunked request body
 * reaches the handler in req->trailers (a body handed over whole and one streamed; the section in one write and byte by byte),
 * and a malformed, forbidden or oversized section is refused (400 or 431; unanswered when the body was streaming to the handler)
 * with the connection closed, so that the request glued after it in the same write is never served. Each case's request is followed
 * by "GET /after": served after a good section (its bytes were consumed exactly), never after a refused one. Exits 0, or names the
 * cases that failed and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>

#define OUT_MAX 8192
#define HEAD_MAX 1024 /* max_request_head_size: the request head and its trailer section together */

static h2o_req_t *to_answer; /* answered from answer_timer, outside h2o's callbacks */
static h2o_timer_t answer_timer;
static h2o_req_t *streamed; /* the request whose body streams to the handler */
static h2o_timer_t proceed_timer;
static char streamed_body[64];
static int on_write_req(void *ctx, int is_end_stream);
static size_t streamed_len;
static int streamed_seen;     /* a body streamed to the handler in this case */
static int streamed_answered; /* and its end reached the handler */

/* The answer says what the handler got: the body, "|", then each trailer as "name=value;" */
static void on_answer_timer(h2o_timer_t *timer)
{
    h2o_req_t *req = to_answer;
    h2o_iovec_t body = req->write_req.cb == on_write_req ? h2o_iovec_init(streamed_body, streamed_len) : req->entity;
    char *buf = h2o_mem_alloc_pool(&req->pool, char, OUT_MAX);
    size_t len = 0, i;

    (void)timer;
    if (h2o_memis(req->path.base, req->path.len, H2O_STRLIT("/after")))
        body = h2o_iovec_init(H2O_STRLIT("after"));
    if (body.len < 100) {
        memcpy(buf, body.base, body.len);
        len = body.len;
    }
    buf[len++] = '|';
    for (i = 0; i != req->trailers.size; ++i) {
        const h2o_header_t *h = req->trailers.entries + i;
        if (len + h->name->len + h->value.len + 2 > OUT_MAX)
            break;
        memcpy(buf + len, h->name->base, h->name->len);
        len += h->name->len;
        buf[len++] = '=';
        memcpy(buf + len, h->value.base, h->value.len);
        len += h->value.len;
        buf[len++] = ';';
    }
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = len;
    h2o_send_inline(req, buf, len);
}

static void on_proceed_timer(h2o_timer_t *timer)
{
    (void)timer;
    if (streamed->proceed_req != NULL) /* NULL once the request is refused */
        streamed->proceed_req(streamed, NULL);
}

static void keep_chunk(h2o_iovec_t chunk)
{
    if (streamed_len + chunk.len <= sizeof(streamed_body)) {
        memcpy(streamed_body + streamed_len, chunk.base, chunk.len);
        streamed_len += chunk.len;
    }
}

static int on_write_req(void *ctx, int is_end_stream)
{
    h2o_req_t *req = ctx;

    keep_chunk(req->entity);
    if (is_end_stream) {
        streamed_answered = 1;
        to_answer = req;
        h2o_timer_link(req->conn->ctx->loop, 0, &answer_timer);
    } else {
        h2o_timer_link(req->conn->ctx->loop, 0, &proceed_timer);
    }
    return 0;
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    if (req->proceed_req != NULL) {
        /* /stream's body, still arriving: its first chunk is req->entity */
        streamed = req;
        streamed_seen = 1;
        req->write_req.cb = on_write_req;
        req->write_req.ctx = req;
        keep_chunk(req->entity);
        h2o_timer_link(req->conn->ctx->loop, 0, &proceed_timer);
        return 0;
    }
    to_answer = req;
    h2o_timer_link(req->conn->ctx->loop, 0, &answer_timer);
    return 0;
}

typedef struct st_case_t {
    const char *name;
    const char *path;        /* "/whole" (the handler takes whole bodies) or "/stream" (it streams them) */
    const char *trailers;    /* the trailer section, its empty line included */
    int split;               /* 0: the request in one write; 1: byte by byte; 2: the body's end in a second write */
    const char *want_status; /* "HTTP/1.1 200 OK", the refusal, or "" (closed unanswered) */
    const char *want_body;   /* what the handler got (a 200's body), or NULL */
} case_t;

static char big_section[2 * HEAD_MAX];

static const case_t cases[] = {
    {"whole body", "/whole", "X-A: 1\r\nx-checksum:  c0ffee \r\n\r\n", 0, "HTTP/1.1 200 OK", "hello|x-a=1;x-checksum=c0ffee;"},
    {"whole body, byte by byte", "/whole", "X-A: 1\r\nX-B: two\r\n\r\n", 1, "HTTP/1.1 200 OK", "hello|x-a=1;x-b=two;"},
    {"streamed body", "/stream", "X-A: 1\r\nX-B: two\r\n\r\n", 2, "HTTP/1.1 200 OK", "hello|x-a=1;x-b=two;"},
    {"streamed body, byte by byte", "/stream", "X-A: 1\r\n\r\n", 1, "HTTP/1.1 200 OK", "hello|x-a=1;"},
    {"no trailer", "/whole", "\r\n", 0, "HTTP/1.1 200 OK", "hello|"},
    {"no trailer, byte by byte", "/stream", "\r\n", 1, "HTTP/1.1 200 OK", "hello|"},
    {"content-length", "/whole", "Content-Length: 40\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"transfer-encoding", "/whole", "X-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"host", "/whole", "host: elsewhere\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"trailer", "/whole", "Trailer: x-a\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"connection", "/whole", "Connection: keep-alive\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    /* a body streaming to the handler: closed unanswered (an answer could cross the handler's) */
    {"connection, streamed", "/stream", "Connection: keep-alive\r\n\r\n", 2, "", NULL},
    {"folded line, streamed", "/stream", "X-A: 1\r\n more\r\n\r\n", 2, "", NULL},
    {"te", "/whole", "TE: trailers\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"folded line", "/whole", "X-A: 1\r\n more\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"bare LF", "/whole", "X-A: 1\nX-B: 2\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"bare LF ending the section", "/whole", "X-A: 1\r\n\n", 0, "HTTP/1.1 400 ", NULL},
    {"bare CR", "/whole", "X-A: 1\rX-B: 2\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"control character", "/whole", "X-A: 1\x01\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"space before the colon", "/whole", "X-A : 1\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"no colon", "/whole", "X-A\r\n\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"empty line not CR LF", "/whole", "\r\r\n", 0, "HTTP/1.1 400 ", NULL},
    {"over the head bound", "/whole", big_section, 0, "HTTP/1.1 431 ", NULL},
    {"over the head bound, streamed", "/stream", big_section, 2, "", NULL},
};

static const char after[] = "GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

/* Runs one case on a new connection: the request, the trailer section and "GET /after" glued after it, then reads until the
 * server closes. 0 when the answers are what the case wants. */
static int run_case(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx, const case_t *c)
{
    static char request[4 * HEAD_MAX], out[OUT_MAX];
    size_t len = 0, sent = 0, first, out_len = 0;
    int fds[2], turns, closed = 0, ok;
    ssize_t n = -1;

    len = (size_t)snprintf(request, sizeof(request),
                           "POST %s HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", c->path);
    first = len;
    len += (size_t)snprintf(request + len, sizeof(request) - len, "0\r\n%s%s", c->trailers, after);
    streamed_len = 0;
    streamed_seen = 0;
    streamed_answered = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        return -1;
    h2o_accept(accept_ctx, h2o_evloop_socket_create(loop, fds[0], 0));
    for (turns = 0; !closed && turns != 2000; ++turns) {
        size_t upto = c->split == 1 ? sent + 1 : c->split == 2 && turns < 5 ? first : len;
        if (sent < upto && upto <= len && (n = write(fds[1], request + sent, upto - sent)) > 0)
            sent += (size_t)n;
        h2o_evloop_run(loop, sent == len ? 10 : 0);
        while (out_len < OUT_MAX - 1 && (n = read(fds[1], out + out_len, OUT_MAX - 1 - out_len)) > 0)
            out_len += (size_t)n;
        closed = n == 0;
    }
    out[out_len] = '\0';
    close(fds[1]);
    for (turns = 0; turns != 5; ++turns)
        h2o_evloop_run(loop, 0);

    ok = closed && strncmp(out, c->want_status, strlen(c->want_status)) == 0;
    if (c->want_body != NULL) {
        /* the answer's body, then /after's: the section's bytes were taken exactly */
        const char *body = strstr(out, "\r\n\r\n"), *second = body != NULL ? strstr(body, "HTTP/1.1 200 OK\r\n") : NULL;
        ok = ok && body != NULL && strncmp(body + 4, c->want_body, strlen(c->want_body)) == 0 && second != NULL &&
             strstr(second, "\r\n\r\nafter|") != NULL;
        ok = ok && streamed_seen == (c->split != 0 && strcmp(c->path, "/stream") == 0);
    } else {
        /* one answer at most, and nothing after the refused section was read as a request */
        ok = ok && (*c->want_status != '\0' ? strstr(out + 1, "HTTP/1.1 ") == NULL : out_len == 0) && !streamed_answered;
    }
    if (!ok)
        fprintf(stderr, "h1 trailers: %s: %s (%s), want %s%s%s; got %zu bytes: %.400s\n", c->name, c->path,
                c->split == 0   ? "one write"
                : c->split == 1 ? "byte by byte"
                                : "two writes",
                c->want_status, c->want_body != NULL ? " then " : "",
                c->want_body != NULL ? c->want_body : " and the connection closed", out_len, out);
    return ok ? 0 : -1;
}

int main(void)
{
    h2o_globalconf_t conf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_loop_t *loop = h2o_evloop_create();
    h2o_hostconf_t *host;
    h2o_handler_t *handler;
    size_t i, failed = 0;

    /* 30 fields of 40 bytes: over what the head leaves of HEAD_MAX, ended */
    for (i = 0; i != 30; ++i)
        snprintf(big_section + i * 40, 41, "x-field-%02zu: %-26s\r\n", i, "v");
    memcpy(big_section + 30 * 40, "\r\n", 3);

    h2o_config_init(&conf);
    conf.max_request_head_size = HEAD_MAX;
    host = h2o_config_register_host(&conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    handler = h2o_create_handler(h2o_config_register_path(host, "/whole", 0), sizeof(*handler));
    handler->on_req = on_req;
    handler = h2o_create_handler(h2o_config_register_path(host, "/after", 0), sizeof(*handler));
    handler->on_req = on_req;
    handler = h2o_create_handler(h2o_config_register_path(host, "/stream", 0), sizeof(*handler));
    handler->on_req = on_req;
    handler->supports_request_streaming = 1;
    h2o_context_init(&ctx, loop, &conf);
    memset(&accept_ctx, 0, sizeof(accept_ctx));
    accept_ctx.ctx = &ctx;
    accept_ctx.hosts = conf.hosts;
    h2o_timer_init(&answer_timer, on_answer_timer);
    h2o_timer_init(&proceed_timer, on_proceed_timer);

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i)
        if (run_case(loop, &accept_ctx, cases + i) != 0)
            ++failed;
    if (failed != 0)
        return 1;
    printf("h1 trailers: %zu cases\n", i);
    h2o_context_dispose(&ctx);
    h2o_config_dispose(&conf);
    h2o_evloop_destroy(loop);
    return 0;
}
