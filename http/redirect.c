/*
 * The gateway's own redirects: Location as an absolute https URL on the
 * request's host. A relative one ("//evil.example/x" after a 302 that only
 * removed lizard_token) is read by browsers as another host.
 */
#include <stdio.h>
#include <string.h>
#include "http/redirect.h"
#include "routing/host.h"

static int is_origin_form(h2o_iovec_t path)
{
    size_t i;

    if (path.len == 0 || path.base[0] != '/')
        return 0;
    for (i = 0; i != path.len; ++i)
        if ((unsigned char)path.base[i] <= 0x20 || (unsigned char)path.base[i] >= 0x7f)
            return 0;
    return 1;
}

h2o_iovec_t gw_redirect_url(h2o_mem_pool_t *pool, h2o_iovec_t hostname, uint16_t port, h2o_iovec_t path)
{
    static const char scheme[] = "https://";
    char port_text[8] = "";
    h2o_iovec_t url;

    if (port != 0 && port != 443)
        snprintf(port_text, sizeof(port_text), ":%u", (unsigned)port);
    if (!is_origin_form(path))
        path = h2o_iovec_init(H2O_STRLIT("/"));
    url = h2o_concat(pool, h2o_iovec_init(H2O_STRLIT(scheme)), hostname, h2o_iovec_init(port_text, strlen(port_text)), path);
    h2o_strtolower(url.base + sizeof(scheme) - 1, hostname.len);
    return url;
}

h2o_iovec_t gw_redirect_location(h2o_mem_pool_t *pool, h2o_iovec_t authority, h2o_iovec_t path)
{
    h2o_iovec_t hostname = gw_host_strip_port(authority);
    size_t rest = authority.len - hostname.len, port = 0;

    /* gw_host_parse let through only ":" and 1 to 5 digits after the name */
    if (rest > 1 && authority.base[hostname.len] == ':') {
        port = h2o_strtosize(authority.base + hostname.len + 1, rest - 1);
        if (port == SIZE_MAX || port > 65535)
            port = 0;
    }
    return gw_redirect_url(pool, hostname, (uint16_t)port, path);
}

void gw_redirect_send(h2o_req_t *req, int status, const char *reason, h2o_iovec_t location)
{
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, location.base, location.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_send_inline(req, "", 0);
}
