/*
 * The preview handler: each request runs through named phases (nginx's
 * phase engine, h2o's handler chain), in this order:
 *
 *   host -> domain -> route -> ingress -> credentials -> protocol -> rate -> hold -> address -> limits -> forward
 *
 * each a function of the request's state (http/phases.h) that says next,
 * answered or async. The route lookup and the wake hold are asynchronous:
 * their callbacks run the phases again from the route, and their state is
 * detached when the request dies. What the phases acquired (connection
 * slots) is given back in one place when one of them answers, or handed to
 * the proxy by forward. Plain listeners get the redirect handler instead,
 * which runs the host phase alone.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "http/phases.h"
#include "http/viewer.h"
#include "http/pipeline.h"
#include "http/redirect.h"
#include "upstream/request_body.h"

/* The preview handler; its per-context state is a pipeline_context_t. */
struct st_gw_pipeline_t {
    h2o_handler_t super;
    gw_pipeline_conf_t conf;
    /* the desktop ports' viewer slots and viewer when the pipeline made them (conf gave none): freed with it */
    gw_conn_limit_t *own_viewer_slots;
    gw_viewer_t *own_viewer;
};

/* What the preview handler keeps per h2o context. */
typedef struct st_pipeline_context_t {
    gw_pipeline_thread_t thread;  /* from gw_pipeline_attach */
    gw_metrics_worker_t *metrics; /* the counters of the context's worker, found at on_context_init */
    gw_hashtab_t refused_addrs;   /* the address phase's memo: the upstream_forbidden lines already written */
} pipeline_context_t;

typedef struct st_gw_pipeline_redirect_t {
    h2o_handler_t super;
    gw_pipeline_conf_t conf;
} redirect_handler_t;

/* What the redirect handler keeps per h2o context. */
typedef struct st_redirect_context_t {
    gw_metrics_worker_t *metrics;
    gw_domain_store_t *domains; /* from gw_pipeline_attach_redirect; NULL: custom hosts are unknown_host */
} redirect_context_t;

static gw_phase_result_t phase_route(gw_pipeline_req_t *r);

/* The phases in their order. */
static gw_phase_result_t (*const phases[])(gw_pipeline_req_t *) = {
    gw_phase_host, gw_phase_domain, phase_route,      gw_phase_ingress, gw_phase_credentials, gw_phase_protocol,
    gw_phase_rate, gw_phase_hold,   gw_phase_address, gw_phase_limits,  gw_phase_forward,
};

/* The unwinding: what the phases acquired and did not hand on, given back
 * once the request has been answered; and a body still arriving is ended
 * (HTTP/1.1: the connection closes after the answer; HTTP/2: the rest is
 * dropped, the stream reset with NO_ERROR: upstream/request_body.h). */
void gw_phases_unwind(gw_pipeline_req_t *r)
{
    gw_request_body_end(r->req, 1); /* the phases never proceed a body */
    if (r->conn_limit != NULL) {
        gw_conn_limit_release(r->conn_limit, r->thread->worker, r->sbx->id);
        r->conn_limit = NULL;
    }
    if (r->viewer_limit != NULL) {
        gw_conn_limit_release(r->viewer_limit, r->thread->worker, r->sbx->id);
        r->viewer_limit = NULL;
    }
    if (r->client_limit != NULL) {
        gw_conn_limit_release(r->client_limit, r->thread->worker, r->client);
        r->client_limit = NULL;
    }
}

void gw_phases_run(gw_pipeline_req_t *r, size_t from)
{
    gw_phase_result_t (*const *phase)(gw_pipeline_req_t *) = phases + from, res;

    assert(from < sizeof(phases) / sizeof(phases[0]));
    /* no bound to test each turn: the last phase, forward, never says next */
    while ((res = (*phase++)(r)) == GW_PHASE_NEXT)
        ;
    if (res == GW_PHASE_ANSWERED)
        gw_phases_unwind(r);
}

