/*
 * The gateway's configuration: one JSON file read with jansson, every key
 * checked (unknown keys, types, ranges), secrets taken from the environment,
 * then handed out frozen. Defaults are set in gw_config_defaults and nowhere else.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include "auth/cookie_keys.h"
#include "gateway/config.h"
#include "tls/tls.h"

#define MAX_FILE_SIZE (1024 * 1024)
#define MAX_PATH_LEN 256 /* of a key path in messages, e.g. "tls.certificates[3].key" */
#define MAX_GOT_LEN 64   /* of a value quoted back in a message */
#define MAX_TIMEOUT_MS 3600000
#define MAX_WORKERS 256
#define MAX_SENTINELS 16

/* Defaults, in one place. */

static const struct {
    const char *address;
    int tls;
} default_listen[] = {{"0.0.0.0:443", 1}, {"0.0.0.0:80", 0}};

static const char *const default_allowed_networks[] = {"10.0.0.0/8", "fd00::/8"};

static char *default_instance_id(void)
{
    char host[256];

    if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
        return strdup("lizard-gateway");
    host[sizeof(host) - 1] = '\0';
    return strdup(host);
}

/* Fills a zeroed config with every default. Returns 0, or -1 when out of
 * memory (the caller frees what was set). */
static int gw_config_defaults(gw_config_t *c)
{
    const char *perr;
    size_t i;

    c->num_listen = sizeof(default_listen) / sizeof(default_listen[0]);
    if ((c->listen = calloc(c->num_listen, sizeof(c->listen[0]))) == NULL)
        return -1;
    for (i = 0; i != c->num_listen; ++i) {
        if ((c->listen[i].address = strdup(default_listen[i].address)) == NULL)
            return -1;
        if (gw_netaddr_parse(c->listen[i].address, 0, &c->listen[i].addr, &perr) != 0)
            return -1;
        c->listen[i].tls = default_listen[i].tls;
        c->listen[i].trusted = 0;
    }

    if ((c->redis.address = strdup("127.0.0.1:6379")) == NULL || gw_netaddr_parse(c->redis.address, 1, &c->redis.addr, &perr) != 0)
        return -1;
    if ((c->redis.prefix = strdup("lizard:")) == NULL)
        return -1;
    c->redis.connect_timeout_ms = 1000;
    c->redis.lookup_timeout_ms = 1000;
    c->redis.reconnect_max_ms = 5000;

    if ((c->auth.cookie_name = strdup("__Host-lizard_access")) == NULL)
        return -1;
    c->auth.cookie_ttl_s = 86400;
    c->auth.cookie_same_site = GW_COOKIE_SAME_SITE_LAX;

    c->routing.cache_ttl_ms = 10000;
    c->routing.negative_ttl_ms = 1000;
    c->routing.stale_ttl_ms = 60000;

    c->upstream.host_header = GW_HOST_HEADER_PRESERVE;
    c->upstream.connect_timeout_ms = 5000;
    c->upstream.first_byte_timeout_ms = 60000;
    c->upstream.idle_timeout_ms = 60000;
    c->upstream.websocket_idle_timeout_ms = 300000;
    c->upstream.max_idle_per_pool = 64;
    c->upstream.num_allowed_networks = sizeof(default_allowed_networks) / sizeof(default_allowed_networks[0]);
    if ((c->upstream.allowed_networks = calloc(c->upstream.num_allowed_networks, sizeof(gw_cidr_t))) == NULL)
        return -1;
    for (i = 0; i != c->upstream.num_allowed_networks; ++i)
        if (gw_cidr_parse(default_allowed_networks[i], &c->upstream.allowed_networks[i], &perr) != 0)
            return -1;

    c->limits.max_request_body_bytes = 64 * 1024 * 1024;
    c->limits.response_buffer_bytes = 1024 * 1024;
    c->limits.max_connections_per_sandbox = 1000;
    c->limits.client_stall_timeout_ms = 60000;
    c->limits.max_connection_buffer_bytes = 8 * 1024 * 1024;
    c->limits.max_worker_buffer_bytes = 32 * 1024 * 1024;
    c->limits.max_connections_per_client = 256;
    c->limits.max_client_connections_per_worker = 10000;

    c->metering.flush_interval_ms = 5000;
    if ((c->metering.spill_file = strdup("/var/lib/lizard-gateway/egress.spill")) == NULL)
        return -1;

    if ((c->admin.address = strdup("127.0.0.1:9901")) == NULL || gw_netaddr_parse(c->admin.address, 0, &c->admin.addr, &perr) != 0)
        return -1;

    c->log.access = NULL;
    c->log.access_max_lines_per_second = 20000;

    if ((c->instance_id = default_instance_id()) == NULL)
        return -1;
    c->workers = 0;

    return 0;
}

/* Messages. */

static int fail(char **err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char **err, const char *path, const char *fmt, ...)
{
    char msg[1024];
    va_list args;
    int off;

    off = path != NULL ? snprintf(msg, sizeof(msg), "config: %s: ", path) : snprintf(msg, sizeof(msg), "config: ");
    if (off < 0 || (size_t)off >= sizeof(msg))
        off = 0;
    va_start(args, fmt);
    vsnprintf(msg + off, sizeof(msg) - off, fmt, args);
    va_end(args);
    *err = strdup(msg);
    return -1;
}

