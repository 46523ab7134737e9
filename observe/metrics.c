/*
 * /metrics (see metrics.h): the counters, the logger that counts responses,
 * and the Prometheus text exposition (version 0.0.4), rendered into a buffer
 * that grows up to a bound and is never cut.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "observe/metrics.h"

/* The buffer's first size: the exposition of a few workers fits. */
#define TEXT_INITIAL_SIZE 8192

typedef struct st_counting_logger_t {
    h2o_logger_t super;
    gw_metrics_t *metrics;
} counting_logger_t;

static void count_response(h2o_logger_t *self, h2o_req_t *req)
{
    gw_metrics_worker_t *mw = h2o_context_get_logger_context(req->conn->ctx, self);
    int status = req->res.status, code = gw_error_code_of(req);
    gw_cut_reason_t cut = gw_cut_of(req);

    GW_COUNTER_ADD(&mw->responses_by_class[status >= 100 && status < 600 ? status / 100 : 0], 1);
    if (code >= 0)
        GW_COUNTER_ADD(&mw->errors_by_code[code], 1);
    if (cut != GW_CUT_NONE)
        GW_COUNTER_ADD(&mw->cuts_by_reason[cut], 1);
    if (status == 0)
        GW_COUNTER_ADD(&mw->abandoned_requests, 1);
    h2o_iovec_t mcp_method = gw_mcp_method_header(&req->headers);
    if (mcp_method.base != NULL)
        GW_COUNTER_ADD(&mw->mcp_requests[gw_mcp_method_of(mcp_method)], 1);
}

/* The logger finds its worker's block once per context, as h2o's own loggers keep per-thread state. */
static void on_logger_context_init(h2o_logger_t *self, h2o_context_t *ctx)
{
    h2o_context_set_logger_context(ctx, self, gw_metrics_worker_of(((counting_logger_t *)self)->metrics, ctx));
}

void gw_metrics_register(h2o_pathconf_t *pathconf, gw_metrics_t *m)
{
    counting_logger_t *self = (void *)h2o_create_logger(pathconf, sizeof(*self));
    self->super.on_context_init = on_logger_context_init;
    self->super.log_access = count_response;
    self->metrics = m;
}

gw_metrics_worker_t *gw_metrics_worker_of(gw_metrics_t *m, h2o_context_t *ctx)
{
    size_t i;

    for (i = 0; i != m->num_workers; ++i)
        if (m->workers[i].ctx == ctx)
            return m->workers + i;
    h2o_fatal("metrics: an h2o context of no worker");
    return NULL;
}

void gw_metrics_init(gw_metrics_t *m, size_t num_workers)
{
    /* whole cache lines (sizeof is a multiple of the alignment), so no block shares one with another, nor with malloc's
     * neighbours */
    size_t size = sizeof(*m->workers) * (num_workers != 0 ? num_workers : 1);

    memset(m, 0, sizeof(*m));
    m->num_workers = num_workers;
    if ((m->workers = aligned_alloc(_Alignof(gw_metrics_worker_t), size)) == NULL)
        h2o_fatal("no memory");
    memset(m->workers, 0, size);
}

void gw_metrics_dispose(gw_metrics_t *m)
{
    free(m->workers);
    m->workers = NULL;
}

void gw_metrics_set_redis(gw_metrics_t *m, size_t index, int connected)
{
    /* only worker `index` writes its flag */
    if (atomic_exchange_explicit(&m->workers[index].redis_connected, connected, memory_order_relaxed) == connected)
        return;
    atomic_fetch_add_explicit(&m->redis_ready_workers, connected ? 1 : -1, memory_order_relaxed);
}

int gw_metrics_redis_ready(gw_metrics_t *m)
{
    return (size_t)atomic_load_explicit(&m->redis_ready_workers, memory_order_relaxed) == m->num_workers;
}

/* A counter of every worker's block, at `offset` in gw_metrics_worker_t, summed. */
static uint64_t sum_at(gw_metrics_t *m, size_t offset)
{
    uint64_t sum = 0;
    size_t i;

    for (i = 0; i != m->num_workers; ++i)
        sum += atomic_load_explicit((atomic_uint_fast64_t *)((char *)(m->workers + i) + offset), memory_order_relaxed);
    return sum;
}

/* A gauge kept as a signed count per worker, summed; never shown below zero. */
static uint64_t sum_gauge_at(gw_metrics_t *m, size_t offset)
{
    int64_t sum = 0;
    size_t i;

    for (i = 0; i != m->num_workers; ++i)
        sum += atomic_load_explicit((atomic_int_fast64_t *)((char *)(m->workers + i) + offset), memory_order_relaxed);
    return sum > 0 ? (uint64_t)sum : 0;
}

