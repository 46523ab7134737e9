/*
 * The RFC 9728 protected resource document and the Bearer challenge that
 * points to it (see oauth_resource.h). Both are built per request from the
 * request's own authority: one preview host is one resource.
 */
#include <string.h>
#include "common/engine.h"
#include "errors/errors.h"
#include "http/oauth_resource.h"
#include "http/redirect.h"

int gw_oauth_resource_is_request(const gw_config_t *conf, h2o_req_t *req, h2o_iovec_t path)
{
    size_t n = sizeof(GW_OAUTH_RESOURCE_PATH) - 1;

    if (conf->auth.num_oauth_authorization_servers == 0 || path.len < n || memcmp(path.base, GW_OAUTH_RESOURCE_PATH, n) != 0 ||
        (path.len != n && path.base[n] != '?'))
        return 0;
    return h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
           h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
}

void gw_oauth_resource_send(const gw_config_t *conf, h2o_req_t *req)
{
    static const char bearer_methods[] = "],\"bearer_methods_supported\":[\"header\"]}\n";
    h2o_iovec_t resource = gw_redirect_location(&req->pool, req->authority, h2o_iovec_init(H2O_STRLIT("/")));
    size_t i, len = sizeof("{\"resource\":\"\",\"authorization_servers\":[") + resource.len + sizeof(bearer_methods);
    char *body, *p;

    for (i = 0; i != conf->auth.num_oauth_authorization_servers; ++i)
        len += strlen(conf->auth.oauth_authorization_servers[i]) + 3;
    /* the URLs need no escaping: the host passed the host parser, the issuers the config's check (no '"' nor '\') */
    p = body = gw_pool_alloc(&req->pool, len);
    p += sizeof("{\"resource\":\"") - 1;
    memcpy(body, "{\"resource\":\"", p - body);
    memcpy(p, resource.base, resource.len);
    p += resource.len;
    memcpy(p, "\",\"authorization_servers\":[", sizeof("\",\"authorization_servers\":[") - 1);
    p += sizeof("\",\"authorization_servers\":[") - 1;
    for (i = 0; i != conf->auth.num_oauth_authorization_servers; ++i) {
        size_t n = strlen(conf->auth.oauth_authorization_servers[i]);
        if (i != 0)
            *p++ = ',';
        *p++ = '"';
        memcpy(p, conf->auth.oauth_authorization_servers[i], n);
        p += n;
        *p++ = '"';
    }
    memcpy(p, bearer_methods, sizeof(bearer_methods) - 1);
    p += sizeof(bearer_methods) - 1;

    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = (size_t)(p - body);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    /* public metadata, fetched by browser code too (an MCP inspector); a cors:<n> = edge port replaces it */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, H2O_STRLIT("*"));
    h2o_send_inline(req, body, (size_t)(p - body));
}

void gw_oauth_resource_challenge(const gw_config_t *conf, h2o_req_t *req)
{
    static const char scheme[] = "Bearer resource_metadata=\"";
    h2o_iovec_t url;
    char *v;

    if (conf->auth.num_oauth_authorization_servers == 0 || gw_error_is_navigation(req))
        return;
    url = gw_redirect_location(&req->pool, req->authority, h2o_iovec_init(H2O_STRLIT(GW_OAUTH_RESOURCE_PATH)));
    v = gw_pool_alloc(&req->pool, sizeof(scheme) + url.len + 1);
    memcpy(v, scheme, sizeof(scheme) - 1);
    memcpy(v + sizeof(scheme) - 1, url.base, url.len);
    v[sizeof(scheme) - 1 + url.len] = '"';
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL, v, sizeof(scheme) + url.len);
}
