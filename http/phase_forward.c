/*
 * The address phase and the forward phase. Address: the record's addr must
 * be an IP literal inside upstream.allowed_networks (a wrong or poisoned
 * addr must never reach the gateway host's own services), else
 * upstream_forbidden, said once per (sandbox, lifecycle, addr) in the log.
 * Forward: the proxy target built from the record, the port's host mode and
 * the slots the limits phase took, handed to the proxy (upstream/proxy.h)
 * with the meter told the sandbox's project.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/netaddr.h"
#include "http/phases.h"
#include "metering/metering.h"
#include "upstream/h2c.h"
#include "upstream/proxy.h"

/* A (sandbox, lifecycle) whose addr was refused and logged. */
typedef struct st_refused_addr_t {
    gw_hashtab_node_t node;
    char key[]; /* sandbox id, lifecycle, addr (refuse_addr) */
} refused_addr_t;

/* At most this many refused (sandbox, lifecycle) pairs are remembered per
 * context; past it the memo starts again (a line more, never unbounded). */
#define MAX_REFUSED_ADDRS 1024

void gw_phase_address_forget(gw_hashtab_t *t)
{
    gw_hashtab_free_all(t, offsetof(refused_addr_t, node));
}

/* upstream_forbidden, saying which: no addr, not an IP literal, or outside
 * upstream.allowed_networks; the operator reads the record's addr and why in
 * the log, once per (sandbox, lifecycle, addr) in each worker. */
static gw_phase_result_t refuse_addr(gw_pipeline_req_t *r, const gw_sandbox_t *sbx)
{
    gw_error_why_t why = !sbx->has_addr_field ? GW_WHY_ADDR_MISSING : !sbx->has_addr ? GW_WHY_ADDR_NOT_IP : GW_WHY_DEFAULT;
    gw_hashtab_t *memo = r->refused_addrs;
    size_t id_len = strlen(sbx->id), addr_len = sbx->has_addr_field ? strlen(sbx->addr_text) : 0;
    size_t key_len = id_len + 1 + sbx->lifecycle.len + 1 + addr_len + 1;
    refused_addr_t *a = malloc(sizeof(*a) + key_len);

    if (a == NULL)
        h2o_fatal("no memory");
    /* "<id>\n<lifecycle>\n<addr><1 when the field is there>": a new addr in the same lifecycle is said too */
    memcpy(a->key, sbx->id, id_len);
    a->key[id_len] = '\n';
    memcpy(a->key + id_len + 1, sbx->lifecycle.base, sbx->lifecycle.len);
    a->key[id_len + 1 + sbx->lifecycle.len] = '\n';
    memcpy(a->key + id_len + 2 + sbx->lifecycle.len, sbx->addr_text, addr_len);
    a->key[key_len - 1] = sbx->has_addr_field ? '1' : '0';
    if (gw_hashtab_find(memo, a->key, key_len) != NULL) {
        free(a);
    } else {
        if (gw_hashtab_size(memo) >= MAX_REFUSED_ADDRS)
            gw_phase_address_forget(memo);
        gw_hashtab_insert(memo, &a->node, a->key, key_len);
        fprintf(stderr, "pipeline: sandbox %s: addr %s%s%s refused: %s\n", sbx->id, sbx->has_addr_field ? "\"" : "",
                sbx->has_addr_field ? sbx->addr_text : "(absent)", sbx->has_addr_field ? "\"" : "",
                why == GW_WHY_ADDR_MISSING  ? "the record has no addr field"
                : why == GW_WHY_ADDR_NOT_IP ? "not an IP literal (host names are never resolved)"
                                            : "outside upstream.allowed_networks");
    }
    return gw_phase_error_why(r, GW_ERR_UPSTREAM_FORBIDDEN, why);
}

/* The port's host mode: host:<n>, else upstream.host_header. */
static int uses_localhost(const gw_config_t *conf, const gw_sandbox_port_t *port)
{
    switch (port != NULL ? port->host : GW_PORT_HOST_DEFAULT) {
    case GW_PORT_HOST_PRESERVE:
        return 0;
    case GW_PORT_HOST_LOCALHOST:
        return 1;
    default:
        return conf->upstream.host_header == GW_HOST_HEADER_LOCALHOST;
    }
}

gw_phase_result_t gw_phase_address(gw_pipeline_req_t *r)
{
    const gw_config_t *conf = r->conf->config;
    const gw_sandbox_t *sbx = r->sbx;

    if (!sbx->has_addr ||
        !gw_cidr_list_contains(conf->upstream.allowed_networks, conf->upstream.num_allowed_networks, (void *)&sbx->addr.ss))
        return refuse_addr(r, sbx);
    return GW_PHASE_NEXT;
}

/* The port of the listener that accepted `conn` (X-Forwarded-Port), without a system call; 0 if unknown. */
static uint16_t listener_port(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    ssize_t i = gw_pipeline_listener_of(conf, conn);
    return i != -1 ? gw_netaddr_port(&conf->config->listen[i].addr) : 0;
}

gw_phase_result_t gw_phase_forward(gw_pipeline_req_t *r)
{
    const gw_config_t *conf = r->conf->config;
    gw_sandbox_t *sbx = r->sbx;
    gw_proxy_target_t target = {.addr = sbx->addr,
                                .lifecycle = sbx->lifecycle,
                                .sandbox_id = sbx->id,
                                .port = r->host.port,
                                .path = r->path,
                                .cors_preflight = gw_phase_is_cors_preflight(r->req),
                                .localhost = uses_localhost(conf, r->sbx_port),
                                .no_activity = gw_phase_header_is(r->req, H2O_STRLIT("x-lizard-no-activity"), H2O_STRLIT("1")),
                                .grant = r->grant,
                                .tcp = gw_phase_port_is_tcp(r) || gw_phase_port_is_rfb(r),
                                .rfb = !gw_phase_port_is_rfb(r) ? 0
                                       : r->grant.view_only     ? GW_RFB_VIEW_ONLY
                                                                : GW_RFB_FULL,
                                .viewer_limit = r->viewer_limit,
                                .client_limit = r->client_limit,
                                .client_addr = r->client_limit != NULL ? r->client : NULL,
                                .conn_limit = r->conn_limit,
                                .limit_worker = r->thread->worker,
                                .client_port = listener_port(r->conf, r->req->conn),
                                /* checked against upstream.max_port_timeout_ms when the record was read */
                                .timeout_ms = r->sbx_port != NULL ? r->sbx_port->timeout_ms : 0,
                                .h2c = r->sbx_port != NULL && r->sbx_port->h2c};

    if (target.addr.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&target.addr.ss)->sin_port = htons(r->host.port);
    else
        ((struct sockaddr_in6 *)&target.addr.ss)->sin6_port = htons(r->host.port);
    /* the slots are the proxy's now */
    r->client_limit = NULL;
    r->conn_limit = NULL;
    r->viewer_limit = NULL;
    /* the proxy's byte counts carry only the sandbox id: the meter keeps its project */
    gw_worker_meter_set_route(r->thread->meter, sbx->id, sbx->project, sbx->egress_quota);
    /* HTTP/2 with prior knowledge to an h2c port, else HTTP/1.1 */
    if (!gw_h2c_take(r->thread->proxy, r->req, &target))
        gw_proxy_forward(r->thread->proxy, r->req, &target);
    return GW_PHASE_ASYNC;
}