/* What a value is, for "got ...": the JSON text of a scalar (a string
 * quoted and cut at MAX_GOT_LEN), or "an object" / "an array". */
static void describe(const json_t *v, char *buf, size_t size)
{
    char *text;
    size_t len;

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
    len = strlen(text);
    if (len > MAX_GOT_LEN)
        snprintf(buf, size, "%.*s...%s", MAX_GOT_LEN, text, json_is_string(v) ? "\"" : "");
    else
        snprintf(buf, size, "%s", text);
    free(text);
}

static int fail_expected(char **err, const char *path, const char *expected, const json_t *got)
{
    char desc[MAX_GOT_LEN + 16];

    describe(got, desc, sizeof(desc));
    return fail(err, path, "expected %s, got %s", expected, desc);
}

/* "parent.key", with bytes that would garble a message replaced by '?'. */
static void path_key(char *buf, size_t size, const char *parent, const char *key)
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

static void path_index(char *buf, size_t size, const char *parent, size_t index)
{
    int n = snprintf(buf, size, "%s[%zu]", parent, index);

    if (n < 0 || (size_t)n >= size)
        buf[size - 1] = '\0'; /* cut; only ever shown in a message */
}

/* Typed readers: each checks one value and stores it, or fails naming the path. */

static int get_uint(char **err, const char *path, const json_t *v, uint64_t min, uint64_t max, uint64_t *out)
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
    return fail_expected(err, path, expected, v);
}

static int get_bool(char **err, const char *path, const json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return fail_expected(err, path, "true or false", v);
    *out = json_is_true(v);
    return 0;
}

/* A string of min_len..max_len bytes without NUL; replaces (frees) *out. */
static int get_string(char **err, const char *path, const json_t *v, size_t min_len, size_t max_len, char **out)
{
    char expected[96];
    size_t len;
    char *s;

    if (json_is_string(v)) {
        len = json_string_length(v);
        if (len >= min_len && len <= max_len && memchr(json_string_value(v), '\0', len) == NULL) {
            if ((s = strdup(json_string_value(v))) == NULL)
                return fail(err, NULL, "out of memory");
            free(*out);
            *out = s;
            return 0;
        }
    }
    if (min_len == 1)
        snprintf(expected, sizeof(expected), "a non-empty string of at most %zu bytes", max_len);
    else
        snprintf(expected, sizeof(expected), "a string of at most %zu bytes", max_len);
    return fail_expected(err, path, expected, v);
}

/* One of `names` (NULL-terminated); *out is its index. */
static int get_enum(char **err, const char *path, const json_t *v, const char *const *names, int *out)
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
    return fail_expected(err, path, expected, v);
}

static int get_object(char **err, const char *path, const json_t *v)
{
    return json_is_object(v) ? 0 : fail_expected(err, path, "an object", v);
}

static int get_address(char **err, const char *path, const json_t *v, int allow_unix, char **out, gw_netaddr_t *addr)
{
    const char *why = NULL;
    char desc[MAX_GOT_LEN + 16];

    if (!json_is_string(v))
        return fail_expected(err, path,
                             allow_unix ? "an address string (\"ip:port\", \"[ip6]:port\" or \"unix:/path\")"
                                        : "an address string (\"ip:port\" or \"[ip6]:port\")",
                             v);
    if (gw_netaddr_parse(json_string_value(v), allow_unix, addr, &why) != 0) {
        describe(v, desc, sizeof(desc));
        return fail(err, path, "%s, got %s", why != NULL ? why : "expected an IP address and port", desc);
    }
    return get_string(err, path, v, 1, 4096, out);
}

/* An environment variable's name as written in the config. */
static int get_env_name(char **err, const char *path, const json_t *v, char **out)
{
    const char *s;
    size_t i;

    if (json_is_string(v) && (s = json_string_value(v))[0] != '\0' && json_string_length(v) <= 128 &&
        !isdigit((unsigned char)s[0])) {
        for (i = 0; s[i] != '\0'; ++i)
            if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
                break;
        if (s[i] == '\0' && i == json_string_length(v))
            return get_string(err, path, v, 1, 128, out);
    }
    return fail_expected(err, path, "the name of an environment variable (letters, digits and '_')", v);
}

/* Sections. Each walks its object once: a known key is read, anything else
 * is an error, so a typo is never silently ignored. */

static int check_domain(const char *s, size_t len, char *lower)
{
    size_t i, label_len = 0, label_start = 0;
    int last_label_numeric = 1;

    if (len == 0 || len > 253 || s[0] == '.' || s[len - 1] == '.')
        return -1;
    for (i = 0; i <= len; ++i) {
        char ch = i < len ? (char)tolower((unsigned char)s[i]) : '.';
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
        lower[i] = ch;
        ++label_len;
    }
    lower[len] = '\0';
    /* a last label of digits only is an IPv4 literal (no TLD is numeric) */
    return last_label_numeric ? -2 : 0;
}

