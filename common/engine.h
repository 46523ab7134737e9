/*
 * The engine's API, a thin layer over the vendored h2o master
 * (third_party/h2o-master, docs/libh2o.md): timers, pool allocation, the
 * client socket of a connection, the tags a request carries, the server
 * defaults the contract changes. Gateway code calls these, never the h2o
 * names they wrap, so that a re-pin that renames or reshapes one of them
 * changes this header (and common/loop_timeout.h, common/recycle.h), not
 * the call sites. (It was written for the move from libh2o 2.2.5 to master,
 * issue 40, when it had one side per engine.) Each wrapper is static inline
 * over h2o's call: no cost.
 */
#ifndef GW_COMMON_ENGINE_H
#define GW_COMMON_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdalign.h>
#include <h2o.h>

/* --- timers ---------------------------------------------------------------------------------------------------------- */

/*
 * A timer: one callback, called once by the loop when the timer expires.
 * It has a member `cb` (h2o_timer_t's): set it while unlinked, before
 * linking; read it to learn what a linked timer will call.
 * Zero-initialised is unlinked.
 */
typedef h2o_timer_t gw_timer_t;
typedef h2o_timer_cb gw_timer_cb;

/*
 * A duration that timers are linked for (common/loop_timeout.h). On h2o's
 * timer wheel it only holds the milliseconds.
 */
typedef struct st_gw_timeout_t {
    uint64_t timeout; /* milliseconds */
} gw_timeout_t;

/* Sets `t` to `cb`, unlinked. Never on a linked timer. */
static inline void gw_timer_init(gw_timer_t *t, gw_timer_cb cb)
{
    memset(t, 0, sizeof(*t));
    t->cb = cb;
}

/* Links `t` (unlinked) to expire `timeout`'s duration from the loop's now. */
static inline void gw_timer_link(h2o_loop_t *loop, gw_timeout_t *timeout, gw_timer_t *t)
{
    h2o_timer_link(loop, timeout->timeout, t);
}

/* Unlinks `t`; a no-op when it is not linked. */
static inline void gw_timer_unlink(gw_timer_t *t)
{
    h2o_timer_unlink(t);
}

static inline int gw_timer_is_linked(gw_timer_t *t)
{
    return h2o_timer_is_linked(t);
}

/* A duration of `ms` (owned by the caller); disposed with no timer linked. */
static inline void gw_timeout_init(h2o_loop_t *loop, gw_timeout_t *timeout, uint64_t ms)
{
    (void)loop;
    timeout->timeout = ms;
}

static inline void gw_timeout_dispose(h2o_loop_t *loop, gw_timeout_t *timeout)
{
    (void)loop;
    (void)timeout;
}

/* The duration `timeout` stands for, in milliseconds. */
static inline uint64_t gw_timeout_ms(const gw_timeout_t *timeout)
{
    return timeout->timeout;
}

/*
 * A timer that takes any delay each time it is linked (the Redis client's
 * deadlines): a plain timer with a duration of its own.
 * `entry` is the timer (gw_timer_unlink, gw_timer_is_linked work on it).
 */
typedef struct st_gw_delay_timer_t {
    gw_timeout_t timeout;
    gw_timer_t entry;
} gw_delay_timer_t;

static inline void gw_delay_timer_init(h2o_loop_t *loop, gw_delay_timer_t *t, gw_timer_cb cb)
{
    gw_timeout_init(loop, &t->timeout, 1);
    gw_timer_init(&t->entry, cb);
}

/* (Re)links `t` to expire `delay_ms` from the loop's now; 0 is taken as 1:
 * a 0 ms timer re-linked from its own callback fires again in the same loop
 * turn, up to 10 times on h2o's timer wheel (its h2o_evloop_run collects
 * expired timers 10 times at most; libh2o 2.2.5 did without end); at 1 ms it fires
 * once a turn and the loop polls in between (test_engine). */
static inline void gw_delay_timer_link(h2o_loop_t *loop, gw_delay_timer_t *t, uint64_t delay_ms)
{
    gw_timer_unlink(&t->entry);
    t->timeout.timeout = delay_ms != 0 ? delay_ms : 1;
    gw_timer_link(loop, &t->timeout, &t->entry);
}

static inline void gw_delay_timer_dispose(h2o_loop_t *loop, gw_delay_timer_t *t)
{
    gw_timer_unlink(&t->entry);
    gw_timeout_dispose(loop, &t->timeout);
}

