/*
 * The process and its threads. gw_server_t is built once by main from the
 * frozen config and shared read-only (plus a few atomic counters); each
 * gw_worker_t is one thread with its own h2o event loop, Redis connection,
 * route store and upstream pools, accepting on its own SO_REUSEPORT sockets.
 */
#ifndef GW_GATEWAY_WORKER_H
#define GW_GATEWAY_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <h2o.h>
#include "gateway/access_log.h"
#include "gateway/config.h"
#include "gateway/conn_limit.h"
#include "gateway/cookie_keys.h"
#include "gateway/errors.h"
#include "metering/metering.h"
#include "gateway/proxy.h"
#include "gateway/revocation.h"
#include "routing/redis.h"
#include "routing/route_store.h"
#include "tls/tls.h"

typedef struct st_gw_worker_t gw_worker_t;

/* Counters for /metrics: written by workers with relaxed atomics. */
typedef struct st_gw_stats_t {
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t responses_by_class[6]; /* index status/100; [0] unused */
    atomic_uint_fast64_t errors_by_code[GW_ERR_NUM_CODES];
    atomic_uint_fast64_t redis_lookups;
    atomic_uint_fast64_t in_flight;
    atomic_uint_fast64_t refused_per_client; /* connections closed at accept: their address is at its limit */
    atomic_uint_fast64_t refused_per_worker; /* connections closed at accept: the worker is at its limit */
    gw_route_store_counters_t routes;        /* the route caches of all workers */
} gw_stats_t;

typedef struct st_gw_server_t {
    const gw_config_t *config;
    gw_tls_t *tls;                 /* NULL when no TLS listener */
    gw_conn_limit_t *conn_limit;   /* limits.max_connections_per_sandbox, across workers */
    gw_conn_limit_t *client_conns; /* limits.max_connections_per_client: connections per client address */
    gw_conn_limit_t *client_reqs;  /* limits.max_connections_per_client: requests in flight per client address */
    gw_cookie_keys_t *cookie_keys; /* the live cookie secrets; replaced on SIGHUP by main */
    h2o_globalconf_t globalconf;
    h2o_hostconf_t *preview_hosts[2];     /* {preview hostconf, NULL}: TLS and trusted plain listeners */
    h2o_hostconf_t *(*listener_hosts)[2]; /* per listener, a copy of preview_hosts or redirect_hosts: a
                                             connection's `hosts` pointer then tells which listener took it */
    h2o_hostconf_t *redirect_hosts[2];    /* {redirect hostconf, NULL}: plain listeners */
    uint16_t https_port;                  /* port of the first TLS listener, for redirects */
    h2o_globalconf_t admin_globalconf;
    h2o_hostconf_t *admin_hosts[2];
    int access_log_fd;           /* -1: off */
    gw_access_log_t *access_log; /* always: it counts for /metrics even when not logging */
    int *listen_fds;             /* [worker * num_listen + i] */
    int admin_fd;                /* -1: none; accepted by worker 0 */
    gw_worker_t *workers;
    size_t num_workers;
    atomic_int stopping; /* set by main on SIGTERM/SIGINT */
    atomic_int redis_ready_workers;
    gw_stats_t stats;
    gw_proxy_counters_t proxy_counters;
    gw_metering_t *metering; /* shared; its flusher runs on worker 0 */
} gw_server_t;

struct st_gw_worker_t {
    gw_server_t *server;
    size_t index;
    pthread_t thread;
    h2o_context_t ctx;
    h2o_context_t admin_ctx;       /* worker 0 only */
    h2o_accept_ctx_t *accept_ctxs; /* one per listener */
    size_t client_connections;     /* open client connections (limits.max_client_connections_per_worker) */
    h2o_socket_t **listeners;
    h2o_accept_ctx_t admin_accept_ctx;
    h2o_socket_t *admin_listener;
    gw_redis_t *redis;
    int redis_ready;
    gw_redis_t *routes_sub; /* SUBSCRIBEd to <prefix>routes for the route cache */
    gw_route_store_t *routes;
    gw_proxy_t *proxy;
    gw_revocation_t *revocation; /* the proxy's open exchanges and tunnels by sandbox, rechecked on publishes */
    gw_meter_t *meter;           /* this worker's byte counts, handed to server->metering every flush interval */
    h2o_timeout_t meter_timeout;
    h2o_timeout_entry_t meter_tick;
};

/* Builds the shared server state: h2o configuration, handlers, listening
 * sockets (bound here, so that a busy port is reported before any thread
 * starts). Returns 0, or -1 with *err (malloc'd). */
int gw_server_init(gw_server_t *s, const gw_config_t *config, gw_tls_t *tls, char **err);

/* The Redis connection settings of every connection the gateway opens
 * (lookups, subscriptions, metering, the final flush): borrows from conf. */
void gw_server_redis_conf(const gw_config_t *conf, gw_redis_conf_t *out);

/* Starts every worker thread; returns 0 or -1 with *err. */
int gw_server_start(gw_server_t *s, char **err);

/* Asks workers to stop accepting, waits up to drain_ms for in-flight
 * requests, then joins the threads. */
void gw_server_stop(gw_server_t *s, uint64_t drain_ms);

void gw_server_dispose(gw_server_t *s);

/* The port of the listener that accepted `conn` (X-Forwarded-Port), without
 * a system call; 0 if unknown. */
uint16_t gw_server_listener_port(const gw_server_t *s, const h2o_conn_t *conn);

/* 1 when `conn` came through a trusted plain listener (a load balancer:
 * X-Forwarded-For names the client), else 0. */
int gw_server_listener_trusted(const gw_server_t *s, const h2o_conn_t *conn);

/* The address of a socket's peer as text (IPv4-mapped IPv6 as IPv4) into
 * buf of at least INET6_ADDRSTRLEN bytes. Returns 0, or -1 when unknown. */
int gw_peer_address(struct sockaddr *sa, socklen_t len, char *buf, size_t bufsize);

/* The worker whose preview context is `ctx` (not for the admin context:
 * admin handlers reach the server through their globalconf). */
gw_worker_t *gw_worker_of(h2o_context_t *ctx);

#endif
