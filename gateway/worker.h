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
#include "common/engine.h"
#include "observe/access_log.h"
#include "config/config.h"
#include "limits/conn_limit.h"
#include "limits/rate_limit.h"
#include "auth/cookie_keys.h"
#include "auth/link_keys.h"
#include "observe/metrics.h"
#include "http/pipeline.h"
#include "metering/worker_meter.h"
#include "metering/metering.h"
#include "upstream/proxy.h"
#include "limits/revocation.h"
#include "common/redis.h"
#include "routing/domain_store.h"
#include "routing/route_store.h"
#include "http/acme.h"
#include "routing/wake.h"
#include "tls/cert_fetch.h"
#include "tls/tls.h"

typedef struct st_gw_worker_t gw_worker_t;

typedef struct st_gw_server_t {
    const gw_config_t *config;
    gw_tls_t *tls;                  /* NULL when no TLS listener */
    gw_conn_limit_t *conn_limit;    /* limits.max_connections_per_sandbox, across workers */
    gw_conn_limit_t *client_conns;  /* limits.max_connections_per_client: connections per client address */
    gw_conn_limit_t *client_reqs;   /* limits.max_connections_per_client: requests in flight per client address */
    gw_rate_limit_t *rate_limit;    /* req_rate: the sandboxes' token buckets, across workers */
    gw_rate_limit_t *stream_errors; /* limits.max_stream_errors_per_client: per client address, across workers; NULL: off */
    gw_conn_limit_t *held_reqs;     /* limits.max_held_requests_per_sandbox: requests held per waking sandbox, across workers */
    gw_cookie_keys_t *cookie_keys;  /* the live cookie secrets; replaced on SIGHUP by main */
    gw_link_keys_t *link_keys;      /* the live share-link keys (empty: links off); reloaded on SIGHUP by main */
    gw_addr_budget_t
        *domain_budget; /* custom-domain look-ups in Redis per client address and per process (routing.domain_lookup*) */
    h2o_globalconf_t globalconf;
    h2o_hostconf_t *preview_hosts[2];     /* {preview hostconf, NULL}: TLS and trusted plain listeners */
    h2o_hostconf_t *(*listener_hosts)[2]; /* per listener, a copy of preview_hosts or redirect_hosts: a
                                             connection's `hosts` pointer then tells which listener took it */
    h2o_hostconf_t *redirect_hosts[2];    /* {redirect hostconf, NULL}: plain listeners */
    uint16_t https_port;                  /* port of the first TLS listener, for redirects */
    h2o_globalconf_t admin_globalconf;
    h2o_hostconf_t *admin_hosts[2];
    int access_log_fd;                /* -1: off */
    gw_access_log_t *access_log;      /* NULL: off */
    gw_pipeline_t *pipeline;          /* the preview handler: each worker attaches its objects to it */
    gw_pipeline_redirect_t *redirect; /* the plain listeners' handler: each worker attaches its custom domains */
    gw_acme_t *acme[2];               /* the ACME HTTP-01 responders of the preview and redirect hostconfs */
    int *listen_fds;                  /* [worker * num_listen + i] */
    int admin_fd;                     /* -1: none; accepted by worker 0 */
    gw_worker_t *workers;
    size_t num_workers;
    atomic_int stopping; /* set by main on SIGTERM/SIGINT */
    gw_metrics_t metrics;
    gw_metering_t *metering; /* shared; its flusher runs on worker 0 */
    /* start-up: each worker reports once whether it could build its objects */
    pthread_mutex_t start_mutex;
    pthread_cond_t start_cond;
    size_t num_reported;
    char *start_err; /* the first failure, NULL if none */
} gw_server_t;

struct st_gw_worker_t {
    gw_server_t *server;
    size_t index;
    pthread_t thread;
    h2o_context_t ctx;
    h2o_context_t admin_ctx;       /* worker 0 only */
    h2o_accept_ctx_t *accept_ctxs; /* one per listener */
    h2o_socket_t **listeners;
    h2o_accept_ctx_t admin_accept_ctx;
    h2o_socket_t *admin_listener;
    gw_redis_t *redis;
    gw_redis_t *routes_sub; /* SUBSCRIBEd to <prefix>routes for the route cache */
    gw_route_store_t *routes;
    gw_domain_store_t *domains;  /* custom domains, kept in step by the route store's subscription */
    gw_cert_fetch_t *cert_fetch; /* NULL without custom-domain certificates */
    gw_proxy_t *proxy;
    gw_revocation_t *revocation; /* the proxy's open exchanges and tunnels by sandbox, rechecked on publishes */
    gw_worker_meter_t *meter;    /* this worker's byte counts and activity, handed to server->metering every flush interval */
    gw_wake_t *wake;             /* requests held while their sandbox wakes */
    gw_hangup_t *hangup;         /* notices HTTP/1 clients that leave while held; NULL: not watched */
    gw_timeout_t
        *proxy_header_timeout; /* limits.proxy_header_timeout_ms (gateway/proxy_protocol.h), the loop's (common/loop_timeout.h) */
    gw_timeout_t *client_hello_timeout; /* h2o's handshake timeout, for the SNI peek (gateway/sni_peek.h), the loop's; NULL
                                         * until the first peek (accept.c) */
};

/* Builds the shared server state: h2o configuration, handlers, listening
 * sockets (bound here, so that a busy port is reported before any thread
 * starts). Returns 0, or -1 with *err (malloc'd). */
int gw_server_init(gw_server_t *s, const gw_config_t *config, gw_tls_t *tls, char **err);

/* The Redis connection settings of every connection the gateway opens
 * (lookups, subscriptions, metering, the final flush): borrows from conf. */
void gw_server_redis_conf(const gw_config_t *conf, gw_redis_conf_t *out);

/* Starts every worker thread and waits until each has built its objects
 * (Redis connections, route store, proxy, meter; worker 0 the metering
 * flusher). Returns 0, or -1 with *err (malloc'd) naming what did not start. */
int gw_server_start(gw_server_t *s, char **err);

/* Asks workers to stop accepting, waits up to drain_ms for in-flight
 * requests, then joins the threads. */
void gw_server_stop(gw_server_t *s, uint64_t drain_ms);

void gw_server_dispose(gw_server_t *s);

#endif
