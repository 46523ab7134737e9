/*
 * The phases of a preview request, what they share and how each one ends
 * (http/pipeline.c runs them; README, "What it is"). A phase is one function
 * of the request's state that returns one gw_phase_result_t: the next phase
 * runs, or the request has been answered (and what earlier phases acquired
 * is given back, in one place: gw_phases_unwind), or someone else goes on
 * with it later. Adding a phase is one function here and one entry in
 * pipeline.c's table.
 */
#ifndef GW_HTTP_PHASES_H
#define GW_HTTP_PHASES_H

#include <stddef.h>
#include <arpa/inet.h>
#include <h2o.h>
#include "auth/warning.h"
#include "http/warning_page.h"
#include "common/hashtab.h"
#include "errors/errors.h"
#include "http/pipeline.h"
#include "routing/domain_store.h"
#include "routing/host.h"

typedef enum {
    GW_PHASE_NEXT = 0, /* the next phase runs */
    GW_PHASE_ANSWERED, /* the phase answered the request: the phases stop and what they acquired is given back */
    GW_PHASE_ASYNC,    /* someone else goes on: a callback that runs the phases again (the route lookup, the wake
                        * hold), or the proxy, which then owns what the phases acquired */
} gw_phase_result_t;

/* One preview request on its way through the phases; lives in req->pool, so
 * its dispose runs whenever the request goes away (including an HTTP/2
 * reset while the route lookup or the wake hold is pending). */
typedef struct st_gw_pipeline_req_t {
    h2o_req_t *req;
    const gw_pipeline_conf_t *conf;
    gw_pipeline_thread_t *thread;
    gw_metrics_worker_t *metrics;
    gw_hashtab_t *refused_addrs; /* the context's memo of upstream_forbidden lines (phase_forward.c) */
    /* host */
    gw_host_t host;
    /* domain: a host under no preview domain, looked up as a custom domain (phase_domain.c) */
    unsigned custom : 1;               /* custom_host (below) is to be looked up; host is filled once it is active */
    gw_domain_lookup_t *domain_lookup; /* in flight, or NULL */
    /* route: set when the lookup (or the wake hold) answered */
    unsigned routed : 1;
    unsigned in_flight : 1; /* counted in metrics' in_flight, given back by the dispose */
    gw_route_status_t route_status;
    gw_sandbox_t *sbx;                 /* GW_ROUTE_FOUND: the record */
    const gw_sandbox_port_t *sbx_port; /* GW_ROUTE_FOUND: the record's entry for host.port, NULL: not exposed */
    gw_route_lookup_t *lookup;
    /* the gateway's credentials, taken off the request when the route answers (gw_phase_credentials_take) */
    h2o_iovec_t path;             /* request target to forward: lizard_token removed */
    h2o_iovec_t query_token;      /* first lizard_token value, decoded */
    size_t query_token_count;     /* 0: no lizard_token parameter */
    h2o_iovec_t token_header;     /* the first X-Lizard-Access-Token value, {NULL, 0} if absent */
    h2o_iovec_t cookie;           /* the gateway's cookie, {NULL, 0} if absent */
    h2o_iovec_t bearer;           /* an Authorization: Bearer that is the gateway's credential, {NULL, 0} if none */
    gw_warning_cookies_t warning; /* the warning page's consent and nonce cookies, {NULL, 0} if absent */
    /* credentials */
    gw_grant_t grant;
    unsigned cors_edge : 1; /* the gateway writes this request's CORS headers (phase_cors.c): once, whatever re-runs */
    /* hold */
    gw_wake_waiter_t *waiter; /* held while the sandbox wakes, or NULL */
    gw_hangup_watch_t hangup; /* HTTP/1: the client is watched while held */
    /* limits: the slots taken, NULL when none (handed to the proxy by forward, else given back by the unwinding) */
    gw_conn_limit_t *client_limit;
    gw_conn_limit_t *conn_limit;
    gw_conn_limit_t *viewer_limit; /* a desktop's WebSocket: a slot of limits.max_desktop_viewers */
    unsigned rate_taken : 1;       /* the rate phase took this request's req_rate token (a re-run takes none) */
    signed char client_known;      /* gw_phase_client: 0 not looked at yet, 1 r->client is set, -1 unknown */
    /* from here on not zeroed when the request comes (300 bytes of 600): each is written before it is read */
    char client[INET6_ADDRSTRLEN];            /* client_known 1: client_limit's key; the ingress rules' address */
    char custom_host[GW_DOMAIN_HOST_MAX + 1]; /* custom: normalized */
} gw_pipeline_req_t;

/* The part of a gw_pipeline_req_t that on_req zeroes. */
#define GW_PIPELINE_REQ_ZEROED offsetof(gw_pipeline_req_t, client)

