/* libFuzzer target: the PROXY protocol header parser (common/proxy_header.c),
 * fed the input's every prefix as a reader receiving it one byte at a time.
 * Invariants: no crash; "need more" is only ever followed by "need more", a
 * refusal or a length, never after GW_PROXY_HEADER_V2_MAX bytes; a refusal
 * and a length stay what they were as bytes arrive (the same length, the
 * same address); a length is at most the bytes given and a header with an
 * address has an AF_INET or AF_INET6 one of its family's size. */
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include "common/proxy_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_proxy_header_t first, h;
    ssize_t decided = 0, r;
    size_t k;

    for (k = 0; k <= size; ++k) {
        memset(&h, 0xa5, sizeof(h));
        r = gw_proxy_header_parse(data, k, &h);
        if (r > (ssize_t)k || r < -1 || (r == 0 && k >= GW_PROXY_HEADER_V2_MAX))
            __builtin_trap();
        if (decided != 0 && r != decided)
            __builtin_trap();
        if (r > 0) {
            if (h.version != 1 && h.version != 2)
                __builtin_trap();
            if (h.has_src && !((h.src.ss_family == AF_INET && h.src_len == sizeof(struct sockaddr_in)) ||
                               (h.src.ss_family == AF_INET6 && h.src_len == sizeof(struct sockaddr_in6))))
                __builtin_trap();
            if (decided == 0)
                first = h;
            else if (h.has_src != first.has_src || (h.has_src && memcmp(&h.src, &first.src, h.src_len) != 0))
                __builtin_trap();
        }
        if (r != 0)
            decided = r;
    }
    return 0;
}
