/*
 * The counters behind the admin listener's /metrics and their Prometheus
 * text exposition. Each worker counts into its own block (summed when
 * /metrics is read); a logger on every preview pathconf counts responses by
 * class, errors by contract code and abandoned requests. What other modules keep (route caches, proxies,
 * metering, access log, cookie secrets) is read from them at render time.
 */
#ifndef GW_OBSERVE_METRICS_H
#define GW_OBSERVE_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <h2o.h>
#include "common/counter.h"
#include "common/proxy_header.h"
#include "tls/client_hello.h"
#include "observe/access_log.h"
#include "observe/mcp.h"
#include "auth/cookie_keys.h"
#include "auth/link_keys.h"
#include "errors/cut.h"
#include "errors/errors.h"
#include "metering/metering.h"
#include "upstream/proxy.h"
#include "routing/route_store.h"
#include "routing/wake.h"
#include "common/addr_budget.h"
#include "tls/dyncert.h"

/* The largest exposition /metrics renders: far above any real one (about
 * 7 KiB plus 100 bytes per worker); over it /metrics answers 500, never a
 * cut exposition. */
#define GW_METRICS_MAX_BYTES (1024 * 1024)

/* One worker's counters. Only the worker's thread writes them (GW_COUNTER_ADD:
 * a relaxed load and store, no locked instruction, see common/counter.h);
 * /metrics reads them from any thread and sums over the workers. Each block
 * starts on its own cache line and fills whole lines, so that a request on
 * one worker never takes a line another worker writes. */
typedef struct st_gw_metrics_worker_t {
    _Alignas(GW_CACHE_LINE) atomic_uint_fast64_t requests;
    atomic_uint_fast64_t responses_by_class[6]; /* index status/100; [0] unused */
    atomic_uint_fast64_t errors_by_code[GW_ERR_NUM_CODES];
    atomic_uint_fast64_t cuts_by_reason[GW_CUT_NUM]; /* responses the gateway ended early; [GW_CUT_NONE] unused */
    atomic_uint_fast64_t route_lookups;
    /* gauge: up when the preview handler takes a request, down when the request's pool is disposed; both run
     * on the thread of the request's connection, so each worker's count is exact and never below zero */
    atomic_uint_fast64_t in_flight;
    atomic_uint_fast64_t abandoned_requests; /* ended before any response began */
    atomic_uint_fast64_t refused_per_client; /* connections closed at accept: their address is at its limit */
    atomic_uint_fast64_t refused_per_worker; /* connections closed at accept: the worker is at its limit */
    atomic_uint_fast64_t client_connections;
    gw_route_store_counters_t routes;  /* the worker's route cache */
    gw_route_store_counters_t domains; /* the worker's custom-domain cache (routing/domain_store.h), counted alike */
    gw_proxy_counters_t proxy;         /* the worker's proxy; its websockets_open gauge goes up and down on this worker */
    gw_wake_counters_t wake;           /* the worker's held-request registry; its held gauge likewise */
    h2o_context_t *ctx;                /* its HTTP/2 event counters (h2o's relaxed atomics); borrowed, set before the worker runs */
    atomic_int redis_connected;
    gw_proxy_header_counters_t proxy_header;               /* the proxy_protocol listeners' headers (gateway/proxy_protocol.h) */
    gw_client_hello_counters_t client_hello;               /* the ClientHellos peeked on TLS listeners (gateway/sni_peek.h) */
    atomic_uint_fast64_t mcp_requests[GW_MCP_NUM_METHODS]; /* requests with an Mcp-Method header, by method (observe/mcp.h) */
} gw_metrics_worker_t;

typedef struct st_gw_metrics_t {
    gw_metrics_worker_t *workers; /* [num_workers], cache-line aligned */
    size_t num_workers;
    atomic_int redis_ready_workers; /* changes only when a Redis connection goes up or down */
    /* read at render time; borrowed; NULL shows as zero */
    gw_metering_t *metering;
    gw_access_log_t *access_log;
    gw_cookie_keys_t *cookie_keys;
    gw_link_keys_t *link_keys;
    gw_dyncert_t *dyncert;           /* custom-domain certificates (tls/dyncert.h) */
    gw_addr_budget_t *domain_budget; /* custom-domain look-ups in Redis (common/addr_budget.h); NULL: none */
} gw_metrics_t;

/* Zeroes m and allocates its per-worker blocks, zeroed (aborts on out of memory). */
void gw_metrics_init(gw_metrics_t *m, size_t num_workers);
void gw_metrics_dispose(gw_metrics_t *m);

/* Installs the logger that counts every response of `pathconf` into the
 * block of the worker whose context serves it. */
void gw_metrics_register(h2o_pathconf_t *pathconf, gw_metrics_t *m);

/* The block of the worker whose h2o context is `ctx` (workers[i].ctx); a
 * context of no worker is a programming error and aborts. For
 * on_context_init callbacks: a linear search. */
gw_metrics_worker_t *gw_metrics_worker_of(gw_metrics_t *m, h2o_context_t *ctx);

/* Preview requests being served now, all workers. Any thread. */
uint64_t gw_metrics_in_flight(gw_metrics_t *m);

/* Worker `index`'s Redis connection went up (1) or down (0); repeats are ignored. */
void gw_metrics_set_redis(gw_metrics_t *m, size_t index, int connected);

/* 1 when every worker's Redis connection is up. */
int gw_metrics_redis_ready(gw_metrics_t *m);

/* Renders the exposition into *out (allocated from pool). Returns 0, or -1
 * when it would be larger than max bytes (nothing is cut). Any thread. */
int gw_metrics_render(gw_metrics_t *m, h2o_mem_pool_t *pool, size_t max, h2o_iovec_t *out);

#endif
