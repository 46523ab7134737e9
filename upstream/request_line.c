/*
 * Request lines (request_line.h): token methods, origin-form targets, and
 * the absolute-form turned into origin-form, so that what the gateway writes
 * upstream is always one well-formed HTTP/1.1 request line.
 */
#include <string.h>
#include "upstream/request_line.h"

/* RFC 9110 5.6.2 tchar */
static int is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int gw_request_method_is_token(h2o_iovec_t method)
{
    size_t i;

    if (method.len == 0)
        return 0;
    for (i = 0; i != method.len; ++i)
        if (!is_tchar((unsigned char)method.base[i]))
            return 0;
    return 1;
}

/* Length of "http://" or "https://" (any case) at the start of s, or 0. */
static size_t http_scheme_prefix(h2o_iovec_t s)
{
    if (s.len >= sizeof("http://") - 1 && h2o_lcstris(s.base, sizeof("http://") - 1, H2O_STRLIT("http://")))
        return sizeof("http://") - 1;
    if (s.len >= sizeof("https://") - 1 && h2o_lcstris(s.base, sizeof("https://") - 1, H2O_STRLIT("https://")))
        return sizeof("https://") - 1;
    return 0;
}

gw_target_form_t gw_request_target_parse(h2o_mem_pool_t *pool, h2o_iovec_t method, h2o_iovec_t target, h2o_iovec_t *authority,
                                         h2o_iovec_t *origin)
{
    size_t start, end;

    *authority = h2o_iovec_init(NULL, 0);
    *origin = target;
    if (target.len != 0 && target.base[0] == '/')
        return GW_TARGET_ORIGIN;
    if (h2o_memis(target.base, target.len, H2O_STRLIT("*")))
        return h2o_memis(method.base, method.len, H2O_STRLIT("OPTIONS")) ? GW_TARGET_ASTERISK : GW_TARGET_INVALID;
    if ((start = http_scheme_prefix(target)) == 0)
        return GW_TARGET_INVALID;

    for (end = start; end != target.len && target.base[end] != '/' && target.base[end] != '?'; ++end)
        if (target.base[end] == '@') /* userinfo: RFC 9110 4.2.4 forbids it in http(s) URIs */
            return GW_TARGET_INVALID;
    if (end == start)
        return GW_TARGET_INVALID;
    *authority = h2o_iovec_init(target.base + start, end - start);
    if (end == target.len) {
        *origin = h2o_iovec_init(H2O_STRLIT("/"));
    } else if (target.base[end] == '?') {
        *origin = h2o_concat(pool, h2o_iovec_init(H2O_STRLIT("/")), h2o_iovec_init(target.base + end, target.len - end));
    } else {
        *origin = h2o_iovec_init(target.base + end, target.len - end);
    }
    return GW_TARGET_ABSOLUTE;
}

int gw_request_line_check(h2o_iovec_t method, h2o_iovec_t target)
{
    size_t i;

    if (!gw_request_method_is_token(method) || h2o_memis(method.base, method.len, H2O_STRLIT("CONNECT")))
        return -1;
    if (h2o_memis(target.base, target.len, H2O_STRLIT("*")))
        return h2o_memis(method.base, method.len, H2O_STRLIT("OPTIONS")) ? 0 : -1;
    if (target.len == 0 || target.base[0] != '/')
        return -1;
    for (i = 0; i != target.len; ++i) {
        unsigned char c = (unsigned char)target.base[i];
        if (c <= 0x20 || c >= 0x7f)
            return -1;
    }
    return 0;
}

void gw_request_line_refuse(h2o_req_t *req, int status, const char *reason, const char *why)
{
    h2o_iovec_t body = h2o_concat(&req->pool, h2o_iovec_init(why, strlen(why)), h2o_iovec_init(H2O_STRLIT(".\n")));
    h2o_send_error_generic(req, status, reason, body.base, H2O_SEND_ERROR_HTTP1_CLOSE_CONNECTION | H2O_SEND_ERROR_KEEP_HEADERS);
}

int gw_request_method_is_idempotent(h2o_iovec_t m)
{
    static const h2o_iovec_t idempotent[] = {{H2O_STRLIT("GET")}, {H2O_STRLIT("HEAD")},   {H2O_STRLIT("OPTIONS")},
                                             {H2O_STRLIT("PUT")}, {H2O_STRLIT("DELETE")}, {H2O_STRLIT("TRACE")}};
    size_t i;
    for (i = 0; i != sizeof(idempotent) / sizeof(idempotent[0]); ++i)
        if (h2o_memis(m.base, m.len, idempotent[i].base, idempotent[i].len))
            return 1;
    return 0;
}
