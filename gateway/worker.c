/*
 * The process and its worker threads: h2o configuration, listening sockets
 * (one SO_REUSEPORT socket per listener per worker, bound before any thread
 * starts), and each worker's loop with its own Redis connection, route store
 * and upstream pools.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "common/keepalive.h"
#include "common/errfmt.h"
#include "common/loop_timeout.h"
#include "observe/access_log.h"
#include "observe/admin.h"
#include "tls/ktls.h"
#include "http/early_errors.h"
#include "http/pipeline.h"
#include "gateway/accept.h"
#include "gateway/worker.h"

#define LISTEN_BACKLOG 1024
#define LOOP_TICK_MS 100
/* at exit, how long worker 0 waits for the answer to a metering MULTI/EXEC in flight */
#define METERING_EXEC_WAIT_MS 1000

/* Zeroed memory; aborts on out of memory (h2o_mem_alloc). */
static void *alloc_zeroed(size_t size)
{
    return memset(h2o_mem_alloc(size), 0, size);
}

static int open_listener(const gw_netaddr_t *addr, int reuseport, char **err, const char *name)
{
    int fd, on = 1;

    if ((fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
        goto Error;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0)
        goto Error;
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0)
        goto Error;
    if (addr->ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) != 0)
        goto Error;
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0)
        goto Error;
    if (listen(fd, LISTEN_BACKLOG) != 0)
        goto Error;
    /* TCP_NODELAY for accepted sockets is set by h2o; keepalive is inherited from here (docs/long-calls.md, Long calls) */
    if ((addr->ss.ss_family == AF_INET || addr->ss.ss_family == AF_INET6) && gw_tcp_keepalive_set(fd) != 0)
        goto Error;
    return fd;

Error:
    gw_errorf(err, "listen: %s: %s", name, strerror(errno));
    if (fd != -1)
        close(fd);
    return -1;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static h2o_hostconf_t *register_catch_all(h2o_globalconf_t *conf, const char *name)
{
    /* The only hostconf of its accept context, so h2o uses it for every Host. */
    return h2o_config_register_host(conf, h2o_iovec_init(name, strlen(name)), 65535);
}

/* The loggers of every preview pathconf: the metrics always, the access log when there is one. */
static void register_loggers(gw_server_t *s, h2o_pathconf_t *pathconf)
{
    gw_metrics_register(pathconf, &s->metrics);
    if (s->access_log != NULL)
        gw_access_log_register(pathconf, s->access_log);
    /* error codes are recorded for the log and the metrics (gw_error_note), not printed */
    pathconf->error_log.emit_request_errors = 0;
}

/* The access log's client: the pipeline's (a trusted listener's X-Forwarded-For), as limits and ingress see it. */
static int access_log_client(void *arg, h2o_req_t *req, char *buf, size_t bufsize)
{
    gw_server_t *s = arg;
    gw_pipeline_conf_t conf = {.config = s->config, .listener_hosts = s->listener_hosts};

    return gw_pipeline_client_text(&conf, req, buf, bufsize);
}

static int open_access_log(gw_server_t *s, char **err)
{
    const gw_config_t *config = s->config;

    if (config->log.access == NULL)
        return 0;
    if (strcmp(config->log.access, "-") == 0) {
        s->access_log_fd = dup(1);
    } else if ((s->access_log_fd = open(config->log.access, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640)) == -1) {
        return gw_errorf(err, "log.access: %s: %s", config->log.access, strerror(errno));
    }
    gw_access_log_conf_t lconf = {.domains = config->domains,
                                  .num_domains = config->num_domains,
                                  .max_lines_per_second = config->log.access_max_lines_per_second,
                                  .client_text = access_log_client,
                                  .client_arg = s};
    s->access_log = gw_access_log_new(s->access_log_fd, s->num_workers, &lconf);
    return 0;
}

