/*
 * CORS at the edge, as part of the credentials phase (docs/cors.md, "Browser code
 * on other origins"): on a port with cors:<n> = edge, a preflight is
 * answered here and never forwarded (204 for an allowed origin, 403
 * origin_not_allowed otherwise), and every other response of the request,
 * the app's or the gateway's own, gets its CORS headers from the gateway:
 * a per-request h2o prefilter rewrites them as the response starts. Other
 * ports pay one test of a bit.
 */
#include "common/engine.h"
#include "http/cors.h"
#include "http/phases.h"

typedef struct st_cors_prefilter_t {
    h2o_req_prefilter_t super;
    gw_cors_t cors;
} cors_prefilter_t;

static void on_setup_ostream(h2o_req_prefilter_t *_self, h2o_req_t *req, h2o_ostream_t **slot)
{
    cors_prefilter_t *self = (void *)_self;

    gw_cors_rewrite(&req->pool, &req->res.headers, &self->cors);
    h2o_setup_next_prefilter(&self->super, req, slot);
}

static h2o_iovec_t request_header(h2o_req_t *req, const h2o_token_t *token, const char *name, size_t len)
{
    ssize_t i = token != NULL ? h2o_find_header(&req->headers, token, -1) : h2o_find_header_by_str(&req->headers, name, len, -1);
    return i == -1 ? h2o_iovec_init(NULL, 0) : req->headers.entries[i].value;
}

gw_phase_result_t gw_phase_cors_edge(gw_pipeline_req_t *r)
{
    h2o_req_t *req = r->req;
    h2o_iovec_t origin = request_header(req, NULL, H2O_STRLIT("origin"));
    gw_cors_t cors;
    int allowed = gw_cors_decide(r->sbx_port, origin, &cors);

    if (gw_phase_is_cors_preflight(req) && allowed) {
        /* answered here: no credential is asked (a preflight cannot carry one), nothing reaches the app */
        gw_cors_preflight_headers(&req->pool, &req->res.headers, &cors,
                                  request_header(req, NULL, H2O_STRLIT("access-control-request-method")),
                                  request_header(req, NULL, H2O_STRLIT("access-control-request-headers")));
        req->res.status = 204;
        req->res.reason = "No Content";
        h2o_send_inline(req, "", 0);
        return GW_PHASE_ANSWERED;
    }
    /* a prefilter is per request (h2o_add_prefilter, in req->pool): the responses of other ports never meet it; the
     * phases run again after a wake hold, the prefilter is added once */
    if (!r->cors_edge) {
        cors_prefilter_t *pf = (void *)gw_add_prefilter(req, sizeof(*pf));
        pf->super.on_setup_ostream = on_setup_ostream;
        pf->cors = cors;
        r->cors_edge = 1;
    }
    if (gw_phase_is_cors_preflight(req))
        return gw_phase_error(r, GW_ERR_ORIGIN_NOT_ALLOWED, NULL);
    return GW_PHASE_NEXT;
}
