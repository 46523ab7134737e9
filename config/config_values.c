/*
 * The config's vocabulary: the messages an operator reads ("config: <key>:
 * expected ..., got ...") and the typed readers that check one JSON value
 * and store it. The key table (config.c) and the list parsers
 * (config_lists.c) read every value through these, so a kind of value is
 * always checked and worded the same way.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "config/config_internal.h"
#include "common/errfmt.h"

int gw_config_fail(char **err, const char *path, const char *fmt, ...)
{
    va_list args;
    char *what;

    va_start(args, fmt);
    gw_verrorf(&what, fmt, args);
    va_end(args);
    if (path != NULL)
        gw_errorf(err, "config: %s: %s", path, what);
    else
        gw_errorf(err, "config: %s", what);
    free(what);
    return -1;
}

void gw_config_describe(const json_t *v, char *buf, size_t size)
{
    char *text;

    if (json_is_object(v)) {
        snprintf(buf, size, "an object");
        return;
    }
    if (json_is_array(v)) {
        snprintf(buf, size, "an array");
        return;
    }
    if ((text = json_dumps(v, JSON_ENCODE_ANY)) == NULL) {
        snprintf(buf, size, "a value");
        return;
    }
    if (strlen(text) > GW_CONFIG_MAX_GOT_LEN)
        snprintf(buf, size, "%.*s...%s", GW_CONFIG_MAX_GOT_LEN, text, json_is_string(v) ? "\"" : "");
    else
        snprintf(buf, size, "%s", text);
    free(text);
}

int gw_config_fail_expected(char **err, const char *path, const char *expected, const json_t *got)
{
    char desc[GW_CONFIG_MAX_GOT_LEN + 16];

    gw_config_describe(got, desc, sizeof(desc));
    return gw_config_fail(err, path, "expected %s, got %s", expected, desc);
}

void gw_config_path_key(char *buf, size_t size, const char *parent, const char *key)
{
    size_t off = 0, i;

    if (parent[0] != '\0') {
        int n = snprintf(buf, size, "%s.", parent);
        off = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
    }
    for (i = 0; key[i] != '\0' && off + 1 < size; ++i)
        buf[off++] = isprint((unsigned char)key[i]) ? key[i] : '?';
    buf[off] = '\0';
}

void gw_config_path_index(char *buf, size_t size, const char *parent, size_t index)
{
    int n = snprintf(buf, size, "%s[%zu]", parent, index);

    if (n < 0 || (size_t)n >= size)
        buf[size - 1] = '\0'; /* cut; only ever shown in a message */
}

int gw_config_get_uint(char **err, const char *path, const json_t *v, uint64_t min, uint64_t max, uint64_t *out)
{
    char expected[96];
    json_int_t n;

    if (json_is_integer(v)) {
        n = json_integer_value(v);
        if (n >= 0 && (uint64_t)n >= min && (uint64_t)n <= max) {
            *out = (uint64_t)n;
            return 0;
        }
    }
    snprintf(expected, sizeof(expected), "an integer from %" PRIu64 " to %" PRIu64, min, max);
    return gw_config_fail_expected(err, path, expected, v);
}

int gw_config_get_bool(char **err, const char *path, const json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return gw_config_fail_expected(err, path, "true or false", v);
    *out = json_is_true(v);
    return 0;
}

int gw_config_get_string(char **err, const char *path, const json_t *v, size_t min_len, size_t max_len, char **out)
{
    char expected[96];
    size_t len;

    if (json_is_string(v)) {
        len = json_string_length(v);
        if (len >= min_len && len <= max_len && memchr(json_string_value(v), '\0', len) == NULL) {
            free(*out);
            *out = h2o_strdup(NULL, json_string_value(v), len).base;
            return 0;
        }
    }
    if (min_len == 1)
        snprintf(expected, sizeof(expected), "a non-empty string of at most %zu bytes", max_len);
    else
        snprintf(expected, sizeof(expected), "a string of at most %zu bytes", max_len);
    return gw_config_fail_expected(err, path, expected, v);
}

int gw_config_get_enum(char **err, const char *path, const json_t *v, const char *const *names, int *out)
{
    char expected[128];
    size_t off = 0, i;

    if (json_is_string(v)) {
        for (i = 0; names[i] != NULL; ++i) {
            if (strcmp(json_string_value(v), names[i]) == 0) {
                *out = (int)i;
                return 0;
            }
        }
    }
    off = (size_t)snprintf(expected, sizeof(expected), "one of");
    for (i = 0; names[i] != NULL && off < sizeof(expected); ++i)
        off += (size_t)snprintf(expected + off, sizeof(expected) - off, "%s \"%s\"", i == 0 ? "" : ",", names[i]);
    return gw_config_fail_expected(err, path, expected, v);
}

int gw_config_get_object(char **err, const char *path, const json_t *v)
{
    return json_is_object(v) ? 0 : gw_config_fail_expected(err, path, "an object", v);
}

int gw_config_get_address(char **err, const char *path, const json_t *v, int allow_unix, char **out, gw_netaddr_t *addr)
{
    const char *why = NULL;
    char desc[GW_CONFIG_MAX_GOT_LEN + 16];

    if (!json_is_string(v))
        return gw_config_fail_expected(err, path,
                                       allow_unix ? "an address string (\"ip:port\", \"[ip6]:port\" or \"unix:/path\")"
                                                  : "an address string (\"ip:port\" or \"[ip6]:port\")",
                                       v);
    if (gw_netaddr_parse(json_string_value(v), allow_unix, addr, &why) != 0) {
        gw_config_describe(v, desc, sizeof(desc));
        return gw_config_fail(err, path, "%s, got %s", why != NULL ? why : "expected an IP address and port", desc);
    }
    return gw_config_get_string(err, path, v, 1, 4096, out);
}

int gw_config_get_env_name(char **err, const char *path, const json_t *v, char **out)
{
    const char *s;
    size_t i;

    if (json_is_string(v) && (s = json_string_value(v))[0] != '\0' && json_string_length(v) <= 128 &&
        !isdigit((unsigned char)s[0])) {
        for (i = 0; s[i] != '\0'; ++i)
            if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
                break;
        if (s[i] == '\0' && i == json_string_length(v))
            return gw_config_get_string(err, path, v, 1, 128, out);
    }
    return gw_config_fail_expected(err, path, "the name of an environment variable (letters, digits and '_')", v);
}
