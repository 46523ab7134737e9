/*
 * The HTTP/2 leg (upstream/h2c.h) on h2o's own HTTP/2 client: this file
 * keeps the per-worker pools (one h2o_httpclient_connection_pool_t and
 * socket pool per (sandbox, lifecycle, port, addr)), starts each call on its
 * pool and ends it (errors, cuts, revocation, disposal); h2c_request.c sends
 * the request, h2c_response.c streams the response.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http2.h>
#include <h2o/httpclient.h>
#include "common/engine.h"
#include "common/hashtab.h"
#include "errors/errors.h"
#include "upstream/h2c_call.h"

/* h2o's client cuts every stream of a connection silent this long
 * (http2client.c's io_timeout), and a request still without its head after
 * first_byte_timeout: both are set out of reach (about 35 years), the
 * gateway's own silence limits decide (a gRPC stream may be silent for as
 * long as its app likes: docs/long-calls.md). */
#define NEVER_MS ((uint64_t)1 << 40)
/* Streams one h2c connection is asked to carry at once (SETTINGS of the
 * gateway as a client: it takes no push, so this bounds nothing the app does). */
#define MAX_CONCURRENT_STREAMS 100

int gw_h2c_is_http1_answer(const char *bytes, size_t len)
{
    return len >= sizeof("HTTP/1.") - 1 && memcmp(bytes, "HTTP/1.", sizeof("HTTP/1.") - 1) == 0;
}

/* --- pools ------------------------------------------------------------------------------------------------------------- */

static void on_pool_wakeup(gw_timer_t *entry);
static void pool_free(h2c_pool_t *pool);

/* Pools kept at least, however many are idle: the sweep runs when the table has doubled past what the last one left. */
#define MIN_SWEEP_AT 64

/* Frees the pools with no connection and no call (their connections idled out: upstream.pool_idle_timeout_ms), so
 * that a worker holds pools for the ports in use, not for every port it ever reached. */
static void sweep_pools(gw_h2c_t *h)
{
    gw_hashtab_node_t *node, *next;

    for (node = gw_hashtab_first(&h->pools); node != NULL; node = next) {
        h2c_pool_t *pool = H2O_STRUCT_FROM_MEMBER(h2c_pool_t, node, node);
        next = gw_hashtab_next(&h->pools, node);
        if (h2o_linklist_is_empty(&pool->connpool.http2.conns) && pool->num_connecting == 0 &&
            h2o_linklist_is_empty(&pool->pending))
            pool_free(pool);
    }
    h->sweep_at = 2 * gw_hashtab_size(&h->pools);
    if (h->sweep_at < MIN_SWEEP_AT)
        h->sweep_at = MIN_SWEEP_AT;
}

