/* libFuzzer target: the gateway's cookie (auth/cookie.c). Verifying any
 * input must not crash nor succeed without the secret; extracting from any
 * Cookie header must keep every other byte; a signed value must verify. */
#include <stdint.h>
#include <string.h>
#include <h2o/string_.h>
#include "auth/cookie.h"

#define HASH "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char key[] = "0123456789abcdef0123456789abcdef";
    gw_cookie_secret_t secret = {key, sizeof(key) - 1};
    h2o_mem_pool_t pool;
    h2o_iovec_t input = h2o_iovec_init(data, size), found, rest;

    h2o_mem_init_pool(&pool);
    /* arbitrary values never verify: the MAC cannot be guessed */
    if (gw_cookie_verify(input, &secret, 1, "sbx1", 3000, 1000, HASH) == GW_COOKIE_OK)
        __builtin_trap();
    gw_cookie_extract(&pool, &input, 1, h2o_iovec_init(H2O_STRLIT("__Host-lizard_access")), &found, &rest);
    /* separators are normalised to "; ", so rest may grow, but boundedly */
    if (rest.len > 2 * size || (found.base != NULL && found.len > size))
        __builtin_trap();
    /* the gateway's cookie never survives extraction */
    if (rest.len != 0) {
        h2o_iovec_t found2, rest2;
        if (gw_cookie_extract(&pool, &rest, 1, h2o_iovec_init(H2O_STRLIT("__Host-lizard_access")), &found2, &rest2) != 0)
            __builtin_trap();
    }

    /* round trip with the input as sandbox id, when it is a plausible one */
    char id[65];
    size_t idlen = size < 64 ? size : 64;
    memcpy(id, data, idlen);
    id[idlen] = '\0';
    h2o_iovec_t v = gw_cookie_sign(&pool, &secret, id, 443, 5000, HASH);
    if (v.base != NULL && gw_cookie_verify(v, &secret, 1, id, 443, 1000, HASH) != GW_COOKIE_OK)
        __builtin_trap();
    h2o_mem_clear_pool(&pool);
    return 0;
}
