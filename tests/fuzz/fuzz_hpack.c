/* libFuzzer target: HTTP/2 header blocks decoded through the patched libh2o's
 * HPACK (lib/http2/hpack.c, h2o patch 0150), several blocks on one dynamic
 * table as the requests of one connection. The input's first two bytes set
 * the bound of a request head (max_request_head_size, 0..65535); then each
 * block is a 2-byte length and that many bytes. Invariants: no crash, no
 * leak (the table is disposed at the end); a block that decodes without a
 * connection error kept its head within the bound, or says it is too large,
 * and then added at most one field past the bound; a block never decodes to
 * more than H2O_HPACK_MAX_AMPLIFICATION times its size plus the table.
 * Decoded with h2o_hpack_parse_request (a decoder callback and an
 * h2o_hpack_head_limit_t), as lib/http2/connection.c decodes a request. */
#include <stdint.h>
#include <string.h>
#include <h2o.h>
#include <h2o/http2.h>
#include <h2o/http2_internal.h>

/* what one block added to a request: its pseudo-headers and its fields */
typedef struct st_decoded_t {
    h2o_mem_pool_t pool;
    h2o_iovec_t method, path, authority;
    h2o_headers_t headers;
} decoded_t;

/* the bytes of the fields added, each as its HTTP/1.1 line */
static size_t decoded_size(decoded_t *d)
{
    size_t n = 0, i;
    h2o_iovec_t pseudo[] = {d->method, d->path, d->authority};

    for (i = 0; i != d->headers.size; ++i)
        n += d->headers.entries[i].name->len + d->headers.entries[i].value.len + 4;
    for (i = 0; i != sizeof(pseudo) / sizeof(pseudo[0]); ++i)
        if (pseudo[i].base != NULL)
            n += pseudo[i].len + 4 + 7; /* ":method" is the longest pseudo-header name but one (":authority" is 10) */
    return n;
}

static int decode_block(decoded_t *d, h2o_hpack_header_table_t *table, const uint8_t *src, size_t len, size_t *head_size,
                        size_t max_head_size)
{
    const h2o_url_scheme_t *scheme = NULL;
    h2o_iovec_t protocol = {NULL}, expect = {NULL};
    size_t content_length;
    int exists_map = H2O_HPACK_PARSE_HEADERS_REPORT_MALFORMED, ret;
    const char *err_desc = NULL;
    h2o_mem_pool_t scratch;
    h2o_hpack_head_limit_t limit = {*head_size, max_head_size, len * H2O_HPACK_MAX_AMPLIFICATION + table->hpack_max_capacity,
                                    &scratch};

    h2o_mem_init_pool(&scratch);
    ret = h2o_hpack_parse_request(&d->pool, h2o_hpack_decode_header, table, &d->method, &scheme, &d->authority, &d->path, &protocol,
                                  &d->headers, &exists_map, &content_length, &expect, NULL, NULL, &limit, src, len, &err_desc);
    h2o_mem_clear_pool(&scratch);
    *head_size = limit.head_size;
    return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    h2o_hpack_header_table_t table;
    size_t max_head_size, off = 2;

    if (size < 2)
        return 0;
    max_head_size = (size_t)data[0] << 8 | data[1];
    memset(&table, 0, sizeof(table));
    table.hpack_capacity = table.hpack_max_capacity = 4096;

    while (off + 2 <= size) {
        size_t len = (size_t)data[off] << 8 | data[off + 1], head_size = 0;
        decoded_t d;
        int ret;
        off += 2;
        if (len > size - off)
            len = size - off;
        memset(&d, 0, sizeof(d));
        h2o_mem_init_pool(&d.pool);
        ret = decode_block(&d, &table, data + off, len, &head_size, max_head_size);
        off += len;
        if (ret == 0 || ret == H2O_HTTP2_ERROR_INVALID_HEADER_CHAR) {
            if (head_size > max_head_size || decoded_size(&d) > head_size + 3 * 7)
                __builtin_trap();
        } else if (ret == H2O_HTTP2_ERROR_HEADERS_TOO_LARGE) {
            /* the field that crossed the bound may have been added, none after it */
            if (head_size <= max_head_size || head_size > len * H2O_HPACK_MAX_AMPLIFICATION + table.hpack_max_capacity)
                __builtin_trap();
        }
        h2o_mem_clear_pool(&d.pool);
        if (ret != 0 && ret != H2O_HTTP2_ERROR_INVALID_HEADER_CHAR && ret != H2O_HTTP2_ERROR_HEADERS_TOO_LARGE)
            break; /* a connection error: the table is no longer usable */
    }
    h2o_hpack_dispose_header_table(&table);
    return 0;
}
