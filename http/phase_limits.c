/*
 * The limits phase: a connection slot of the client's address
 * (limits.max_connections_per_client) and one of the sandbox
 * (limits.max_connections_per_sandbox), and for a desktop's WebSocket one of
 * its viewers (limits.max_desktop_viewers), or too_many_connections. Hands on
 * the slots in r; the proxy gives them back when the request is done, the
 * unwinding when a later phase answers.
 */
#include <string.h>
#include <arpa/inet.h>
#include "common/client_addr.h"
#include "http/phases.h"

ssize_t gw_pipeline_listener_of(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    size_t i;

    /* told by the `hosts` its accept context gave the connection */
    for (i = 0; i != conf->config->num_listen; ++i)
        if (conn->hosts == conf->listener_hosts[i])
            return (ssize_t)i;
    return -1;
}

/* 1 when `conn` came through a trusted plain listener (a load balancer: X-Forwarded-For names the client).
 * With proxy_protocol the PROXY header named the client (the socket's peer): an L4 balancer adds no
 * X-Forwarded-For, so one there is the client's own and is not believed. */
static int listener_trusted(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    ssize_t i = gw_pipeline_listener_of(conf, conn);
    return i != -1 && conf->config->listen[i].trusted && !conf->config->listen[i].proxy_protocol;
}

int gw_pipeline_client_text(const gw_pipeline_conf_t *conf, h2o_req_t *req, char *buf, size_t bufsize)
{
    ssize_t i = -1, last = -1;

    if (listener_trusted(conf, req->conn)) {
        while ((i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-forwarded-for"), i)) != -1)
            last = i;
        if (last != -1) {
            h2o_iovec_t v = req->headers.entries[last].value;
            const char *end = v.base + v.len, *start;
            unsigned char bin[sizeof(struct in6_addr)];
            while (end != v.base && (end[-1] == ' ' || end[-1] == '\t'))
                --end;
            for (start = end; start != v.base && start[-1] != ',' && start[-1] != ' ' && start[-1] != '\t'; --start)
                ;
            if ((size_t)(end - start) < bufsize && end != start) {
                memcpy(buf, start, end - start);
                buf[end - start] = '\0';
                if (inet_pton(AF_INET, buf, bin) == 1 || inet_pton(AF_INET6, buf, bin) == 1)
                    return 0;
            }
        }
    }
    return gw_client_addr_text(req->conn, buf, bufsize) < 0 ? -1 : 0;
}

int gw_phase_client(gw_pipeline_req_t *r)
{
    if (r->client_known == 0)
        r->client_known = gw_pipeline_client_text(r->conf, r->req, r->client, sizeof(r->client)) == 0 ? 1 : -1;
    return r->client_known == 1 ? 0 : -1;
}

/* 1 when the client's address has less than half its budget of HTTP/2 stream errors left (gateway/accept.c takes from it):
 * it gets no new request through until half has come back. Half, not one: a new request is admitted before its stream
 * can err, and each token earned back would otherwise let a whole burst of requests reach the app. One load while no
 * address is in debt (rate_limit.h). */
static int stream_errors_spent(gw_pipeline_req_t *r)
{
    const gw_config_t *c = r->conf->config;
    uint32_t burst = (uint32_t)c->limits.max_stream_errors_per_client;

    return r->conf->stream_errors != NULL &&
           gw_rate_limit_below(r->conf->stream_errors, r->client, (uint32_t)c->limits.stream_errors_per_client_per_s, burst,
                               burst / 2 != 0 ? burst / 2 : 1, gw_rate_limit_now_ns());
}

/* One client address cannot take every slot of a sandbox, nor one sandbox
 * every socket of the gateway. */
gw_phase_result_t gw_phase_limits(gw_pipeline_req_t *r)
{
    size_t worker = r->thread->worker;

    if (gw_phase_client(r) == 0) {
        if (stream_errors_spent(r))
            return gw_phase_error_why(r, GW_ERR_TOO_MANY_CONNECTIONS, GW_WHY_STREAM_ERRORS);
        if (!gw_conn_limit_acquire(r->conf->client_reqs, worker, r->client))
            return gw_phase_error(r, GW_ERR_TOO_MANY_CONNECTIONS, NULL);
        r->client_limit = r->conf->client_reqs;
    }
    if (!gw_conn_limit_acquire(r->conf->conn_limit, worker, r->sbx->id))
        return gw_phase_error(r, GW_ERR_TOO_MANY_CONNECTIONS, NULL); /* the unwinding gives the client's slot back */
    r->conn_limit = r->conf->conn_limit;
    /* a desktop's viewers are bounded apart: each holds a framebuffer stream (the protocol phase let only its WebSocket
     * through) */
    if (gw_phase_port_is_rfb(r)) {
        if (!gw_conn_limit_acquire(r->conf->desktop_viewers, worker, r->sbx->id))
            return gw_phase_error_why(r, GW_ERR_TOO_MANY_CONNECTIONS, GW_WHY_DESKTOP_VIEWERS);
        r->viewer_limit = r->conf->desktop_viewers;
    }
    return GW_PHASE_NEXT;
}
