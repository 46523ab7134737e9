/*
 * Feeding a parser attacker bytes (picohttpparser's tests do the same):
 * every prefix of a valid input, every single-byte replacement and every
 * single-byte deletion, each in a malloc'd buffer of exactly its length so
 * that ASan reports any read past the end. Header-only, for unit tests.
 */
#ifndef GW_TESTS_UNIT_BYTES_H
#define GW_TESTS_UNIT_BYTES_H

#include <stdlib.h>
#include <string.h>

/* Called with a buffer of exactly `len` bytes (not NUL-terminated), freed
 * after the call. `data` is the caller's. */
typedef void (*gw_bytes_fn)(const char *buf, size_t len, void *data);

/* Bytes that mean something to one parser or another, and a few that must
 * never be accepted anywhere. */
static const unsigned char gw_bytes_interesting[] = {0x00, 0x01, 0x09, '\n', '\r', ' ', '"',  '%',  '&',  '+', ',', '-',
                                                     '.',  '/',  '0',  '9',  ':',  ';', '=',  '?',  '@',  'A', 'Z', '[',
                                                     ']',  '_',  'a',  'z',  '|',  '~', 0x7f, 0x80, 0xc3, 0xff};

static inline void gw_bytes_call(const char *s, size_t len, gw_bytes_fn fn, void *data)
{
    char *copy = calloc(1, len); /* glibc: never NULL, a 0-byte block for len 0 */

    if (len != 0)
        memcpy(copy, s, len);
    fn(copy, len, data);
    free(copy);
}

/* fn on s[0..k) for every k from 0 to len (the whole input last). */
static inline void gw_bytes_each_prefix(const char *s, size_t len, gw_bytes_fn fn, void *data)
{
    size_t k;

    for (k = 0; k <= len; ++k)
        gw_bytes_call(s, k, fn, data);
}

/* fn on every input that differs from s in one byte: each byte replaced by
 * each interesting byte and by itself with bit 5 or bit 0 flipped, and each
 * byte deleted. */
static inline void gw_bytes_each_mutation(const char *s, size_t len, gw_bytes_fn fn, void *data)
{
    char *m = malloc(len != 0 ? len : 1);
    size_t i, j;

    for (i = 0; i != len; ++i) {
        unsigned char orig = (unsigned char)s[i], subs[sizeof(gw_bytes_interesting) + 2];
        memcpy(subs, gw_bytes_interesting, sizeof(gw_bytes_interesting));
        subs[sizeof(gw_bytes_interesting)] = orig ^ 0x20;
        subs[sizeof(gw_bytes_interesting) + 1] = orig ^ 0x01;
        for (j = 0; j != sizeof(subs); ++j) {
            if (subs[j] == orig)
                continue;
            memcpy(m, s, len);
            m[i] = (char)subs[j];
            gw_bytes_call(m, len, fn, data);
        }
        /* without byte i */
        memcpy(m, s, i);
        memcpy(m + i, s + i + 1, len - i - 1);
        gw_bytes_call(m, len - 1, fn, data);
    }
    free(m);
}

#endif
