/*
 * The domain phase (CONTRACT.md, "Custom domains"): a host under no preview
 * domain is read as <prefix>domain:{<host>} from the worker's domain store;
 * an active record makes the request its preview host's, <port>-<sandbox>,
 * for every phase after (access rule, credentials, cookies host-only for the
 * custom host, waking, metering); anything else is unknown_host, and so is
 * a host the store would have to read from Redis while its client is over
 * its budget of such reads (routing.domain_lookups_*). Also the plain
 * listener's redirect of an active custom domain to https.
 */
#include <string.h>
#include "common/client_addr.h"
#include "common/netaddr.h"
#include "http/phases.h"
#include "http/redirect.h"

static void on_domain(void *data, gw_domain_status_t status, const gw_domain_t *domain)
{
    gw_pipeline_req_t *r = data;

    r->domain_lookup = NULL;
    r->custom = 0;
    switch (status) {
    case GW_DOMAIN_ACTIVE:
        r->host.port = domain->port;
        memcpy(r->host.sandbox_id, domain->sandbox_id, sizeof(r->host.sandbox_id));
        gw_phases_run(r, GW_PHASE_ROUTE);
        break;
    case GW_DOMAIN_NOT_SERVED:
        gw_error_send(r->req, GW_ERR_UNKNOWN_HOST, NULL, 0, NULL);
        break;
    default:
        gw_error_send(r->req, GW_ERR_ROUTING_UNAVAILABLE, NULL, 0, NULL);
        break;
    }
}

gw_phase_result_t gw_phase_domain(gw_pipeline_req_t *r)
{
    gw_netaddr_t client;
    int known;

    if (!r->custom)
        return GW_PHASE_NEXT; /* a preview host */
    /* the client whose budget of Redis look-ups a miss spends: the same address as the limits' and ingress rules' */
    known = gw_phase_client(r) == 0 && gw_netaddr_parse_ip(r->client, strlen(r->client), 0, &client) == 0;
    r->domain_lookup = gw_domain_store_lookup(r->thread->domains, r->custom_host, known ? &client.ss : NULL, on_domain, r);
    return GW_PHASE_ASYNC;
}

/* A custom host on a plain listener while its record is read (req->pool). */
typedef struct st_redirect_pending_t {
    h2o_req_t *req;
    uint16_t https_port;
    gw_domain_lookup_t *lookup;
    char host[GW_DOMAIN_HOST_MAX + 1]; /* normalized: safe to reflect */
} redirect_pending_t;

static void on_redirect_dispose(void *_p)
{
    redirect_pending_t *p = _p;

    if (p->lookup != NULL)
        gw_domain_lookup_cancel(p->lookup);
}

static void on_redirect_domain(void *data, gw_domain_status_t status, const gw_domain_t *domain)
{
    redirect_pending_t *p = data;
    h2o_req_t *req = p->req;

    (void)domain;
    p->lookup = NULL;
    if (status != GW_DOMAIN_ACTIVE) {
        gw_error_send(req, status == GW_DOMAIN_NOT_SERVED ? GW_ERR_UNKNOWN_HOST : GW_ERR_ROUTING_UNAVAILABLE, NULL, 0, NULL);
        return;
    }
    h2o_iovec_t url = gw_redirect_url(&req->pool, h2o_iovec_init(p->host, strlen(p->host)), p->https_port, req->path);
    gw_redirect_send(req, 308, "Permanent Redirect", url);
}

void gw_phase_domain_redirect(h2o_req_t *req, gw_domain_store_t *domains, const char *custom_host, uint16_t https_port)
{
    redirect_pending_t *p = h2o_mem_alloc_shared(&req->pool, sizeof(*p), on_redirect_dispose);
    struct sockaddr_storage client;

    p->req = req;
    p->https_port = https_port;
    memcpy(p->host, custom_host, strlen(custom_host) + 1);
    /* a plain listener that redirects is not a trusted one: the connection's client is the client */
    p->lookup =
        gw_domain_store_lookup(domains, p->host, gw_client_addr(req->conn, &client) != 0 ? &client : NULL, on_redirect_domain, p);
}
