/*
 * The counters behind the admin listener's /metrics and their Prometheus
 * text exposition. Workers count with relaxed atomics; a logger on every
 * preview pathconf counts responses by class, errors by contract code and
 * abandoned requests. What other modules keep (route caches, proxies,
 * metering, access log, cookie secrets) is read from them at render time.
 */
#ifndef GW_GATEWAY_METRICS_H
#define GW_GATEWAY_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include <h2o.h>
#include "gateway/access_log.h"
#include "auth/cookie_keys.h"
#include "auth/link_keys.h"
#include "gateway/errors.h"
#include "metering/metering.h"
#include "upstream/proxy.h"
#include "routing/route_store.h"
#include "routing/wake.h"

/* The largest exposition /metrics renders: far above any real one (about
 * 7 KiB plus 100 bytes per worker); over it /metrics answers 500, never a
 * cut exposition. */
#define GW_METRICS_MAX_BYTES (1024 * 1024)

/* What one worker shows by itself. */
typedef struct st_gw_metrics_worker_t {
    h2o_context_t *ctx; /* its HTTP/2 event counters (h2o's relaxed atomics); borrowed, zeroed until the worker runs */
    atomic_uint_fast64_t client_connections;
    atomic_int redis_connected;
} gw_metrics_worker_t;

typedef struct st_gw_metrics_t {
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t responses_by_class[6]; /* index status/100; [0] unused */
    atomic_uint_fast64_t errors_by_code[GW_ERR_NUM_CODES];
    atomic_uint_fast64_t route_lookups;
    atomic_uint_fast64_t in_flight;
    atomic_uint_fast64_t abandoned_requests; /* ended before any response began */
    atomic_uint_fast64_t refused_per_client; /* connections closed at accept: their address is at its limit */
    atomic_uint_fast64_t refused_per_worker; /* connections closed at accept: the worker is at its limit */
    atomic_int redis_ready_workers;
    gw_route_store_counters_t routes; /* the route caches of all workers */
    gw_proxy_counters_t proxy;        /* the proxies of all workers */
    gw_wake_counters_t wake;          /* the held-request registries of all workers */
    gw_metrics_worker_t *workers;
    size_t num_workers;
    /* read at render time; borrowed; NULL shows as zero */
    gw_metering_t *metering;
    gw_access_log_t *access_log;
    gw_cookie_keys_t *cookie_keys;
    gw_link_keys_t *link_keys;
} gw_metrics_t;

/* Zeroes m and allocates its per-worker part (aborts on out of memory). */
void gw_metrics_init(gw_metrics_t *m, size_t num_workers);
void gw_metrics_dispose(gw_metrics_t *m);

/* Installs the logger that counts every response of `pathconf` into m. */
void gw_metrics_register(h2o_pathconf_t *pathconf, gw_metrics_t *m);

/* Worker `index`'s Redis connection went up (1) or down (0); repeats are ignored. */
void gw_metrics_set_redis(gw_metrics_t *m, size_t index, int connected);

/* 1 when every worker's Redis connection is up. */
int gw_metrics_redis_ready(gw_metrics_t *m);

/* Renders the exposition into *out (allocated from pool). Returns 0, or -1
 * when it would be larger than max bytes (nothing is cut). Any thread. */
int gw_metrics_render(gw_metrics_t *m, h2o_mem_pool_t *pool, size_t max, h2o_iovec_t *out);

#endif