#define SUM(field) sum_at(m, offsetof(gw_metrics_worker_t, field))
#define SUM_ELEMENT(array, i) sum_at(m, offsetof(gw_metrics_worker_t, array) + (size_t)(i) * sizeof(atomic_uint_fast64_t))

uint64_t gw_metrics_in_flight(gw_metrics_t *m)
{
    return SUM(in_flight);
}

/* The exposition being written: grows from the pool up to `max` bytes; once
 * over, it stays failed and nothing more is written. */
typedef struct st_text_t {
    h2o_mem_pool_t *pool;
    H2O_VECTOR(char) buf;
    size_t max;
    int over;
} text_t;

__attribute__((format(printf, 2, 3))) static void append(text_t *t, const char *fmt, ...)
{
    va_list args;
    int n;

    while (!t->over) {
        size_t room = t->buf.capacity - t->buf.size;
        va_start(args, fmt);
        n = vsnprintf(t->buf.entries + t->buf.size, room, fmt, args);
        va_end(args);
        if (n < 0 || t->buf.size + (size_t)n > t->max) {
            t->over = 1;
        } else if ((size_t)n < room) {
            t->buf.size += (size_t)n;
            return;
        } else {
            /* room for the terminating NUL vsnprintf writes, too */
            h2o_vector_reserve(t->pool, &t->buf, t->buf.size + (size_t)n + 1);
        }
    }
}

/* "# HELP" and "# TYPE" lines of one metric family. */
static void family(text_t *out, const char *name, const char *type, const char *help)
{
    append(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample; `labels` is NULL or "key=\"value\"". */
static void sample(text_t *out, const char *name, const char *labels, unsigned long long value)
{
    if (labels != NULL)
        append(out, "%s{%s} %llu\n", name, labels, value);
    else
        append(out, "%s %llu\n", name, value);
}

/* A family with a single unlabelled sample. */
static void metric(text_t *out, const char *name, const char *type, const char *help, unsigned long long value)
{
    family(out, name, type, help);
    sample(out, name, NULL, value);
}

/* The HTTP/2 front's defences (the project's h2o patches, third_party/h2o-master/patches/01xx and 0300): counters that h2o
 * keeps per context with relaxed atomics, summed here over the workers. */
static const struct {
    const char *label;
    size_t offset;
} HTTP2_EVENTS[] = {
    {"event=\"reset_budget_exceeded\"", offsetof(h2o_context_t, http2.events.reset_budget_exceeded)},
    {"event=\"empty_continuations_exceeded\"", offsetof(h2o_context_t, http2.events.empty_continuations_exceeded)},
    {"event=\"header_block_timeout\"", offsetof(h2o_context_t, http2.events.header_block_timeouts)},
    {"event=\"unknown_frame\"", offsetof(h2o_context_t, http2.events.unknown_frames)},
    {"event=\"malformed_request\"", offsetof(h2o_context_t, http2.events.malformed_requests)},
    {"event=\"request_head_too_large\"", offsetof(h2o_context_t, http2.events.request_heads_too_large)},
    {"event=\"header_amplification_exceeded\"", offsetof(h2o_context_t, http2.events.header_amplification_exceeded)},
    {"event=\"idle_frame_budget_exceeded\"", offsetof(h2o_context_t, http2.events.idle_frame_budget_exceeded)},
    {"event=\"client_stream_errors_exceeded\"", offsetof(h2o_context_t, http2.events.client_stream_errors_exceeded)},
};

static unsigned long long http2_event_sum(gw_metrics_t *m, size_t offset)
{
    unsigned long long sum = 0;
    size_t i;

    for (i = 0; i != m->num_workers; ++i)
        sum += __atomic_load_n((uint64_t *)((char *)m->workers[i].ctx + offset), __ATOMIC_RELAXED);
    return sum;
}

/* Waking paused sandboxes (routing/wake.h), all workers. */
static void wake_metrics(text_t *out, gw_metrics_t *m)
{
    static const uint64_t bounds[GW_WAKE_HISTOGRAM_BUCKETS] = GW_WAKE_HISTOGRAM_BOUNDS;
    unsigned long long cumulative = 0;
    char label[32];
    size_t i;

    metric(out, "lizard_wake_held_requests", "gauge", "Requests held now while their sandbox wakes.",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, wake.held)));
    metric(out, "lizard_wake_held_requests_total", "counter", "Requests that were held while their sandbox woke.",
           SUM(wake.held_total));
    family(out, "lizard_wake_resume_requests_total", "counter",
           "Resume requests: sent (this gateway won SET <prefix>resume:{id} NX and wrote XADD <prefix>resume), "
           "deduplicated (the lock was taken: asked for less than 30 s ago), failed (Redis did not take it).");
    sample(out, "lizard_wake_resume_requests_total", "result=\"sent\"", SUM(wake.resume_requests));
    sample(out, "lizard_wake_resume_requests_total", "result=\"deduplicated\"", SUM(wake.resume_deduped));
    sample(out, "lizard_wake_resume_requests_total", "result=\"failed\"", SUM(wake.resume_failures));
    metric(out, "lizard_wake_timeouts_total", "counter",
           "Held requests answered 503 sandbox_not_running after routing.resume_timeout_ms.", SUM(wake.timeouts));
    metric(out, "lizard_wake_abandoned_total", "counter", "Held requests whose client went away.", SUM(wake.abandoned));
    metric(out, "lizard_wake_refused_total", "counter",
           "Requests refused 429 because too many were held (limits.max_held_requests_per_sandbox, "
           "limits.max_held_requests_per_worker).",
           SUM(wake.refused));
    metric(out, "lizard_wake_refused_bytes_total", "counter",
           "Requests refused 503 because their body would take the held bodies past limits.max_held_request_bytes.",
           SUM(wake.refused_bytes));
    metric(out, "lizard_wake_held_bytes", "gauge", "Body bytes of the requests held now while their sandbox wakes.",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, wake.held_bytes)));
    /* milliseconds, not seconds: every sample of the exposition stays an integer */
    family(out, "lizard_wake_milliseconds", "histogram",
           "From the first request held for a sandbox to the read that showed it running, per wake seen by a worker.");
    for (i = 0; i != GW_WAKE_HISTOGRAM_BUCKETS; ++i) {
        cumulative += SUM_ELEMENT(wake.wake_ms_buckets, i);
        snprintf(label, sizeof(label), "le=\"%llu\"", (unsigned long long)bounds[i]);
        sample(out, "lizard_wake_milliseconds_bucket", label, cumulative);
    }
    cumulative += SUM_ELEMENT(wake.wake_ms_buckets, GW_WAKE_HISTOGRAM_BUCKETS);
    sample(out, "lizard_wake_milliseconds_bucket", "le=\"+Inf\"", cumulative);
    sample(out, "lizard_wake_milliseconds_sum", NULL, SUM(wake.wake_ms_sum));
    /* the +Inf bucket, not wake_count: a scrape between two increments must not see them disagree */
    sample(out, "lizard_wake_milliseconds_count", NULL, cumulative);
}

