/*
 * The ?lizard_token= query parameter: finding it in a request target and
 * removing every occurrence while keeping each other parameter, in order,
 * byte for byte, so that the sandbox sees the URL the user typed minus the
 * token.
 */
#include <string.h>
#include <h2o/string_.h>
#include "auth/query.h"
#include "common/engine.h"

/* 1 with the byte in *c when raw[i] starts a "%XX" escape inside raw_len bytes */
static int percent_escape(const char *raw, size_t raw_len, size_t i, char *c)
{
    return raw[i] == '%' && i + 2 < raw_len && h2o_hex_decode(c, raw + i + 1, 2) == 0;
}

/* Percent-decodes src into dst (room for src_len bytes); returns the decoded
 * length. A '%' not followed by two hex digits is kept literally, and '+'
 * stays '+': tokens are hex or base64url, and base64 ('+' is a digit there)
 * must survive a link pasted without encoding. */
static size_t percent_decode(char *dst, const char *src, size_t src_len)
{
    size_t i, n = 0;

    for (i = 0; i < src_len; ++i) {
        if (percent_escape(src, src_len, i, &dst[n]))
            i += 2;
        else
            dst[n] = src[i];
        ++n;
    }
    return n;
}

/* 1 when the parameter name `raw` (still percent-encoded) decodes to `name`. */
static int name_matches(const char *raw, size_t raw_len, h2o_iovec_t name)
{
    size_t i, n = 0;

    /* a decoded name is never longer than its encoding, never shorter than a third of it */
    if (name.len > raw_len || raw_len > name.len * 3)
        return 0;
    for (i = 0; i < raw_len; ++i) {
        char c;
        if (percent_escape(raw, raw_len, i, &c))
            i += 2;
        else
            c = raw[i];
        if (n == name.len || name.base[n] != c)
            return 0;
        ++n;
    }
    return n == name.len;
}

/* Iterates over the '&'-separated parameters of [*cursor, query_end), empty
 * ones included. Sets *param and *name_len (bytes before the first '='), and
 * returns 0 once every parameter has been returned. Start with
 * *cursor = query; NULL marks the end. */
static int next_param(const char **cursor, const char *query_end, h2o_iovec_t *param, size_t *name_len)
{
    const char *p = *cursor, *param_end, *eq;

    if (p == NULL)
        return 0;
    if ((param_end = memchr(p, '&', query_end - p)) == NULL)
        param_end = query_end;
    if ((eq = memchr(p, '=', param_end - p)) == NULL)
        eq = param_end;
    *param = h2o_iovec_init(p, param_end - p);
    *name_len = eq - p;
    *cursor = param_end == query_end ? NULL : param_end + 1;
    return 1;
}

size_t gw_query_take(h2o_mem_pool_t *pool, h2o_iovec_t path, h2o_iovec_t name, h2o_iovec_t *value, h2o_iovec_t *stripped)
{
    const char *query, *query_end, *end = path.base + path.len, *cursor;
    h2o_iovec_t param;
    size_t name_len, found = 0, kept = 0, out_len;
    char *out;

    *value = h2o_iovec_init(NULL, 0);
    *stripped = path;
    if (path.len == 0)
        return 0;

    /* A fragment is never sent by a browser; if one arrives anyway it ends
     * the query and is carried over as is. */
    if ((query_end = memchr(path.base, '#', path.len)) == NULL)
        query_end = end;
    if ((query = memchr(path.base, '?', query_end - path.base)) == NULL)
        return 0;
    ++query;

    for (cursor = query; next_param(&cursor, query_end, &param, &name_len);) {
        if (!name_matches(param.base, name_len, name))
            continue;
        if (found++ == 0) {
            /* "name" and "name=" both give an empty value */
            size_t skip = name_len < param.len ? name_len + 1 : name_len;
            char *buf = gw_pool_alloc(pool, param.len - skip + 1);
            value->len = percent_decode(buf, param.base + skip, param.len - skip);
            buf[value->len] = '\0';
            value->base = buf;
        }
    }
    if (found == 0)
        return 0;

    /* the result is never longer than the input */
    out = gw_pool_alloc(pool, path.len + 1);
    out_len = query - path.base;
    memcpy(out, path.base, out_len);
    for (cursor = query; next_param(&cursor, query_end, &param, &name_len);) {
        if (name_matches(param.base, name_len, name))
            continue;
        /* kept parameters are joined with one '&' each, as they were, so
         * "a&&b" keeps its empty parameter */
        if (kept++ != 0)
            out[out_len++] = '&';
        memcpy(out + out_len, param.base, param.len);
        out_len += param.len;
    }
    /* nothing left of the query (only the token, or the token and empty
     * parameters): drop the '?' */
    if (out_len == (size_t)(query - path.base))
        --out_len;
    memcpy(out + out_len, query_end, end - query_end);
    out_len += end - query_end;
    out[out_len] = '\0';
    *stripped = h2o_iovec_init(out, out_len);
    return found;
}
