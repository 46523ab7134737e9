/*
 * How long an exchange may wait (CONTRACT.md, Long calls): the app's
 * silences, by the port's timeout:<n> when the record sets one, and the
 * HTTP/1 client that leaves while its call runs. A port's limit is any
 * number of milliseconds, so it gets no gw_timeout_t of its own (the loop
 * walks each one on every turn): its exchanges tick on the shared one-second
 * timeout and compare their silence with the limit, firing up to a second
 * late. Exchanges without a timeout:<n> never come here.
 */
#include <stdio.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http2.h>
#include "common/engine.h"
#include "upstream/exchange.h"
#include "upstream/h2c.h"

static void on_port_tick(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);
    gw_proxy_t *p = ex->proxy;

    if (h2o_now(p->ctx->loop) - ex->silent_since >= ex->timeout_ms) {
        ex->silence_cb(entry);
        return;
    }
    gw_timer_link(p->ctx->loop, p->port_tick.timeout, &ex->timer);
}

void gw_exchange_set_port_silence(gw_exchange_t *ex, gw_timer_cb cb)
{
    gw_proxy_t *p = ex->proxy;

    ex->silent_since = h2o_now(p->ctx->loop);
    ex->silence_cb = cb;
    /* ticking already: the next tick measures from now */
    if (gw_timer_is_linked(&ex->timer) && ex->timer.cb == on_port_tick)
        return;
    gw_exchange_clear_timer(ex);
    ex->timer.cb = on_port_tick;
    gw_timer_link(p->ctx->loop, p->port_tick.timeout, &ex->timer);
}

void gw_exchange_silence_detail(gw_exchange_t *ex, gw_silence_t which, char *buf, size_t bufsize)
{
    gw_proxy_silence_detail(ex->proxy, ex->timeout_ms, ex->port, which, buf, bufsize);
}

void gw_proxy_silence_detail(const gw_proxy_t *p, uint32_t timeout_ms, uint16_t port, gw_silence_t which, char *buf, size_t bufsize)
{
    const char *what = which == GW_SILENCE_FIRST_BYTE ? "before the response head" : "between body bytes";

    if (timeout_ms != 0) {
        snprintf(buf, bufsize,
                 "The limit that fired is this port's: %u ms of silence %s, set by timeout:%u in the sandbox's record; the "
                 "platform raises it there.",
                 (unsigned)timeout_ms, what, (unsigned)port);
    } else {
        snprintf(buf, bufsize,
                 "The limit that fired is the gateway's default, upstream.%s_timeout_ms = %llu ms of silence %s; to raise it "
                 "for this port, the platform sets timeout:%u (milliseconds) in the sandbox's record.",
                 which == GW_SILENCE_FIRST_BYTE ? "first_byte" : "idle",
                 (unsigned long long)(which == GW_SILENCE_FIRST_BYTE ? p->conf.first_byte_timeout_ms : p->conf.idle_timeout_ms),
                 what, (unsigned)port);
    }
}

int gw_exchange_is_streamed(h2o_req_t *req)
{
    /* the types that carry their own heartbeats (CONTRACT.md, Long calls), after "application/"; "+" ends a prefix of
     * +suffix forms. A response of any other type pays one header lookup and a character or two. */
    static const char app[] = "application/", sse[] = "text/event-stream";
    static const h2o_iovec_t subtypes[] = {{H2O_STRLIT("x-ndjson")},     {H2O_STRLIT("jsonl")},         {H2O_STRLIT("json-seq")},
                                           {H2O_STRLIT("connect+json")}, {H2O_STRLIT("connect+proto")}, {H2O_STRLIT("grpc")},
                                           {H2O_STRLIT("grpc+")}};
    ssize_t i = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
    size_t t;

    if (i == -1)
        return 0;
    h2o_iovec_t v = req->res.headers.entries[i].value;
    if (v.len >= sizeof(sse) - 1 && h2o_lcstris(v.base, sizeof(sse) - 1, sse, sizeof(sse) - 1))
        return v.len == sizeof(sse) - 1 || v.base[sizeof(sse) - 1] == ';' || v.base[sizeof(sse) - 1] == ' ' ? 2 : 0;
    if (v.len <= sizeof(app) - 1 || !h2o_lcstris(v.base, sizeof(app) - 1, app, sizeof(app) - 1))
        return 0;
    v.base += sizeof(app) - 1;
    v.len -= sizeof(app) - 1;
    for (t = 0; t != sizeof(subtypes) / sizeof(subtypes[0]); ++t) {
        size_t n = subtypes[t].len;
        if (v.len < n || !h2o_lcstris(v.base, n, subtypes[t].base, n))
            continue;
        if (subtypes[t].base[n - 1] == '+' ? v.len > n : (v.len == n || v.base[n] == ';' || v.base[n] == ' '))
            return 1;
    }
    return 0;
}

