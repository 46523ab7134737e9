/*
 * What a config names outside itself, resolved at load so that a start (and
 * --check) fails now rather than on first use: the Redis passwords and the
 * cookie secrets from the environment, the cookie secrets file and the TLS
 * ticket keys file (read with the same rules as on SIGHUP), and the
 * directory of the metering spill file.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <h2o/string_.h>
#include <openssl/crypto.h>
#include "auth/cookie_keys.h"
#include "auth/share_link.h"
#include "config/config_internal.h"
#include "tls/seal.h"
#include "tls/tls.h"

/* The value of the environment variable `name` (named by the key `path`). */
static int read_env(const char *path, const char *name, char **out, char **err)
{
    const char *value = getenv(name);

    if (value == NULL || value[0] == '\0')
        return gw_config_fail(err, path, "the environment variable %s is not set or is empty", name);
    *out = h2o_strdup(NULL, value, SIZE_MAX).base;
    return 0;
}

/* Splits the comma-separated list of cookie secrets in the variable `name`. */
static int read_cookie_secrets_env(gw_config_t *c, const char *name, char **err)
{
    static const char path[] = "auth.cookie_secrets_env";
    const char *list = getenv(name), *p, *end, *comma;
    size_t count = 1, index;

    if (list == NULL || list[0] == '\0')
        return gw_config_fail(err, path, "the environment variable %s is not set or is empty", name);
    for (p = list; *p != '\0'; ++p)
        if (*p == ',')
            ++count;
    if (count > GW_COOKIE_SECRETS_MAX)
        return gw_config_fail(err, path, "%s holds %zu secrets, at most %d are allowed", name, count, GW_COOKIE_SECRETS_MAX);
    c->auth.cookie_secrets = gw_config_calloc(count, sizeof(gw_cookie_secret_t));

    for (p = list, index = 0; index != count; ++index, p = comma + 1) {
        unsigned char *bytes;

        if ((comma = strchr(p, ',')) == NULL)
            comma = p + strlen(p);
        /* spaces around a comma are layout, not secret */
        for (end = comma; p < end && (*p == ' ' || *p == '\t'); ++p)
            ;
        while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
            --end;
        if ((size_t)(end - p) < GW_COOKIE_SECRET_MIN_LEN)
            return gw_config_fail(err, path, "secret %zu of %zu in %s is shorter than %d bytes", index + 1, count, name,
                                  GW_COOKIE_SECRET_MIN_LEN);
        bytes = h2o_mem_alloc(end - p);
        memcpy(bytes, p, end - p);
        c->auth.cookie_secrets[index] = (gw_cookie_secret_t){bytes, end - p};
        c->auth.num_cookie_secrets = index + 1;
    }
    return 0;
}

/* A reader's message (which names the file) under the config key `path`. */
static int fail_with(char **err, const char *path, char *why)
{
    gw_config_fail(err, path, "%s", why != NULL ? why : "out of memory");
    free(why);
    return -1;
}

int gw_config_read_secrets(gw_config_t *c, char **err)
{
    char *why = NULL;

    if (c->redis.password_env != NULL && read_env("redis.password_env", c->redis.password_env, &c->redis.password, err) != 0)
        return -1;
    if (c->redis.sentinel_password_env != NULL &&
        read_env("redis.sentinel_password_env", c->redis.sentinel_password_env, &c->redis.sentinel_password, err) != 0)
        return -1;

    if (c->auth.cookie_secrets_env != NULL && c->auth.cookie_secrets_file != NULL)
        return gw_config_fail(err, "auth",
                              "cookie_secrets_env and cookie_secrets_file are both set; set only one (cookie_secrets_file is "
                              "re-read on SIGHUP, the environment only at start)");
    if (c->auth.cookie_secrets_env != NULL && read_cookie_secrets_env(c, c->auth.cookie_secrets_env, err) != 0)
        return -1;
    if (c->auth.cookie_secrets_file != NULL &&
        gw_cookie_secrets_read_file(c->auth.cookie_secrets_file, &c->auth.cookie_secrets, &c->auth.num_cookie_secrets, &why) != 0)
        return fail_with(err, "auth.cookie_secrets_file", why);

    if (c->auth.link_keys_env != NULL && c->auth.link_keys_file != NULL)
        return gw_config_fail(err, "auth",
                              "link_keys_env and link_keys_file are both set; set only one (link_keys_file is re-read on SIGHUP, "
                              "the environment only at start)");
    if (c->auth.link_keys_env != NULL || c->auth.link_keys_file != NULL) {
        /* read here so that --check and a start with bad keys fail; the server reads its own live copy */
        gw_link_key_t *keys;
        size_t num_keys;
        if (gw_share_link_keys_load(c->auth.link_keys_env, c->auth.link_keys_file, &keys, &num_keys, &why) != 0)
            return fail_with(err, c->auth.link_keys_env != NULL ? "auth.link_keys_env" : "auth.link_keys_file", why);
        gw_share_link_keys_free(keys, num_keys);
    }
    /* the page's CSRF token and consent cookie are signed with the cookie secrets */
    if (c->auth.public_warning && c->auth.num_cookie_secrets == 0)
        return gw_config_fail(err, "auth.public_warning",
                              "needs auth.cookie_secrets_env or auth.cookie_secrets_file: the page's CSRF token and the consent "
                              "cookie are signed with the cookie secrets");

    if (c->tls.ticket_keys_file != NULL && gw_tls_ticket_keys_check(c->tls.ticket_keys_file, &why) != 0)
        return fail_with(err, "tls.ticket_keys_file", why);
    if (c->tls.sealed_key_env != NULL && gw_seal_parse_key(getenv(c->tls.sealed_key_env), c->tls.sealed_key) != 0)
        return gw_config_fail(err, "tls.sealed_key_env", "the environment variable %s does not hold 64 hex digits",
                              c->tls.sealed_key_env);
    return 0;
}

/* The spill file is written at exit, when Redis is down: a directory that
 * cannot take it must show now (and in --check), not when the records it
 * should have held are lost. Checked for the file loader only: what the
 * process that loads it can do there. */
int gw_config_check_spill_dir(const char *spill, char **err)
{
    static const char path[] = "metering.spill_file";
    char buf[4096 + 2];
    struct stat st;
    const char *dir;

    if (stat(spill, &st) == 0 && S_ISDIR(st.st_mode))
        return gw_config_fail(err, path, "%s is a directory; expected the path of a file", spill);
    snprintf(buf, sizeof(buf), "%s", spill);
    dir = dirname(buf);
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            return gw_config_fail(err, path,
                                  "the directory %s does not exist; create it (writable by the gateway's user) "
                                  "or choose another path",
                                  dir);
        return gw_config_fail(err, path, "the directory %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return gw_config_fail(err, path, "%s is not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return gw_config_fail(err, path, "the directory %s is not writable by this process (uid %u): %s", dir, (unsigned)getuid(),
                              strerror(errno));
    return 0;
}

void gw_config_free_secret_string(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}