static h2c_pool_t *pool_get(gw_h2c_t *h, call_t *c, h2o_iovec_t lifecycle, const gw_netaddr_t *addr)
{
    size_t cap = strlen(c->sandbox_id) + lifecycle.len + sizeof("\n\n65535\n") + sizeof(addr->ss);
    char *key = gw_pool_alloc(&c->req->pool, cap), text[80];
    int n = snprintf(key, cap, "%s\n%.*s\n%u\n", c->sandbox_id, (int)lifecycle.len, lifecycle.base, (unsigned)c->port);
    gw_hashtab_node_t *node;
    h2o_url_t url;

    if (n < 0 || (size_t)n + addr->len > cap || gw_netaddr_format(addr, text, sizeof(text)) < 0)
        return NULL;
    memcpy(key + n, &addr->ss, addr->len);
    if ((node = gw_hashtab_find(&h->pools, key, (size_t)n + addr->len)) != NULL)
        return H2O_STRUCT_FROM_MEMBER(h2c_pool_t, node, node);

    if (gw_hashtab_size(&h->pools) >= h->sweep_at)
        sweep_pools(h);
    h2c_pool_t *pool = h2o_mem_alloc(offsetof(h2c_pool_t, key) + (size_t)n + addr->len);
    memset(pool, 0, offsetof(h2c_pool_t, key));
    pool->h2c = h;
    pool->key_len = (size_t)n + addr->len;
    memcpy(pool->key, key, pool->key_len);
    pool->sandbox_id = h2o_strdup(NULL, c->sandbox_id, SIZE_MAX).base;
    pool->lifecycle = h2o_strdup(NULL, lifecycle.base, lifecycle.len).base;
    h2o_linklist_init_anchor(&pool->pending);
    gw_delay_timer_init(h->proxy->ctx->loop, &pool->wakeup, on_pool_wakeup);
    /* an IP literal: the socket pool connects to it as a sockaddr, never resolving */
    char url_text[sizeof("http:///") + sizeof(text)];
    snprintf(url_text, sizeof(url_text), "http://%s/", text);
    if (h2o_url_parse(NULL, url_text, SIZE_MAX, &url) != 0)
        h2o_fatal("h2c: cannot parse %s", url_text);
    h2o_socketpool_target_t *target = h2o_socketpool_create_target(&url, NULL);
    h2o_socketpool_init_specific(&pool->sockpool, SIZE_MAX, &target, 1, NULL);
    h2o_httpclient_connection_pool_init(&pool->connpool, &pool->sockpool);
    gw_hashtab_insert(&h->pools, &pool->node, pool->key, pool->key_len);
    return pool;
}

static void start_call(call_t *c, h2c_pool_t *pool);

static void on_pool_wakeup(gw_timer_t *entry)
{
    h2c_pool_t *pool = H2O_STRUCT_FROM_MEMBER(h2c_pool_t, wakeup.entry, entry);

    /* one at a time: the first may become the next opener, the others wait again */
    while (!pool->connecting && !h2o_linklist_is_empty(&pool->pending)) {
        call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, pending, pool->pending.next);
        h2o_linklist_unlink(&c->pending);
        start_call(c, pool);
    }
}

/* The opener's connection is up or failed: the calls waiting start, after the client's callback returns (a stream
 * opened inside it would send its HEADERS before the opener's, with a higher stream id: a protocol error). */
static void pool_opened(h2c_pool_t *pool)
{
    pool->connecting = 0;
    if (!h2o_linklist_is_empty(&pool->pending))
        gw_delay_timer_link(pool->h2c->proxy->ctx->loop, &pool->wakeup, 0);
}

/* Lets go of the pool's connections and frees it. */
static void pool_free(h2c_pool_t *pool)
{
    while (!h2o_linklist_is_empty(&pool->connpool.http2.conns)) {
        h2o_httpclient__h2_conn_t *conn = H2O_STRUCT_FROM_MEMBER(h2o_httpclient__h2_conn_t, link, pool->connpool.http2.conns.next);
        /* off the pool (which goes now), so that no new stream takes it: an idle one reads EOF and closes itself, one
         * with calls serves them to their end (as the HTTP/1.1 leg's exchanges in flight) and closes when idle for
         * the pool's idle lifetime */
        h2o_linklist_unlink(&conn->link);
        if (conn->num_streams == 0)
            shutdown(h2o_socket_get_fd(conn->sock), SHUT_RDWR);
    }
    gw_delay_timer_dispose(pool->h2c->proxy->ctx->loop, &pool->wakeup);
    gw_hashtab_remove(&pool->h2c->pools, &pool->node);
    h2o_socketpool_dispose(&pool->sockpool);
    free(pool->sandbox_id);
    free(pool->lifecycle);
    free(pool);
}

void gw_h2c_connect_done(call_t *c)
{
    h2c_pool_t *pool = c->pool;

    c->pool = NULL;
    --pool->num_connecting;
    if (c->opener) {
        c->opener = 0;
        pool_opened(pool);
    }
}

/* --- ending a call ----------------------------------------------------------------------------------------------------- */

void gw_h2c_detach_client(call_t *c)
{
    if (c->client != NULL) {
        c->client->data = NULL;
        c->client = NULL;
    }
}

