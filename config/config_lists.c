/*
 * The config keys that are not scalars, each read by a parser of its own
 * (named by a LIST row of the key table in config.c): listen, domains,
 * tls.certificates, redis.sentinels, upstream.allowed_networks and
 * auth.oauth_authorization_servers. Each
 * checks its items, their keys and the duplicates among them.
 */
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "config/config_internal.h"

#define MAX_SENTINELS 16
#define MAX_OAUTH_SERVERS 8
#define MAX_URL_LEN 2048

int gw_config_parse_listen(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char path[GW_CONFIG_MAX_PATH_LEN], key_path[GW_CONFIG_MAX_PATH_LEN];
    const char *name;
    json_t *item, *value;
    size_t i, j;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return gw_config_fail_expected(err, key->path, "a non-empty array of listeners", v);
    c->listen = gw_config_calloc(json_array_size(v), sizeof(c->listen[0]));
    c->num_listen = json_array_size(v);
    json_array_foreach(v, i, item)
    {
        gw_config_listen_t *l = &c->listen[i];

        gw_config_path_index(path, sizeof(path), key->path, i);
        if (gw_config_get_object(err, path, item) != 0)
            return -1;
        l->tls = 1;
        l->trusted = 0;
        l->proxy_protocol = 0;
        json_object_foreach(item, name, value)
        {
            gw_config_path_key(key_path, sizeof(key_path), path, name);
            if (strcmp(name, "address") == 0) {
                if (gw_config_get_address(err, key_path, value, 0, &l->address, &l->addr) != 0)
                    return -1;
            } else if (strcmp(name, "tls") == 0) {
                if (gw_config_get_bool(err, key_path, value, &l->tls) != 0)
                    return -1;
            } else if (strcmp(name, "trusted") == 0) {
                if (gw_config_get_bool(err, key_path, value, &l->trusted) != 0)
                    return -1;
            } else if (strcmp(name, "proxy_protocol") == 0) {
                if (gw_config_get_bool(err, key_path, value, &l->proxy_protocol) != 0)
                    return -1;
            } else {
                return gw_config_fail(err, key_path, "unknown key");
            }
        }
        gw_config_path_key(key_path, sizeof(key_path), path, "address");
        if (l->address == NULL)
            return gw_config_fail(err, key_path, "missing, expected an address such as \"0.0.0.0:443\"");
        if (l->tls && l->trusted) {
            gw_config_path_key(key_path, sizeof(key_path), path, "trusted");
            return gw_config_fail(err, key_path, "only a plain (\"tls\": false) listener can be trusted");
        }
        for (j = 0; j != i; ++j)
            if (c->listen[j].addr.len == l->addr.len && memcmp(&c->listen[j].addr.ss, &l->addr.ss, l->addr.len) == 0)
                return gw_config_fail(err, key_path, "\"%s\" is already used by listen[%zu]", l->address, j);
    }
    return 0;
}

/* Lowercases the hostname s[0..len) into `lower`. Returns 0, -1 when it is
 * not a hostname, -2 when it is an IPv4 literal. */
