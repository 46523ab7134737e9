/*
 * Live keys: the rwlock swap of a secret list (the lifetime rule is at the
 * lock, auth/live_keys.h).
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "auth/live_keys.h"

void gw_live_keys_init(gw_live_keys_t *k, const char *file, void *list, size_t num, gw_live_keys_free_cb free_list)
{
    pthread_rwlockattr_t attr;

    *k = (gw_live_keys_t){
        .list = list, .num = num, .file = file != NULL ? h2o_strdup(NULL, file, SIZE_MAX).base : NULL, .free_list = free_list};
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&k->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
}

void gw_live_keys_dispose(gw_live_keys_t *k)
{
    pthread_rwlock_destroy(&k->lock);
    k->free_list(k->list, k->num);
    free(k->file);
}

const void *gw_live_keys_read_begin(gw_live_keys_t *k, size_t *num)
{
    pthread_rwlock_rdlock(&k->lock);
    *num = k->num;
    return k->list;
}

void gw_live_keys_read_end(gw_live_keys_t *k)
{
    pthread_rwlock_unlock(&k->lock);
}

size_t gw_live_keys_count(gw_live_keys_t *k)
{
    size_t n;

    gw_live_keys_read_begin(k, &n);
    gw_live_keys_read_end(k);
    return n;
}

const char *gw_live_keys_file(const gw_live_keys_t *k)
{
    return k->file;
}

int gw_live_keys_reload(gw_live_keys_t *k, gw_live_keys_load_cb load, char **err)
{
    void *fresh, *old;
    size_t num_fresh, num_old;

    *err = NULL;
    if (k->file == NULL)
        return 0; /* from the environment: nothing can have changed */
    if (load(k->file, &fresh, &num_fresh, err) != 0)
        return -1; /* the current list stays */

    pthread_rwlock_wrlock(&k->lock);
    old = k->list;
    num_old = k->num;
    k->list = fresh;
    k->num = num_fresh;
    pthread_rwlock_unlock(&k->lock);

    /* no reader can hold the old list now: readers only use it under the lock */
    k->free_list(old, num_old);
    return 0;
}