/* Tunnels by kind, and the keep-alive Pings of WebSocket tunnels. */
static void tunnel_metrics(text_t *out, gw_metrics_t *m)
{
    family(out, "lizard_tunnels_opened_total", "counter",
           "Tunnels opened, by kind: websocket (HTTP upgrades), tcp (proto tcp ports).");
    sample(out, "lizard_tunnels_opened_total", "kind=\"websocket\"", SUM(proxy.websockets_opened));
    sample(out, "lizard_tunnels_opened_total", "kind=\"tcp\"", SUM(proxy.tcp_tunnels_opened));
    family(out, "lizard_tunnels_open", "gauge", "Tunnels open now, by kind.");
    sample(out, "lizard_tunnels_open", "kind=\"websocket\"", sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.websockets_open)));
    sample(out, "lizard_tunnels_open", "kind=\"tcp\"", sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.tcp_tunnels_open)));
    metric(out, "lizard_websocket_pings_total", "counter",
           "Keep-alive Pings sent to clients of WebSocket tunnels (upstream.websocket_ping_interval_ms).", SUM(proxy.pings_sent));
    metric(out, "lizard_websocket_pong_timeouts_total", "counter",
           "Tunnels closed because their client answered no Ping for upstream.websocket_idle_timeout_ms.",
           SUM(proxy.pong_timeouts));
    family(out, "lizard_tunnel_limit_closes_total", "counter",
           "WebSocket and TCP tunnels closed for what their client sent: frame_rate (1008, past "
           "limits.websocket_frames_per_second), message_size (1009, past limits.websocket_max_message_bytes).");
    sample(out, "lizard_tunnel_limit_closes_total", "limit=\"frame_rate\"", SUM(proxy.frame_rate_closes));
    sample(out, "lizard_tunnel_limit_closes_total", "limit=\"message_size\"", SUM(proxy.message_size_closes));
    family(out, "lizard_desktop_viewers", "gauge",
           "Desktop (proto rfb) viewers connected now, by mode: full, view_only (their input dropped by the gateway).");
    sample(out, "lizard_desktop_viewers", "mode=\"full\"",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.desktop_viewers[0])));
    sample(out, "lizard_desktop_viewers", "mode=\"view_only\"",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.desktop_viewers[1])));
    metric(out, "lizard_desktop_input_dropped_total", "counter",
           "Input messages (keys, pointer, clipboard, resize, power) of view-only desktop viewers dropped by the gateway.",
           SUM(proxy.desktop_input_drops));
}