/* The preview and redirect hostconfs, their handlers and loggers. */
static void register_front(gw_server_t *s)
{
    const gw_config_t *config = s->config;
    h2o_pathconf_t *pathconf;
    size_t i;

    s->https_port = 443;
    for (i = 0; i != config->num_listen; ++i) {
        if (config->listen[i].tls) {
            s->https_port = gw_netaddr_port(&config->listen[i].addr);
            break;
        }
    }
    gw_pipeline_conf_t pconf = {.config = config,
                                .metrics = &s->metrics,
                                .cookie_keys = s->cookie_keys,
                                .link_keys = s->link_keys,
                                .conn_limit = s->conn_limit,
                                .client_reqs = s->client_reqs,
                                .rate_limit = s->rate_limit,
                                .stream_errors = s->stream_errors,
                                .listener_hosts = s->listener_hosts,
                                .https_port = s->https_port};

    s->preview_hosts[0] = register_catch_all(&s->globalconf, "preview.lizard-gateway.invalid");
    s->redirect_hosts[0] = register_catch_all(&s->globalconf, "redirect.lizard-gateway.invalid");
    /* ACME HTTP-01 on every listener, before "/" (h2o takes the first path that matches); the pathconf
     * pointer is used before the next registration moves it */
    gw_acme_conf_t aconf = {.prefix = config->redis.prefix, .lookup_timeout_ms = config->redis.lookup_timeout_ms};
    for (i = 0; i != 2; ++i) {
        pathconf = h2o_config_register_path(i == 0 ? s->preview_hosts[0] : s->redirect_hosts[0], GW_ACME_PATH, 0);
        s->acme[i] = gw_acme_register(pathconf, &aconf);
        register_loggers(s, pathconf);
    }
    pathconf = h2o_config_register_path(s->preview_hosts[0], "/", 0);
    s->pipeline = gw_pipeline_register(pathconf, &pconf);
    register_loggers(s, pathconf);

    pathconf = h2o_config_register_path(s->redirect_hosts[0], "/", 0);
    s->redirect = gw_pipeline_register_redirect(pathconf, &pconf);
    register_loggers(s, pathconf);

    /* h2o binds the requests it fails before routing to the fallback paths:
     * h2o's own 413 (HTTP/1) becomes body_too_large, logged and counted */
    gw_early_errors_register(&s->preview_hosts[0]->fallback_path, config);
    register_loggers(s, &s->preview_hosts[0]->fallback_path);
    gw_early_errors_register(&s->redirect_hosts[0]->fallback_path, config);
    register_loggers(s, &s->redirect_hosts[0]->fallback_path);

    for (i = 0; i != config->num_listen; ++i) {
        h2o_hostconf_t **from = (config->listen[i].tls || config->listen[i].trusted) ? s->preview_hosts : s->redirect_hosts;
        s->listener_hosts[i][0] = from[0];
        s->listener_hosts[i][1] = NULL;
    }
}

/* h2o's settings of the client front. */
static void init_globalconf(h2o_globalconf_t *g, const gw_config_t *config)
{
    h2o_config_init(g);
    g->server_name = h2o_iovec_init(H2O_STRLIT("lizard-gateway"));
    g->max_request_entity_size = config->limits.max_request_body_bytes;
    g->http1.upgrade_to_http2 = 0; /* an "Upgrade: h2c" from a client must not turn into HTTP/2 behind our back */
    gw_globalconf_http2_reset_policy(g);
    gw_globalconf_contract_defaults(g); /* where h2o master's defaults differ from the contract (common/engine.h) */
    /* h2o answers 431 past it, HTTP/2 while decoding (patch 0150): the head never reaches the pipeline */
    g->max_request_head_size = config->limits.max_request_head_bytes;
    /* h2o patch 0320: a client that keeps sending requests without reading the answers */
    g->http1.max_requests_per_connection = config->limits.max_requests_per_connection;
    g->http1.max_pipelined_unsent = config->limits.max_pipelined_unsent_bytes;
}

/* The custom-domain look-ups in Redis a client address, and the process, may cause (tls/cert_fetch.c and the
 * domain stores share it). */
