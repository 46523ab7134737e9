/*
 * UTF-8 well-formedness (RFC 3629, table 3-7 of the Unicode standard): the
 * lead byte fixes the length and the range of the second byte, which is
 * what rules out overlong forms, surrogates and code points past U+10FFFF.
 */
#include "common/utf8.h"

size_t gw_utf8_char_len(const void *_s, size_t avail)
{
    const unsigned char *s = _s;
    unsigned lo = 0x80, hi = 0xbf;
    size_t n, i;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0; /* a continuation byte, an overlong lead (0xc0, 0xc1) or past U+10FFFF */
    if (avail < n)
        return 0;
    switch (s[0]) {
    case 0xe0:
        lo = 0xa0; /* below: overlong */
        break;
    case 0xed:
        hi = 0x9f; /* above: surrogates */
        break;
    case 0xf0:
        lo = 0x90; /* below: overlong */
        break;
    case 0xf4:
        hi = 0x8f; /* above: past U+10FFFF */
        break;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < n; ++i)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

int gw_utf8_is_valid(const void *_s, size_t len)
{
    const unsigned char *s = _s, *end = s + len;
    size_t n;

    while (s != end) {
        if ((n = gw_utf8_char_len(s, end - s)) == 0)
            return 0;
        s += n;
    }
    return 1;
}
