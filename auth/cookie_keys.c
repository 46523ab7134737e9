/*
 * The live cookie secrets: a gw_live_keys_t of gw_cookie_secret_t, read by
 * the workers under its read lock for one HMAC and swapped whole on reload
 * (the lifetime rule is at the lock, auth/live_keys.h). The file's reader is
 * here too: the config reads the same file with the same rules at load.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <h2o/string_.h>
#include "auth/cookie_keys.h"
#include "auth/live_keys.h"
#include "common/secret_file.h"
#include "common/errfmt.h"

#define MAX_SECRETS_FILE_SIZE (64 * 1024)

struct st_gw_cookie_keys_t {
    gw_live_keys_t live; /* of gw_cookie_secret_t */
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

static void free_secrets(void *list, size_t num)
{
    gw_cookie_secrets_free(list, num);
}

static int load_secrets(const char *file, void **list, size_t *num, char **err)
{
    gw_cookie_secret_t *secrets;

    if (gw_cookie_secrets_read_file(file, &secrets, num, err) != 0)
        return -1;
    *list = secrets;
    return 0;
}

gw_cookie_keys_t *gw_cookie_keys_new(const gw_cookie_keys_config_t *config)
{
    gw_cookie_keys_t *keys = h2o_mem_alloc(sizeof(*keys));

    gw_live_keys_init(&keys->live, config->file, copy_secrets(config->secrets, config->num_secrets), config->num_secrets,
                      free_secrets);
    return keys;
}

void gw_cookie_keys_free(gw_cookie_keys_t *keys)
{
    if (keys == NULL)
        return;
    gw_live_keys_dispose(&keys->live);
    free(keys);
}

size_t gw_cookie_keys_count(gw_cookie_keys_t *keys)
{
    return gw_live_keys_count(&keys->live);
}

const char *gw_cookie_keys_file(gw_cookie_keys_t *keys)
{
    return gw_live_keys_file(&keys->live);
}

/* The signing secret (the first), with the read lock held: NULL when there
 * is none. Either way gw_live_keys_read_end follows. */
static const gw_cookie_secret_t *signer_begin(gw_cookie_keys_t *keys)
{
    size_t num;
    const gw_cookie_secret_t *secrets = gw_live_keys_read_begin(&keys->live, &num);

    return num != 0 ? &secrets[0] : NULL;
}

int gw_cookie_keys_sign(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port, uint64_t expires_at,
                        const char *token_sha256_hex, h2o_iovec_t *value)
{
    const gw_cookie_secret_t *secret = signer_begin(keys);

    /* the value is copied into `pool`: nothing of the set escapes the lock */
    if (secret != NULL)
        *value = gw_cookie_sign(pool, secret, sandbox_id, port, expires_at, token_sha256_hex);
    gw_live_keys_read_end(&keys->live);
    return secret != NULL ? 0 : -1;
}

gw_cookie_result_t gw_cookie_keys_verify(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                         uint64_t now, const char *token_sha256_hex)
{
    size_t num;
    const gw_cookie_secret_t *secrets = gw_live_keys_read_begin(&keys->live, &num);
    gw_cookie_result_t result =
        num != 0 ? gw_cookie_verify(value, secrets, num, sandbox_id, port, now, token_sha256_hex) : GW_COOKIE_BAD_SIGNATURE;

    gw_live_keys_read_end(&keys->live);
    return result;
}

int gw_cookie_keys_sign_link(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port,
                             uint64_t expires_at, uint64_t link_epoch, h2o_iovec_t *value)
{
    const gw_cookie_secret_t *secret = signer_begin(keys);

    if (secret != NULL)
        *value = gw_cookie_sign_link(pool, secret, sandbox_id, port, expires_at, link_epoch);
    gw_live_keys_read_end(&keys->live);
    return secret != NULL ? 0 : -1;
}

gw_cookie_result_t gw_cookie_keys_verify_link(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                              uint64_t now, uint64_t link_epoch)
{
    size_t num;
    const gw_cookie_secret_t *secrets = gw_live_keys_read_begin(&keys->live, &num);
    gw_cookie_result_t result =
        num != 0 ? gw_cookie_verify_link(value, secrets, num, sandbox_id, port, now, link_epoch) : GW_COOKIE_BAD_SIGNATURE;

    gw_live_keys_read_end(&keys->live);
    return result;
}

int gw_cookie_keys_sign_view_link(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool, const char *sandbox_id, uint16_t port,
                                  uint64_t expires_at, uint64_t link_epoch, h2o_iovec_t *value)
{
    const gw_cookie_secret_t *secret = signer_begin(keys);

    if (secret != NULL)
        *value = gw_cookie_sign_view_link(pool, secret, sandbox_id, port, expires_at, link_epoch);
    gw_live_keys_read_end(&keys->live);
    return secret != NULL ? 0 : -1;
}

gw_cookie_result_t gw_cookie_keys_verify_view_link(gw_cookie_keys_t *keys, h2o_iovec_t value, const char *sandbox_id, uint16_t port,
                                                   uint64_t now, uint64_t link_epoch)
{
    size_t num;
    const gw_cookie_secret_t *secrets = gw_live_keys_read_begin(&keys->live, &num);
    gw_cookie_result_t result =
        num != 0 ? gw_cookie_verify_view_link(value, secrets, num, sandbox_id, port, now, link_epoch) : GW_COOKIE_BAD_SIGNATURE;

    gw_live_keys_read_end(&keys->live);
    return result;
}

int gw_cookie_keys_reload(gw_cookie_keys_t *keys, char **err)
{
    return gw_live_keys_reload(&keys->live, load_secrets, err);
}