/* The PROXY protocol headers of proxy_protocol listeners (gateway/proxy_protocol.h), all workers. */
static void proxy_header_metrics(text_t *out, gw_metrics_t *m)
{
    family(out, "lizard_proxy_protocol_connections_total", "counter",
           "Connections of proxy_protocol listeners by their PROXY header: accepted (read, the connection went on); "
           "closed without one: invalid (other bytes, or a malformed or oversized header), timeout "
           "(limits.proxy_header_timeout_ms), closed (the peer left first).");
    sample(out, "lizard_proxy_protocol_connections_total", "result=\"accepted\"", SUM(proxy_header.accepted));
    sample(out, "lizard_proxy_protocol_connections_total", "result=\"invalid\"", SUM(proxy_header.invalid));
    sample(out, "lizard_proxy_protocol_connections_total", "result=\"timeout\"", SUM(proxy_header.timeout));
    sample(out, "lizard_proxy_protocol_connections_total", "result=\"closed\"", SUM(proxy_header.closed));
}

/* The ClientHellos peeked on TLS listeners with custom-domain certificates (gateway/sni_peek.h), all workers. */
static void client_hello_metrics(text_t *out, gw_metrics_t *m)
{
    family(out, "lizard_tls_client_hellos_total", "counter",
           "Connections of TLS listeners by their ClientHello, read before the handshake while custom-domain certificates "
           "are on: read (whole, handed to the handshake), other (no ClientHello, or a malformed one: handed over, TLS "
           "refuses it); closed without a handshake: too_large (over 16 KiB), timeout (no whole ClientHello within the "
           "handshake timeout), closed (the peer left first).");
    sample(out, "lizard_tls_client_hellos_total", "result=\"read\"", SUM(client_hello.read));
    sample(out, "lizard_tls_client_hellos_total", "result=\"other\"", SUM(client_hello.other));
    sample(out, "lizard_tls_client_hellos_total", "result=\"too_large\"", SUM(client_hello.too_large));
    sample(out, "lizard_tls_client_hellos_total", "result=\"timeout\"", SUM(client_hello.timeout));
    sample(out, "lizard_tls_client_hellos_total", "result=\"closed\"", SUM(client_hello.closed));
}

#define DYN(f) atomic_load_explicit(&c->f, memory_order_relaxed)