static int parse_domains(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN], desc[MAX_GOT_LEN + 16];
    size_t i, j;
    json_t *item;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return fail_expected(err, "domains", "a non-empty array of hostnames", v);
    if ((c->domains = calloc(json_array_size(v), sizeof(char *))) == NULL)
        return fail(err, NULL, "out of memory");
    json_array_foreach(v, i, item)
    {
        size_t len;
        int rc;

        path_index(path, sizeof(path), "domains", i);
        if (!json_is_string(item))
            return fail_expected(err, path, "a hostname string", item);
        len = json_string_length(item);
        if ((c->domains[i] = malloc(len + 1)) == NULL)
            return fail(err, NULL, "out of memory");
        c->num_domains = i + 1;
        describe(item, desc, sizeof(desc));
        if (memchr(json_string_value(item), '\0', len) != NULL ||
            (rc = check_domain(json_string_value(item), len, c->domains[i])) == -1)
            return fail(err, path,
                        "expected a hostname such as \"lizard.app\" (letters, digits, '-' and non-empty labels "
                        "separated by '.'), got %s",
                        desc);
        if (rc == -2)
            return fail(err, path, "expected a hostname, got an IP address %s", desc);
        for (j = 0; j != i; ++j)
            if (strcmp(c->domains[j], c->domains[i]) == 0)
                return fail(err, path, "%s is listed twice", desc);
    }
    return 0;
}

static int parse_listen(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN], key_path[MAX_PATH_LEN];
    const char *key;
    json_t *item, *value;
    size_t i, j, n;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return fail_expected(err, "listen", "a non-empty array of listeners", v);
    /* the defaults are replaced as a whole */
    for (i = 0; i != c->num_listen; ++i)
        free(c->listen[i].address);
    free(c->listen);
    c->num_listen = 0;
    n = json_array_size(v);
    if ((c->listen = calloc(n, sizeof(c->listen[0]))) == NULL)
        return fail(err, NULL, "out of memory");
    c->num_listen = n;

    json_array_foreach(v, i, item)
    {
        gw_config_listen_t *l = &c->listen[i];

        path_index(path, sizeof(path), "listen", i);
        if (get_object(err, path, item) != 0)
            return -1;
        l->tls = 1;
        l->trusted = 0;
        json_object_foreach(item, key, value)
        {
            path_key(key_path, sizeof(key_path), path, key);
            if (strcmp(key, "address") == 0) {
                if (get_address(err, key_path, value, 0, &l->address, &l->addr) != 0)
                    return -1;
            } else if (strcmp(key, "tls") == 0) {
                if (get_bool(err, key_path, value, &l->tls) != 0)
                    return -1;
            } else if (strcmp(key, "trusted") == 0) {
                if (get_bool(err, key_path, value, &l->trusted) != 0)
                    return -1;
            } else {
                return fail(err, key_path, "unknown key");
            }
        }
        path_key(key_path, sizeof(key_path), path, "address");
        if (l->address == NULL)
            return fail(err, key_path, "missing, expected an address such as \"0.0.0.0:443\"");
        if (l->tls && l->trusted) {
            path_key(key_path, sizeof(key_path), path, "trusted");
            return fail(err, key_path, "only a plain (\"tls\": false) listener can be trusted");
        }
        for (j = 0; j != i; ++j)
            if (c->listen[j].addr.len == l->addr.len && memcmp(&c->listen[j].addr.ss, &l->addr.ss, l->addr.len) == 0)
                return fail(err, key_path, "\"%s\" is already used by listen[%zu]", l->address, j);
    }
    return 0;
}

static int parse_tls(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN], key_path[MAX_PATH_LEN];
    const char *key, *ckey;
    json_t *value, *item, *cvalue;
    size_t i;

    if (get_object(err, "tls", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "tls", key);
        if (strcmp(key, "ticket_keys_file") == 0) {
            char *why = NULL;
            if (get_string(err, path, value, 1, 4096, &c->tls.ticket_keys_file) != 0)
                return -1;
            /* read now so that --check and the start refuse a bad file */
            if (gw_tls_ticket_keys_check(c->tls.ticket_keys_file, &why) != 0) {
                fail(err, path, "%s", why != NULL ? why : "out of memory");
                free(why);
                return -1;
            }
            continue;
        }
        if (strcmp(key, "certificates") != 0)
            return fail(err, path, "unknown key");
        if (!json_is_array(value))
            return fail_expected(err, path, "an array of {\"cert\": PATH, \"key\": PATH}", value);
        if (json_array_size(value) != 0 && (c->tls.certificates = calloc(json_array_size(value), sizeof(gw_config_cert_t))) == NULL)
            return fail(err, NULL, "out of memory");
        json_array_foreach(value, i, item)
        {
            gw_config_cert_t *cert = &c->tls.certificates[i];

            c->tls.num_certificates = i + 1;
            path_index(key_path, sizeof(key_path), path, i);
            if (get_object(err, key_path, item) != 0)
                return -1;
            json_object_foreach(item, ckey, cvalue)
            {
                char field_path[MAX_PATH_LEN];

                path_key(field_path, sizeof(field_path), key_path, ckey);
                if (strcmp(ckey, "cert") == 0) {
                    if (get_string(err, field_path, cvalue, 1, 4096, &cert->cert) != 0)
                        return -1;
                } else if (strcmp(ckey, "key") == 0) {
                    if (get_string(err, field_path, cvalue, 1, 4096, &cert->key) != 0)
                        return -1;
                } else {
                    return fail(err, field_path, "unknown key");
                }
            }
            if (cert->cert == NULL || cert->key == NULL) {
                char field_path[MAX_PATH_LEN];
                path_key(field_path, sizeof(field_path), key_path, cert->cert == NULL ? "cert" : "key");
                return fail(err, field_path, "missing, expected the path of a PEM file");
            }
        }
    }
    return 0;
}

