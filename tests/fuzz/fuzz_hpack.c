/* libFuzzer target: HTTP/2 header blocks decoded through the patched libh2o's
 * HPACK (lib/http2/hpack.c, h2o patch 0150), several blocks on one dynamic
 * table as the requests of one connection. The input's first two bytes set
 * the bound of a request head (max_request_head_size, 0..65535); then each
 * block is a 2-byte length and that many bytes. Invariants: no crash, no
 * leak (the table is disposed at the end); a block that decodes without a
 * connection error kept its head within the bound, or says it is too large,
 * and then added at most one field past the bound; a block never decodes to
 * more than H2O_HPACK_MAX_AMPLIFICATION times its size plus the table. */
#include <stdint.h>
#include <string.h>
#include <h2o.h>
#include <h2o/http2.h>
#include <h2o/http2_internal.h>

/* the bytes of the fields added to req, each as its HTTP/1.1 line */
static size_t decoded_size(h2o_req_t *req)
{
    size_t n = 0, i;
    h2o_iovec_t pseudo[] = {req->input.method, req->input.path, req->input.authority};

    for (i = 0; i != req->headers.size; ++i)
        n += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    for (i = 0; i != sizeof(pseudo) / sizeof(pseudo[0]); ++i)
        if (pseudo[i].base != NULL)
            n += pseudo[i].len + 4 + 7; /* ":method" is the longest pseudo-header name but one (":authority" is 10) */
    return n;
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
        size_t len = (size_t)data[off] << 8 | data[off + 1], head_size = 0, content_length;
        int exists_map = 0, ret;
        const char *err_desc = NULL;
        h2o_req_t req;
        off += 2;
        if (len > size - off)
            len = size - off;
        memset(&req, 0, sizeof(req));
        h2o_mem_init_pool(&req.pool);
        ret = h2o_hpack_parse_headers(&req, &table, data + off, len, &exists_map, &content_length, NULL, &head_size, max_head_size,
                                      &err_desc);
        off += len;
        if (ret == 0 || ret == H2O_HTTP2_ERROR_INVALID_HEADER_CHAR) {
            if (head_size > max_head_size || decoded_size(&req) > head_size + 3 * 7)
                __builtin_trap();
        } else if (ret == H2O_HTTP2_ERROR_HEADERS_TOO_LARGE) {
            /* the field that crossed the bound may have been added, none after it */
            if (head_size <= max_head_size || head_size > len * H2O_HPACK_MAX_AMPLIFICATION + table.hpack_max_capacity)
                __builtin_trap();
        }
        h2o_mem_clear_pool(&req.pool);
        if (ret != 0 && ret != H2O_HTTP2_ERROR_INVALID_HEADER_CHAR && ret != H2O_HTTP2_ERROR_HEADERS_TOO_LARGE)
            break; /* a connection error: the table is no longer usable */
    }
    h2o_hpack_dispose_header_table(&table);
    return 0;
}