static gw_addr_budget_t *new_domain_budget(const gw_config_t *config)
{
    gw_addr_budget_conf_t conf = {.per_client_rate = config->routing.domain_lookups_per_second_per_client,
                                  .per_client_burst = config->routing.domain_lookup_burst_per_client,
                                  .total_rate = config->routing.domain_lookups_per_second,
                                  .total_burst = config->routing.domain_lookups_per_second};
    return gw_addr_budget_new(&conf);
}

int gw_server_init(gw_server_t *s, const gw_config_t *config, gw_tls_t *tls, char **err)
{
    size_t i, w, num_listen = config->num_listen != 0 ? config->num_listen : 1;

    memset(s, 0, sizeof(*s));
    s->config = config;
    s->tls = tls;
    s->access_log_fd = -1;
    s->admin_fd = -1;
    s->num_workers = config->workers;
    pthread_mutex_init(&s->start_mutex, NULL);
    pthread_cond_init(&s->start_cond, NULL);
    gw_metrics_init(&s->metrics, s->num_workers);

    init_globalconf(&s->globalconf, config);
    if (open_access_log(s, err) != 0)
        return -1;
    s->conn_limit = gw_conn_limit_new(config->limits.max_connections_per_sandbox, s->num_workers);
    s->client_conns = gw_conn_limit_new(config->limits.max_connections_per_client, s->num_workers);
    s->client_reqs = gw_conn_limit_new(config->limits.max_connections_per_client, s->num_workers);
    s->rate_limit = gw_rate_limit_new();
    if (config->limits.max_stream_errors_per_client != 0)
        s->stream_errors = gw_rate_limit_new_watched();
    s->domain_budget = new_domain_budget(config);
    s->held_reqs = gw_conn_limit_new(config->limits.max_held_requests_per_sandbox, s->num_workers);
    s->cookie_keys = gw_cookie_keys_new(&(gw_cookie_keys_config_t){.file = config->auth.cookie_secrets_file,
                                                                   .secrets = config->auth.cookie_secrets,
                                                                   .num_secrets = config->auth.num_cookie_secrets});
    char *why = NULL;
    if ((s->link_keys = gw_link_keys_new(config->auth.link_keys_env, config->auth.link_keys_file, &why)) == NULL) {
        gw_errorf(err, "auth: share link keys: %s", why);
        free(why);
        return -1;
    }

    s->listener_hosts = alloc_zeroed(num_listen * sizeof(*s->listener_hosts));
    register_front(s);

    h2o_config_init(&s->admin_globalconf);
    s->admin_globalconf.server_name = s->globalconf.server_name;
    s->admin_hosts[0] = register_catch_all(&s->admin_globalconf, "admin.lizard-gateway.invalid");
    gw_admin_conf_t aconf = {.metrics = &s->metrics, .tls = tls, .ktls = gw_ktls_checked()};
    for (i = 0; i != config->num_listen; ++i)
        aconf.tls_listeners |= config->listen[i].tls;
    gw_admin_register(h2o_config_register_path(s->admin_hosts[0], "/", 0), &aconf);

    s->listen_fds = alloc_zeroed(sizeof(int) * s->num_workers * num_listen);
    for (w = 0; w != s->num_workers; ++w) {
        for (i = 0; i != config->num_listen; ++i) {
            int fd = open_listener(&config->listen[i].addr, 1, err, config->listen[i].address);
            if (fd == -1)
                return -1;
            s->listen_fds[w * config->num_listen + i] = fd;
        }
    }
    if (config->admin.address != NULL && (s->admin_fd = open_listener(&config->admin.addr, 0, err, config->admin.address)) == -1)
        return -1;

    /* locks the spill file (one gateway per file) and reads what the
     * previous run left in it, before any worker can count */
    gw_metering_conf_t mconf = {config->redis.prefix, config->instance_id, config->metering.spill_file,
                                config->metering.journal_interval_ms};
    if ((s->metering = gw_metering_new(&mconf, wall_ms(), err)) == NULL)
        return -1;
    s->metrics.metering = s->metering;
    s->metrics.access_log = s->access_log;
    s->metrics.cookie_keys = s->cookie_keys;
    s->metrics.link_keys = s->link_keys;
    s->metrics.dyncert = gw_tls_dynamic(tls);
    s->metrics.domain_budget = s->domain_budget;

    s->workers = alloc_zeroed(s->num_workers * sizeof(*s->workers));
    for (w = 0; w != s->num_workers; ++w) {
        s->workers[w].server = s;
        s->workers[w].index = w;
        s->metrics.workers[w].ctx = &s->workers[w].ctx;
    }
    return 0;
}