/* The upstream stream is cancelled (RST_STREAM CANCEL: the app sees the call cancelled), the timers stopped. */
void gw_h2c_close_upstream(call_t *c)
{
    h2o_httpclient_t *client = c->client;

    gw_timer_unlink(&c->silence.entry);
    gw_timer_unlink(&c->stall);
    if (h2o_linklist_is_linked(&c->waiting))
        h2o_linklist_unlink(&c->waiting);
    gw_timer_unlink(&c->watch_timer);
    gw_hangup_unwatch(c->h2c->proxy->hangup, &c->hangup);
    if (c->pool != NULL) {
        /* still waiting for its pool's first connection, or connecting (cancelled below) */
        if (h2o_linklist_is_linked(&c->pending)) {
            h2o_linklist_unlink(&c->pending);
            c->pool = NULL;
        } else {
            gw_h2c_connect_done(c);
        }
    }
    if (client != NULL) {
        gw_h2c_detach_client(c);
        client->cancel(client);
    }
}

void gw_h2c_release_slots(call_t *c)
{
    if (c->slot != NULL) {
        gw_conn_limit_release(c->slot, c->slot_worker, c->sandbox_id);
        c->slot = NULL;
    }
    if (c->client_slot != NULL) {
        gw_conn_limit_release(c->client_slot, c->slot_worker, c->client_addr);
        c->client_slot = NULL;
    }
}

/* Answers with a gateway error (gRPC-shaped for a gRPC request). Last use of c. */
void gw_h2c_fail_why(call_t *c, gw_error_code_t code, gw_error_why_t why, const char *detail, const gw_netaddr_t *addr)
{
    gw_h2c_close_upstream(c);
    c->state = CALL_OVER;
    if (code == GW_ERR_PORT_NOT_OPEN && addr != NULL && gw_netaddr_is_loopback((const struct sockaddr *)&addr->ss))
        why = GW_WHY_LOOPBACK_UPSTREAM;
    gw_error_send_why(c->req, code, why, c->sandbox_id, c->port, detail);
    /* a body still arriving keeps the request alive past the answer, which it follows (request_body.h) */
    gw_request_body_end(c->req, c->in_hand);
}

void gw_h2c_fail(call_t *c, gw_error_code_t code, const char *detail)
{
    gw_h2c_fail_why(c, code, GW_WHY_DEFAULT, detail, NULL);
}

/* The response has started: the client's stream is reset (HTTP/2 RST_STREAM INTERNAL_ERROR; HTTP/1 the connection),
 * the upstream stream cancelled, the slots given back. Last use of c. */
void gw_h2c_cut(call_t *c, gw_cut_reason_t reason)
{
    h2o_req_t *req = c->req;
    int no_send = !c->in_send;

    gw_h2c_close_upstream(c);
    c->state = CALL_OVER;
    gw_h2c_account(c); /* holds nothing any more */
    gw_h2c_release_slots(c);
    gw_cut_note(req, reason);
    gw_response_cut_client(req, no_send, 1);
}

/* Before the head: HTTP/2 resets the stream, HTTP/1 gets an empty answer on a socket shut first (deadline.c's
 * end_before_head). Last use of c. */
