/*
 * The live share-link keys, shared by every worker: the list named by
 * auth.link_keys_env or auth.link_keys_file, verified against under a read
 * lock. A list read from a file is read again on SIGHUP (as the cookie
 * secrets are); one from the environment is fixed for the process's life.
 */
#ifndef GW_AUTH_LINK_KEYS_H
#define GW_AUTH_LINK_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include "auth/share_link.h"

typedef struct st_gw_link_keys_t gw_link_keys_t;

/* Reads the keys from the environment variable env_name or the file path
 * (at most one non-NULL; both NULL: share links are off, an empty set).
 * Returns the set, or NULL with *err (malloc'd, never a secret's byte).
 * Free with gw_link_keys_free. */
gw_link_keys_t *gw_link_keys_new(const char *env_name, const char *path, char **err);

/* Wipes and frees the set; NULL is a no-op. No thread may still use it. */
void gw_link_keys_free(gw_link_keys_t *keys);

/* Number of keys; 0: share links are off (every link is refused). */
size_t gw_link_keys_count(gw_link_keys_t *keys);

/* The file the set is read from, or NULL (environment, or off). */
const char *gw_link_keys_file(gw_link_keys_t *keys);

/* gw_share_link_verify against the current keys (an empty set: every link
 * is GW_LINK_UNKNOWN_KEY). Any thread. */
gw_link_result_t gw_link_keys_verify(gw_link_keys_t *keys, h2o_iovec_t token, const char *sandbox_id, uint16_t port,
                                     const uint64_t *current_epoch, uint64_t now, uint64_t max_ttl_s, gw_share_link_t *out);

/* Re-reads the file and swaps the new list in; links being verified finish
 * with the old one. A set from the environment (or an empty one) is left as
 * is and 0 returned. On failure returns -1 with *err and keeps the current
 * list. Call from one thread at a time (main's signal loop). */
int gw_link_keys_reload(gw_link_keys_t *keys, char **err);

#endif
