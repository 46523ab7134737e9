/*
 * The live share-link keys: a list swapped whole under a write lock, read
 * under a read lock held for one HMAC. The file is read and checked before
 * the lock is taken, so a reload never stalls requests on I/O and a bad file
 * never replaces a good list.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "auth/link_keys.h"

struct st_gw_link_keys_t {
    pthread_rwlock_t lock;
    char *file; /* NULL: the list is fixed (environment, or off) */
    /* guarded by lock */
    gw_link_key_t *keys;
    size_t num_keys;
};

gw_link_keys_t *gw_link_keys_new(const char *env_name, const char *path, char **err)
{
    pthread_rwlockattr_t attr;
    gw_link_keys_t *set = h2o_mem_alloc(sizeof(*set));

    *set = (gw_link_keys_t){.file = NULL};
    *err = NULL;
    if ((env_name != NULL || path != NULL) &&
        gw_share_link_keys_load(env_name, env_name == NULL ? path : NULL, &set->keys, &set->num_keys, err) != 0) {
        free(set);
        return NULL;
    }
    if (env_name == NULL && path != NULL)
        set->file = h2o_strdup(NULL, path, strlen(path)).base;
    /* a steady stream of readers (every link request) must not starve a reload */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&set->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return set;
}

void gw_link_keys_free(gw_link_keys_t *set)
{
    if (set == NULL)
        return;
    pthread_rwlock_destroy(&set->lock);
    gw_share_link_keys_free(set->keys, set->num_keys);
    free(set->file);
    free(set);
}

size_t gw_link_keys_count(gw_link_keys_t *set)
{
    size_t n;

    pthread_rwlock_rdlock(&set->lock);
    n = set->num_keys;
    pthread_rwlock_unlock(&set->lock);
    return n;
}

const char *gw_link_keys_file(gw_link_keys_t *set)
{
    return set->file;
}

gw_link_result_t gw_link_keys_verify(gw_link_keys_t *set, h2o_iovec_t token, const char *sandbox_id, uint16_t port,
                                     const uint64_t *current_epoch, uint64_t now, uint64_t max_ttl_s, gw_share_link_t *out)
{
    gw_link_result_t result;

    pthread_rwlock_rdlock(&set->lock);
    result = gw_share_link_verify(token, set->keys, set->num_keys, sandbox_id, port, current_epoch, now, max_ttl_s, out);
    pthread_rwlock_unlock(&set->lock);
    return result;
}

int gw_link_keys_reload(gw_link_keys_t *set, char **err)
{
    gw_link_key_t *fresh, *old;
    size_t num_fresh, num_old;

    *err = NULL;
    if (set->file == NULL)
        return 0; /* from the environment: nothing can have changed */
    if (gw_share_link_keys_load(NULL, set->file, &fresh, &num_fresh, err) != 0)
        return -1; /* the current list stays */

    pthread_rwlock_wrlock(&set->lock);
    old = set->keys;
    num_old = set->num_keys;
    set->keys = fresh;
    set->num_keys = num_fresh;
    pthread_rwlock_unlock(&set->lock);

    /* no reader can hold the old list now: readers only use it under the lock */
    gw_share_link_keys_free(old, num_old);
    return 0;
}
