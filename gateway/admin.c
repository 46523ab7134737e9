/*
 * The admin listener (loopback by default): /healthz says the process
 * answers, /readyz that every worker reaches Redis and certificates are
 * loaded, /metrics exposes the counters in Prometheus text format.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "gateway/admin.h"
#include "gateway/worker.h"

#define METRICS_MAX 16384

static gw_server_t *server_of(h2o_req_t *req)
{
    return H2O_STRUCT_FROM_MEMBER(gw_server_t, admin_globalconf, req->conn->ctx->globalconf);
}

static void send_text(h2o_req_t *req, int status, const char *reason, const char *type, const char *body, size_t len)
{
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, type, strlen(type));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_send_inline(req, body, len);
}

static uint64_t load(atomic_uint_fast64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

typedef struct st_text_t {
    char *buf; /* METRICS_MAX bytes */
    size_t len;
} text_t;

__attribute__((format(printf, 2, 3))) static void append(text_t *t, const char *fmt, ...)
{
    va_list args;
    int n;

    va_start(args, fmt);
    n = vsnprintf(t->buf + t->len, METRICS_MAX - t->len, fmt, args);
    va_end(args);
    /* a cut line is better than an overrun; METRICS_MAX leaves ample room */
    if (n > 0)
        t->len += (size_t)n < METRICS_MAX - t->len ? (size_t)n : METRICS_MAX - t->len - 1;
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

/* The HTTP/2 front's defences (the project's h2o patches, third_party/h2o/patches/01xx): counters that h2o
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
};

static unsigned long long http2_event_sum(gw_server_t *s, size_t offset)
{
    unsigned long long sum = 0;
    size_t i;

    for (i = 0; i != s->num_workers; ++i)
        sum += __atomic_load_n((uint64_t *)((char *)&s->workers[i].ctx + offset), __ATOMIC_RELAXED);
    return sum;
}

static void send_metrics(h2o_req_t *req, gw_server_t *s)
{
    text_t out = {h2o_mem_alloc_pool(&req->pool, METRICS_MAX), 0};
    gw_route_store_counters_t *rc = &s->stats.routes;
    gw_proxy_counters_t *pc = &s->proxy_counters;
    gw_metering_stats_t ms;
    char label[64];
    int i;

    metric(&out, "lizard_requests_total", "counter", "Preview requests received.", load(&s->stats.requests));
    family(&out, "lizard_responses_total", "counter", "Responses sent, by status class.");
    for (i = 1; i <= 5; ++i) {
        snprintf(label, sizeof(label), "class=\"%dxx\"", i);
        sample(&out, "lizard_responses_total", label, load(&s->stats.responses_by_class[i]));
    }
    family(&out, "lizard_errors_total", "counter", "Errors the gateway produced, by contract code.");
    for (i = 0; i != GW_ERR_NUM_CODES; ++i) {
        snprintf(label, sizeof(label), "code=\"%s\"", gw_error_code_name(i));
        sample(&out, "lizard_errors_total", label, load(&s->stats.errors_by_code[i]));
    }

    metric(&out, "lizard_route_lookups_total", "counter", "Route lookups started.", load(&s->stats.redis_lookups));
    family(&out, "lizard_route_cache_total", "counter",
           "Route cache outcomes: hit (no Redis call), fetch (HGETALL sent), coalesced (joined a fetch in flight), "
           "stale (expired route served while Redis could not answer), unavailable.");
    sample(&out, "lizard_route_cache_total", "result=\"hit\"", load(&rc->hits));
    sample(&out, "lizard_route_cache_total", "result=\"fetch\"", load(&rc->fetches));
    sample(&out, "lizard_route_cache_total", "result=\"coalesced\"", load(&rc->coalesced));
    sample(&out, "lizard_route_cache_total", "result=\"stale\"", load(&rc->stale));
    sample(&out, "lizard_route_cache_total", "result=\"unavailable\"", load(&rc->unavailable));
    metric(&out, "lizard_route_cache_invalidations_total", "counter", "Cached sandboxes evicted by a message on <prefix>routes.",
           load(&rc->invalidations));
    metric(&out, "lizard_route_cache_flushes_total", "counter", "Whole-cache drops on a (re)confirmed subscription.",
           load(&rc->flushes));
    metric(&out, "lizard_route_cache_evictions_total", "counter", "Entries dropped to keep the cache under its size bound.",
           load(&rc->evictions));

    metric(&out, "lizard_upstream_connects_total", "counter", "Fresh connections to sandboxes started.", load(&pc->connects));
    metric(&out, "lizard_upstream_reuses_total", "counter", "Requests sent on a pooled keep-alive connection.", load(&pc->reuses));
    metric(&out, "lizard_upstream_retries_total", "counter", "Requests retried after a pooled connection was found dead.",
           load(&pc->retries));
    metric(&out, "lizard_websockets_opened_total", "counter", "WebSocket tunnels opened.", load(&pc->websockets_opened));
    metric(&out, "lizard_client_stalls_total", "counter",
           "Responses reset because the client took no byte for limits.client_stall_timeout_ms.", load(&pc->client_stalls));
    metric(&out, "lizard_buffer_budget_resets_total", "counter",
           "Responses waiting for their client reset because a connection's or the worker's buffer budget was reached.",
           load(&pc->budget_resets));
    metric(&out, "lizard_websockets_open", "gauge", "WebSocket tunnels open now.",
           (unsigned long long)atomic_load_explicit(&pc->websockets_open, memory_order_relaxed));
    family(&out, "lizard_proxied_bytes_total", "counter", "HTTP-level bytes of proxied exchanges, by direction.");
    sample(&out, "lizard_proxied_bytes_total", "direction=\"egress\"", load(&pc->egress_bytes));
    sample(&out, "lizard_proxied_bytes_total", "direction=\"ingress\"", load(&pc->ingress_bytes));

    family(&out, "lizard_http2_events_total", "counter",
           "HTTP/2 abuse the front refused: connections closed for too many stream resets (rapid reset), too many empty "
           "CONTINUATION frames or an unfinished header block; unknown frame types skipped; malformed requests reset.");
    for (i = 0; i != (int)(sizeof(HTTP2_EVENTS) / sizeof(HTTP2_EVENTS[0])); ++i)
        sample(&out, "lizard_http2_events_total", HTTP2_EVENTS[i].label, http2_event_sum(s, HTTP2_EVENTS[i].offset));

    metric(&out, "lizard_in_flight_requests", "gauge", "Preview requests being served.", load(&s->stats.in_flight));
    family(&out, "lizard_refused_connections_total", "counter",
           "Client connections closed at accept: their address (limits.max_connections_per_client) or the worker "
           "(limits.max_client_connections_per_worker) was at its limit.");
    sample(&out, "lizard_refused_connections_total", "limit=\"client\"", load(&s->stats.refused_per_client));
    sample(&out, "lizard_refused_connections_total", "limit=\"worker\"", load(&s->stats.refused_per_worker));
    {
        gw_access_log_stats_t ls;
        gw_access_log_stats(s->access_log, &ls);
        metric(&out, "lizard_access_log_lines_total", "counter", "Access-log lines handed to the writer thread.", ls.written);
        family(&out, "lizard_access_log_dropped_lines_total", "counter",
               "Access-log lines not written: the writer's buffer was full, or a worker's lines-per-second budget "
               "(log.access_max_lines_per_second) was spent.");
        sample(&out, "lizard_access_log_dropped_lines_total", "reason=\"buffer_full\"", ls.dropped_full);
        sample(&out, "lizard_access_log_dropped_lines_total", "reason=\"over_budget\"", ls.dropped_over_budget);
        metric(&out, "lizard_abandoned_requests_total", "counter",
               "Requests that ended before any response began (client reset or closed); summed per connection in the log.",
               ls.abandoned_requests);
    }
    metric(&out, "lizard_redis_connected_workers", "gauge", "Workers whose Redis connection is up.",
           (unsigned long long)atomic_load(&s->redis_ready_workers));

    gw_metering_get_stats(s->metering, &ms);
    metric(&out, "lizard_metering_pending_records", "gauge", "Metering records counted and not yet written to Redis.",
           ms.pending_records);
    metric(&out, "lizard_metering_pending_batches", "gauge", "Sealed metering batches waiting for Redis.", ms.pending_batches);
    metric(&out, "lizard_metering_records_written_total", "counter", "Metering records written to Redis (XADD + INCRBY).",
           ms.records_written);
    metric(&out, "lizard_metering_flush_failures_total", "counter", "Metering MULTI/EXEC that failed or timed out (retried).",
           ms.flush_failures);
    family(&out, "lizard_metering_spill_records_total", "counter",
           "Spill file records: written at exit, replayed at start, malformed lines skipped.");
    sample(&out, "lizard_metering_spill_records_total", "op=\"written\"", ms.spill_written);
    sample(&out, "lizard_metering_spill_records_total", "op=\"replayed\"", ms.spill_replayed);
    sample(&out, "lizard_metering_spill_records_total", "op=\"malformed\"", ms.spill_malformed);

    metric(&out, "lizard_cookie_secrets", "gauge",
           "Cookie secrets in the live set (the first signs); changes on a SIGHUP reload of auth.cookie_secrets_file.",
           gw_cookie_keys_count(s->cookie_keys));
    metric(&out, "lizard_workers", "gauge", "Worker threads.", s->num_workers);

    send_text(req, 200, "OK", "text/plain; version=0.0.4", out.buf, out.len);
}

static int needs_tls(const gw_config_t *config)
{
    size_t i;

    for (i = 0; i != config->num_listen; ++i)
        if (config->listen[i].tls)
            return 1;
    return 0;
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    gw_server_t *s = server_of(req);
    (void)self;

    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) &&
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        send_text(req, 405, "Method Not Allowed", "text/plain", H2O_STRLIT("method not allowed\n"));
        return 0;
    }
    if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/healthz"))) {
        send_text(req, 200, "OK", "text/plain", H2O_STRLIT("ok\n"));
    } else if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/readyz"))) {
        int redis = (size_t)atomic_load(&s->redis_ready_workers) == s->num_workers;
        /* loaded before the listeners opened (or no TLS listener needs them); a
         * failed reload keeps the old set, so this holds for the process's life */
        int certs = s->tls != NULL || !needs_tls(s->config);
        char body[128];
        int n = snprintf(body, sizeof(body), "{\"ready\":%s,\"redis\":%s,\"certificates\":%s}\n", redis && certs ? "true" : "false",
                         redis ? "true" : "false", certs ? "true" : "false");
        if (redis && certs)
            send_text(req, 200, "OK", "application/json", body, (size_t)n);
        else
            send_text(req, 503, "Service Unavailable", "application/json", body, (size_t)n);
    } else if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/metrics"))) {
        send_metrics(req, s);
    } else {
        send_text(req, 404, "Not Found", "text/plain", H2O_STRLIT("not found\n"));
    }
    return 0;
}

void gw_admin_register(h2o_pathconf_t *pathconf)
{
    h2o_handler_t *h = h2o_create_handler(pathconf, sizeof(*h));
    h->on_req = on_req;
}
