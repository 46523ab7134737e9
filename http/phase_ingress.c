/*
 * The ingress phase, right after the route (docs/access-control.md, "Who may reach a
 * sandbox, and how much"): the sandbox's ingress_deny then ingress_allow
 * (403 ip_not_allowed; the message never names the lists); and the rate
 * phase, after the credentials and the protocol: its egress_quota against
 * the running total read with the record (429 egress_quota_exceeded), then
 * its req_rate on this gateway (429 rate_limited with Retry-After). Every
 * request and every tunnel (WebSocket, TCP) let through passes there once at
 * its start; what is already streaming is never cut. A sandbox with no
 * rules costs one pointer test and two integer tests.
 */
#include <stdio.h>
#include <string.h>
#include "common/engine.h"
#include "http/phases.h"
#include "routing/ingress.h"

/* 1 when the request's client may reach the sandbox by its ingress lists. */
static int ingress_admits(gw_pipeline_req_t *r)
{
    gw_netaddr_t a;

    if (r->sbx->ingress->malformed || gw_phase_client(r) != 0)
        return 0; /* a malformed list, or no client address to check: refused, never opened */
    if (gw_netaddr_parse_ip(r->client, strlen(r->client), 0, &a) != 0)
        return 0;
    return gw_ingress_admits(r->sbx->ingress, (const struct sockaddr *)&a.ss);
}

gw_phase_result_t gw_phase_ingress(gw_pipeline_req_t *r)
{
    if (r->sbx->ingress != NULL && !ingress_admits(r))
        return gw_phase_error(r, GW_ERR_IP_NOT_ALLOWED, NULL);
    return GW_PHASE_NEXT;
}

/* req_rate counts the requests let through to the sandbox: after the credentials and the protocol phase, so
 * that requests refused there (a scanner without a token) never spend the sandbox's budget, nor learn that its
 * egress quota is used up. A request refused by the quota spends no token either. */
gw_phase_result_t gw_phase_rate(gw_pipeline_req_t *r)
{
    uint32_t wait;

    if (gw_sandbox_quota_reached(r->sbx))
        return gw_phase_error(r, GW_ERR_EGRESS_QUOTA_EXCEEDED, NULL);
    if (r->sbx->req_rate != 0 && !r->rate_taken) {
        if ((wait = gw_rate_limit_take(r->conf->rate_limit, r->sbx->id, r->sbx->req_rate, gw_rate_limit_now_ns())) != 0) {
            char *v = gw_pool_alloc(&r->req->pool, 12);
            int len = snprintf(v, 12, "%u", wait);
            h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, v, (size_t)len);
            return gw_phase_error(r, GW_ERR_RATE_LIMITED, NULL);
        }
        r->rate_taken = 1;
    }
    return GW_PHASE_NEXT;
}