/* Custom-domain certificates (tls/dyncert.h), process-wide; zeroes when off. */
static void dyncert_metrics(text_t *out, gw_dyncert_t *d)
{
    static const gw_dyncert_counters_t zero;
    static const uint64_t pause_bounds[GW_DYNCERT_PAUSE_BUCKETS] = GW_DYNCERT_PAUSE_BOUNDS;
    static const uint64_t expiry_bounds[GW_DYNCERT_EXPIRY_BUCKETS] = GW_DYNCERT_EXPIRY_BOUNDS;
    const gw_dyncert_counters_t *c = d != NULL ? gw_dyncert_counters(d) : &zero;
    uint64_t expiry[GW_DYNCERT_EXPIRY_BUCKETS + 1] = {0};
    unsigned long long cumulative = 0;
    char label[48];
    int i;

    family(out, "lizard_dynamic_cert_cache_total", "counter",
           "Handshakes for custom domains: hit (cached certificate), miss (paused for a fetch), negative (refused from "
           "the negative cache, no Redis call), stale (an unconfirmed certificate served while Redis could not answer).");
    sample(out, "lizard_dynamic_cert_cache_total", "result=\"hit\"", DYN(hits));
    sample(out, "lizard_dynamic_cert_cache_total", "result=\"miss\"", DYN(misses));
    sample(out, "lizard_dynamic_cert_cache_total", "result=\"negative\"", DYN(negative_hits));
    sample(out, "lizard_dynamic_cert_cache_total", "result=\"stale\"", DYN(stale_served));
    metric(out, "lizard_dynamic_cert_fetches_total", "counter", "EVALs sent for custom-domain certificates.", DYN(fetches));
    metric(out, "lizard_dynamic_cert_coalesced_total", "counter", "Misses that joined a fetch in flight on their worker.",
           DYN(coalesced));
    family(out, "lizard_dynamic_cert_fetch_errors_total", "counter",
           "Custom-domain certificate fetches that gave no certificate, by reason.");
    family(out, "lizard_dynamic_cert_refused_total", "counter",
           "Custom-domain handshakes refused with unrecognized_name, by reason.");
    for (i = 1; i != GW_DYNCERT_NUM_REASONS; ++i) {
        snprintf(label, sizeof(label), "reason=\"%s\"", gw_dyncert_reason_name(i));
        sample(out, "lizard_dynamic_cert_fetch_errors_total", label, DYN(fetch_errors[i]));
        sample(out, "lizard_dynamic_cert_refused_total", label, DYN(refused[i]));
    }
    metric(out, "lizard_dynamic_cert_evictions_total", "counter", "Cached certificates dropped for tls.max_dynamic_certs.",
           DYN(evictions));
    metric(out, "lizard_dynamic_cert_invalidations_total", "counter",
           "Cached entries dropped by a domain:<host> or cert:<name> message on <prefix>routes.", DYN(invalidations));
    family(out, "lizard_dynamic_cert_pause_milliseconds", "histogram",
           "How long handshakes stayed paused for a custom-domain certificate fetch.");
    for (i = 0; i != GW_DYNCERT_PAUSE_BUCKETS; ++i) {
        cumulative += DYN(pause_buckets[i]);
        snprintf(label, sizeof(label), "le=\"%llu\"", (unsigned long long)pause_bounds[i]);
        sample(out, "lizard_dynamic_cert_pause_milliseconds_bucket", label, cumulative);
    }
    cumulative += DYN(pause_buckets[GW_DYNCERT_PAUSE_BUCKETS]);
    sample(out, "lizard_dynamic_cert_pause_milliseconds_bucket", "le=\"+Inf\"", cumulative);
    sample(out, "lizard_dynamic_cert_pause_milliseconds_sum", NULL, DYN(pause_us_sum) / 1000);
    sample(out, "lizard_dynamic_cert_pause_milliseconds_count", NULL, cumulative);
    if (d != NULL)
        gw_dyncert_expiry(d, expiry);
    family(out, "lizard_dynamic_certs", "gauge",
           "Cached custom-domain certificates by days left until not_after (an expired one counts under the first).");
    for (i = 0; i != GW_DYNCERT_EXPIRY_BUCKETS; ++i) {
        snprintf(label, sizeof(label), "expires_in_days=\"<%llu\"", (unsigned long long)expiry_bounds[i]);
        sample(out, "lizard_dynamic_certs", label, expiry[i]);
    }
    snprintf(label, sizeof(label), "expires_in_days=\">=%llu\"", (unsigned long long)expiry_bounds[GW_DYNCERT_EXPIRY_BUCKETS - 1]);
    sample(out, "lizard_dynamic_certs", label, expiry[GW_DYNCERT_EXPIRY_BUCKETS]);
    metric(out, "lizard_dynamic_cert_logs_suppressed_total", "counter",
           "Refusals not logged: that name was logged already, or the log's budget was spent.", DYN(logs_suppressed));
}

/* Requests, responses by status class, errors by contract code. */
static void response_metrics(text_t *out, gw_metrics_t *m)
{
    char label[64];
    int i;

    metric(out, "lizard_requests_total", "counter", "Preview requests received.", SUM(requests));
    family(out, "lizard_responses_total", "counter", "Responses sent, by status class.");
    for (i = 1; i <= 5; ++i) {
        snprintf(label, sizeof(label), "class=\"%dxx\"", i);
        sample(out, "lizard_responses_total", label, SUM_ELEMENT(responses_by_class, i));
    }
    family(out, "lizard_errors_total", "counter", "Errors the gateway produced, by contract code.");
    for (i = 0; i != GW_ERR_NUM_CODES; ++i) {
        snprintf(label, sizeof(label), "code=\"%s\"", gw_error_code_name(i));
        sample(out, "lizard_errors_total", label, SUM_ELEMENT(errors_by_code, i));
    }
    family(out, "lizard_responses_cut_total", "counter",
           "Responses the gateway ended before their end (HTTP/1.1: closed early; HTTP/2: RST_STREAM INTERNAL_ERROR; a "
           "first_byte_timeout is the 504), by reason; the access log says \"cut\" on each.");
    for (i = GW_CUT_NONE + 1; i != GW_CUT_NUM; ++i) {
        snprintf(label, sizeof(label), "reason=\"%s\"", gw_cut_reason_name(i));
        sample(out, "lizard_responses_cut_total", label, SUM_ELEMENT(cuts_by_reason, i));
    }
    family(out, "lizard_mcp_requests_total", "counter",
           "Preview requests that named their MCP method in Mcp-Method, by method (any other method: other).");
    for (i = 0; i != GW_MCP_NUM_METHODS; ++i) {
        snprintf(label, sizeof(label), "method=\"%s\"", gw_mcp_method_name(i));
        sample(out, "lizard_mcp_requests_total", label, SUM_ELEMENT(mcp_requests, i));
    }
}