/* redis.sentinels: ["ip:port", ...] */
static int parse_sentinels(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    json_t *item;
    size_t i, j, n;

    if (!json_is_array(v) || (n = json_array_size(v)) == 0 || n > MAX_SENTINELS)
        return fail_expected(err, "redis.sentinels", "a non-empty array of at most 16 sentinel addresses (\"ip:port\")", v);
    if ((c->redis.sentinels = calloc(n, sizeof(char *))) == NULL ||
        (c->redis.sentinel_addrs = calloc(n, sizeof(gw_netaddr_t))) == NULL)
        return fail(err, NULL, "out of memory");
    json_array_foreach(v, i, item)
    {
        path_index(path, sizeof(path), "redis.sentinels", i);
        c->redis.num_sentinels = i + 1;
        if (get_address(err, path, item, 0, &c->redis.sentinels[i], &c->redis.sentinel_addrs[i]) != 0)
            return -1;
        for (j = 0; j != i; ++j)
            if (c->redis.sentinel_addrs[j].len == c->redis.sentinel_addrs[i].len &&
                memcmp(&c->redis.sentinel_addrs[j].ss, &c->redis.sentinel_addrs[i].ss, c->redis.sentinel_addrs[i].len) == 0)
                return fail(err, path, "\"%s\" is already redis.sentinels[%zu]", c->redis.sentinels[i], j);
    }
    return 0;
}

static int parse_redis(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key, *value_s;
    json_t *value;
    size_t i;
    int address_set = 0;

    if (get_object(err, "redis", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "redis", key);
        if (strcmp(key, "address") == 0) {
            if (get_address(err, path, value, 1, &c->redis.address, &c->redis.addr) != 0)
                return -1;
            address_set = 1;
        } else if (strcmp(key, "sentinels") == 0) {
            if (parse_sentinels(value, c, err) != 0)
                return -1;
        } else if (strcmp(key, "master_name") == 0) {
            if (get_string(err, path, value, 1, 128, &c->redis.master_name) != 0)
                return -1;
            for (i = 0; c->redis.master_name[i] != '\0'; ++i)
                if (!isgraph((unsigned char)c->redis.master_name[i]))
                    return fail_expected(err, path, "a Sentinel master name without spaces or control characters", value);
        } else if (strcmp(key, "sentinel_password_env") == 0) {
            if (get_env_name(err, path, value, &c->redis.sentinel_password_env) != 0)
                return -1;
        } else if (strcmp(key, "password_env") == 0) {
            if (get_env_name(err, path, value, &c->redis.password_env) != 0)
                return -1;
        } else if (strcmp(key, "prefix") == 0) {
            if (get_string(err, path, value, 0, 64, &c->redis.prefix) != 0)
                return -1;
            /* a brace would break the {sandboxId} hash tag of every key */
            for (i = 0; c->redis.prefix[i] != '\0'; ++i)
                if (!isgraph((unsigned char)c->redis.prefix[i]) || c->redis.prefix[i] == '{' || c->redis.prefix[i] == '}')
                    return fail_expected(err, path, "a key prefix without spaces, control characters or braces", value);
        } else if (strcmp(key, "connect_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->redis.connect_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "lookup_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->redis.lookup_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "reconnect_max_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->redis.reconnect_max_ms) != 0)
                return -1;
        } else {
            return fail(err, path, "unknown key");
        }
    }

    if (c->redis.password_env != NULL) {
        if ((value_s = getenv(c->redis.password_env)) == NULL || value_s[0] == '\0')
            return fail(err, "redis.password_env", "the environment variable %s is not set or is empty", c->redis.password_env);
        if ((c->redis.password = strdup(value_s)) == NULL)
            return fail(err, NULL, "out of memory");
    }

    /* Sentinel mode: the sentinels name the primary, so a fixed address would be ignored */
    if (c->redis.num_sentinels != 0) {
        if (address_set)
            return fail(err, "redis.address", "set redis.address or redis.sentinels, not both");
        if (c->redis.master_name == NULL)
            return fail(err, "redis.master_name", "missing, required with redis.sentinels (the name the sentinels monitor)");
    } else if (c->redis.master_name != NULL) {
        return fail(err, "redis.master_name", "only meaningful with redis.sentinels");
    } else if (c->redis.sentinel_password_env != NULL) {
        return fail(err, "redis.sentinel_password_env", "only meaningful with redis.sentinels");
    }
    if (c->redis.sentinel_password_env != NULL) {
        if ((value_s = getenv(c->redis.sentinel_password_env)) == NULL || value_s[0] == '\0')
            return fail(err, "redis.sentinel_password_env", "the environment variable %s is not set or is empty",
                        c->redis.sentinel_password_env);
        if ((c->redis.sentinel_password = strdup(value_s)) == NULL)
            return fail(err, NULL, "out of memory");
    }
    return 0;
}

/* Splits the comma-separated list of cookie secrets in the variable `name`. */
static int load_cookie_secrets(gw_config_t *c, const char *name, char **err)
{
    const char *list = getenv(name), *p, *end, *comma;
    size_t count = 1, index;

    if (list == NULL || list[0] == '\0')
        return fail(err, "auth.cookie_secrets_env", "the environment variable %s is not set or is empty", name);
    for (p = list; *p != '\0'; ++p)
        if (*p == ',')
            ++count;
    if (count > GW_COOKIE_SECRETS_MAX)
        return fail(err, "auth.cookie_secrets_env", "%s holds %zu secrets, at most %d are allowed", name, count,
                    GW_COOKIE_SECRETS_MAX);
    if ((c->auth.cookie_secrets = calloc(count, sizeof(gw_cookie_secret_t))) == NULL)
        return fail(err, NULL, "out of memory");

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
            return fail(err, "auth.cookie_secrets_env", "secret %zu of %zu in %s is shorter than %d bytes", index + 1, count, name,
                        GW_COOKIE_SECRET_MIN_LEN);
        if ((bytes = malloc(end - p)) == NULL)
            return fail(err, NULL, "out of memory");
        memcpy(bytes, p, end - p);
        c->auth.cookie_secrets[index].bytes = bytes;
        c->auth.cookie_secrets[index].len = end - p;
        c->auth.num_cookie_secrets = index + 1;
    }
    return 0;
}

