/*
 * The HTTP/2 leg's request (upstream/h2c.h): its head as the HTTP/1.1 leg
 * rewrites it (upstream/http1_head.h), and its body, whole or streamed into
 * h2o's HTTP/2 client as the client sends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http2.h>
#include "upstream/h2c_call.h"
#include "common/client_addr.h"
#include "common/numfmt.h"

static void set_trailers(call_t *c, h2o_httpclient_t *client);

static void on_proceed_req(h2o_httpclient_t *client, const char *errstr)
{
    call_t *c = client->data;

    if (c == NULL)
        return;
    if (errstr != NULL)
        gw_h2c_detach_client(c);
    if (c->req->proceed_req != NULL) {
        if (errstr == NULL)
            c->in_hand = 0;
        c->req->proceed_req(c->req, errstr);
    }
}

void gw_h2c_on_over_limit(gw_timer_t *entry)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, over_limit.entry, entry);

    switch (c->state) {
    case CALL_CONNECTING:
    case CALL_AWAIT_HEAD:
        gw_h2c_fail(c, GW_ERR_BODY_TOO_LARGE, "The request body is larger than the gateway accepts.");
        break;
    case CALL_BODY:
        gw_h2c_cut(c, GW_CUT_BODY_TOO_LARGE);
        break;
    case CALL_OVER:
        break;
    }
}

static int write_req(void *ctx, int is_end_stream)
{
    call_t *c = ctx;
    h2o_httpclient_t *client = c->client;
    h2o_iovec_t chunk = c->req->entity;

    c->in_hand = 1;
    if (client == NULL || c->state == CALL_OVER)
        return 0; /* the chunk stays with h2o until the call's end ends the body */
    if (c->body_sent + chunk.len > c->req->conn->ctx->globalconf->max_request_entity_size) {
        /* nothing of it reaches the app; answered out of h2o's call (a reset inside it would close the stream under
         * its feet), as request_body.c does */
        gw_delay_timer_link(c->h2c->proxy->ctx->loop, &c->over_limit, 0);
        return 0;
    }
    c->body_sent += chunk.len;
    gw_proxy_add_bytes(c->h2c->proxy, c->sandbox_id, c->no_activity, 0, chunk.len);
    if (is_end_stream) {
        /* the trailers came with the body's end: ingress as they arrived, all of them */
        gw_proxy_add_bytes(c->h2c->proxy, c->sandbox_id, c->no_activity, 0,
                           gw_h2c_headers_size(c->req->trailers.entries, c->req->trailers.size));
        set_trailers(c, client);
        c->req->write_req.cb = NULL;
        c->req_done = 1;
        if (c->res_done)
            gw_h2c_detach_client(c);
    }
    return client->write_req(client, chunk, is_end_stream);
}

/* A request header the app gets: hop-by-hop fields (but te: trailers, which gRPC servers require), Host,
 * Content-Length, Expect, Forwarded, X-Forwarded-*, X-Real-IP, X-Lizard-* and names with an underscore are not
 * forwarded, as on the HTTP/1.1 leg (upstream/http1_head.h). */
static int request_header_is_forwarded(const h2o_header_t *h)
{
    const h2o_iovec_t *name = h->name;

    if (h2o_iovec_is_token(name)) {
        const h2o_token_t *t = H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, name);
        if (t == H2O_TOKEN_TE)
            return h2o_lcstris(h->value.base, h->value.len, H2O_STRLIT("trailers"));
        if (t == H2O_TOKEN_CONNECTION || t == H2O_TOKEN_KEEP_ALIVE || t == H2O_TOKEN_TRANSFER_ENCODING || t == H2O_TOKEN_UPGRADE ||
            t == H2O_TOKEN_HTTP2_SETTINGS || t == H2O_TOKEN_PROXY_CONNECTION || t == H2O_TOKEN_HOST ||
            t == H2O_TOKEN_CONTENT_LENGTH || t == H2O_TOKEN_EXPECT)
            return 0;
    }
    if (h2o_lcstris(name->base, name->len, H2O_STRLIT("forwarded")) ||
        h2o_lcstris(name->base, name->len, H2O_STRLIT("x-real-ip")) ||
        (name->len >= 12 && h2o_lcstris(name->base, 12, H2O_STRLIT("x-forwarded-"))) ||
        (name->len >= 9 && h2o_lcstris(name->base, 9, H2O_STRLIT("x-lizard-"))))
        return 0;
    return memchr(name->base, '_', name->len) == NULL;
}

/* A request trailer the app gets: as a header field is, but never authentication (RFC 9110 6.5.1: Authorization,
 * Proxy-Authorization, Cookie): the gateway takes its own credentials out of the head only, a trailer must not carry one
 * to the app. (h2o refuses the fields that frame or route in a trailer: patches 0310 and 0550.) */
static int request_trailer_is_forwarded(const h2o_header_t *h)
{
    return h->name != &H2O_TOKEN_AUTHORIZATION->buf && h->name != &H2O_TOKEN_PROXY_AUTHORIZATION->buf &&
           h->name != &H2O_TOKEN_COOKIE->buf && request_header_is_forwarded(h);
}