void gw_h2c_end_before_head(call_t *c, int status, const char *reason)
{
    h2o_req_t *req = c->req;

    gw_h2c_close_upstream(c);
    c->state = CALL_OVER;
    req->res.status = status;
    req->res.reason = reason;
    if (req->version >= 0x200) {
        h2o_http2_reset_request(req, H2O_HTTP2_ERROR_INTERNAL); /* patch 0230 */
        return;
    }
    h2o_socket_t *sock = gw_conn_socket(req->conn);
    if (sock != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
    req->http1_is_persistent = 0;
    h2o_send_inline(req, "", 0);
}

static void start_call(call_t *c, h2c_pool_t *pool)
{
    gw_h2c_t *h = c->h2c;

    c->pool = pool;
    /* the pool's first connection is being made: wait for it, and share it */
    if (pool->connecting) {
        h2o_linklist_insert(&pool->pending, &c->pending);
        return;
    }
    if (h2o_linklist_is_empty(&pool->connpool.http2.conns)) {
        pool->connecting = 1;
        c->opener = 1;
        GW_PROXY_COUNT(h->proxy, connects, 1);
    } else {
        GW_PROXY_COUNT(h->proxy, reuses, 1);
    }
    ++pool->num_connecting;
    h2o_httpclient_connect(&c->client, &c->req->pool, c, &h->ctx, &pool->connpool, &pool->sockpool.targets.entries[0]->url, NULL,
                           gw_h2c_on_connect);
}

int gw_h2c_retry(call_t *c)
{
    h2c_pool_t *pool;

    if (c->retried || c->req->proceed_req != NULL || (pool = pool_get(c->h2c, c, c->lifecycle, &c->addr)) == NULL)
        return -1;
    c->retried = 1;
    c->state = CALL_CONNECTING;
    GW_PROXY_COUNT(c->h2c->proxy, retries, 1);
    /* out of the client's callback (it walks the connection's streams), by then off the connection going away */
    c->pool = pool;
    h2o_linklist_insert(&pool->pending, &c->pending);
    gw_delay_timer_link(c->h2c->proxy->ctx->loop, &pool->wakeup, 0);
    return 0;
}

/* The HTTP/1 client closed (FIN or reset) while its call runs: the app's stream is cancelled now (HTTP/2 clients need
 * no watch: h2o disposes the request of a reset stream or a closed connection). */
static void on_client_hangup(gw_hangup_watch_t *watch)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, hangup, watch);

    switch (c->state) {
    case CALL_CONNECTING:
    case CALL_AWAIT_HEAD:
        /* logged as nginx logs a client that closed its request: 499 */
        gw_h2c_end_before_head(c, 499, "Client Closed Request");
        break;
    case CALL_BODY:
        gw_h2c_cut(c, GW_CUT_NONE);
        break;
    case CALL_OVER:
        break;
    }
}

static void on_watch_delay(gw_timer_t *entry)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, watch_timer, entry);

    c->hangup.cb = on_client_hangup;
    gw_hangup_watch(c->h2c->proxy->hangup, &c->hangup, c->req);
}

/* --- revocation, disposal ---------------------------------------------------------------------------------------------- */

static void on_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, revocable, item);

    switch (c->state) {
    case CALL_CONNECTING:
    case CALL_AWAIT_HEAD:
        gw_h2c_fail(c, code, NULL);
        break;
    case CALL_BODY:
        gw_h2c_cut(c, code == GW_ERR_EGRESS_QUOTA_EXCEEDED ? GW_CUT_EGRESS_QUOTA : GW_CUT_REVOKED);
        break;
    case CALL_OVER:
        break;
    }
}

static void on_call_dispose(void *_c)
{
    call_t *c = _c;

    gw_h2c_close_upstream(c);
    gw_delay_timer_dispose(c->h2c->proxy->ctx->loop, &c->silence);
    gw_delay_timer_dispose(c->h2c->proxy->ctx->loop, &c->over_limit);
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    if (c->revocable.grant.record != NULL) {
        if (c->h2c->proxy->revocation != NULL)
            gw_revocation_remove(c->h2c->proxy->revocation, &c->revocable);
        gw_sandbox_release(c->revocable.grant.record);
    }
    gw_h2c_release_slots(c);
    c->state = CALL_OVER;
    if (c->last != NULL)
        h2o_buffer_dispose(&c->last);
    gw_h2c_account(c); /* to 0 */
    h2o_doublebuffer_dispose(&c->sending);
}

/* --- public ------------------------------------------------------------------------------------------------------------ */