/* The route cache (routing/route_store.h), all workers. */
static void route_metrics(text_t *out, gw_metrics_t *m)
{
    metric(out, "lizard_route_lookups_total", "counter", "Route lookups started.", SUM(route_lookups));
    family(out, "lizard_route_cache_total", "counter",
           "Route cache outcomes: hit (no Redis call), fetch (HGETALL sent), coalesced (joined a fetch in flight), "
           "stale (expired route served while Redis could not answer), unavailable.");
    sample(out, "lizard_route_cache_total", "result=\"hit\"", SUM(routes.hits));
    sample(out, "lizard_route_cache_total", "result=\"fetch\"", SUM(routes.fetches));
    sample(out, "lizard_route_cache_total", "result=\"coalesced\"", SUM(routes.coalesced));
    sample(out, "lizard_route_cache_total", "result=\"stale\"", SUM(routes.stale));
    sample(out, "lizard_route_cache_total", "result=\"unavailable\"", SUM(routes.unavailable));
    metric(out, "lizard_route_cache_invalidations_total", "counter", "Cached sandboxes evicted by a message on <prefix>routes.",
           SUM(routes.invalidations));
    metric(out, "lizard_route_cache_flushes_total", "counter", "Whole-cache drops on a (re)confirmed subscription.",
           SUM(routes.flushes));
    metric(out, "lizard_route_cache_evictions_total", "counter", "Entries dropped to keep the cache under its size bound.",
           SUM(routes.evictions));
    family(out, "lizard_domain_cache_total", "counter",
           "Custom-domain cache outcomes (HGETALL <prefix>domain:{<host>}): hit, fetch, coalesced, stale, unavailable, "
           "invalidation (a publish of domain:<host>), eviction (size bound).");
    sample(out, "lizard_domain_cache_total", "result=\"hit\"", SUM(domains.hits));
    sample(out, "lizard_domain_cache_total", "result=\"fetch\"", SUM(domains.fetches));
    sample(out, "lizard_domain_cache_total", "result=\"coalesced\"", SUM(domains.coalesced));
    sample(out, "lizard_domain_cache_total", "result=\"stale\"", SUM(domains.stale));
    sample(out, "lizard_domain_cache_total", "result=\"unavailable\"", SUM(domains.unavailable));
    sample(out, "lizard_domain_cache_total", "result=\"invalidation\"", SUM(domains.invalidations));
    sample(out, "lizard_domain_cache_total", "result=\"eviction\"", SUM(domains.evictions));
    {
        static gw_addr_budget_counters_t zero;
        gw_addr_budget_counters_t *b = m->domain_budget != NULL ? gw_addr_budget_counters(m->domain_budget) : &zero;
        family(out, "lizard_domain_lookups_refused_total", "counter",
               "Custom-domain look-ups (a certificate at the handshake, a record for the Host) refused without a Redis "
               "call: the client address over routing.domain_lookups_per_second_per_client, or the gateway over "
               "routing.domain_lookups_per_second.");
        sample(out, "lizard_domain_lookups_refused_total", "limit=\"client\"",
               atomic_load_explicit(&b->refused_client, memory_order_relaxed));
        sample(out, "lizard_domain_lookups_refused_total", "limit=\"gateway\"",
               atomic_load_explicit(&b->refused_total, memory_order_relaxed));
    }
}