static int check_domain(const char *s, size_t len, char *lower)
{
    size_t i, label_len = 0, label_start = 0;
    int last_label_numeric = 1;

    if (len == 0 || len > 253 || s[0] == '.' || s[len - 1] == '.')
        return -1;
    memcpy(lower, s, len);
    h2o_strtolower(lower, len);
    for (i = 0; i <= len; ++i) {
        char ch = i < len ? lower[i] : '.';
        if (ch == '.') {
            if (label_len == 0 || label_len > 63 || lower[label_start] == '-' || lower[i - 1] == '-')
                return -1;
            if (i == len)
                break;
            label_len = 0;
            label_start = i + 1;
            last_label_numeric = 1;
            lower[i] = '.';
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
            return -1;
        if (!(ch >= '0' && ch <= '9'))
            last_label_numeric = 0;
        ++label_len;
    }
    lower[len] = '\0';
    /* a last label of digits only is an IPv4 literal (no TLD is numeric) */
    return last_label_numeric ? -2 : 0;
}

int gw_config_parse_domains(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char path[GW_CONFIG_MAX_PATH_LEN], desc[GW_CONFIG_MAX_GOT_LEN + 16];
    size_t i, j;
    json_t *item;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return gw_config_fail_expected(err, key->path, "a non-empty array of hostnames", v);
    c->domains = gw_config_calloc(json_array_size(v), sizeof(char *));
    json_array_foreach(v, i, item)
    {
        size_t len;
        int rc;

        gw_config_path_index(path, sizeof(path), key->path, i);
        if (!json_is_string(item))
            return gw_config_fail_expected(err, path, "a hostname string", item);
        len = json_string_length(item);
        c->domains[i] = h2o_mem_alloc(len + 1);
        c->num_domains = i + 1;
        gw_config_describe(item, desc, sizeof(desc));
        if (memchr(json_string_value(item), '\0', len) != NULL ||
            (rc = check_domain(json_string_value(item), len, c->domains[i])) == -1)
            return gw_config_fail(err, path,
                                  "expected a hostname such as \"lizard.app\" (letters, digits, '-' and non-empty labels "
                                  "separated by '.'), got %s",
                                  desc);
        if (rc == -2)
            return gw_config_fail(err, path, "expected a hostname, got an IP address %s", desc);
        for (j = 0; j != i; ++j)
            if (strcmp(c->domains[j], c->domains[i]) == 0)
                return gw_config_fail(err, path, "%s is listed twice", desc);
    }
    return 0;
}

int gw_config_parse_certificates(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char item_path[GW_CONFIG_MAX_PATH_LEN], field_path[GW_CONFIG_MAX_PATH_LEN];
    const char *name;
    json_t *item, *value;
    size_t i;

    if (!json_is_array(v))
        return gw_config_fail_expected(err, key->path, "an array of {\"cert\": PATH, \"key\": PATH}", v);
    c->tls.certificates = gw_config_calloc(json_array_size(v), sizeof(gw_config_cert_t));
    json_array_foreach(v, i, item)
    {
        gw_config_cert_t *cert = &c->tls.certificates[i];

        c->tls.num_certificates = i + 1;
        gw_config_path_index(item_path, sizeof(item_path), key->path, i);
        if (gw_config_get_object(err, item_path, item) != 0)
            return -1;
        json_object_foreach(item, name, value)
        {
            gw_config_path_key(field_path, sizeof(field_path), item_path, name);
            if (strcmp(name, "cert") == 0) {
                if (gw_config_get_string(err, field_path, value, 1, 4096, &cert->cert) != 0)
                    return -1;
            } else if (strcmp(name, "key") == 0) {
                if (gw_config_get_string(err, field_path, value, 1, 4096, &cert->key) != 0)
                    return -1;
            } else {
                return gw_config_fail(err, field_path, "unknown key");
            }
        }
        if (cert->cert == NULL || cert->key == NULL) {
            gw_config_path_key(field_path, sizeof(field_path), item_path, cert->cert == NULL ? "cert" : "key");
            return gw_config_fail(err, field_path, "missing, expected the path of a PEM file");
        }
    }
    return 0;
}

int gw_config_parse_sentinels(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char path[GW_CONFIG_MAX_PATH_LEN];
    json_t *item;
    size_t i, j, n;

    if (!json_is_array(v) || (n = json_array_size(v)) == 0 || n > MAX_SENTINELS)
        return gw_config_fail_expected(err, key->path, "a non-empty array of at most 16 sentinel addresses (\"ip:port\")", v);
    c->redis.sentinels = gw_config_calloc(n, sizeof(char *));
    c->redis.sentinel_addrs = gw_config_calloc(n, sizeof(gw_netaddr_t));
    json_array_foreach(v, i, item)
    {
        gw_config_path_index(path, sizeof(path), key->path, i);
        c->redis.num_sentinels = i + 1;
        if (gw_config_get_address(err, path, item, 0, &c->redis.sentinels[i], &c->redis.sentinel_addrs[i]) != 0)
            return -1;
        for (j = 0; j != i; ++j)
            if (c->redis.sentinel_addrs[j].len == c->redis.sentinel_addrs[i].len &&
                memcmp(&c->redis.sentinel_addrs[j].ss, &c->redis.sentinel_addrs[i].ss, c->redis.sentinel_addrs[i].len) == 0)
                return gw_config_fail(err, path, "\"%s\" is already redis.sentinels[%zu]", c->redis.sentinels[i], j);
    }
    return 0;
}

int gw_config_parse_allowed_networks(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char item_path[GW_CONFIG_MAX_PATH_LEN], desc[GW_CONFIG_MAX_GOT_LEN + 16];
    const char *why = NULL;
    json_t *item;
    size_t i;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return gw_config_fail_expected(err, key->path, "a non-empty array of networks such as \"10.0.0.0/8\"", v);
    c->upstream.allowed_networks = gw_config_calloc(json_array_size(v), sizeof(gw_cidr_t));
    json_array_foreach(v, i, item)
    {
        gw_config_path_index(item_path, sizeof(item_path), key->path, i);
        if (!json_is_string(item))
            return gw_config_fail_expected(err, item_path, "a network string such as \"10.0.0.0/8\"", item);
        if (gw_cidr_parse(json_string_value(item), &c->upstream.allowed_networks[i], &why) != 0) {
            gw_config_describe(item, desc, sizeof(desc));
            return gw_config_fail(err, item_path, "%s, got %s", why != NULL ? why : "expected an IP network", desc);
        }
        c->upstream.num_allowed_networks = i + 1;
    }
    return 0;
}

/* An issuer URL as a JSON document may carry it unescaped: http(s)://, a host, printable ASCII without quotes,
 * backslashes or spaces (RFC 8414: no query or fragment). */
static int is_issuer_url(const char *s, size_t len)
{
    size_t i, scheme = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;

    if (scheme == 0 || len <= scheme || s[scheme] == '/' || len > MAX_URL_LEN)
        return 0;
    for (i = 0; i != len; ++i)
        if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\' || s[i] == '?' || s[i] == '#')
            return 0;
    return 1;
}

int gw_config_parse_oauth_servers(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err)
{
    char path[GW_CONFIG_MAX_PATH_LEN], desc[GW_CONFIG_MAX_GOT_LEN + 16];
    json_t *item;
    size_t i, j;

    if (!json_is_array(v) || json_array_size(v) > MAX_OAUTH_SERVERS)
        return gw_config_fail_expected(err, key->path, "an array of at most 8 issuer URLs", v);
    if (json_array_size(v) == 0)
        return 0;
    c->auth.oauth_authorization_servers = gw_config_calloc(json_array_size(v), sizeof(char *));
    json_array_foreach(v, i, item)
    {
        gw_config_path_index(path, sizeof(path), key->path, i);
        if (!json_is_string(item) || !is_issuer_url(json_string_value(item), json_string_length(item))) {
            gw_config_describe(item, desc, sizeof(desc));
            return gw_config_fail(err, path,
                                  "expected an issuer URL such as \"https://auth.lizard.app\" (http or https, no spaces, "
                                  "quotes, query or fragment), got %s",
                                  desc);
        }
        c->auth.oauth_authorization_servers[i] = h2o_strdup(NULL, json_string_value(item), SIZE_MAX).base;
        c->auth.num_oauth_authorization_servers = i + 1;
        for (j = 0; j != i; ++j)
            if (strcmp(c->auth.oauth_authorization_servers[j], c->auth.oauth_authorization_servers[i]) == 0)
                return gw_config_fail(err, path, "\"%s\" is listed twice", c->auth.oauth_authorization_servers[i]);
    }
    return 0;
}