static void on_req_dispose(void *_r)
{
    gw_pipeline_req_t *r = _r;

    if (r->lookup != NULL)
        gw_route_lookup_cancel(r->lookup);
    if (r->domain_lookup != NULL)
        gw_domain_lookup_cancel(r->domain_lookup);
    if (r->waiter != NULL) {
        /* an HTTP/2 reset, or the connection closed, while held */
        gw_hangup_unwatch(r->thread->hangup, &r->hangup);
        gw_wake_cancel(r->waiter, 1);
    }
    /* the request's connection is on this worker's loop, as it was when the route phase counted it */
    if (r->in_flight)
        GW_COUNTER_ADD(&r->metrics->in_flight, -1);
}

static void on_route(void *data, gw_route_status_t status, gw_sandbox_t *sbx)
{
    gw_pipeline_req_t *r = data;

    r->lookup = NULL;
    r->routed = 1;
    r->route_status = status;
    r->sbx = sbx;
    gw_phase_credentials_take(r);
    gw_phases_run(r, GW_PHASE_ROUTE);
}

/* The route phase: the sandbox's record, from the route store (its cache
 * or Redis), asynchronously; run again when the lookup (or a wake hold) has
 * the answer. Answers sandbox_not_found and routing_unavailable; hands on
 * r->sbx. */
static gw_phase_result_t phase_route(gw_pipeline_req_t *r)
{
    if (!r->routed) {
        r->in_flight = 1;
        GW_COUNTER_ADD(&r->metrics->in_flight, 1);
        GW_COUNTER_ADD(&r->metrics->route_lookups, 1);
        if ((r->lookup = gw_route_store_lookup(r->thread->routes, r->host.sandbox_id, on_route, r)) == NULL) {
            /* the lookup did not start, so on_route will never run: answered here */
            return gw_phase_error(r, GW_ERR_ROUTING_UNAVAILABLE, NULL);
        }
        return GW_PHASE_ASYNC;
    }
    switch (r->route_status) {
    case GW_ROUTE_FOUND:
        /* looked up once here for the phases after (credentials, protocol, forward) */
        r->sbx_port = gw_sandbox_port(r->sbx, r->host.port);
        return GW_PHASE_NEXT;
    case GW_ROUTE_NOT_FOUND:
        return gw_phase_error(r, GW_ERR_SANDBOX_NOT_FOUND, NULL);
    default:
        return gw_phase_error(r, GW_ERR_ROUTING_UNAVAILABLE, NULL);
    }
}

static int on_req(h2o_handler_t *_self, h2o_req_t *req)
{
    gw_pipeline_t *self = (void *)_self;
    pipeline_context_t *pc = h2o_context_get_handler_context(req->conn->ctx, _self);
    gw_pipeline_req_t *r = h2o_mem_alloc_shared(&req->pool, sizeof(*r), on_req_dispose);

    memset(r, 0, GW_PIPELINE_REQ_ZEROED);
    r->req = req;
    r->conf = &self->conf;
    r->thread = &pc->thread;
    r->metrics = pc->metrics;
    r->refused_addrs = &pc->refused_addrs;
    gw_phases_run(r, 0);
    return 0;
}

/* Plain listener: preview requests (and active custom domains) go to https on the same host and path. */
static int on_req_redirect(h2o_handler_t *_self, h2o_req_t *req)
{
    redirect_handler_t *self = (void *)_self;
    redirect_context_t *rc = h2o_context_get_handler_context(req->conn->ctx, _self);
    char custom_host[GW_DOMAIN_HOST_MAX + 1];
    gw_host_t host;

    if (gw_phase_host_parse(req, &self->conf, rc->metrics, &host, rc->domains != NULL ? custom_host : NULL) != GW_PHASE_NEXT)
        return 0;
    if (host.port == 0) {
        gw_phase_domain_redirect(req, rc->domains, custom_host, self->conf.https_port);
        return 0;
    }

    /* The host is a valid preview name (so it is safe to reflect): the same
     * host, lowercased, with the https port ("OPTIONS *" goes to the root). */
    h2o_iovec_t url = gw_redirect_url(&req->pool, gw_host_strip_port(req->authority), self->conf.https_port, req->path);
    gw_redirect_send(req, 308, "Permanent Redirect", url);
    return 0;
}