/* Connections and bytes to sandboxes (upstream/proxy.h), and the HTTP/2 abuse the front refused. */
static void upstream_metrics(text_t *out, gw_metrics_t *m)
{
    metric(out, "lizard_upstream_connects_total", "counter", "Fresh connections to sandboxes started.", SUM(proxy.connects));
    metric(out, "lizard_upstream_reuses_total", "counter", "Requests sent on a pooled keep-alive connection.", SUM(proxy.reuses));
    metric(out, "lizard_upstream_retries_total", "counter", "Requests retried after a pooled connection was found dead.",
           SUM(proxy.retries));
    metric(out, "lizard_websockets_opened_total", "counter", "WebSocket tunnels opened.", SUM(proxy.websockets_opened));
    metric(out, "lizard_client_stalls_total", "counter",
           "Responses reset because the client took no byte for limits.client_stall_timeout_ms.", SUM(proxy.client_stalls));
    metric(out, "lizard_buffer_budget_resets_total", "counter",
           "Responses waiting for their client reset because a connection's or the worker's buffer budget was reached.",
           SUM(proxy.budget_resets));
    metric(out, "lizard_spliced_responses_total", "counter",
           "Response bodies moved from the sandbox socket to the client socket with splice(2), without a copy (upstream.splice).",
           SUM(proxy.spliced_responses));
    metric(out, "lizard_spliced_bytes_total", "counter", "Body bytes those spliced responses wrote to their clients.",
           SUM(proxy.spliced_bytes));
    metric(out, "lizard_spliced_tunnels_total", "counter",
           "WebSocket tunnels whose bytes moved between the two sockets with splice(2) (a plain listener, no Pings).",
           SUM(proxy.spliced_tunnels));
    metric(out, "lizard_spliced_tunnel_bytes_total", "counter", "Bytes those spliced tunnels moved, both ways.",
           SUM(proxy.spliced_tunnel_bytes));
    metric(out, "lizard_websockets_open", "gauge", "WebSocket tunnels open now.",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.websockets_open)));
    metric(out, "lizard_orphaned_requests_total", "counter",
           "Requests whose client left (a reset stream, a closed connection) while the app worked on them: their client's "
           "and sandbox's slots stayed held until the app answered.",
           SUM(proxy.orphans));
    metric(out, "lizard_orphaned_requests", "gauge", "Such requests the app has not answered yet (their slots still held).",
           sum_gauge_at(m, offsetof(gw_metrics_worker_t, proxy.orphans_open)));
    tunnel_metrics(out, m);
    family(out, "lizard_proxied_bytes_total", "counter", "HTTP-level bytes of proxied exchanges, by direction.");
    sample(out, "lizard_proxied_bytes_total", "direction=\"egress\"", SUM(proxy.egress_bytes));
    sample(out, "lizard_proxied_bytes_total", "direction=\"ingress\"", SUM(proxy.ingress_bytes));

    family(out, "lizard_http2_events_total", "counter",
           "HTTP/2 abuse the front refused: connections closed for too many stream resets (rapid reset), too many empty "
           "CONTINUATION frames or an unfinished header block; unknown frame types skipped; malformed requests reset.");
    for (size_t i = 0; i != sizeof(HTTP2_EVENTS) / sizeof(HTTP2_EVENTS[0]); ++i)
        sample(out, "lizard_http2_events_total", HTTP2_EVENTS[i].label, http2_event_sum(m, HTTP2_EVENTS[i].offset));
    family(out, "lizard_http1_events_total", "counter",
           "HTTP/1.1 clients the front held back: a connection that waited, before its next request, for its client to read "
           "the answers (limits.max_pipelined_unsent_bytes).");
    sample(out, "lizard_http1_events_total", "event=\"pipeline_wait\"",
           http2_event_sum(m, offsetof(h2o_context_t, http1.events.pipeline_waits)));
}

/* Requests in flight, connections refused at accept, the access log. */
static void front_metrics(text_t *out, gw_metrics_t *m)
{
    gw_access_log_stats_t ls = {0};

    metric(out, "lizard_in_flight_requests", "gauge", "Preview requests being served.", SUM(in_flight));
    family(out, "lizard_refused_connections_total", "counter",
           "Client connections closed at accept: their address (limits.max_connections_per_client) or the worker "
           "(limits.max_client_connections_per_worker) was at its limit.");
    sample(out, "lizard_refused_connections_total", "limit=\"client\"", SUM(refused_per_client));
    sample(out, "lizard_refused_connections_total", "limit=\"worker\"", SUM(refused_per_worker));
    proxy_header_metrics(out, m);
    client_hello_metrics(out, m);
    if (m->access_log != NULL)
        gw_access_log_stats(m->access_log, &ls);
    metric(out, "lizard_access_log_lines_total", "counter", "Access-log lines handed to the writer thread.", ls.written);
    family(out, "lizard_access_log_dropped_lines_total", "counter",
           "Access-log lines not written: the writer's buffer was full, or a worker's lines-per-second budget "
           "(log.access_max_lines_per_second) was spent.");
    sample(out, "lizard_access_log_dropped_lines_total", "reason=\"buffer_full\"", ls.dropped_full);
    sample(out, "lizard_access_log_dropped_lines_total", "reason=\"over_budget\"", ls.dropped_over_budget);
    metric(out, "lizard_abandoned_requests_total", "counter",
           "Requests that ended before any response began (client reset or closed); summed per connection in the log.",
           SUM(abandoned_requests));
}