static int parse_auth(const json_t *v, gw_config_t *c, char **err)
{
    static const char *const same_site_names[] = {"lax", "strict", "none", NULL};
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;
    size_t i;
    int same_site;

    if (get_object(err, "auth", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "auth", key);
        if (strcmp(key, "cookie_secrets_env") == 0) {
            if (get_env_name(err, path, value, &c->auth.cookie_secrets_env) != 0)
                return -1;
        } else if (strcmp(key, "cookie_secrets_file") == 0) {
            if (get_string(err, path, value, 1, 4096, &c->auth.cookie_secrets_file) != 0)
                return -1;
        } else if (strcmp(key, "cookie_name") == 0) {
            if (get_string(err, path, value, 1, 128, &c->auth.cookie_name) != 0)
                return -1;
            /* RFC 6265 cookie-name: an RFC 7230 token */
            for (i = 0; c->auth.cookie_name[i] != '\0'; ++i)
                if (!isalnum((unsigned char)c->auth.cookie_name[i]) && strchr("!#$%&'*+-.^_`|~", c->auth.cookie_name[i]) == NULL)
                    return fail_expected(err, path, "a cookie name (letters, digits and !#$%&'*+-.^_`|~)", value);
        } else if (strcmp(key, "cookie_ttl_s") == 0) {
            if (get_uint(err, path, value, 60, 31536000, &c->auth.cookie_ttl_s) != 0)
                return -1;
        } else if (strcmp(key, "cookie_same_site") == 0) {
            if (get_enum(err, path, value, same_site_names, &same_site) != 0)
                return -1;
            c->auth.cookie_same_site = same_site == 0   ? GW_COOKIE_SAME_SITE_LAX
                                       : same_site == 1 ? GW_COOKIE_SAME_SITE_STRICT
                                                        : GW_COOKIE_SAME_SITE_NONE;
        } else {
            return fail(err, path, "unknown key");
        }
    }
    if (c->auth.cookie_secrets_env != NULL && c->auth.cookie_secrets_file != NULL)
        return fail(err, "auth",
                    "cookie_secrets_env and cookie_secrets_file are both set; set only one (cookie_secrets_file is re-read on "
                    "SIGHUP, the environment only at start)");
    if (c->auth.cookie_secrets_env != NULL && load_cookie_secrets(c, c->auth.cookie_secrets_env, err) != 0)
        return -1;
    if (c->auth.cookie_secrets_file != NULL) {
        char *why = NULL;
        if (gw_cookie_secrets_read_file(c->auth.cookie_secrets_file, &c->auth.cookie_secrets, &c->auth.num_cookie_secrets,
                                               &why) != 0) {
            fail(err, "auth.cookie_secrets_file", "%s", why != NULL ? why : "out of memory");
            free(why);
            return -1;
        }
    }
    return 0;
}

static int parse_routing(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;
    uint64_t *field;

    if (get_object(err, "routing", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "routing", key);
        if (strcmp(key, "cache_ttl_ms") == 0)
            field = &c->routing.cache_ttl_ms;
        else if (strcmp(key, "negative_ttl_ms") == 0)
            field = &c->routing.negative_ttl_ms;
        else if (strcmp(key, "stale_ttl_ms") == 0)
            field = &c->routing.stale_ttl_ms;
        else
            return fail(err, path, "unknown key");
        /* 0 is allowed: no caching (or no serving stale routes) */
        if (get_uint(err, path, value, 0, MAX_TIMEOUT_MS, field) != 0)
            return -1;
    }
    return 0;
}

