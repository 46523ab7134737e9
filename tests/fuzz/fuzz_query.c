/* libFuzzer target: removing ?lizard_token= from a request target
 * (auth/query.c). Invariants: no crash; nothing is added; when the
 * parameter is absent the target is unchanged; the stripped target never
 * carries the parameter again. */
#include <stdint.h>
#include <string.h>
#include <h2o/string_.h>
#include "auth/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    h2o_mem_pool_t pool;
    h2o_iovec_t value, stripped, value2, stripped2;
    h2o_iovec_t name = h2o_iovec_init(H2O_STRLIT("lizard_token"));
    size_t n;

    h2o_mem_init_pool(&pool);
    n = gw_query_take(&pool, h2o_iovec_init(data, size), name, &value, &stripped);
    if (stripped.len > size)
        __builtin_trap();
    if (n == 0 && (stripped.len != size || (size != 0 && memcmp(stripped.base, data, size) != 0)))
        __builtin_trap();
    if (n != 0 && gw_query_take(&pool, stripped, name, &value2, &stripped2) != 0)
        __builtin_trap();
    h2o_mem_clear_pool(&pool);
    return 0;
}
