/* libFuzzer target: error negotiation (errors/errors.c): any Accept and
 * Sec-Fetch-Mode pair, and rendering with any reflected value. */
#include <stdint.h>
#include <string.h>
#include "errors/errors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t split = size != 0 ? data[0] % (size + 1) : 0;
    h2o_mem_pool_t pool;
    char detail[256];

    gw_error_prefers_html(h2o_iovec_init(data, split), h2o_iovec_init(data + split, size - split));
    h2o_mem_init_pool(&pool);
    size_t n = size < sizeof(detail) - 1 ? size : sizeof(detail) - 1;
    memcpy(detail, data, n);
    detail[n] = '\0';
    for (int html = 0; html != 2; ++html) {
        h2o_iovec_t body = gw_error_render(&pool, (gw_error_code_t)(size % GW_ERR_NUM_CODES), html, detail, 3000, detail);
        /* the page has no script of its own and reflected values are escaped */
        if (html && body.base != NULL && strstr(body.base, "<script") != NULL)
            __builtin_trap();
    }
    h2o_mem_clear_pool(&pool);
    return 0;
}