static int parse_allowed_networks(const char *path, const json_t *v, gw_config_t *c, char **err)
{
    char item_path[MAX_PATH_LEN], desc[MAX_GOT_LEN + 16];
    const char *why = NULL;
    json_t *item;
    size_t i;

    if (!json_is_array(v) || json_array_size(v) == 0)
        return fail_expected(err, path, "a non-empty array of networks such as \"10.0.0.0/8\"", v);
    free(c->upstream.allowed_networks);
    c->upstream.num_allowed_networks = 0;
    if ((c->upstream.allowed_networks = calloc(json_array_size(v), sizeof(gw_cidr_t))) == NULL)
        return fail(err, NULL, "out of memory");
    json_array_foreach(v, i, item)
    {
        path_index(item_path, sizeof(item_path), path, i);
        if (!json_is_string(item))
            return fail_expected(err, item_path, "a network string such as \"10.0.0.0/8\"", item);
        if (gw_cidr_parse(json_string_value(item), &c->upstream.allowed_networks[i], &why) != 0) {
            describe(item, desc, sizeof(desc));
            return fail(err, item_path, "%s, got %s", why != NULL ? why : "expected an IP network", desc);
        }
        c->upstream.num_allowed_networks = i + 1;
    }
    return 0;
}

static int parse_upstream(const json_t *v, gw_config_t *c, char **err)
{
    static const char *const host_header_names[] = {"preserve", "localhost", NULL};
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;
    uint64_t n = 0; /* set by get_uint before use; -O3 cannot see it */
    int mode;

    if (get_object(err, "upstream", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "upstream", key);
        if (strcmp(key, "host_header") == 0) {
            if (get_enum(err, path, value, host_header_names, &mode) != 0)
                return -1;
            c->upstream.host_header = mode == 0 ? GW_HOST_HEADER_PRESERVE : GW_HOST_HEADER_LOCALHOST;
        } else if (strcmp(key, "connect_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->upstream.connect_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "first_byte_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->upstream.first_byte_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "idle_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->upstream.idle_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "websocket_idle_timeout_ms") == 0) {
            if (get_uint(err, path, value, 1, MAX_TIMEOUT_MS, &c->upstream.websocket_idle_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "max_idle_per_pool") == 0) {
            if (get_uint(err, path, value, 0, 4096, &n) != 0)
                return -1;
            c->upstream.max_idle_per_pool = (size_t)n;
        } else if (strcmp(key, "allowed_networks") == 0) {
            if (parse_allowed_networks(path, value, c, err) != 0)
                return -1;
        } else {
            return fail(err, path, "unknown key");
        }
    }
    return 0;
}

static int parse_limits(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;

    if (get_object(err, "limits", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "limits", key);
        if (strcmp(key, "max_request_body_bytes") == 0) {
            /* 1 KiB .. 16 GiB; h2o buffers the whole body before the handler runs */
            if (get_uint(err, path, value, 1024, UINT64_C(17179869184), &c->limits.max_request_body_bytes) != 0)
                return -1;
        } else if (strcmp(key, "response_buffer_bytes") == 0) {
            /* 4 KiB .. 12 MiB per response: refused above, rather than silently capped (see config.h) */
            if (get_uint(err, path, value, 4096, GW_MAX_RESPONSE_BUFFER_BYTES, &c->limits.response_buffer_bytes) != 0)
                return -1;
        } else if (strcmp(key, "max_connections_per_sandbox") == 0) {
            if (get_uint(err, path, value, 1, 1000000, &c->limits.max_connections_per_sandbox) != 0)
                return -1;
        } else if (strcmp(key, "client_stall_timeout_ms") == 0) {
            /* 0 (off) .. 1 hour; a response making no progress toward its client is reset after it */
            if (get_uint(err, path, value, 0, 3600000, &c->limits.client_stall_timeout_ms) != 0)
                return -1;
        } else if (strcmp(key, "max_connection_buffer_bytes") == 0) {
            /* 64 KiB .. 64 GiB */
            if (get_uint(err, path, value, 65536, UINT64_C(68719476736), &c->limits.max_connection_buffer_bytes) != 0)
                return -1;
        } else if (strcmp(key, "max_worker_buffer_bytes") == 0) {
            if (get_uint(err, path, value, 65536, UINT64_C(68719476736), &c->limits.max_worker_buffer_bytes) != 0)
                return -1;
        } else if (strcmp(key, "max_connections_per_client") == 0) {
            if (get_uint(err, path, value, 1, 1000000, &c->limits.max_connections_per_client) != 0)
                return -1;
        } else if (strcmp(key, "max_client_connections_per_worker") == 0) {
            if (get_uint(err, path, value, 1, 1000000, &c->limits.max_client_connections_per_worker) != 0)
                return -1;
        } else {
            return fail(err, path, "unknown key");
        }
    }
    return 0;
}

static int parse_metering(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;

    if (get_object(err, "metering", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "metering", key);
        if (strcmp(key, "flush_interval_ms") == 0) {
            if (get_uint(err, path, value, 100, MAX_TIMEOUT_MS, &c->metering.flush_interval_ms) != 0)
                return -1;
        } else if (strcmp(key, "spill_file") == 0) {
            if (get_string(err, path, value, 1, 4096, &c->metering.spill_file) != 0)
                return -1;
        } else {
            return fail(err, path, "unknown key");
        }
    }
    return 0;
}

static int parse_admin(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;

    if (get_object(err, "admin", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "admin", key);
        if (strcmp(key, "address") != 0)
            return fail(err, path, "unknown key");
        if (json_is_null(value)) {
            free(c->admin.address);
            c->admin.address = NULL;
            memset(&c->admin.addr, 0, sizeof(c->admin.addr));
        } else if (!json_is_string(value)) {
            return fail_expected(err, path, "an address string such as \"127.0.0.1:9901\", or null to disable", value);
        } else if (get_address(err, path, value, 0, &c->admin.address, &c->admin.addr) != 0) {
            return -1;
        }
    }
    return 0;
}

static int parse_log(const json_t *v, gw_config_t *c, char **err)
{
    char path[MAX_PATH_LEN];
    const char *key;
    json_t *value;

    if (get_object(err, "log", v) != 0)
        return -1;
    json_object_foreach((json_t *)v, key, value)
    {
        path_key(path, sizeof(path), "log", key);
        if (strcmp(key, "access_max_lines_per_second") == 0) {
            if (get_uint(err, path, value, 0, 10000000, &c->log.access_max_lines_per_second) != 0)
                return -1;
            continue;
        }
        if (strcmp(key, "access") != 0)
            return fail(err, path, "unknown key");
        if (json_is_null(value)) {
            free(c->log.access);
            c->log.access = NULL;
            c->log.access_max_lines_per_second = 20000;
        } else if (!json_is_string(value)) {
            return fail_expected(err, path, "a file path, \"-\" for stdout, or null to disable", value);
        } else if (get_string(err, path, value, 1, 4096, &c->log.access) != 0) {
            return -1;
        }
    }
    return 0;
}

static int parse_instance_id(const json_t *v, gw_config_t *c, char **err)
{
    size_t i;

    if (get_string(err, "instance_id", v, 1, 128, &c->instance_id) != 0)
        return -1;
    /* written into every metering record: keep it one printable word */
    for (i = 0; c->instance_id[i] != '\0'; ++i)
        if (!isgraph((unsigned char)c->instance_id[i]))
            return fail_expected(err, "instance_id", "a name without spaces or control characters", v);
    return 0;
}

static unsigned resolve_workers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1)
        return 1;
    return n > MAX_WORKERS ? MAX_WORKERS : (unsigned)n;
}