/* --- memory ---------------------------------------------------------------------------------------------------------- */

/* `sz` bytes from `pool`, aligned for any type, freed with the pool; never
 * NULL (out of memory aborts). */
static inline void *gw_pool_alloc(h2o_mem_pool_t *pool, size_t sz)
{
    return h2o_mem_alloc_pool_aligned(pool, alignof(max_align_t), sz);
}

/* The bytes of `db` handed to a write and not yet consumed. */
static inline size_t gw_doublebuffer_inflight(const h2o_doublebuffer_t *db)
{
    return db->_bytes_inflight;
}

/* --- sockets, strings, time ------------------------------------------------------------------------------------------ */

/* Starts a non-blocking connect to `addr`; `cb` gets the outcome. NULL
 * when the socket cannot be made or the connect fails at once. */
static inline h2o_socket_t *gw_socket_connect(h2o_loop_t *loop, struct sockaddr *addr, socklen_t len, h2o_socket_cb cb)
{
    return h2o_socket_connect(loop, addr, len, cb, NULL);
}

/* The bytes the read whose callback runs appended to sock->input (above
 * TLS). h2o's bytes_read is the total; our patch 0002 keeps the last read's
 * count in bytes_last_read. */
static inline size_t gw_socket_bytes_last_read(const h2o_socket_t *sock)
{
    return sock->bytes_last_read;
}

/* The next element of a `separator`-separated list in `iter` (elements end
 * at a comma too), its length in *len; NULL at the end. A zero-width
 * element is returned as well. `value`, when not NULL, gets what follows
 * '=' in the element. */
static inline const char *gw_next_token(h2o_iovec_t *iter, int separator, size_t *len, h2o_iovec_t *value)
{
    return h2o_next_token(iter, separator, ',', len, value);
}

/* The loop's wall-clock time as h2o stamps requests with it. */
static inline struct timeval gw_context_timeval(h2o_context_t *ctx)
{
    return h2o_gettimeofday(ctx->loop);
}

/* --- filters and output streams ---------------------------------------------------------------------------------------- */

/*
 * What an output stream's do_send gets: h2o_sendvec_t (a vector that may
 * also be read from a file or a pipe).
 * gw_ostream_vec_init makes one of a memory buffer that outlives the send.
 */
typedef h2o_sendvec_t gw_ostream_vec_t;

static inline void gw_ostream_vec_init(gw_ostream_vec_t *vec, h2o_iovec_t buf)
{
    h2o_sendvec_init_raw(vec, buf.base, buf.len);
}

/* The bytes of a vector made of memory (every vector the gateway's own
 * streams see, not one read from a file or a pipe). */
static inline h2o_iovec_t gw_ostream_vec_bytes(const gw_ostream_vec_t *vec)
{
    return h2o_iovec_init(vec->raw, vec->len);
}

/* An output stream of `sz` bytes (its h2o_ostream_t first) inserted at
 * `slot`, in req->pool. */
static inline h2o_ostream_t *gw_add_ostream(h2o_req_t *req, size_t sz, h2o_ostream_t **slot)
{
    return h2o_add_ostream(req, alignof(max_align_t), sz, slot);
}

/* A prefilter of `sz` bytes (its h2o_req_prefilter_t first) for `req`
 * only, in req->pool. */
static inline h2o_req_prefilter_t *gw_add_prefilter(h2o_req_t *req, size_t sz)
{
    return h2o_add_prefilter(req, alignof(max_align_t), sz);
}

/* --- connections and requests ------------------------------------------------------------------------------------------ */

