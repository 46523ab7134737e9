/* libFuzzer target: the ClientHello parser (tls/client_hello.c), fed the
 * input's every prefix as a reader receiving it one byte at a time.
 * Invariants: no crash; "need more" never after GW_CLIENT_HELLO_MAX_INPUT
 * bytes; an answer other than "need more" stays the same (and so does the
 * server name) as bytes arrive; a name is 1-255 bytes, NUL-terminated,
 * without a NUL inside. */
#include <stdint.h>
#include <string.h>
#include "tls/client_hello.h"

static uint8_t scratch[GW_CLIENT_HELLO_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[GW_CLIENT_HELLO_MAX_NAME + 1], first[GW_CLIENT_HELLO_MAX_NAME + 1];
    gw_client_hello_result_t decided = GW_CLIENT_HELLO_MORE, r;
    size_t name_len, first_len = 0, k;

    for (k = 0; k <= size; ++k) {
        memset(name, 0xa5, sizeof(name));
        r = gw_client_hello_parse(data, k, scratch, name, &name_len);
        if (r == GW_CLIENT_HELLO_MORE && k >= GW_CLIENT_HELLO_MAX_INPUT)
            __builtin_trap();
        if (decided != GW_CLIENT_HELLO_MORE && r != decided)
            __builtin_trap();
        if (r == GW_CLIENT_HELLO_OK) {
            if (name_len > GW_CLIENT_HELLO_MAX_NAME || (name_len != 0 && (name[name_len] != '\0' || strlen(name) != name_len)))
                __builtin_trap();
            if (decided == GW_CLIENT_HELLO_MORE) {
                first_len = name_len;
                memcpy(first, name, name_len);
            } else if (name_len != first_len || memcmp(first, name, name_len) != 0) {
                __builtin_trap();
            }
        }
        if (r != GW_CLIENT_HELLO_MORE)
            decided = r;
    }
    return 0;
}