/* The client's request trailers (h2o's req->trailers: an HTTP/2 client's, patch 0540, an HTTP/1.1 client's chunked trailer
 * section, patch 0550) that the app gets, handed to the HTTP/2 client before the body's end (patch 0541: it copies them then). */
static void set_trailers(call_t *c, h2o_httpclient_t *client)
{
    h2o_req_t *req = c->req;
    h2o_headers_t out = {NULL};
    size_t i;

    for (i = 0; i != req->trailers.size; ++i)
        if (request_trailer_is_forwarded(req->trailers.entries + i)) {
            h2o_vector_reserve(&req->pool, &out, out.size + 1);
            out.entries[out.size++] = req->trailers.entries[i];
        }
    client->request_trailers.entries = out.entries;
    client->request_trailers.size = out.size;
}

static void build_headers(call_t *c, h2o_headers_t *out)
{
    h2o_req_t *req = c->req;
    const h2o_headers_t *in = c->localhost ? gw_address_view_request_headers(&c->view, &req->pool, &req->headers) : &req->headers;
    char ip[64];
    size_t i;

    for (i = 0; i != in->size; ++i)
        if (request_header_is_forwarded(in->entries + i)) {
            h2o_vector_reserve(&req->pool, out, out->size + 1);
            out->entries[out->size++] = in->entries[i];
        }
    h2o_iovec_t client_addr =
        c->client_addr != NULL ? h2o_iovec_init(c->client_addr, strlen(c->client_addr)) : h2o_iovec_init(NULL, 0);
    if (client_addr.base == NULL) {
        int n = gw_client_addr_text(req->conn, ip, sizeof(ip));
        if (n > 0)
            client_addr = h2o_strdup(&req->pool, ip, (size_t)n);
    }
    if (client_addr.len != 0)
        h2o_add_header_by_str(&req->pool, out, H2O_STRLIT("x-forwarded-for"), 0, NULL, client_addr.base, client_addr.len);
    h2o_iovec_t scheme = c->localhost ? h2o_iovec_init(H2O_STRLIT("https")) : req->scheme->name;
    h2o_add_header_by_str(&req->pool, out, H2O_STRLIT("x-forwarded-proto"), 0, NULL, scheme.base, scheme.len);
    h2o_add_header_by_str(&req->pool, out, H2O_STRLIT("x-forwarded-host"), 0, NULL, req->authority.base, req->authority.len);
    if (c->client_port != 0) {
        char *num = h2o_mem_alloc_pool(&req->pool, char, GW_NUMFMT_DEC_SIZE);
        h2o_add_header_by_str(&req->pool, out, H2O_STRLIT("x-forwarded-port"), 0, NULL, num, gw_numfmt_dec(num, c->client_port));
    }
}

h2o_httpclient_head_cb gw_h2c_on_connect(h2o_httpclient_t *client, const char *errstr, h2o_iovec_t *method, h2o_url_t *url,
                                         const h2o_header_t **headers, size_t *num_headers, h2o_iovec_t *body,
                                         h2o_httpclient_proceed_req_cb *proceed_req_cb, h2o_httpclient_properties_t *props,
                                         h2o_url_t *origin)
{
    call_t *c = client->data;
    h2o_req_t *req;

    (void)props;
    if (c == NULL)
        return NULL;
    req = c->req;
    gw_h2c_connect_done(c);
    if (errstr != NULL) {
        gw_h2c_detach_client(c);
        if (errstr == h2o_httpclient_error_connect_timeout)
            gw_h2c_fail(c, GW_ERR_UPSTREAM_TIMEOUT, DETAIL_CONNECT_TIMEOUT);
        else
            gw_h2c_fail_why(c, GW_ERR_PORT_NOT_OPEN, GW_WHY_DEFAULT, NULL, &c->addr);
        return NULL;
    }
    h2o_headers_t out = {NULL};
    build_headers(c, &out);
    *method = req->method;
    *url = *origin;
    url->authority = c->authority;
    url->path = c->path;
    *headers = out.entries;
    *num_headers = out.size;
    *body = h2o_iovec_init(NULL, 0);
    *proceed_req_cb = NULL;
    c->req_done = 1;
    if (req->entity.base != NULL) {
        *body = req->entity;
        /* a body still arriving at forward was not counted then: what h2o has of it now (all of it, when it ended since) */
        if (c->body_streams) {
            size_t ended = req->proceed_req == NULL ? gw_h2c_headers_size(req->trailers.entries, req->trailers.size) : 0;
            c->body_sent = req->entity.len;
            gw_proxy_add_bytes(c->h2c->proxy, c->sandbox_id, c->no_activity, 0, req->entity.len + ended); /* with its trailers */
        }
        if (req->proceed_req != NULL) {
            /* the body streams (http/pipeline.c's supports_request_streaming): each chunk goes on as h2o hands it */
            *proceed_req_cb = on_proceed_req;
            req->write_req.cb = write_req;
            req->write_req.ctx = c;
            c->req_done = 0;
        }
    }
    if (c->req_done)
        set_trailers(c, client); /* a body that came whole, or none: its trailers follow it */
    c->state = CALL_AWAIT_HEAD;
    gw_h2c_arm_silence(c);
    return gw_h2c_on_head;
}