static void on_redis_state(void *data, int connected)
{
    gw_worker_t *w = data;

    gw_metrics_set_redis(&w->server->metrics, w->index, connected);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void close_listeners(gw_worker_t *w)
{
    size_t i;

    for (i = 0; i != w->server->config->num_listen; ++i) {
        if (w->listeners[i] != NULL) {
            h2o_socket_read_stop(w->listeners[i]);
            h2o_socket_close(w->listeners[i]);
            w->listeners[i] = NULL;
        }
    }
    if (w->admin_listener != NULL) {
        h2o_socket_read_stop(w->admin_listener);
        h2o_socket_close(w->admin_listener);
        w->admin_listener = NULL;
    }
}

/* The route store saw a sandbox get a new lifecycle (or vanish): pooled
 * connections to the old microVM are of no use any more. */
static void on_route_lifecycle(void *data, const char *sandbox_id, const char *lifecycle)
{
    gw_worker_t *w = data;

    if (w->proxy != NULL)
        gw_proxy_drop_pools(w->proxy, sandbox_id, lifecycle);
}

/* The held-request registry's slots (gw_wake_slots_t): a sandbox's held
 * requests count across workers, as the contract's per-gateway limit reads. */
static int acquire_held_slot(void *data, const char *sandbox_id)
{
    gw_worker_t *w = data;
    return gw_conn_limit_acquire(w->server->held_reqs, w->index, sandbox_id);
}

static void release_held_slot(void *data, const char *sandbox_id)
{
    gw_worker_t *w = data;
    gw_conn_limit_release(w->server->held_reqs, w->index, sandbox_id);
}

/* A publish on <prefix>routes (NULL: the subscription was confirmed again):
 * open exchanges and tunnels are rechecked, held requests read their
 * sandbox again. */
static void on_route_invalidate(void *data, const char *sandbox_id)
{
    gw_worker_t *w = data;

    gw_revocation_on_publish(w->revocation, sandbox_id);
    gw_wake_on_publish(w->wake, sandbox_id);
    if (sandbox_id == NULL)
        gw_domain_store_flush(w->domains);
    if (sandbox_id == NULL && w->cert_fetch != NULL) /* messages may have been lost: custom certificates are confirmed again */
        gw_cert_fetch_on_publish(w->cert_fetch, NULL, 0);
}

/* A message on <prefix>routes that names no sandbox: "domain:<host>" evicts a custom domain (its route) and,
 * with "cert:<name>", custom-domain certificates. */
static void on_route_other_message(void *data, const char *payload, size_t len)
{
    gw_worker_t *w = data;

    gw_domain_store_on_message(w->domains, payload, len);
    if (w->cert_fetch != NULL)
        gw_cert_fetch_on_publish(w->cert_fetch, payload, len);
}

void gw_server_redis_conf(const gw_config_t *conf, gw_redis_conf_t *out)
{
    *out = (gw_redis_conf_t){.addr = conf->redis.addr,
                             .password = conf->redis.password,
                             .connect_timeout_ms = conf->redis.connect_timeout_ms,
                             .reconnect_min_ms = 50,
                             .reconnect_max_ms = conf->redis.reconnect_max_ms,
                             .sentinels = conf->redis.sentinel_addrs,
                             .num_sentinels = conf->redis.num_sentinels,
                             .master_name = conf->redis.master_name,
                             .sentinel_password = conf->redis.sentinel_password};
}

/* --- the worker's per-thread state: each module builds its own, from the
 * frozen config, in THREAD_INITS order (a later one uses what an earlier one
 * built). An init returns 0, or -1 with *err naming what did not start. */

/* Routing: the worker's Redis connections, its route store (subscribed to
 * <prefix>routes: each worker hears every invalidation itself), the
 * requests held while a sandbox wakes, and the revocation watch, which
 * re-reads the record of a sandbox with open exchanges or tunnels on a
 * publish and closes what it refuses (on_route_invalidate). */
static int init_routing(gw_worker_t *w, char **err)
{
    gw_server_t *s = w->server;
    const gw_config_t *conf = s->config;
    h2o_loop_t *loop = w->ctx.loop;
    gw_redis_conf_t rconf;

    gw_server_redis_conf(conf, &rconf);
    /* constructors that cannot fail (out of memory aborts) are not checked */
    w->redis = gw_redis_new(loop, &rconf);
    w->routes_sub = gw_redis_new(loop, &rconf);
    gw_redis_set_state_cb(w->redis, on_redis_state, w);
    w->revocation = gw_revocation_new(loop, NULL);
    gw_route_store_conf_t sconf = {.prefix = conf->redis.prefix,
                                   .lookup_timeout_ms = conf->redis.lookup_timeout_ms,
                                   .cache_ttl_ms = conf->routing.cache_ttl_ms,
                                   .negative_ttl_ms = conf->routing.negative_ttl_ms,
                                   .stale_ttl_ms = conf->routing.stale_ttl_ms,
                                   .max_port_timeout_ms = conf->upstream.max_port_timeout_ms,
                                   .counters = &s->metrics.workers[w->index].routes,
                                   .on_lifecycle = on_route_lifecycle,
                                   .lifecycle_data = w,
                                   .on_invalidate = on_route_invalidate,
                                   .invalidate_data = w,
                                   .on_other_message = on_route_other_message,
                                   .other_message_data = w};
    w->routes = gw_route_store_new(loop, w->redis, &sconf);
    gw_domain_store_conf_t dconf = {.prefix = conf->redis.prefix,
                                    .lookup_timeout_ms = conf->redis.lookup_timeout_ms,
                                    .cache_ttl_ms = conf->routing.cache_ttl_ms,
                                    .negative_ttl_ms = conf->routing.negative_ttl_ms,
                                    .stale_ttl_ms = conf->routing.stale_ttl_ms,
                                    .counters = &s->metrics.workers[w->index].domains,
                                    .routes = w->routes,
                                    .budget = s->domain_budget};
    w->domains = gw_domain_store_new(loop, w->redis, &dconf); /* never NULL */
    if (gw_tls_dynamic(s->tls) != NULL) /* custom-domain certificates are fetched on this loop, with this connection */
        w->cert_fetch = gw_cert_fetch_new(loop, w->redis, gw_tls_dynamic(s->tls), s->domain_budget);
    gw_revocation_set_routes(w->revocation, w->routes);
    gw_wake_conf_t wconf = {.prefix = conf->redis.prefix,
                            .instance_id = conf->instance_id,
                            .timeout_ms = conf->routing.resume_timeout_ms,
                            .slots = {acquire_held_slot, release_held_slot, w},
                            .max_per_worker = conf->limits.max_held_requests_per_worker,
                            .max_bytes = conf->limits.max_held_request_bytes,
                            .command_timeout_ms = conf->redis.lookup_timeout_ms,
                            .counters = &s->metrics.workers[w->index].wake};
    w->wake = gw_wake_new(loop, w->redis, w->routes, &wconf);
    w->hangup = gw_hangup_new(loop); /* NULL (reported): held HTTP/1 requests are not watched */
    if (gw_route_store_subscribe(w->routes, w->routes_sub) != 0)
        return gw_errorf(err, "worker %zu: the route cache subscription did not start", w->index);
    return 0;
}

/* Metering: the worker's meter and activity and their tick; worker 0 runs
 * the flusher (a Redis outage is the flusher's to retry). */
static int init_metering(gw_worker_t *w, char **err)
{
    const gw_config_t *conf = w->server->config;
    gw_redis_conf_t rconf;

    (void)err;
    gw_server_redis_conf(conf, &rconf);
    w->meter = gw_worker_meter_new(w->ctx.loop, &(gw_worker_meter_conf_t){.metering = w->server->metering,
                                                                          .redis = w->redis,
                                                                          .prefix = conf->redis.prefix,
                                                                          .flush_interval_ms = conf->metering.flush_interval_ms,
                                                                          .journal_interval_ms = conf->metering.journal_interval_ms,
                                                                          .flusher_redis = w->index == 0 ? &rconf : NULL});
    return 0;
}

/* The way to the sandboxes: the proxy, its counters, and where it bills and registers what it opens. */
static int init_upstream(gw_worker_t *w, char **err)
{
    const gw_config_t *conf = w->server->config;
    gw_proxy_conf_t pconf = {
        .cookie_rules = {.domains = conf->domains, .num_domains = conf->num_domains, .access_cookie = conf->auth.cookie_name},
        .connect_timeout_ms = conf->upstream.connect_timeout_ms,
        .first_byte_timeout_ms = conf->upstream.first_byte_timeout_ms,
        .idle_timeout_ms = conf->upstream.idle_timeout_ms,
        .pool_idle_timeout_ms = conf->upstream.pool_idle_timeout_ms,
        .websocket_idle_timeout_ms = conf->upstream.websocket_idle_timeout_ms,
        .websocket_ping_interval_ms = conf->upstream.websocket_ping_interval_ms,
        .max_idle_per_pool = conf->upstream.max_idle_per_pool,
        .max_idle_per_worker = conf->upstream.max_idle_per_worker,
        .allowed_networks = conf->upstream.allowed_networks,
        .num_allowed_networks = conf->upstream.num_allowed_networks,
        .response_buffer_bytes = conf->limits.response_buffer_bytes,
        .client_stall_timeout_ms = conf->limits.client_stall_timeout_ms,
        .max_connection_buffer_bytes = conf->limits.max_connection_buffer_bytes,
        .max_worker_buffer_bytes = conf->limits.max_worker_buffer_bytes,
        .event_stream_idle_timeout_ms = conf->upstream.event_stream_idle_timeout_ms,
        .splice = conf->upstream.splice,
        .websocket_bounds = {.frames_per_second = conf->limits.websocket_frames_per_second,
                             .max_message_bytes = conf->limits.websocket_max_message_bytes},
        .tunnel_socket_buffer_bytes = conf->limits.tunnel_socket_buffer_bytes};

    (void)err;
    w->proxy = gw_proxy_new(&w->ctx, &pconf); /* aborts on out of memory, never NULL */
    gw_proxy_set_counters(w->proxy, &w->server->metrics.workers[w->index].proxy);
    gw_proxy_set_revocation(w->proxy, w->revocation);
    gw_proxy_set_meter(w->proxy, w->meter);
    gw_proxy_set_hangup(w->proxy, w->hangup);
    return 0;
}

/* The preview handler's objects on this worker's context. */
static int init_pipeline(gw_worker_t *w, char **err)
{
    (void)err;
    gw_pipeline_attach(w->server->pipeline, &w->ctx,
                       &(gw_pipeline_thread_t){.routes = w->routes,
                                               .domains = w->domains,
                                               .proxy = w->proxy,
                                               .meter = w->meter,
                                               .wake = w->wake,
                                               .hangup = w->hangup,
                                               .worker = w->index});
    /* the plain listeners' redirect (active custom domains) and the ACME responders of both hostconfs */
    gw_pipeline_attach_redirect(w->server->redirect, &w->ctx, w->domains);
    for (size_t i = 0; i != 2; ++i)
        gw_acme_attach(w->server->acme[i], &w->ctx, w->redis);
    return 0;
}

/* The worker's own SO_REUSEPORT sockets; worker 0 also takes the admin listener. */
static int init_listeners(gw_worker_t *w, char **err)
{
    gw_server_t *s = w->server;
    const gw_config_t *conf = s->config;
    h2o_loop_t *loop = w->ctx.loop;
    size_t i;

    (void)err;
    w->proxy_header_timeout = gw_loop_timeout_acquire(loop, conf->limits.proxy_header_timeout_ms);
    w->accept_ctxs = alloc_zeroed(conf->num_listen * sizeof(*w->accept_ctxs));
    w->listeners = alloc_zeroed(conf->num_listen * sizeof(*w->listeners));
    for (i = 0; i != conf->num_listen; ++i) {
        h2o_accept_ctx_t *actx = w->accept_ctxs + i;
        actx->ctx = &w->ctx;
        actx->hosts = s->listener_hosts[i];
        actx->ssl_ctx = conf->listen[i].tls ? gw_tls_listener_ctx(s->tls) : NULL;
        w->listeners[i] = gw_accept_start_listener(loop, s->listen_fds[w->index * conf->num_listen + i], actx, gw_accept_on_client);
    }
    if (w->index == 0 && s->admin_fd != -1) {
        h2o_context_init(&w->admin_ctx, loop, &s->admin_globalconf);
        w->admin_accept_ctx = (h2o_accept_ctx_t){.ctx = &w->admin_ctx, .hosts = s->admin_hosts};
        w->admin_listener = gw_accept_start_listener(loop, s->admin_fd, &w->admin_accept_ctx, gw_accept_on_admin);
    }
    return 0;
}

/* The modules' thread inits, in order. The pipeline's per-thread objects
 * (route and domain stores, proxy, meter, wake, hang-up watch) are built
 * here and handed to it by init_pipeline (gw_pipeline_attach), not in its
 * on_context_init, by choice: h2o_context_init runs every on_context_init
 * before any of them can exist (the proxy is made from the context), and
 * they are shared with revocation, wake and cert_fetch (the route store,
 * the Redis connection), which are below http/ and must not get them from
 * the pipeline. */
static int (*const THREAD_INITS[])(gw_worker_t *w, char **err) = {init_routing, init_metering, init_upstream, init_pipeline,
                                                                  init_listeners};

/* Starts this worker on its loop: h2o's handlers and loggers build their
 * per-context state in h2o_context_init (on_context_init), then each module
 * its own. Returns 0, or -1 with *err: a worker without them would serve
 * without routing, revocation or billing, so the process must not start. */
static int start_worker(gw_worker_t *w, h2o_loop_t *loop, char **err)
{
    size_t i;

    h2o_context_init(&w->ctx, loop, &w->server->globalconf);
    gw_context_on_stream_error(&w->ctx, gw_accept_on_stream_error, w);
    for (i = 0; i != sizeof(THREAD_INITS) / sizeof(THREAD_INITS[0]); ++i)
        if (THREAD_INITS[i](w, err) != 0)
            return -1;
    return 0;
}

/* Tells gw_server_start that this worker started (err NULL) or why not (err is taken). */
static void report_start(gw_server_t *s, char *err)
{
    pthread_mutex_lock(&s->start_mutex);
    if (err != NULL && s->start_err == NULL)
        s->start_err = err;
    else
        free(err);
    ++s->num_reported;
    pthread_cond_signal(&s->start_cond);
    pthread_mutex_unlock(&s->start_mutex);
}

/* After the drain, how long the cut exchanges get to be written and logged. */
#define CUT_FLUSH_MS 500

static void *worker_main(void *arg)
{
    gw_worker_t *w = arg;
    gw_server_t *s = w->server;
    h2o_loop_t *loop = h2o_evloop_create();
    char *err = NULL;

    if (start_worker(w, loop, &err) != 0) {
        /* main exits with the message; this thread's objects go with the process */
        report_start(s, err);
        return NULL;
    }
    report_start(s, NULL);

    while (!atomic_load(&s->stopping))
        h2o_evloop_run(loop, LOOP_TICK_MS);

    /* Drain: no new connections; in-flight requests get a bounded time.
     * Open connections are told to go elsewhere: HTTP/1 answers from now on
     * carry "Connection: close", HTTP/2 gets GOAWAY. Idle connections and
     * WebSocket tunnels hold no request, so they do not extend the drain;
     * they are closed when the process exits. */
    close_listeners(w);
    h2o_context_request_shutdown(&w->ctx);
    gw_wake_expire_all(w->wake); /* held requests get their 503 now, not at their deadline */
    uint64_t deadline = now_ms() + (uint64_t)atomic_load(&s->stopping);
    while (gw_metrics_in_flight(&s->metrics) != 0 && now_ms() < deadline)
        h2o_evloop_run(loop, LOOP_TICK_MS);
    /* what still runs is cut, visibly (docs/long-calls.md, Long calls): the loop runs on
     * briefly so that the resets go out and the access log has the lines */
    gw_proxy_cut_all(w->proxy);
    deadline = now_ms() + CUT_FLUSH_MS;
    while (gw_metrics_in_flight(&s->metrics) != 0 && now_ms() < deadline)
        h2o_evloop_run(loop, LOOP_TICK_MS);

    gw_worker_meter_stop_tick(w->meter);
    if (w->index == 0) {
        /* A MULTI/EXEC in flight is given its answer (and its WAIT): the final
         * flush then has less to do. One it takes over is not executed again on
         * the primary that ran it (metering/commands.h). */
        uint64_t until = now_ms() + METERING_EXEC_WAIT_MS;
        while (gw_metering_in_flight(s->metering) && now_ms() < until)
            h2o_evloop_run(loop, 10);
    }
    /* The loop stops here: what this worker counted goes to the shared queue
     * for main's final flush. */
    /* egress still held for open connections: what their clients have */
    gw_proxy_settle_deliveries(w->proxy);
    gw_proxy_set_meter(w->proxy, NULL);
    gw_worker_meter_free(w->meter); /* and worker 0's flusher stops */
    w->meter = NULL;
    return NULL;
}

int gw_server_start(gw_server_t *s, char **err)
{
    size_t started;

    for (started = 0; started != s->num_workers; ++started) {
        int ret;
        if ((ret = pthread_create(&s->workers[started].thread, NULL, worker_main, s->workers + started)) != 0) {
            gw_errorf(err, "worker: pthread_create: %s", strerror(ret));
            break;
        }
    }
    /* every thread started reports once, whether or not it could build its objects */
    pthread_mutex_lock(&s->start_mutex);
    while (s->num_reported != started)
        pthread_cond_wait(&s->start_cond, &s->start_mutex);
    pthread_mutex_unlock(&s->start_mutex);
    if (started != s->num_workers) {
        free(s->start_err);
        s->start_err = NULL;
        return -1;
    }
    if (s->start_err != NULL) {
        *err = s->start_err;
        s->start_err = NULL;
        return -1;
    }
    return 0;
}

void gw_server_stop(gw_server_t *s, uint64_t drain_ms)
{
    size_t w;

    /* `stopping` carries the drain budget; any non-zero value stops the loops */
    atomic_store(&s->stopping, (int)(drain_ms > 0 ? drain_ms : 1));
    for (w = 0; w != s->num_workers; ++w)
        pthread_join(s->workers[w].thread, NULL);
}

void gw_server_dispose(gw_server_t *s)
{
    /* The loops and contexts of stopped workers are left to process exit: h2o
     * 2.2.5 cannot dispose a context while connections it accepted are open. */
    gw_access_log_free(s->access_log); /* the workers are joined */
    s->access_log = NULL;
    if (s->access_log_fd != -1)
        close(s->access_log_fd);
    free(s->listen_fds);
    free(s->listener_hosts);
    s->listener_hosts = NULL;
    s->listen_fds = NULL;
    gw_metering_free(s->metering);
    s->metering = NULL;
    /* the worker threads are joined: nothing signs or verifies any more */
    gw_cookie_keys_free(s->cookie_keys);
    s->cookie_keys = NULL;
    gw_link_keys_free(s->link_keys);
    s->link_keys = NULL;
    gw_metrics_dispose(&s->metrics);
}
