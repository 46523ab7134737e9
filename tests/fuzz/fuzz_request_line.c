/* libFuzzer target: request lines (upstream/request_line.c). The input is
 * "<method> <target>" (split at the first space). Invariants: no crash; an
 * absolute-form target yields a non-empty authority without '@' and an
 * origin starting with '/'; a line that passes gw_request_line_check is one
 * token method and a target of visible ASCII only. */
#include <stdint.h>
#include <string.h>
#include "upstream/request_line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *sp = memchr(data, ' ', size);
    h2o_iovec_t method = h2o_iovec_init(data, sp != NULL ? (size_t)(sp - (const char *)data) : size);
    h2o_iovec_t target = sp != NULL ? h2o_iovec_init(sp + 1, size - method.len - 1) : h2o_iovec_init("", 0);
    h2o_iovec_t authority, origin;
    h2o_mem_pool_t pool;
    size_t i;

    h2o_mem_init_pool(&pool);
    switch (gw_request_target_parse(&pool, method, target, &authority, &origin)) {
    case GW_TARGET_ABSOLUTE:
        if (authority.len == 0 || memchr(authority.base, '@', authority.len) != NULL || origin.len == 0 || origin.base[0] != '/')
            __builtin_trap();
        break;
    case GW_TARGET_ORIGIN:
        if (origin.len == 0 || origin.base[0] != '/')
            __builtin_trap();
        break;
    default:
        break;
    }
    if (gw_request_line_check(method, origin) == 0) {
        if (!gw_request_method_is_token(method) || origin.len == 0)
            __builtin_trap();
        for (i = 0; i != origin.len; ++i)
            if ((unsigned char)origin.base[i] <= 0x20 || (unsigned char)origin.base[i] >= 0x7f)
                __builtin_trap();
    }
    h2o_mem_clear_pool(&pool);
    return 0;
}