/* Ends an exchange whose head has not come: the connection to the sandbox is
 * closed now (never pooled); HTTP/2 resets the stream, HTTP/1 gets an answer
 * nobody reads on a socket shut first, so that h2o's write fails and it
 * closes the connection. Either way the access log says `status`. Last use
 * of ex. */
static void end_before_head(gw_exchange_t *ex, int status, const char *reason)
{
    h2o_req_t *req = ex->req;
    h2o_socket_t *sock;

    gw_exchange_detach_upstream(ex);
    ex->state = GW_EX_OVER;
    if (req->version >= 0x200) {
        /* the status is the access log's: a request without one is only summed as abandoned */
        req->res.status = status;
        req->res.reason = reason;
        h2o_http2_reset_request(req, H2O_HTTP2_ERROR_INTERNAL); /* patch 0230 */
        return;
    }
    if ((sock = gw_exchange_client_socket(ex)) != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
    req->http1_is_persistent = 0;
    req->res.status = status;
    req->res.reason = reason;
    h2o_send_inline(req, "", 0);
}

/* The HTTP/1 client closed (FIN or reset) while its call runs: the
 * connection to the sandbox is closed now, never pooled, so that the app
 * sees its caller leave. */
static void on_client_hangup(gw_hangup_watch_t *watch)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, hangup, watch);

    switch (ex->state) {
    case GW_EX_CONNECTING:
    case GW_EX_AWAIT_HEAD:
        /* a request the app has whole is orphaned as an HTTP/2 stream's would be (orphan.c): the app reads EOF now,
         * and its slots are held until it answers; logged as nginx logs a client that closed its request: 499 */
        gw_exchange_unwatch_client(ex);
        gw_orphan_adopt(ex);
        end_before_head(ex, 499, "Client Closed Request");
        break;
    case GW_EX_BODY:
        gw_exchange_reset(ex, GW_CUT_NONE);
        break;
    case GW_EX_OVER:
        break;
    }
}

static void on_watch_delay(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, watch_timer, entry);

    ex->hangup.cb = on_client_hangup;
    gw_hangup_watch(ex->proxy->hangup, &ex->hangup, ex->req);
}

void gw_exchange_watch_client(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;

    /* HTTP/2: h2o reads the connection and disposes the request of a client that leaves */
    if (p->hangup == NULL || ex->req->version >= 0x200 || ex->is_websocket || ex->is_tcp)
        return;
    /* most exchanges are over before it: they never pay the epoll_ctl calls */
    ex->watch_timer.cb = on_watch_delay;
    gw_timer_link(p->ctx->loop, p->watch_delay.timeout, &ex->watch_timer);
}

void gw_exchange_unwatch_client(gw_exchange_t *ex)
{
    if (gw_timer_is_linked(&ex->watch_timer))
        gw_timer_unlink(&ex->watch_timer);
    gw_hangup_unwatch(ex->proxy->hangup, &ex->hangup);
}

void gw_proxy_cut_all(gw_proxy_t *p)
{
    gw_h2c_cut_all(p->h2c);
    while (!h2o_linklist_is_empty(&p->exchanges)) {
        gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, link, p->exchanges.next);
        /* off the list first: ending it may dispose it, or not yet */
        h2o_linklist_unlink(&ex->link);
        switch (ex->state) {
        case GW_EX_CONNECTING:
        case GW_EX_AWAIT_HEAD:
            gw_cut_note(ex->req, GW_CUT_SHUTDOWN);
            end_before_head(ex, 503, "Service Unavailable");
            break;
        case GW_EX_BODY:
            gw_exchange_cut(ex, GW_CUT_SHUTDOWN);
            break;
        case GW_EX_OVER:
            break;
        }
    }
}
