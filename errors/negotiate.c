/*
 * Which format an error takes (CONTRACT.md, Errors): a browser navigation
 * gets HTML, anything else JSON, told by Sec-Fetch-Mode or else by Accept's
 * qvalues. Split from errors.c, which renders and sends.
 */
#include <string.h>
#include "errors/errors.h"
/* Case-insensitive equality of [s, s+len) with the NUL-terminated lowercase `lit`. */
static int token_is(const char *s, size_t len, const char *lit)
{
    return h2o_lcstris(s, len, lit, strlen(lit));
}

static void trim(const char **s, const char **end)
{
    while (*s < *end && (**s == ' ' || **s == '\t'))
        ++*s;
    while (*end > *s && ((*end)[-1] == ' ' || (*end)[-1] == '\t'))
        --*end;
}

/* Parses a qvalue ("0", "0.8", "1", "1.000") into thousandths; -1 if invalid. */
static int parse_qvalue(const char *s, const char *end)
{
    int q, scale = 100;

    if (s == end || (*s != '0' && *s != '1'))
        return -1;
    q = (*s++ - '0') * 1000;
    if (s == end)
        return q;
    if (*s++ != '.')
        return -1;
    for (; s < end && scale != 0; ++s, scale /= 10) {
        if (*s < '0' || *s > '9')
            return -1;
        q += (*s - '0') * scale;
    }
    return s == end && q <= 1000 ? q : -1;
}

int gw_error_prefers_html(h2o_iovec_t sec_fetch_mode, h2o_iovec_t accept)
{
    /* q in thousandths; -1 = not listed. json_q keeps the most specific
     * range that covers application/json. */
    int html_q = -1, json_q = -1, app_any_q = -1, any_q = -1;
    const char *p, *end;

    /* browsers that send Sec-Fetch-Mode say exactly what the request is */
    if (sec_fetch_mode.base != NULL && sec_fetch_mode.len != 0) {
        const char *m = sec_fetch_mode.base, *m_end = m + sec_fetch_mode.len;
        trim(&m, &m_end);
        return token_is(m, m_end - m, "navigate");
    }
    if (accept.base == NULL)
        return 0;

    for (p = accept.base, end = accept.base + accept.len; p < end;) {
        const char *range_end = memchr(p, ',', end - p), *type_end, *param;
        int q = 1000;
        if (range_end == NULL)
            range_end = end;
        if ((type_end = memchr(p, ';', range_end - p)) == NULL)
            type_end = range_end;
        /* parameters: only q matters */
        for (param = type_end; param < range_end;) {
            const char *param_end = memchr(param + 1, ';', range_end - (param + 1)), *name = param + 1, *name_end;
            if (param_end == NULL)
                param_end = range_end;
            if ((name_end = memchr(name, '=', param_end - name)) != NULL) {
                const char *v = name_end + 1, *v_end = param_end;
                trim(&name, &name_end);
                trim(&v, &v_end);
                if (token_is(name, name_end - name, "q"))
                    q = parse_qvalue(v, v_end);
            }
            param = param_end;
        }
        trim(&p, &type_end);
        if (q >= 0) {
            int *slot = NULL;
            if (token_is(p, type_end - p, "text/html") || token_is(p, type_end - p, "application/xhtml+xml"))
                slot = &html_q;
            else if (token_is(p, type_end - p, "application/json"))
                slot = &json_q;
            else if (token_is(p, type_end - p, "application/*"))
                slot = &app_any_q;
            else if (token_is(p, type_end - p, "*/*"))
                slot = &any_q;
            if (slot != NULL && q > *slot)
                *slot = q;
        }
        p = range_end + 1;
    }

    if (json_q < 0)
        json_q = app_any_q >= 0 ? app_any_q : any_q >= 0 ? any_q : 0;
    return html_q > 0 && html_q >= json_q;
}

int gw_error_is_navigation(h2o_req_t *req)
{
    h2o_iovec_t sec_fetch_mode = {NULL, 0}, accept = {NULL, 0};
    ssize_t i;

    if ((i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("sec-fetch-mode"), -1)) != -1)
        sec_fetch_mode = req->headers.entries[i].value;
    if ((i = h2o_find_header(&req->headers, H2O_TOKEN_ACCEPT, -1)) != -1)
        accept = req->headers.entries[i].value;
    return gw_error_prefers_html(sec_fetch_mode, accept);
}