static int parse_root(const json_t *root, const char *name, gw_config_t *c, char **err)
{
    char desc[MAX_GOT_LEN + 16], path[MAX_PATH_LEN];
    const char *key;
    json_t *value;
    int seen_domains = 0, rc;
    uint64_t workers = 0; /* set by get_uint before use; -O3 cannot see it */
    size_t i;

    if (!json_is_object(root)) {
        describe(root, desc, sizeof(desc));
        return fail(err, name, "expected a JSON object at the top level, got %s", desc);
    }
    json_object_foreach((json_t *)root, key, value)
    {
        if (strcmp(key, "listen") == 0) {
            rc = parse_listen(value, c, err);
        } else if (strcmp(key, "domains") == 0) {
            rc = parse_domains(value, c, err);
            seen_domains = 1;
        } else if (strcmp(key, "tls") == 0) {
            rc = parse_tls(value, c, err);
        } else if (strcmp(key, "redis") == 0) {
            rc = parse_redis(value, c, err);
        } else if (strcmp(key, "auth") == 0) {
            rc = parse_auth(value, c, err);
        } else if (strcmp(key, "routing") == 0) {
            rc = parse_routing(value, c, err);
        } else if (strcmp(key, "upstream") == 0) {
            rc = parse_upstream(value, c, err);
        } else if (strcmp(key, "limits") == 0) {
            rc = parse_limits(value, c, err);
        } else if (strcmp(key, "metering") == 0) {
            rc = parse_metering(value, c, err);
        } else if (strcmp(key, "admin") == 0) {
            rc = parse_admin(value, c, err);
        } else if (strcmp(key, "log") == 0) {
            rc = parse_log(value, c, err);
        } else if (strcmp(key, "instance_id") == 0) {
            rc = parse_instance_id(value, c, err);
        } else if (strcmp(key, "workers") == 0) {
            if ((rc = get_uint(err, "workers", value, 0, MAX_WORKERS, &workers)) == 0)
                c->workers = (unsigned)workers;
        } else {
            path_key(path, sizeof(path), "", key);
            rc = fail(err, path, "unknown key");
        }
        if (rc != 0)
            return -1;
    }

    /* every key was valid on its own; now what holds across keys */
    if (!seen_domains)
        return fail(err, "domains", "missing, expected a non-empty array of hostnames such as [\"lizard.app\"]");
    for (i = 0; i != c->num_listen; ++i) {
        if (c->listen[i].tls && c->tls.num_certificates == 0)
            return fail(err, "tls.certificates",
                        "missing, expected at least one {\"cert\": PATH, \"key\": PATH}: listen[%zu] (\"%s\") uses TLS", i,
                        c->listen[i].address);
    }
    if (c->workers == 0)
        c->workers = resolve_workers();
    return 0;
}