gw_h2c_t *gw_h2c_new(gw_proxy_t *p)
{
    gw_h2c_t *h = h2o_mem_alloc(sizeof(*h));

    memset(h, 0, sizeof(*h));
    h->proxy = p;
    h->ctx.loop = p->ctx->loop;
    h->ctx.io_timeout = NEVER_MS;
    h->ctx.connect_timeout = p->conf.connect_timeout_ms != 0 ? p->conf.connect_timeout_ms : NEVER_MS;
    h->ctx.first_byte_timeout = NEVER_MS;
    /* an idle connection (no stream) closes after the pool's idle lifetime, as the HTTP/1.1 pool's do */
    h->ctx.keepalive_timeout = p->conf.pool_idle_timeout_ms != 0 ? p->conf.pool_idle_timeout_ms : NEVER_MS;
    /* each stream's window: what the app may send ahead of the client's reading (limits.response_buffer_bytes) */
    h->ctx.max_buffer_size = p->conf.response_buffer_bytes;
    h->ctx.force_cleartext_http2 = 1;
    h->ctx.protocol_selector.ratio.http2 = 100;
    h->ctx.http2.max_concurrent_streams = MAX_CONCURRENT_STREAMS;
    gw_hashtab_init(&h->pools);
    h->sweep_at = MIN_SWEEP_AT;
    h2o_linklist_init_anchor(&h->calls);
    h2o_linklist_init_anchor(&h->waiting);
    return h;
}

void gw_h2c_free(gw_h2c_t *h)
{
    if (h == NULL)
        return;
    while (!h2o_linklist_is_empty(&h->calls)) {
        call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, link, h->calls.next);
        h2o_linklist_unlink(&c->link);
        gw_h2c_close_upstream(c);
    }
    gw_h2c_drop(h, NULL, NULL);
    gw_hashtab_dispose(&h->pools);
    free(h);
}

void gw_h2c_forward(gw_h2c_t *h, h2o_req_t *req, const gw_proxy_target_t *target)
{
    gw_proxy_t *p = h->proxy;
    call_t *c = h2o_mem_alloc_shared(&req->pool, sizeof(*c), on_call_dispose);
    h2c_pool_t *pool;

    memset(c, 0, sizeof(*c));
    c->super.proceed = gw_h2c_on_proceed;
    c->super.stop = gw_h2c_on_stop;
    c->h2c = h;
    c->req = req;
    h2o_linklist_insert(&h->calls, &c->link);
    h2o_doublebuffer_init(&c->sending, &h2o_socket_buffer_prototype);
    gw_delay_timer_init(p->ctx->loop, &c->silence, gw_h2c_on_silence);
    gw_timer_init(&c->stall, gw_h2c_on_client_stall);
    gw_delay_timer_init(p->ctx->loop, &c->over_limit, gw_h2c_on_over_limit);
    gw_timer_init(&c->watch_timer, on_watch_delay);
    c->sandbox_id = h2o_strdup(&req->pool, target->sandbox_id, SIZE_MAX).base;
    c->port = target->port;
    c->addr = target->addr;
    c->lifecycle = h2o_strdup(&req->pool, target->lifecycle.base, target->lifecycle.len);
    c->path = h2o_strdup(&req->pool, target->path.base, target->path.len);
    c->client_port = target->client_port;
    c->no_activity = target->no_activity != 0;
    c->localhost = target->localhost != 0;
    c->timeout_ms = target->timeout_ms;
    c->slot = target->conn_limit;
    c->slot_worker = target->limit_worker;
    if (target->client_limit != NULL) {
        c->client_slot = target->client_limit;
        c->client_addr = h2o_strdup(&req->pool, target->client_addr, SIZE_MAX).base;
    }
    gw_address_view_init(&c->view, &req->pool, req->authority, c->localhost ? c->port : 0, &p->conf.cookie_rules);
    if (c->localhost) {
        char *a = h2o_mem_alloc_pool(&req->pool, char, sizeof("localhost:65535"));
        c->authority = h2o_iovec_init(a, (size_t)snprintf(a, sizeof("localhost:65535"), "localhost:%u", (unsigned)c->port));
    } else {
        c->authority = req->authority;
    }
    if (target->grant.record != NULL) {
        c->revocable.grant = target->grant;
        gw_sandbox_retain(c->revocable.grant.record);
        c->revocable.on_revoke = on_revoke;
        if (p->revocation != NULL)
            gw_revocation_add(p->revocation, &c->revocable);
    }
    /* the request head as the client sent it, and a body that came whole with its trailers (a streamed one is counted as it
     * goes) */
    size_t whole = req->proceed_req == NULL ? req->entity.len + gw_h2c_headers_size(req->trailers.entries, req->trailers.size) : 0;
    gw_proxy_add_bytes(p, c->sandbox_id, c->no_activity, 0,
                       req->method.len + req->path.len + req->authority.len +
                           gw_h2c_headers_size(req->headers.entries, req->headers.size) + whole);
    c->in_hand = c->body_streams = gw_request_body_streams(req); /* what h2o read before on_req */
    if (c->in_hand && req->entity.len > req->conn->ctx->globalconf->max_request_entity_size) {
        gw_h2c_fail(c, GW_ERR_BODY_TOO_LARGE, "The request body is larger than the gateway accepts.");
        return;
    }
    /* the route came from Redis: never connect outside the allowed networks */
    if (!gw_cidr_list_contains(p->conf.allowed_networks, p->conf.num_allowed_networks, (const struct sockaddr *)&target->addr.ss)) {
        gw_h2c_fail(c, GW_ERR_UPSTREAM_FORBIDDEN, NULL);
        return;
    }
    if ((pool = pool_get(h, c, c->lifecycle, &c->addr)) == NULL) {
        gw_h2c_fail(c, GW_ERR_UPSTREAM_FORBIDDEN, NULL);
        return;
    }
    /* most calls are over before it: they never pay the epoll_ctl calls */
    if (p->hangup != NULL && req->version < 0x200)
        gw_timer_link(p->ctx->loop, p->watch_delay.timeout, &c->watch_timer);
    start_call(c, pool);
}

