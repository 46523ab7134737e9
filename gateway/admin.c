/*
 * The admin listener (loopback by default): /healthz says the process
 * answers, /readyz that every worker reaches Redis and certificates are
 * loaded, /metrics exposes the counters in Prometheus text format.
 */
#include <stdarg.h>
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

static void send_metrics(h2o_req_t *req, gw_server_t *s)
{
    text_t out = {h2o_mem_alloc_pool(&req->pool, METRICS_MAX), 0};
    int i;

    append(&out, "# HELP lizard_requests_total Preview requests received.\n# TYPE lizard_requests_total counter\n");
    append(&out, "lizard_requests_total %llu\n", (unsigned long long)load(&s->stats.requests));
    append(&out, "# HELP lizard_responses_total Responses sent, by status class.\n# TYPE lizard_responses_total counter\n");
    for (i = 1; i <= 5; ++i)
        append(&out, "lizard_responses_total{class=\"%dxx\"} %llu\n", i, (unsigned long long)load(&s->stats.responses_by_class[i]));
    append(&out, "# HELP lizard_errors_total Errors the gateway produced, by contract code.\n# TYPE lizard_errors_total counter\n");
    for (i = 0; i != GW_ERR_NUM_CODES; ++i)
        append(&out, "lizard_errors_total{code=\"%s\"} %llu\n", gw_error_code_name(i),
               (unsigned long long)load(&s->stats.errors_by_code[i]));
    append(&out, "# HELP lizard_route_lookups_total Route lookups started.\n# TYPE lizard_route_lookups_total counter\n");
    append(&out, "lizard_route_lookups_total %llu\n", (unsigned long long)load(&s->stats.redis_lookups));
    append(&out, "# HELP lizard_route_cache_total Route cache outcomes: hit (no Redis call), fetch (HGETALL sent), coalesced "
                 "(joined a fetch in flight), stale (expired route served while Redis could not answer), unavailable.\n"
                 "# TYPE lizard_route_cache_total counter\n");
    append(&out, "lizard_route_cache_total{result=\"hit\"} %llu\n", (unsigned long long)load(&s->stats.routes.hits));
    append(&out, "lizard_route_cache_total{result=\"fetch\"} %llu\n", (unsigned long long)load(&s->stats.routes.fetches));
    append(&out, "lizard_route_cache_total{result=\"coalesced\"} %llu\n", (unsigned long long)load(&s->stats.routes.coalesced));
    append(&out, "lizard_route_cache_total{result=\"stale\"} %llu\n", (unsigned long long)load(&s->stats.routes.stale));
    append(&out, "lizard_route_cache_total{result=\"unavailable\"} %llu\n", (unsigned long long)load(&s->stats.routes.unavailable));
    append(&out, "# HELP lizard_route_cache_invalidations_total Cached sandboxes evicted by a message on <prefix>routes.\n"
                 "# TYPE lizard_route_cache_invalidations_total counter\n");
    append(&out, "lizard_route_cache_invalidations_total %llu\n", (unsigned long long)load(&s->stats.routes.invalidations));
    append(&out, "# HELP lizard_route_cache_flushes_total Whole-cache drops on a (re)confirmed subscription.\n"
                 "# TYPE lizard_route_cache_flushes_total counter\n");
    append(&out, "lizard_route_cache_flushes_total %llu\n", (unsigned long long)load(&s->stats.routes.flushes));
    append(&out, "# HELP lizard_route_cache_evictions_total Entries dropped to keep the cache under its size bound.\n"
                 "# TYPE lizard_route_cache_evictions_total counter\n");
    append(&out, "lizard_route_cache_evictions_total %llu\n", (unsigned long long)load(&s->stats.routes.evictions));
    {
        gw_proxy_counters_t *pc = &s->proxy_counters;
        append(&out,
               "# HELP lizard_upstream_connects_total Fresh connections to sandboxes started.\n"
               "# TYPE lizard_upstream_connects_total counter\n"
               "lizard_upstream_connects_total %llu\n",
               (unsigned long long)load(&pc->connects));
        append(&out,
               "# HELP lizard_upstream_reuses_total Requests sent on a pooled keep-alive connection.\n"
               "# TYPE lizard_upstream_reuses_total counter\n"
               "lizard_upstream_reuses_total %llu\n",
               (unsigned long long)load(&pc->reuses));
        append(&out,
               "# HELP lizard_upstream_retries_total Requests retried after a pooled connection was found dead.\n"
               "# TYPE lizard_upstream_retries_total counter\n"
               "lizard_upstream_retries_total %llu\n",
               (unsigned long long)load(&pc->retries));
        append(&out,
               "# HELP lizard_websockets_opened_total WebSocket tunnels opened.\n"
               "# TYPE lizard_websockets_opened_total counter\n"
               "lizard_websockets_opened_total %llu\n",
               (unsigned long long)load(&pc->websockets_opened));
        append(&out,
               "# HELP lizard_websockets_open WebSocket tunnels open now.\n# TYPE lizard_websockets_open gauge\n"
               "lizard_websockets_open %lld\n",
               (long long)atomic_load_explicit(&pc->websockets_open, memory_order_relaxed));
        append(&out,
               "# HELP lizard_proxied_bytes_total HTTP-level bytes of proxied exchanges, by direction.\n"
               "# TYPE lizard_proxied_bytes_total counter\n"
               "lizard_proxied_bytes_total{direction=\"egress\"} %llu\n"
               "lizard_proxied_bytes_total{direction=\"ingress\"} %llu\n",
               (unsigned long long)load(&pc->egress_bytes), (unsigned long long)load(&pc->ingress_bytes));
    }
    append(&out, "# HELP lizard_in_flight_requests Preview requests being served.\n# TYPE lizard_in_flight_requests gauge\n");
    append(&out, "lizard_in_flight_requests %llu\n", (unsigned long long)load(&s->stats.in_flight));
    append(&out, "# HELP lizard_redis_connected_workers Workers whose Redis connection is up.\n"
                 "# TYPE lizard_redis_connected_workers gauge\n");
    append(&out, "lizard_redis_connected_workers %d\n", atomic_load(&s->redis_ready_workers));
    gw_metering_stats_t ms;
    gw_metering_get_stats(s->metering, &ms);
    append(&out, "# HELP lizard_metering_pending_records Metering records counted and not yet written to Redis.\n"
                 "# TYPE lizard_metering_pending_records gauge\n");
    append(&out, "lizard_metering_pending_records %llu\n", (unsigned long long)ms.pending_records);
    append(&out, "# HELP lizard_metering_pending_batches Sealed metering batches waiting for Redis.\n"
                 "# TYPE lizard_metering_pending_batches gauge\n");
    append(&out, "lizard_metering_pending_batches %llu\n", (unsigned long long)ms.pending_batches);
    append(&out, "# HELP lizard_metering_records_written_total Metering records written to Redis (XADD + INCRBY).\n"
                 "# TYPE lizard_metering_records_written_total counter\n");
    append(&out, "lizard_metering_records_written_total %llu\n", (unsigned long long)ms.records_written);
    append(&out, "# HELP lizard_metering_flush_failures_total Metering MULTI/EXEC that failed or timed out (retried).\n"
                 "# TYPE lizard_metering_flush_failures_total counter\n");
    append(&out, "lizard_metering_flush_failures_total %llu\n", (unsigned long long)ms.flush_failures);
    append(&out, "# HELP lizard_metering_spill_records_total Spill file records: written at exit, replayed at start, "
                 "malformed lines skipped.\n# TYPE lizard_metering_spill_records_total counter\n");
    append(&out, "lizard_metering_spill_records_total{op=\"written\"} %llu\n", (unsigned long long)ms.spill_written);
    append(&out, "lizard_metering_spill_records_total{op=\"replayed\"} %llu\n", (unsigned long long)ms.spill_replayed);
    append(&out, "lizard_metering_spill_records_total{op=\"malformed\"} %llu\n", (unsigned long long)ms.spill_malformed);
    append(&out, "# HELP lizard_cookie_secrets Cookie secrets in the live set (the first signs); changes on a SIGHUP "
                 "reload of auth.cookie_secrets_file.\n# TYPE lizard_cookie_secrets gauge\n");
    append(&out, "lizard_cookie_secrets %zu\n", gw_cookie_keys_count(s->cookie_keys));
    append(&out, "# HELP lizard_workers Worker threads.\n# TYPE lizard_workers gauge\nlizard_workers %zu\n", s->num_workers);

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