/*
 * Where h2o master's server defaults differ from what the gateway promises,
 * the gateway's (the contract was written on libh2o 2.2.5, whose defaults
 * these were):
 * - extended CONNECT (RFC 8441) advertised, as master does: the gateway
 *   serves WebSocket over HTTP/2 (upstream/ws_h2.h), which Chromium uses on
 *   its HTTP/2 connection when offered (our patch 0003 could leave the
 *   setting out, and 0530 then refuses :protocol);
 * - HTTP/1.1 reads time out as the contract says: a request's head within h2o's
 *   request timeout (http1.req_timeout, 10 s), its body and an idle
 *   keep-alive connection after 10 s without a byte, not master's 5 s
 *   (http1.req_io_timeout, new in master);
 * - and no h2o timer while a response is sent (our patch 0004): master's
 *   I/O timeout cut a body silent for 5 s and a client reading nothing for
 *   5 s; the gateway's own timeouts (upstream.idle_timeout_ms, timeout:<n>,
 *   limits.client_stall_timeout_ms) govern responses;
 * - a cut HTTP/1.1 chunked response is closed before its end (the
 *   contract's cut, a truncated transfer to clients), without the broken
 *   chunk master appends (our patch 0005);
 * - a streaming request body (docs/uploads.md) has an HTTP/2 stream window
 *   of GW_HTTP2_STREAMING_WINDOW_BYTES, not master's 16 MiB: what h2o holds
 *   of one upload the app has not taken yet;
 * - an HTTP/2 connection streams as many request bodies at once as it may
 *   open streams (max_streams, 100), not master's 1: a gRPC channel's second
 *   streaming call, or a browser's parallel uploads, would wait for the first.
 */
#define GW_HTTP2_STREAMING_WINDOW_BYTES (1024 * 1024)
static inline void gw_globalconf_contract_defaults(h2o_globalconf_t *g)
{
    g->http1.req_io_timeout = g->http1.req_timeout;
    g->http1.no_response_io_timeout = 1;
    g->http1.error_closes_only = 1;
    g->http2.active_stream_window_size = GW_HTTP2_STREAMING_WINDOW_BYTES;
    g->http2.max_concurrent_streaming_requests_per_connection = g->http2.max_streams;
}

/* Has `cb(data, conn)` called on each HTTP/2 stream error a client causes
 * (h2o patch 0300; it returns non-zero to close the
 * connection). */
static inline void gw_context_on_stream_error(h2o_context_t *ctx, int (*cb)(void *data, h2o_conn_t *conn), void *data)
{
    ctx->http2.on_client_stream_error.cb = cb;
    ctx->http2.on_client_stream_error.data = data;
}

/* The contract's answer to an HTTP/2 connection whose reset budget runs out
 * (Rapid Reset, MadeYouReset): GOAWAY(ENHANCE_YOUR_CALM) and close. h2o
 * delays the connection's requests by http2.dos_delay (100 ms) unless our
 * patch 0100's dos_goaway is set, and the delay is then off
 * (docs/security.md says why). */
static inline void gw_globalconf_http2_reset_policy(h2o_globalconf_t *g)
{
    g->http2.dos_goaway = 1;
    g->http2.dos_delay = 0;
}

/* The client's socket under `conn` (HTTP/1 and HTTP/2 connections), NULL
 * when it has none. h2o deleted h2o_conn_callbacks_t.get_socket (2019):
 * our patch 0001 brings it back, behind this function. */
static inline h2o_socket_t *gw_conn_socket(h2o_conn_t *conn)
{
    return conn->callbacks->get_socket != NULL ? conn->callbacks->get_socket(conn) : NULL;
}

/*
 * A tag on a request: a pointer into the caller's own static table of
 * names, kept as long as the request (the error code, the cut reason:
 * errors/): a pair of req->env (the variables of FastCGI and the access
 * log's %{..}e, neither of which the gateway uses; h2o's error_logs is a
 * text buffer): `module` then the name, both found again by address.
 */
static inline void gw_req_tag_add(h2o_req_t *req, const char *module, const char *name)
{
    h2o_vector_reserve(&req->pool, &req->env, req->env.size + 2);
    req->env.entries[req->env.size++] = h2o_iovec_init(module, strlen(module));
    req->env.entries[req->env.size++] = h2o_iovec_init(name, strlen(name));
}

/* The first of `req`'s tags under `module` that points into [first, end),
 * NULL when none does. */
static inline const char *gw_req_tag_find(h2o_req_t *req, const char *module, const char *first, const char *end)
{
    size_t i;

    for (i = 0; i + 1 < req->env.size; i += 2) {
        const char *at = req->env.entries[i + 1].base;
        if (req->env.entries[i].base == module && (uintptr_t)at >= (uintptr_t)first && (uintptr_t)at < (uintptr_t)end)
            return at;
    }
    return NULL;
}

/* How many tags `req` carries, of any module. */
static inline size_t gw_req_tag_count(h2o_req_t *req)
{
    return req->env.size / 2;
}

/* Keeps the first `n` tags of `req` (tests start over with it). */
static inline void gw_req_tag_truncate(h2o_req_t *req, size_t n)
{
    req->env.size = n * 2;
}

#endif
