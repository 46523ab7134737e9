/* libFuzzer target: share links (auth/share_link.c) and the key list.
 * Verifying any input must not crash nor succeed without the secret; any
 * key text parses or fails cleanly; a link signed for the input's sandbox id
 * verifies, and only for its own port. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "auth/share_link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char secret[] = "0123456789abcdef0123456789abcdef";
    gw_link_key_t key = {"k1", (unsigned char *)secret, sizeof(secret) - 1}, *keys = NULL;
    const uint64_t epoch = 3;
    h2o_iovec_t input = h2o_iovec_init(data, size);
    size_t num_keys = 0;
    char *err = NULL;
    h2o_mem_pool_t pool;

    h2o_mem_init_pool(&pool);
    /* arbitrary tokens never verify: the MAC cannot be guessed */
    if (gw_share_link_verify(input, &key, 1, "sbx1", 3000, &epoch, 1000, 1u << 30, NULL) == GW_LINK_OK)
        __builtin_trap();
    /* any key text: parsed, or refused with a message */
    if (gw_share_link_keys_parse((const char *)data, size, "fuzz", &keys, &num_keys, &err) == 0) {
        if (num_keys == 0 || keys == NULL)
            __builtin_trap();
        gw_share_link_keys_free(keys, num_keys);
    } else if (err == NULL) {
        __builtin_trap();
    }
    free(err);

    /* round trip with the input as sandbox id, when it is a valid one */
    char id[65];
    size_t idlen = size < 64 ? size : 64;
    memcpy(id, data, idlen);
    id[idlen] = '\0';
    h2o_iovec_t t = gw_share_link_sign(&pool, &key, id, 443, 5000, epoch);
    if (t.base != NULL) {
        if (gw_share_link_verify(t, &key, 1, id, 443, &epoch, 1000, 4000, NULL) != GW_LINK_OK)
            __builtin_trap();
        if (gw_share_link_verify(t, &key, 1, id, 444, &epoch, 1000, 4000, NULL) != GW_LINK_WRONG_PORT)
            __builtin_trap();
    }
    h2o_mem_clear_pool(&pool);
    return 0;
}
