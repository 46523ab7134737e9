/*
 * The vendored h2o master (third_party/h2o-master, issue 40 phase 1), linked
 * and run: a configuration with one handler, a context on an evloop, a
 * timer of master's timer wheel, and one HTTP/1.1 request over a socketpair
 * answered through h2o_accept. Built only with -Dengine=h2o-master, where it
 * is the one test (the gateway itself is not ported yet). Prints h2o's
 * version and exits 0, or names what failed and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include <h2o/version.h>

#define RESPONSE_MAX 1024

static int timer_fired;

static void on_timer(h2o_timer_t *timer)
{
    (void)timer;
    timer_fired = 1;
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = sizeof("smoke\n") - 1; /* or master's HTTP/1 chunks the body */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain"));
    h2o_send_inline(req, H2O_STRLIT("smoke\n"));
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

static int serve_one(h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    static const char request[] = "GET / HTTP/1.1\r\nHost: smoke\r\nConnection: close\r\n\r\n";
    char answer[RESPONSE_MAX];
    size_t len = 0;
    int fds[2], done = 0, turns;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        return -1;
    h2o_accept(accept_ctx, h2o_evloop_socket_create(loop, fds[0], 0));
    if (write(fds[1], request, sizeof(request) - 1) != (ssize_t)(sizeof(request) - 1))
        return -1;
    for (turns = 0; !done && turns != 200; ++turns) {
        if (h2o_evloop_run(loop, 10) != 0 && errno != EINTR)
            break;
        read_answer(fds[1], answer, &len, &done);
    }
    close(fds[1]);
    if (!done || strncmp(answer, "HTTP/1.1 200 OK\r\n", 17) != 0) {
        fprintf(stderr, "smoke: no 200 answer, got %zu bytes: %.200s\n", len, answer);
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

    h2o_config_init(&conf);
    host = h2o_config_register_host(&conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    path = h2o_config_register_path(host, "/", 0);
    h2o_create_handler(path, sizeof(h2o_handler_t))->on_req = on_req;
    h2o_context_init(&ctx, loop, &conf);
    memset(&accept_ctx, 0, sizeof(accept_ctx));
    accept_ctx.ctx = &ctx;
    accept_ctx.hosts = conf.hosts;

    h2o_timer_init(&timer, on_timer);
    h2o_timer_link(loop, 1, &timer);
    if (run_until(loop, &timer_fired) != 0) {
        fprintf(stderr, "smoke: the timer did not fire\n");
        return 1;
    }
    if (serve_one(loop, &accept_ctx) != 0)
        return 1;
    printf("h2o %s (libh2o %s): context, loop, timer and one HTTP/1.1 request\n", H2O_VERSION, H2O_LIBRARY_VERSION);
    h2o_context_dispose(&ctx);
    h2o_config_dispose(&conf);
    h2o_evloop_destroy(loop); /* frees the closed sockets: LeakSanitizer sees none */
    return 0;
}
