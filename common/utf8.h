/*
 * The one UTF-8 check: RFC 3629 as jansson and browsers enforce it (no
 * overlong forms, no surrogates, nothing above U+10FFFF), one character at
 * a time so that callers can replace what is not well-formed.
 */
#ifndef GW_COMMON_UTF8_H
#define GW_COMMON_UTF8_H

#include <stddef.h>

/* Length (1 to 4) of the well-formed UTF-8 character at `s`, of which
 * `avail` (at least 1) bytes may be read; 0 when the bytes there are not
 * one (a lone continuation byte, an overlong form, a surrogate, a code point
 * above U+10FFFF, or a sequence cut by `avail`). NUL is a well-formed
 * character of length 1: callers whose strings end at NUL refuse it
 * themselves. */
size_t gw_utf8_char_len(const void *s, size_t avail);

/* 1 when all `len` bytes at `s` are well-formed UTF-8, else 0. */
int gw_utf8_is_valid(const void *s, size_t len);

#endif
