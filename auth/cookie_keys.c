/*
 * The live cookie secrets: a set swapped whole under a write lock, read by
 * the workers under a read lock held only for one HMAC. The file is read
 * and checked before the lock is taken, so a reload never stalls requests
 * on I/O and a bad file never replaces a good set.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "gateway/cookie_keys.h"

struct st_gw_cookie_keys_t {
    pthread_rwlock_t lock;
    char *file; /* NULL: the set is fixed (environment, or no cookies) */
    /* guarded by lock */
    gw_cookie_secret_t *secrets;
    size_t num_secrets;
};

static gw_cookie_secret_t *copy_secrets(const gw_cookie_secret_t *src, size_t num)
{
    gw_cookie_secret_t *dst;
    size_t i;

    if ((dst = calloc(num != 0 ? num : 1, sizeof(*dst))) == NULL)
        return NULL;
    for (i = 0; i != num; ++i) {
        unsigned char *bytes;
        if ((bytes = malloc(src[i].len)) == NULL) {
            gw_config_free_cookie_secrets(dst, i);
            return NULL;
        }
        memcpy(bytes, src[i].bytes, src[i].len);
        dst[i] = (gw_cookie_secret_t){bytes, src[i].len};
    }
    return dst;
}

gw_cookie_keys_t *gw_cookie_keys_new(const gw_config_t *config)
{
    pthread_rwlockattr_t attr;
    gw_cookie_keys_t *keys;

    if ((keys = calloc(1, sizeof(*keys))) == NULL)
        return NULL;
    if (config->auth.cookie_secrets_file != NULL && (keys->file = strdup(config->auth.cookie_secrets_file)) == NULL)
        goto Error;
    if ((keys->secrets = copy_secrets(config->auth.cookie_secrets, config->auth.num_cookie_secrets)) == NULL)
        goto Error;
    keys->num_secrets = config->auth.num_cookie_secrets;
    /* a steady stream of readers (every cookie request) must not starve a reload */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&keys->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return keys;

Error:
    free(keys->file);
    free(keys);
    return NULL;
}

void gw_cookie_keys_free(gw_cookie_keys_t *keys)
{
    if (keys == NULL)
        return;
    pthread_rwlock_destroy(&keys->lock);
    gw_config_free_cookie_secrets(keys->secrets, keys->num_secrets);
    free(keys->file);
    free(keys);
}

size_t gw_cookie_keys_count(gw_cookie_keys_t *keys)
{
    size_t n;

    pthread_rwlock_rdlock(&keys->lock);
    n = keys->num_secrets;
    pthread_rwlock_unlock(&keys->lock);
    return n;
}

const char *gw_cookie_keys_file(gw_cookie_keys_t *keys)
{
    return keys->file;
}

int gw_cookie_keys_sign(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port, uint64_t expires_at,
                        const char *token_sha256_hex, h2o_iovec_t *value)
{
    int ret = -1;

    pthread_rwlock_rdlock(&keys->lock);
    if (keys->num_secrets != 0) {
        /* the value is copied into `pool`: nothing of the set escapes the lock */
        *value = gw_cookie_sign(pool, &keys->secrets[0], sandbox_id, port, expires_at, token_sha256_hex);
        ret = 0;
    }
    pthread_rwlock_unlock(&keys->lock);
    return ret;
}

gw_cookie_result_t gw_cookie_keys_verify(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                         uint64_t now, const char *token_sha256_hex)
{
    gw_cookie_result_t result = GW_COOKIE_BAD_SIGNATURE;

    pthread_rwlock_rdlock(&keys->lock);
    if (keys->num_secrets != 0)
        result = gw_cookie_verify(value, keys->secrets, keys->num_secrets, sandbox_id, port, now, token_sha256_hex);
    pthread_rwlock_unlock(&keys->lock);
    return result;
}

int gw_cookie_keys_reload(gw_cookie_keys_t *keys, char **err)
{
    gw_cookie_secret_t *fresh, *old;
    size_t num_fresh, num_old;

    *err = NULL;
    if (keys->file == NULL)
        return 0; /* from the environment: nothing can have changed */
    if (gw_config_read_cookie_secrets_file(keys->file, &fresh, &num_fresh, err) != 0)
        return -1; /* the current set stays */

    pthread_rwlock_wrlock(&keys->lock);
    old = keys->secrets;
    num_old = keys->num_secrets;
    keys->secrets = fresh;
    keys->num_secrets = num_fresh;
    pthread_rwlock_unlock(&keys->lock);

    /* no reader can hold the old set now: readers only use it under the lock */
    gw_config_free_cookie_secrets(old, num_old);
    return 0;
}
