/*
 * Sandbox ids (CONTRACT.md, Hostnames): 1 to 56 characters of [a-z0-9].
 * The one check, used wherever an id comes from outside: the Host header,
 * a cookie, a share link, a spill file.
 */
#ifndef GW_COMMON_SANDBOX_ID_H
#define GW_COMMON_SANDBOX_ID_H

#include <stddef.h>

#define GW_SANDBOX_ID_MAX 56

/* 1 when the `len` bytes at `s` (not NUL-terminated; NULL only with len 0)
 * are a sandbox id, else 0. Case matters: the caller folds a hostname's
 * case first. Reads no byte beyond `len`. */
static inline int gw_sandbox_id_valid(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len > GW_SANDBOX_ID_MAX)
        return 0;
    for (i = 0; i != len; ++i)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return 0;
    return 1;
}

#endif