static void on_context_init(h2o_handler_t *_self, h2o_context_t *ctx)
{
    gw_pipeline_t *self = (void *)_self;
    pipeline_context_t *pc = h2o_mem_alloc(sizeof(*pc));

    *pc = (pipeline_context_t){.metrics = gw_metrics_worker_of(self->conf.metrics, ctx)};
    gw_hashtab_init(&pc->refused_addrs);
    h2o_context_set_handler_context(ctx, _self, pc);
}

static void on_context_dispose(h2o_handler_t *self, h2o_context_t *ctx)
{
    pipeline_context_t *pc = h2o_context_get_handler_context(ctx, self);

    gw_phase_address_forget(&pc->refused_addrs);
    gw_hashtab_dispose(&pc->refused_addrs);
    free(pc);
}

/* h2o_config_dispose (the process keeps its pipeline to the end; tests dispose theirs) */
static void on_dispose(h2o_handler_t *_self)
{
    gw_pipeline_t *self = (void *)_self;

    gw_conn_limit_free(self->own_viewer_slots);
    gw_viewer_free(self->own_viewer);
}

gw_pipeline_t *gw_pipeline_register(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf)
{
    gw_pipeline_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));

    self->super.on_context_init = on_context_init;
    self->super.on_context_dispose = on_context_dispose;
    self->super.dispose = on_dispose;
    self->super.on_req = on_req;
    /* a body reaches the handler as it arrives and streams to the app (docs/uploads.md); the redirect handler's stay whole */
    self->super.supports_request_streaming = 1;
    self->conf = *conf;
    /* the desktop ports' viewer and viewer slots, the pipeline's own unless given (README, Desktops) */
    if (self->conf.desktop_viewers == NULL)
        self->conf.desktop_viewers = self->own_viewer_slots =
            gw_conn_limit_new(conf->config->limits.max_desktop_viewers, conf->config->workers != 0 ? conf->config->workers : 1);
    if (self->conf.viewer == NULL)
        self->conf.viewer = self->own_viewer = gw_viewer_load_or_say(conf->config->desktop.viewer_dir);
    return self;
}

void gw_pipeline_attach(gw_pipeline_t *p, h2o_context_t *ctx, const gw_pipeline_thread_t *thread)
{
    pipeline_context_t *pc = h2o_context_get_handler_context(ctx, &p->super);
    pc->thread = *thread;
}

/* The redirect handler's per-context state: its worker's counters and custom domains. */
static void on_redirect_context_init(h2o_handler_t *_self, h2o_context_t *ctx)
{
    redirect_handler_t *self = (void *)_self;
    redirect_context_t *rc = h2o_mem_alloc(sizeof(*rc));

    *rc = (redirect_context_t){.metrics = gw_metrics_worker_of(self->conf.metrics, ctx)};
    h2o_context_set_handler_context(ctx, _self, rc);
}

static void on_redirect_context_dispose(h2o_handler_t *self, h2o_context_t *ctx)
{
    free(h2o_context_get_handler_context(ctx, self));
}

gw_pipeline_redirect_t *gw_pipeline_register_redirect(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf)
{
    redirect_handler_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));

    self->super.on_context_init = on_redirect_context_init;
    self->super.on_context_dispose = on_redirect_context_dispose;
    self->super.on_req = on_req_redirect;
    self->conf = *conf;
    return self;
}

void gw_pipeline_attach_redirect(gw_pipeline_redirect_t *r, h2o_context_t *ctx, gw_domain_store_t *domains)
{
    redirect_context_t *rc = h2o_context_get_handler_context(ctx, &r->super);
    rc->domains = domains;
}