int gw_h2c_take(gw_proxy_t *p, h2o_req_t *req, const gw_proxy_target_t *target)
{
    if (!target->h2c || target->tcp || req->upgrade.base != NULL)
        return 0;
    gw_h2c_forward(p->h2c, req, target);
    return 1;
}

void gw_h2c_drop(gw_h2c_t *h, const char *sandbox_id, const char *current_lifecycle)
{
    gw_hashtab_node_t *node, *next;

    for (node = gw_hashtab_first(&h->pools); node != NULL; node = next) {
        h2c_pool_t *pool = H2O_STRUCT_FROM_MEMBER(h2c_pool_t, node, node);
        next = gw_hashtab_next(&h->pools, node);
        if (sandbox_id != NULL && (strcmp(pool->sandbox_id, sandbox_id) != 0 ||
                                   (current_lifecycle != NULL && strcmp(pool->lifecycle, current_lifecycle) == 0)))
            continue;
        if (pool->num_connecting != 0 || !h2o_linklist_is_empty(&pool->pending))
            continue; /* a call still connects through it: dropped at a later publish, or with the proxy */
        pool_free(pool);
    }
}

void gw_h2c_cut_all(gw_h2c_t *h)
{
    while (!h2o_linklist_is_empty(&h->calls)) {
        call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, link, h->calls.next);
        h2o_linklist_unlink(&c->link);
        switch (c->state) {
        case CALL_CONNECTING:
        case CALL_AWAIT_HEAD:
            gw_cut_note(c->req, GW_CUT_SHUTDOWN);
            gw_h2c_end_before_head(c, 503, "Service Unavailable");
            break;
        case CALL_BODY:
            gw_h2c_cut(c, GW_CUT_SHUTDOWN);
            break;
        case CALL_OVER:
            break;
        }
    }
}
