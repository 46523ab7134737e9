/*
 * The host phase: the request line (method, origin-form target) and the
 * Host, parsed into the sandbox id and port. Answers what is not a preview
 * request of this gateway (405 for CONNECT, 400, bad_host, unknown_host);
 * an HTTP/2 extended CONNECT for a WebSocket goes on as its HTTP/1.1
 * upgrade (upstream/ws_h2.h). Hands on r->host.
 */
#include "http/phases.h"
#include "upstream/request_line.h"
#include "upstream/ws_h2.h"

/* 1 when the request came without a Host/:authority (h2o then substitutes the
 * hostconf's own name). */
static int lacks_authority(h2o_req_t *req)
{
    return req->authority.base == req->hostconf->authority.hostport.base;
}

/* The gateway is not a forward proxy: CONNECT is refused before anything
 * else, and a method that is not a token never goes further (an HTTP/2
 * :method can hold spaces). 1 when the request may go on, 0 when answered. */
static int allowed_method(h2o_req_t *req)
{
    /* WebSocket over HTTP/2 (RFC 8441): from here on the upgrade it stands for */
    if (gw_ws_h2_is_extended_connect(req)) {
        if (gw_ws_h2_as_upgrade(req) == 0)
            return 1;
        gw_request_line_refuse(req, 400, "Bad Request", "Extended CONNECT serves :protocol websocket only");
        return 0;
    }
    if (gw_phase_is_method(req, H2O_STRLIT("CONNECT"))) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT(GW_REQUEST_ALLOWED_METHODS));
        gw_request_line_refuse(req, 405, "Method Not Allowed", "CONNECT is not forwarded: this is a web server, not a proxy");
        return 0;
    }
    if (!gw_request_method_is_token(req->method)) {
        gw_request_line_refuse(req, 400, "Bad Request", "The method is not a token");
        return 0;
    }
    return 1;
}

/* The request-target: origin-form, "*" for OPTIONS, or (HTTP/1.x only)
 * absolute-form naming the Host header's own host, which becomes the
 * origin-form in req->path so that everything after (credentials, the
 * redirect, the upstream request line) sees only that. 1 when the request may
 * go on, 0 when answered. */
static int origin_form_target(h2o_req_t *req)
{
    h2o_iovec_t authority, origin;

    switch (gw_request_target_parse(&req->pool, req->method, req->path, &authority, &origin)) {
    case GW_TARGET_ORIGIN:
    case GW_TARGET_ASTERISK:
        return 1;
    case GW_TARGET_ABSOLUTE:
        if (req->version >= 0x200)
            break; /* an HTTP/2 :path is never absolute (RFC 9113 8.3.1) */
        /* RFC 9112 3.2.2 makes the target's host win over Host; a hop in
         * front that routed or authorized by Host would disagree: refuse */
        authority = gw_host_strip_port(authority);
        h2o_iovec_t host = gw_host_strip_port(req->authority);
        if (!h2o_lcstris(authority.base, authority.len, host.base, host.len)) {
            gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, "The request target names another host than the Host header.");
            return 0;
        }
        req->path = origin;
        return 1;
    default:
        break;
    }
    gw_request_line_refuse(req, 400, "Bad Request", "The request target is not a path");
    return 0;
}

gw_phase_result_t gw_phase_host_parse(h2o_req_t *req, const gw_pipeline_conf_t *pconf, gw_metrics_worker_t *metrics,
                                      gw_host_t *host, char *custom_host)
{
    const gw_config_t *conf = pconf->config;

    GW_COUNTER_ADD(&metrics->requests, 1);
    if (!allowed_method(req))
        return GW_PHASE_ANSWERED;
    if (lacks_authority(req)) {
        gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, "The request has no Host header.");
        return GW_PHASE_ANSWERED;
    }
    if (!origin_form_target(req))
        return GW_PHASE_ANSWERED;
    switch (gw_host_parse(req->authority, conf->domains, conf->num_domains, host)) {
    case GW_HOST_OK:
        return GW_PHASE_NEXT;
    case GW_HOST_UNKNOWN:
        if (custom_host != NULL && gw_domain_host_normalize(req->authority, custom_host) != 0) {
            *host = (gw_host_t){.domain_index = SIZE_MAX};
            return GW_PHASE_NEXT; /* the domain phase reads its record */
        }
        gw_error_send(req, GW_ERR_UNKNOWN_HOST, NULL, 0, NULL);
        return GW_PHASE_ANSWERED;
    default:
        gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, NULL);
        return GW_PHASE_ANSWERED;
    }
}

gw_phase_result_t gw_phase_host(gw_pipeline_req_t *r)
{
    gw_phase_result_t res =
        gw_phase_host_parse(r->req, r->conf, r->metrics, &r->host, r->thread->domains != NULL ? r->custom_host : NULL);

    r->custom = res == GW_PHASE_NEXT && r->host.port == 0;
    return res;
}
