/*
 * Live keys: a list of secrets shared by every worker, read under a read
 * lock and swapped whole by a reload. What the cookie secrets
 * (auth/cookie_keys.c) and the share-link keys (auth/link_keys.c) both are;
 * the list's type and its file format are theirs.
 */
#ifndef GW_AUTH_LIVE_KEYS_H
#define GW_AUTH_LIVE_KEYS_H

#include <pthread.h>
#include <stddef.h>

/* Wipes and frees a list the loader made. */
typedef void (*gw_live_keys_free_cb)(void *list, size_t num);
/* Reads and checks `file` into a new list: 0 with *list and *num, or -1
 * with *err (malloc'd, never a secret's byte) and nothing to free. */
typedef int (*gw_live_keys_load_cb)(const char *file, void **list, size_t *num, char **err);

/* Embedded in the owner; fields private. */
typedef struct st_gw_live_keys_t {
    /* The lifetime rule: a reader holds `lock` for reading from before it
     * looks at `list` until after its last use of it (one HMAC: whatever it
     * makes is copied out before unlocking, nothing of the list escapes).
     * A reload reads and checks the file before taking the lock, swaps
     * `list` under the write lock and frees the old list after unlocking:
     * once the swap is done no reader can still hold the old one. Readers
     * never stall on I/O and a bad file never replaces a good list. The
     * lock prefers writers: a steady stream of readers (every request with
     * a cookie or a link) must not starve a reload. */
    pthread_rwlock_t lock;
    void *list; /* guarded by lock */
    size_t num; /* guarded by lock */
    char *file; /* NULL: the list is fixed (environment, or off); set once */
    gw_live_keys_free_cb free_list;
} gw_live_keys_t;

/* Takes ownership of `list` (`num` entries; NULL with 0), copies `file`
 * (NULL: gw_live_keys_reload keeps the list). */
void gw_live_keys_init(gw_live_keys_t *k, const char *file, void *list, size_t num, gw_live_keys_free_cb free_list);
/* Frees the list; no thread may still use `k`. */
void gw_live_keys_dispose(gw_live_keys_t *k);

/* The current list, with the read lock held (*num: its length, maybe 0):
 * use it, then gw_live_keys_read_end. Any thread. */
const void *gw_live_keys_read_begin(gw_live_keys_t *k, size_t *num);
void gw_live_keys_read_end(gw_live_keys_t *k);

/* The current number of entries. */
size_t gw_live_keys_count(gw_live_keys_t *k);
/* The file the list is read from, or NULL. */
const char *gw_live_keys_file(const gw_live_keys_t *k);

/* Loads the file with `load` and swaps the new list in; readers in the
 * middle of a use finish with the old one. Without a file, 0 and nothing
 * changes. On failure -1 with *err, and the current list stays. One
 * reload at a time (main's signal loop). */
int gw_live_keys_reload(gw_live_keys_t *k, gw_live_keys_load_cb load, char **err);

#endif
