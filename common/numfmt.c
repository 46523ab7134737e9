/*
 * Number formatting without printf (see numfmt.h): digits are written from
 * the end of a scratch buffer, then moved to the front.
 */
#include <string.h>
#include "common/numfmt.h"

size_t gw_numfmt_dec(char *buf, uint64_t v)
{
    char tmp[GW_NUMFMT_DEC_SIZE], *p = tmp + sizeof(tmp);
    size_t len;

    *--p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    len = (size_t)(tmp + sizeof(tmp) - 1 - p);
    memcpy(buf, p, len + 1);
    return len;
}

size_t gw_numfmt_hex(char *buf, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[GW_NUMFMT_HEX_SIZE], *p = tmp + sizeof(tmp);
    size_t len;

    *--p = '\0';
    do {
        *--p = digits[v & 15];
        v >>= 4;
    } while (v != 0);
    len = (size_t)(tmp + sizeof(tmp) - 1 - p);
    memcpy(buf, p, len + 1);
    return len;
}

size_t gw_numfmt_ipv4(char *buf, const void *addr)
{
    const uint8_t *a = addr;
    char *p = buf;
    int i;

    for (i = 0; i != 4; ++i) {
        unsigned b = a[i];
        if (i != 0)
            *p++ = '.';
        if (b >= 100)
            *p++ = (char)('0' + b / 100);
        if (b >= 10)
            *p++ = (char)('0' + b / 10 % 10);
        *p++ = (char)('0' + b % 10);
    }
    *p = '\0';
    return (size_t)(p - buf);
}