int gw_config_load_string(const char *json, const char *name, gw_config_t **out, char **err)
{
    gw_config_t *c = NULL;
    json_error_t jerr;
    json_t *root;

    *out = NULL;
    *err = NULL;
    if ((root = json_loadb(json, strlen(json), JSON_REJECT_DUPLICATES, &jerr)) == NULL)
        return fail(err, NULL, "%s:%d:%d: %s", name, jerr.line, jerr.column, jerr.text);
    if ((c = calloc(1, sizeof(*c))) == NULL) {
        fail(err, NULL, "out of memory");
        goto Error;
    }
    if (gw_config_defaults(c) != 0) {
        fail(err, NULL, "out of memory");
        goto Error;
    }
    if (parse_root(root, name, c, err) != 0)
        goto Error;
    json_decref(root);
    *out = c;
    return 0;

Error:
    gw_config_free(c);
    json_decref(root);
    return -1;
}

/* The spill file is written at exit, when Redis is down: a directory that
 * cannot take it must show now (and in --check), not when the records it
 * should have held are lost. Checked for the file loader only: what the
 * process that loads it can do there. */
static int check_spill_dir(const char *spill, char **err)
{
    char buf[4096 + 2];
    struct stat st;
    const char *dir;

    if (stat(spill, &st) == 0 && S_ISDIR(st.st_mode))
        return fail(err, "metering.spill_file", "%s is a directory; expected the path of a file", spill);
    snprintf(buf, sizeof(buf), "%s", spill);
    dir = dirname(buf);
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            return fail(err, "metering.spill_file",
                        "the directory %s does not exist; create it (writable by the gateway's user) "
                        "or choose another path",
                        dir);
        return fail(err, "metering.spill_file", "the directory %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return fail(err, "metering.spill_file", "%s is not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return fail(err, "metering.spill_file", "the directory %s is not writable by this process (uid %u): %s", dir,
                    (unsigned)getuid(), strerror(errno));
    return 0;
}

int gw_config_load(const char *path, gw_config_t **out, char **err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp;
    int rc;

    *out = NULL;
    *err = NULL;
    if ((fp = fopen(path, "rb")) == NULL)
        return fail(err, NULL, "%s: %s", path, strerror(errno));
    if ((buf = malloc(MAX_FILE_SIZE + 1)) == NULL) {
        fail(err, NULL, "out of memory");
        goto Error;
    }
    len = fread(buf, 1, MAX_FILE_SIZE + 1, fp);
    if (ferror(fp)) {
        fail(err, NULL, "%s: %s", path, strerror(errno));
        goto Error;
    }
    if (len > MAX_FILE_SIZE) {
        fail(err, NULL, "%s: larger than %d bytes", path, MAX_FILE_SIZE);
        goto Error;
    }
    if (memchr(buf, '\0', len) != NULL) {
        fail(err, NULL, "%s: contains a NUL byte; expected a JSON text", path);
        goto Error;
    }
    buf[len] = '\0';
    fclose(fp);
    rc = gw_config_load_string(buf, path, out, err);
    free(buf);
    if (rc == 0 && check_spill_dir((*out)->metering.spill_file, err) != 0) {
        gw_config_free(*out);
        *out = NULL;
        rc = -1;
    }
    return rc;

Error:
    free(buf);
    fclose(fp);
    return -1;
}

static void free_secret_string(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void gw_config_free(gw_config_t *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i != c->num_listen; ++i)
        free(c->listen[i].address);
    free(c->listen);
    for (i = 0; i != c->num_domains; ++i)
        free(c->domains[i]);
    free(c->domains);
    for (i = 0; i != c->tls.num_certificates; ++i) {
        free(c->tls.certificates[i].cert);
        free(c->tls.certificates[i].key);
    }
    free(c->tls.certificates);
    free(c->tls.ticket_keys_file);

    free(c->redis.address);
    free(c->redis.password_env);
    free_secret_string(c->redis.password);
    free(c->redis.prefix);
    for (i = 0; i != c->redis.num_sentinels; ++i)
        free(c->redis.sentinels[i]);
    free(c->redis.sentinels);
    free(c->redis.sentinel_addrs);
    free(c->redis.master_name);
    free(c->redis.sentinel_password_env);
    free_secret_string(c->redis.sentinel_password);

    free(c->auth.cookie_secrets_env);
    free(c->auth.cookie_secrets_file);
    gw_cookie_secrets_free(c->auth.cookie_secrets, c->auth.num_cookie_secrets);
    free(c->auth.cookie_name);

    free(c->upstream.allowed_networks);
    free(c->metering.spill_file);
    free(c->admin.address);
    free(c->log.access);
    free(c->instance_id);
    OPENSSL_cleanse(c, sizeof(*c));
    free(c);
}
