/*
 * The live cookie secrets: a set swapped whole under a write lock, read by
 * the workers under a read lock held only for one HMAC. The file is read
 * and checked before the lock is taken, so a reload never stalls requests
 * on I/O and a bad file never replaces a good set. The file's reader is
 * here too: the config reads the same file with the same rules at load.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <h2o/string_.h>
#include "auth/cookie_keys.h"
#include "common/secret_file.h"
#include "common/errfmt.h"

#define MAX_SECRETS_FILE_SIZE (64 * 1024)

struct st_gw_cookie_keys_t {
    pthread_rwlock_t lock;
    char *file; /* NULL: the set is fixed (environment, or no cookies) */
    /* guarded by lock */
    gw_cookie_secret_t *secrets;
    size_t num_secrets;
};

/* A message without any prefix: the caller says where the file comes from
 * (the config at load, a reload on SIGHUP). */
int gw_cookie_secrets_read_file(const char *path, gw_cookie_secret_t **secrets, size_t *num_secrets, char **err)
{
    gw_cookie_secret_t *list;
    size_t count = 0, line = 0, len = 0, pos = 0, n;
    const char *s;
    char *buf = NULL;

    *secrets = NULL;
    *num_secrets = 0;
    if (gw_secret_file_read(path, MAX_SECRETS_FILE_SIZE, &buf, &len, err) != 0)
        return -1;
    list = h2o_mem_alloc(GW_COOKIE_SECRETS_MAX * sizeof(*list));
    if (memchr(buf, '\0', len) != NULL) {
        gw_errorf(err, "%s: contains a NUL byte; expected one secret per line", path);
        goto Error;
    }

    while (gw_secret_file_next_line(buf, len, &pos, &line, &s, &n)) {
        unsigned char *bytes;

        /* messages name the line, never its bytes */
        if (count == GW_COOKIE_SECRETS_MAX) {
            gw_errorf(err, "%s: line %zu: more than %d secrets; at most %d are allowed", path, line, GW_COOKIE_SECRETS_MAX,
                      GW_COOKIE_SECRETS_MAX);
            goto Error;
        }
        if (n < GW_COOKIE_SECRET_MIN_LEN) {
            gw_errorf(err, "%s: line %zu: the secret is shorter than %d bytes", path, line, GW_COOKIE_SECRET_MIN_LEN);
            goto Error;
        }
        bytes = h2o_mem_alloc(n);
        memcpy(bytes, s, n);
        list[count++] = (gw_cookie_secret_t){bytes, n};
    }
    if (count == 0) {
        gw_errorf(err, "%s: holds no secret (only blank lines and comments)", path);
        goto Error;
    }

    OPENSSL_cleanse(buf, len);
    free(buf);
    *secrets = list;
    *num_secrets = count;
    return 0;

Error:
    gw_cookie_secrets_free(list, count);
    OPENSSL_cleanse(buf, len);
    free(buf);
    return -1;
}

void gw_cookie_secrets_free(gw_cookie_secret_t *secrets, size_t num_secrets)
{
    size_t i;

    if (secrets == NULL)
        return;
    for (i = 0; i != num_secrets; ++i) {
        unsigned char *bytes = (unsigned char *)secrets[i].bytes;
        OPENSSL_cleanse(bytes, secrets[i].len);
        free(bytes);
    }
    free(secrets);
}

static gw_cookie_secret_t *copy_secrets(const gw_cookie_secret_t *src, size_t num)
{
    gw_cookie_secret_t *dst = h2o_mem_alloc((num != 0 ? num : 1) * sizeof(*dst));
    size_t i;

    for (i = 0; i != num; ++i) {
        unsigned char *bytes = h2o_mem_alloc(src[i].len);
        memcpy(bytes, src[i].bytes, src[i].len);
        dst[i] = (gw_cookie_secret_t){bytes, src[i].len};
    }
    return dst;
}

gw_cookie_keys_t *gw_cookie_keys_new(const gw_cookie_keys_config_t *config)
{
    gw_cookie_keys_t *keys = h2o_mem_alloc(sizeof(*keys));
    pthread_rwlockattr_t attr;

    *keys = (gw_cookie_keys_t){.file = config->file != NULL ? h2o_strdup(NULL, config->file, SIZE_MAX).base : NULL,
                               .secrets = copy_secrets(config->secrets, config->num_secrets),
                               .num_secrets = config->num_secrets};
    /* a steady stream of readers (every cookie request) must not starve a reload */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&keys->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return keys;
}

void gw_cookie_keys_free(gw_cookie_keys_t *keys)
{
    if (keys == NULL)
        return;
    pthread_rwlock_destroy(&keys->lock);
    gw_cookie_secrets_free(keys->secrets, keys->num_secrets);
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

int gw_cookie_keys_sign_link(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port,
                             uint64_t expires_at, uint64_t link_epoch, h2o_iovec_t *value)
{
    int ret = -1;

    pthread_rwlock_rdlock(&keys->lock);
    if (keys->num_secrets != 0) {
        *value = gw_cookie_sign_link(pool, &keys->secrets[0], sandbox_id, port, expires_at, link_epoch);
        ret = 0;
    }
    pthread_rwlock_unlock(&keys->lock);
    return ret;
}

gw_cookie_result_t gw_cookie_keys_verify_link(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                              uint64_t now, uint64_t link_epoch)
{
    gw_cookie_result_t result = GW_COOKIE_BAD_SIGNATURE;

    pthread_rwlock_rdlock(&keys->lock);
    if (keys->num_secrets != 0)
        result = gw_cookie_verify_link(value, keys->secrets, keys->num_secrets, sandbox_id, port, now, link_epoch);
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
    if (gw_cookie_secrets_read_file(keys->file, &fresh, &num_fresh, err) != 0)
        return -1; /* the current set stays */

    pthread_rwlock_wrlock(&keys->lock);
    old = keys->secrets;
    num_old = keys->num_secrets;
    keys->secrets = fresh;
    keys->num_secrets = num_fresh;
    pthread_rwlock_unlock(&keys->lock);

    /* no reader can hold the old set now: readers only use it under the lock */
    gw_cookie_secrets_free(old, num_old);
    return 0;
}
