/*
 * The live set of cookie secrets, shared by every worker: the first secret
 * signs new cookies, every secret verifies. A set read from a file
 * (auth.cookie_secrets_file) can be replaced while the process runs
 * (SIGHUP); one from the environment is fixed for the life of the process.
 * Also the reader of a secrets file, used at load and on reload.
 */
#ifndef GW_AUTH_COOKIE_KEYS_H
#define GW_AUTH_COOKIE_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>
#include "auth/cookie.h"

/* Each secret is at least this long; a set holds at most GW_COOKIE_SECRETS_MAX. */
#define GW_COOKIE_SECRET_MIN_LEN 32
#define GW_COOKIE_SECRETS_MAX 16

typedef struct st_gw_cookie_keys_t gw_cookie_keys_t;

/* What a set starts from (filled by the gateway from its config). */
typedef struct st_gw_cookie_keys_config_t {
    const char *file;                  /* re-read on reload; NULL: the set is fixed (environment, or no cookies) */
    const gw_cookie_secret_t *secrets; /* already read and checked at load; the first signs */
    size_t num_secrets;                /* 0: an empty set, cookies disabled */
} gw_cookie_keys_config_t;

/* Reads a cookie secrets file: one secret per line, blank lines and lines
 * whose first non-blank byte is '#' ignored, spaces and tabs around a secret
 * (and a CR before the LF) not part of it; each secret at least
 * GW_COOKIE_SECRET_MIN_LEN bytes, at most GW_COOKIE_SECRETS_MAX secrets, the
 * first signs. The file must be a regular file that others (o+r, o+w)
 * cannot access. The same rules serve at load and on SIGHUP. On success
 * returns 0 and a malloc'd array in *secrets (free with
 * gw_cookie_secrets_free). On failure returns -1 and *err (malloc'd) names
 * the file and the line, never a secret's bytes. */
int gw_cookie_secrets_read_file(const char *path, gw_cookie_secret_t **secrets, size_t *num_secrets, char **err);

/* Wipes and frees secrets as returned above; NULL is a no-op. */
void gw_cookie_secrets_free(gw_cookie_secret_t *secrets, size_t num_secrets);

/* A set holding a copy of config->secrets; it remembers config->file for
 * reloads. Free with gw_cookie_keys_free. */
gw_cookie_keys_t *gw_cookie_keys_new(const gw_cookie_keys_config_t *config);

/* Wipes and frees the set; NULL is a no-op. No thread may still use it. */
void gw_cookie_keys_free(gw_cookie_keys_t *keys);

/* Number of secrets in the current set; 0: cookies are disabled. */
size_t gw_cookie_keys_count(gw_cookie_keys_t *keys);

/* The file the set is read from, or NULL when it comes from the
 * environment (or cookies are disabled). Owned by `keys`. */
const char *gw_cookie_keys_file(gw_cookie_keys_t *keys);

/* gw_cookie_sign with the current first secret. Returns 0 and the value
 * (from `pool`) in *value, or -1 when the set is empty. Any thread. */
int gw_cookie_keys_sign(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port, uint64_t expires_at,
                        const char *token_sha256_hex, h2o_iovec_t *value);

/* gw_cookie_verify against every current secret. An empty set verifies
 * nothing (GW_COOKIE_BAD_SIGNATURE). Any thread. */
gw_cookie_result_t gw_cookie_keys_verify(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                         uint64_t now, const char *token_sha256_hex);

/* gw_cookie_sign_link and gw_cookie_verify_link with the current set, as
 * the two above. */
int gw_cookie_keys_sign_link(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port,
                             uint64_t expires_at, uint64_t link_epoch, h2o_iovec_t *value);
gw_cookie_result_t gw_cookie_keys_verify_link(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                              uint64_t now, uint64_t link_epoch);
/* The same for the cookie of a view-only link (gw_cookie_sign_view_link). */
int gw_cookie_keys_sign_view_link(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port,
                                  uint64_t expires_at, uint64_t link_epoch, h2o_iovec_t *value);
gw_cookie_result_t gw_cookie_keys_verify_view_link(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                                   uint64_t now, uint64_t link_epoch);

/* Re-reads the file (same rules as at load: gw_cookie_secrets_read_file)
 * and swaps the new set in; requests being signed or verified finish with
 * the old one. Returns 0 on success. A set from the environment (or an empty
 * set) is left as is and 0 is returned: a running process's environment
 * cannot change (the caller says "restart to change them"). On failure
 * returns -1 with *err (malloc'd; never a secret's bytes) and keeps the
 * current set. Call from one thread at a time (main's signal loop). */
int gw_cookie_keys_reload(gw_cookie_keys_t *keys, char **err);

#endif