/* Runs the phases from the `from`th one (pipeline.c's table) until one does
 * not say GW_PHASE_NEXT. */
void gw_phases_run(gw_pipeline_req_t *r, size_t from);
/* The request has been answered: gives back what the phases acquired, and
 * ends a body still arriving (gw_phases_run does it for the phases; a
 * callback that answers outside them calls it). */
void gw_phases_unwind(gw_pipeline_req_t *r);
/* The domain phase's place (a custom domain's record is read there). */
#define GW_PHASE_DOMAIN 1
/* The route phase's place: where a callback that has a (new) answer about
 * the sandbox runs the phases again. */
#define GW_PHASE_ROUTE 2

/* The phases, in their order (route is pipeline.c's own). */
gw_phase_result_t gw_phase_host(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_domain(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_credentials(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_ingress(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_protocol(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_rate(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_hold(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_address(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_limits(gw_pipeline_req_t *r);
gw_phase_result_t gw_phase_forward(gw_pipeline_req_t *r);

/* CORS on a cors:<n> = edge port (r->sbx_port non-NULL), first in the
 * credentials phase (phase_cors.c): answers a preflight (204, or
 * origin_not_allowed), else makes the gateway write the CORS headers of
 * whatever answers the request and says next. */
gw_phase_result_t gw_phase_cors_edge(gw_pipeline_req_t *r);

/* The host phase without the request's state (the plain listener's redirect
 * handler runs it alone): counts the request, checks its request line and
 * parses its host into *host. A host under no preview domain that may be a
 * custom domain (custom_host non-NULL, GW_DOMAIN_HOST_MAX + 1 bytes): NEXT
 * with its normalized name in custom_host and *host zeroed; custom_host
 * NULL, or not a DNS name: answered unknown_host. */
gw_phase_result_t gw_phase_host_parse(h2o_req_t *req, const gw_pipeline_conf_t *pconf, gw_metrics_worker_t *metrics,
                                      gw_host_t *host, char *custom_host);

/* The plain listener's custom-domain redirect: 308 to https once the record
 * of custom_host (normalized) says active, else unknown_host (phase_domain.c). */
void gw_phase_domain_redirect(h2o_req_t *req, gw_domain_store_t *domains, const char *custom_host, uint16_t https_port);

/* Takes the gateway's credentials off the request (into r: the query token,
 * the cookie, the warning page's cookies) and makes r->path a valid
 * request-target; once, when the route answers. */
void gw_phase_credentials_take(gw_pipeline_req_t *r);

/* The client's address as text into r->client, once per request (the
 * limits and the ingress rules use the same one): 0, or -1 when unknown. */
int gw_phase_client(gw_pipeline_req_t *r);

/* The listener (config->listen[i]) that accepted `conn`; -1 when unknown. */
ssize_t gw_pipeline_listener_of(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn);

/* Frees a context's memo of refused addrs (the address phase fills it). */
void gw_phase_address_forget(gw_hashtab_t *refused_addrs);

static inline gw_phase_result_t gw_phase_error(gw_pipeline_req_t *r, gw_error_code_t code, const char *detail)
{
    gw_error_send(r->req, code, r->host.sandbox_id, r->host.port, detail);
    return GW_PHASE_ANSWERED;
}

static inline gw_phase_result_t gw_phase_error_why(gw_pipeline_req_t *r, gw_error_code_t code, gw_error_why_t why)
{
    gw_error_send_why(r->req, code, why, r->host.sandbox_id, r->host.port, NULL);
    return GW_PHASE_ANSWERED;
}

/* 1 when the routed port is a desktop (proto:<n> = rfb). */
static inline int gw_phase_port_is_rfb(const gw_pipeline_req_t *r)
{
    return r->sbx_port != NULL && r->sbx_port->rfb;
}

/* 1 when the routed port is a raw TCP one (proto:<n> = tcp). */
static inline int gw_phase_port_is_tcp(const gw_pipeline_req_t *r)
{
    return r->sbx_port != NULL && r->sbx_port->tcp;
}

static inline int gw_phase_is_method(h2o_req_t *req, const char *m, size_t len)
{
    return h2o_memis(req->method.base, req->method.len, m, len);
}

/* A CORS preflight cannot carry the token: it goes to the sandbox without one. */
static inline int gw_phase_is_cors_preflight(h2o_req_t *req)
{
    return gw_phase_is_method(req, H2O_STRLIT("OPTIONS")) &&
           h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1) != -1 &&
           h2o_find_header_by_str(&req->headers, H2O_STRLIT("access-control-request-method"), -1) != -1;
}

static inline int gw_phase_header_is(h2o_req_t *req, const char *name, size_t name_len, const char *value, size_t value_len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, name_len, -1);
    return i != -1 && h2o_lcstris(req->headers.entries[i].value.base, req->headers.entries[i].value.len, value, value_len);
}

#endif
