/* libFuzzer target: preview host parsing (routing/host.c). Invariants: no
 * crash, and a parsed host reads back as <port>-<id> of valid characters. */
#include <stdint.h>
#include <string.h>
#include "routing/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *const domains[] = {"lizard.app", "eu.lizard.app", "localhost"};
    gw_host_t host;

    if (gw_host_parse(h2o_iovec_init(data, size), domains, 3, &host) == GW_HOST_OK) {
        size_t len = strlen(host.sandbox_id);
        if (host.port == 0 || len == 0 || len > GW_SANDBOX_ID_MAX || host.domain_index >= 3)
            __builtin_trap();
        for (size_t i = 0; i != len; ++i)
            if (!((host.sandbox_id[i] >= 'a' && host.sandbox_id[i] <= 'z') ||
                  (host.sandbox_id[i] >= '0' && host.sandbox_id[i] <= '9')))
                __builtin_trap();
    }
    return 0;
}