/* The metering queue, its flushes and the journal (metering/metering.h). */
static void metering_metrics(text_t *out, gw_metrics_t *m)
{
    gw_metering_stats_t ms = {0};

    if (m->metering != NULL)
        gw_metering_get_stats(m->metering, &ms);
    metric(out, "lizard_metering_pending_records", "gauge", "Metering records counted and not yet written to Redis.",
           ms.pending_records);
    metric(out, "lizard_metering_pending_batches", "gauge", "Sealed metering batches waiting for Redis.", ms.pending_batches);
    metric(out, "lizard_metering_records_written_total", "counter", "Metering records written to Redis (XADD + INCRBY).",
           ms.records_written);
    metric(out, "lizard_metering_flush_failures_total", "counter", "Metering MULTI/EXEC that failed or timed out (retried).",
           ms.flush_failures);
    metric(out, "lizard_metering_records_lost_total", "counter",
           "Metering records lost: a command Redis refused inside an EXEC that ran (not retried), or at exit neither "
           "written nor spilled.",
           ms.records_lost);
    metric(out, "lizard_egress_quota_reached_total", "counter",
           "Sandboxes a metering flush found at or past their egress_quota, published on <prefix>routes so that every "
           "gateway refuses their new requests.",
           ms.quota_reached);
    metric(out, "lizard_metering_unacknowledged_batches", "gauge",
           "Metering batches executed on the primary and not yet acknowledged by a replica (Sentinel); kept in the journal.",
           ms.unacked_batches);
    metric(out, "lizard_metering_unacknowledged_bytes", "gauge", "The egress bytes of the unacknowledged metering batches.",
           ms.unacked_bytes);
    metric(out, "lizard_metering_journal_bytes", "gauge", "The size of the metering journal (metering.spill_file).",
           ms.journal_bytes);
    metric(out, "lizard_metering_journal_failures_total", "counter",
           "Metering journal writes that failed (full disk, I/O error); counts stay in memory, the next write rewrites it.",
           ms.journal_failures);
    metric(out, "lizard_metering_batches_reexecuted_total", "counter",
           "Unacknowledged metering batches executed again on a new primary that lacked them.", ms.batches_reexecuted);
    metric(out, "lizard_metering_batches_held_total", "counter",
           "Unacknowledged metering batches not executed again: the new primary held them (replication id and offset).",
           ms.batches_held);
    metric(out, "lizard_metering_unacknowledged_released_total", "counter",
           "Metering records released unacknowledged at the bound of records waiting for a replica.", ms.unacked_released);
    family(out, "lizard_metering_spill_records_total", "counter",
           "Journal records: left in it at exit, replayed at start, malformed entries skipped.");
    sample(out, "lizard_metering_spill_records_total", "op=\"written\"", ms.spill_written);
    sample(out, "lizard_metering_spill_records_total", "op=\"replayed\"", ms.spill_replayed);
    sample(out, "lizard_metering_spill_records_total", "op=\"malformed\"", ms.spill_malformed);
}

/* The live key sets, and the workers one by one. */
static void process_metrics(text_t *out, gw_metrics_t *m)
{
    char label[64];
    size_t w;

    metric(out, "lizard_cookie_secrets", "gauge",
           "Cookie secrets in the live set (the first signs); changes on a SIGHUP reload of auth.cookie_secrets_file.",
           m->cookie_keys != NULL ? gw_cookie_keys_count(m->cookie_keys) : 0);
    metric(out, "lizard_share_link_keys", "gauge",
           "Share-link keys in the live set; changes on a SIGHUP reload of auth.link_keys_file.",
           m->link_keys != NULL ? gw_link_keys_count(m->link_keys) : 0);
    metric(out, "lizard_workers", "gauge", "Worker threads.", m->num_workers);

    family(out, "lizard_worker_client_connections", "gauge", "Client connections open, by worker.");
    for (w = 0; w != m->num_workers; ++w) {
        snprintf(label, sizeof(label), "worker=\"%zu\"", w);
        sample(out, "lizard_worker_client_connections", label,
               atomic_load_explicit(&m->workers[w].client_connections, memory_order_relaxed));
    }
    family(out, "lizard_worker_redis_connected", "gauge", "1 when the worker's Redis connection is up, by worker.");
    for (w = 0; w != m->num_workers; ++w) {
        snprintf(label, sizeof(label), "worker=\"%zu\"", w);
        sample(out, "lizard_worker_redis_connected", label, (unsigned long long)atomic_load(&m->workers[w].redis_connected));
    }
}

int gw_metrics_render(gw_metrics_t *m, h2o_mem_pool_t *pool, size_t max, h2o_iovec_t *result)
{
    text_t out = {.pool = pool, .max = max};

    h2o_vector_reserve(pool, &out.buf, TEXT_INITIAL_SIZE);
    response_metrics(&out, m);
    route_metrics(&out, m);
    upstream_metrics(&out, m);
    front_metrics(&out, m);
    wake_metrics(&out, m);
    dyncert_metrics(&out, m->dyncert);
    metric(&out, "lizard_redis_connected_workers", "gauge", "Workers whose Redis connection is up.",
           (unsigned long long)atomic_load(&m->redis_ready_workers));
    metering_metrics(&out, m);
    process_metrics(&out, m);
    if (out.over)
        return -1;
    *result = h2o_iovec_init(out.buf.entries, out.buf.size);
    return 0;
}
