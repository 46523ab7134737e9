/*
 * The gateway's configuration: one JSON file read with jansson and walked
 * once against the key table below, every key checked (unknown keys, types,
 * ranges), then secrets resolved (config_secrets.c) and the config handed
 * out frozen. The table holds one row per key: its path, type, field, range
 * and default, the default written there and nowhere else; the keys that
 * are not scalars name a parser of their own (config_lists.c).
 *
 * Adding a key (say "limits.max_widgets"):
 *   1. a field in gw_config_t (config.h), with a comment saying what it bounds;
 *   2. one row in gw_config_keys below, in its section, e.g.
 *        UINT("limits.max_widgets", limits.max_widgets, 1, 1000000, "64"),
 *      (UINT, STRING, CHECKED_STRING, ENV_NAME for "*_env", ENUM, ADDRESS;
 *      the default is JSON text, NULL for none; a new section needs nothing
 *      more: a row "share.x" makes "share" a section);
 *   3. a row in docs/gen/configuration.md's table, with the same default and
 *      what the key does, then docs/gen/gen.py (docs/configuration.md);
 *   4. the key, with its default, in deploy/gateway.example.json (a key the
 *      example cannot hold, e.g. one set instead of another, is listed with
 *      its reason in not_in_example of the test below).
 * tests/unit/config/test_config_documented.c fails, naming the key, until
 * 3 and 4 match the table. A check across keys goes in check_across_keys; a
 * value taken from outside the file (environment, file) in config_secrets.c;
 * a key that is not a scalar gets a parser in config_lists.c and a LIST row.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <h2o/string_.h>
#include <openssl/crypto.h>
#include "auth/cookie_keys.h"
#include "config/config.h"
#include "config/config_internal.h"

#define MAX_FILE_SIZE (1024 * 1024)
#define MAX_TIMEOUT_MS 3600000
#define MAX_WORKERS 256

/* RFC 6265 cookie-name: an RFC 7230 token */
static int is_cookie_name(const char *s)
{
    for (; *s != '\0'; ++s)
        if (!isalnum((unsigned char)*s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
            return -1;
    return 0;
}

/* One printable word: no spaces or control characters. */
static int is_word(const char *s)
{
    for (; *s != '\0'; ++s)
        if (!isgraph((unsigned char)*s))
            return -1;
    return 0;
}

/* A Redis key prefix: a word without braces, which would break the
 * {sandboxId} hash tag of every key. */
static int is_key_prefix(const char *s)
{
    return is_word(s) != 0 || strpbrk(s, "{}") != NULL ? -1 : 0;
}

static const char *const same_site_names[] = {"lax", "strict", "none", NULL};   /* gw_cookie_same_site_t */
static const char *const host_header_names[] = {"preserve", "localhost", NULL}; /* gw_host_header_mode_t */

/* The key table: one row per line reads as a table. */
/* clang-format off */
#define FIELD(f) .offset = offsetof(gw_config_t, f), .size = sizeof(((gw_config_t *)0)->f)
#define UINT(p, f, lo, hi, d) {.path = p, .type = GW_CONFIG_UINT, FIELD(f), .min = lo, .max = hi, .dflt = d}
#define STRING(p, f, lo, hi, d) {.path = p, .type = GW_CONFIG_STRING, FIELD(f), .min = lo, .max = hi, .dflt = d}
#define CHECKED_STRING(p, f, lo, hi, d, fn, what) \
    {.path = p, .type = GW_CONFIG_STRING, FIELD(f), .min = lo, .max = hi, .dflt = d, .valid = fn, .expected_valid = what}
#define ENV_NAME(p, f) {.path = p, .type = GW_CONFIG_ENV_NAME, FIELD(f)}
#define ENUM(p, f, n, d) {.path = p, .type = GW_CONFIG_ENUM, FIELD(f), .names = n, .dflt = d}
#define BOOL(p, f, d) {.path = p, .type = GW_CONFIG_BOOL, FIELD(f), .dflt = d}
#define ADDRESS(p, f, a, unix_ok, d) \
    {.path = p, .type = GW_CONFIG_ADDRESS, FIELD(f), .aux_offset = offsetof(gw_config_t, a), .allow_unix = unix_ok, .dflt = d}
#define LIST(p, fn, d) {.path = p, .type = GW_CONFIG_LIST, .parse = fn, .dflt = d}
#define OR_NULL(what) .nullable = 1, .expected_type = what /* null is accepted: "null to disable" */
#define STR(s) "\"" s "\"" /* a JSON string default */

const gw_config_key_t gw_config_keys[] = {
    LIST("listen", gw_config_parse_listen, "[{\"address\": \"0.0.0.0:443\", \"tls\": true}, {\"address\": \"0.0.0.0:80\", \"tls\": false}]"),
    LIST("domains", gw_config_parse_domains, NULL), /* required */

    LIST("tls.certificates", gw_config_parse_certificates, NULL), /* required with a TLS listener */
    STRING("tls.ticket_keys_file", tls.ticket_keys_file, 1, 4096, NULL),
    ENV_NAME("tls.sealed_key_env", tls.sealed_key_env),
    UINT("tls.cert_fetch_timeout_ms", tls.cert_fetch_timeout_ms, 1, MAX_TIMEOUT_MS, "500"),
    UINT("tls.max_dynamic_certs", tls.max_dynamic_certs, 1, 10000000, "10000"),

    ADDRESS("redis.address", redis.address, redis.addr, 1, STR("127.0.0.1:6379")),
    ENV_NAME("redis.password_env", redis.password_env),
    LIST("redis.sentinels", gw_config_parse_sentinels, NULL),
    CHECKED_STRING("redis.master_name", redis.master_name, 1, 128, NULL, is_word, "a Sentinel master name without spaces or control characters"),
    ENV_NAME("redis.sentinel_password_env", redis.sentinel_password_env),
    CHECKED_STRING("redis.prefix", redis.prefix, 0, 64, STR("lizard:"), is_key_prefix, "a key prefix without spaces, control characters or braces"),
    UINT("redis.connect_timeout_ms", redis.connect_timeout_ms, 1, MAX_TIMEOUT_MS, "1000"),
    UINT("redis.lookup_timeout_ms", redis.lookup_timeout_ms, 1, MAX_TIMEOUT_MS, "1000"),
    UINT("redis.reconnect_max_ms", redis.reconnect_max_ms, 1, MAX_TIMEOUT_MS, "5000"),

    ENV_NAME("auth.cookie_secrets_env", auth.cookie_secrets_env),
    STRING("auth.cookie_secrets_file", auth.cookie_secrets_file, 1, 4096, NULL),
    CHECKED_STRING("auth.cookie_name", auth.cookie_name, 1, 128, STR("__Host-lizard_access"), is_cookie_name, "a cookie name (letters, digits and !#$%&'*+-.^_`|~)"),
    UINT("auth.cookie_ttl_s", auth.cookie_ttl_s, 60, 31536000, "86400"),
    ENUM("auth.cookie_same_site", auth.cookie_same_site, same_site_names, STR("lax")),
    /* share links (auth/share_link.h): the keys are read at load (config_secrets.c) and by the server */
    ENV_NAME("auth.link_keys_env", auth.link_keys_env),
    STRING("auth.link_keys_file", auth.link_keys_file, 1, 4096, NULL),
    UINT("auth.link_max_ttl_s", auth.link_max_ttl_s, 60, 31536000, "604800"),
    /* the warning page of public ports (auth/warning.h) */
    BOOL("auth.public_warning", auth.public_warning, "false"),
    UINT("auth.public_warning_ttl_s", auth.public_warning_ttl_s, 60, 31536000, "86400"),
    /* OAuth discovery for MCP and other OAuth clients (http/oauth_resource.h) */
    LIST("auth.oauth_authorization_servers", gw_config_parse_oauth_servers, "[]"),

    /* 0 is allowed: no caching (or no serving stale routes) */
    UINT("routing.cache_ttl_ms", routing.cache_ttl_ms, 0, MAX_TIMEOUT_MS, "10000"),
    UINT("routing.negative_ttl_ms", routing.negative_ttl_ms, 0, MAX_TIMEOUT_MS, "1000"),
    UINT("routing.stale_ttl_ms", routing.stale_ttl_ms, 0, MAX_TIMEOUT_MS, "60000"),
    /* 0: a request for a waking sandbox asks for the resume and is answered 503 at once */
    UINT("routing.resume_timeout_ms", routing.resume_timeout_ms, 0, MAX_TIMEOUT_MS, "30000"),
    /* custom-domain look-ups in Redis a client address, and the whole gateway, may cause (docs/custom-domains.md, Custom domains); 0: no bound */
    UINT("routing.domain_lookups_per_second_per_client", routing.domain_lookups_per_second_per_client, 0, 1000000, "20"),
    UINT("routing.domain_lookup_burst_per_client", routing.domain_lookup_burst_per_client, 1, 1000000, "200"),
    UINT("routing.domain_lookups_per_second", routing.domain_lookups_per_second, 0, 1000000, "2000"),

    ENUM("upstream.host_header", upstream.host_header, host_header_names, STR("preserve")),
    UINT("upstream.connect_timeout_ms", upstream.connect_timeout_ms, 1, MAX_TIMEOUT_MS, "5000"),
    /* 610 s: a call of the platform's SDK may run 600 s, silent (docs/long-calls.md, Long calls) */
    UINT("upstream.first_byte_timeout_ms", upstream.first_byte_timeout_ms, 1, MAX_TIMEOUT_MS, "610000"),
    UINT("upstream.idle_timeout_ms", upstream.idle_timeout_ms, 1, MAX_TIMEOUT_MS, "610000"),
    UINT("upstream.websocket_idle_timeout_ms", upstream.websocket_idle_timeout_ms, 1, MAX_TIMEOUT_MS, "300000"),
    UINT("upstream.websocket_ping_interval_ms", upstream.websocket_ping_interval_ms, 0, MAX_TIMEOUT_MS, "25000"),
    UINT("upstream.max_idle_per_pool", upstream.max_idle_per_pool, 0, 4096, "64"),
    UINT("upstream.max_idle_per_worker", upstream.max_idle_per_worker, 0, 65536, "1024"),
    LIST("upstream.allowed_networks", gw_config_parse_allowed_networks, "[\"10.0.0.0/8\", \"fd00::/8\"]"),
    /* server-sent events are silent between events: upstream.idle_timeout_ms does not apply to them */
    UINT("upstream.event_stream_idle_timeout_ms", upstream.event_stream_idle_timeout_ms, 0, MAX_TIMEOUT_MS, "0"),
    BOOL("upstream.splice", upstream.splice, "true"),
    /* the largest timeout:<n> a sandbox record may set; 1 s .. 24 h */
    UINT("upstream.max_port_timeout_ms", upstream.max_port_timeout_ms, 1000, 86400000, "3600000"),
    /* idle pooled connections, whatever the response timeouts are */
    UINT("upstream.pool_idle_timeout_ms", upstream.pool_idle_timeout_ms, 1, MAX_TIMEOUT_MS, "60000"),

    /* 1 KiB .. 16 GiB; h2o buffers the whole body before the handler runs */
    UINT("limits.max_request_body_bytes", limits.max_request_body_bytes, 1024, UINT64_C(17179869184), "67108864"),
    /* 1 KiB .. 256 KiB (h2o reads at most H2O_MAX_REQLEN, 408 KiB, of a head); nginx's large_client_header_buffers and
     * HAProxy's tune.bufsize are in this range */
    UINT("limits.max_request_head_bytes", limits.max_request_head_bytes, 1024, 262144, "65536"),
    /* 4 KiB .. 12 MiB per response: refused above, rather than silently capped (see config.h) */
    UINT("limits.response_buffer_bytes", limits.response_buffer_bytes, 4096, GW_MAX_RESPONSE_BUFFER_BYTES, "1048576"),
    UINT("limits.max_connections_per_sandbox", limits.max_connections_per_sandbox, 1, 1000000, "1000"),
    /* 0 (off) .. 1 hour; a response making no progress toward its client is reset after it */
    UINT("limits.client_stall_timeout_ms", limits.client_stall_timeout_ms, 0, MAX_TIMEOUT_MS, "60000"),
    /* 64 KiB .. 64 GiB */
    UINT("limits.max_connection_buffer_bytes", limits.max_connection_buffer_bytes, 65536, UINT64_C(68719476736), "8388608"),
    UINT("limits.max_worker_buffer_bytes", limits.max_worker_buffer_bytes, 65536, UINT64_C(68719476736), "33554432"),
    UINT("limits.max_connections_per_client", limits.max_connections_per_client, 1, 1000000, "256"),
    /* 1 ms .. 1 hour; the balancer writes the header first: 10 s, like h2o's TLS handshake and request-head timeouts */
    UINT("limits.proxy_header_timeout_ms", limits.proxy_header_timeout_ms, 1, MAX_TIMEOUT_MS, "10000"),
    UINT("limits.max_client_connections_per_worker", limits.max_client_connections_per_worker, 1, 1000000, "10000"),
    UINT("limits.max_held_requests_per_sandbox", limits.max_held_requests_per_sandbox, 1, 1000000, "256"),
    UINT("limits.max_held_requests_per_worker", limits.max_held_requests_per_worker, 1, 1000000, "4096"),
    /* 0 (no request with a body is held) .. 64 GiB; 64 MiB holds one upload of the default
     * limits.max_request_body_bytes while its sandbox wakes (docs/wake.md, Waking paused sandboxes) */
    UINT("limits.max_held_request_bytes", limits.max_held_request_bytes, 0, UINT64_C(68719476736), "67108864"),
    /* 0 (off) .. 1000000: HTTP/2 streams the gateway resets for a client's protocol error (MadeYouReset), per client address
     * across its connections and the workers; a well-behaved client makes none */
    UINT("limits.max_stream_errors_per_client", limits.max_stream_errors_per_client, 0, 1000000, "100"),
    UINT("limits.stream_errors_per_client_per_s", limits.stream_errors_per_client_per_s, 1, 1000000, "10"),
    /* 0 (no limit) .. 1e9; nginx's keepalive_requests is 1000 */
    UINT("limits.max_requests_per_connection", limits.max_requests_per_connection, 0, 1000000000, "1000"),
    /* 0 (off) .. 64 MiB */
    UINT("limits.max_pipelined_unsent_bytes", limits.max_pipelined_unsent_bytes, 0, 67108864, "65536"),
    /* 0 (off) .. 1,000,000 frames a second; the allowance is GW_WS_BUDGET_SECONDS (10) of it (docs/security.md, Limits under hostile clients) */
    UINT("limits.websocket_frames_per_second", limits.websocket_frames_per_second, 0, 1000000, "10000"),
    /* 0 (off) .. 2^62; a message is a request body's worth by default */
    UINT("limits.websocket_max_message_bytes", limits.websocket_max_message_bytes, 0, UINT64_C(4611686018427387904), "67108864"),
    /* 0 (autotuned) .. 16 MiB; the kernel doubles it */
    UINT("limits.tunnel_socket_buffer_bytes", limits.tunnel_socket_buffer_bytes, 0, 16777216, "262144"),
    UINT("limits.max_desktop_viewers", limits.max_desktop_viewers, 1, 1000000, "20"),

    /* the noVNC viewer of desktop ports (http/viewer.h); Debian's novnc package */
    STRING("desktop.viewer_dir", desktop.viewer_dir, 1, 4096, STR("/usr/share/novnc")),

    UINT("metering.flush_interval_ms", metering.flush_interval_ms, 100, MAX_TIMEOUT_MS, "5000"),
    STRING("metering.spill_file", metering.spill_file, 1, 4096, STR("/var/lib/lizard-gateway/egress.spill")),
    UINT("metering.journal_interval_ms", metering.journal_interval_ms, 10, MAX_TIMEOUT_MS, "1000"),

    {.path = "admin.address", .type = GW_CONFIG_ADDRESS, FIELD(admin.address), .aux_offset = offsetof(gw_config_t, admin.addr), .dflt = STR("127.0.0.1:9901"), OR_NULL("an address string such as \"127.0.0.1:9901\", or null to disable")},

    /* none: no access log */
    {.path = "log.access", .type = GW_CONFIG_STRING, FIELD(log.access), .min = 1, .max = 4096, OR_NULL("a file path, \"-\" for stdout, or null to disable")},
    UINT("log.access_max_lines_per_second", log.access_max_lines_per_second, 0, 10000000, "20000"),

    /* written into every metering record: one printable word; none: the host name */
    CHECKED_STRING("instance_id", instance_id, 1, 128, NULL, is_word, "a name without spaces or control characters"),
    UINT("workers", workers, 0, MAX_WORKERS, "0"), /* 0: the number of CPUs, resolved at load */
};
/* clang-format on */

const size_t gw_config_num_keys = sizeof(gw_config_keys) / sizeof(gw_config_keys[0]);

#define NUM_KEYS (sizeof(gw_config_keys) / sizeof(gw_config_keys[0]))

static void *field(gw_config_t *c, size_t offset)
{
    return (char *)c + offset;
}

/* Stores n into the row's uint64_t, size_t or unsigned (or enum) field. */
static void store_uint(gw_config_t *c, const gw_config_key_t *k, uint64_t n)
{
    unsigned u = (unsigned)n; /* the table's range fits */

    if (k->size == sizeof(uint64_t))
        memcpy(field(c, k->offset), &n, sizeof(n));
    else if (k->size == sizeof(unsigned))
        memcpy(field(c, k->offset), &u, sizeof(u));
    else
        h2o_fatal("config: a key table row names a field that is not uint64_t, size_t, unsigned or an enum");
}

/* Reads one value into the row's field; the only place a row's type is looked at. */
static int read_key(const gw_config_key_t *k, const json_t *v, gw_config_t *c, char **err)
{
    char **s = field(c, k->offset);
    uint64_t n = 0;
    int index = 0;

    if (k->nullable && json_is_null(v))
        return 0; /* "null to disable": the field stays NULL */
    if (k->nullable && !json_is_string(v))
        return gw_config_fail_expected(err, k->path, k->expected_type, v);
    switch (k->type) {
    case GW_CONFIG_UINT:
        if (gw_config_get_uint(err, k->path, v, k->min, k->max, &n) != 0)
            return -1;
        store_uint(c, k, n);
        return 0;
    case GW_CONFIG_STRING:
        if (gw_config_get_string(err, k->path, v, k->min, k->max, s) != 0)
            return -1;
        if (k->valid != NULL && k->valid(*s) != 0)
            return gw_config_fail_expected(err, k->path, k->expected_valid, v);
        return 0;
    case GW_CONFIG_ENV_NAME:
        return gw_config_get_env_name(err, k->path, v, s);
    case GW_CONFIG_ENUM:
        if (gw_config_get_enum(err, k->path, v, k->names, &index) != 0)
            return -1;
        store_uint(c, k, (uint64_t)index);
        return 0;
    case GW_CONFIG_BOOL:
        return gw_config_get_bool(err, k->path, v, field(c, k->offset));
    case GW_CONFIG_ADDRESS:
        return gw_config_get_address(err, k->path, v, k->allow_unix, s, field(c, k->aux_offset));
    case GW_CONFIG_LIST:
        return k->parse(k, v, c, err);
    }
    return gw_config_fail(err, k->path, "no reader for this key"); /* unreachable: every type is handled above */
}

static const gw_config_key_t *find_key(const char *path)
{
    size_t i;

    for (i = 0; i != NUM_KEYS; ++i)
        if (strcmp(gw_config_keys[i].path, path) == 0)
            return &gw_config_keys[i];
    return NULL;
}

/* A top-level key is a section when some row's path is "<name>.<key>". */
static int is_section(const char *name)
{
    size_t i, len = strlen(name);

    for (i = 0; i != NUM_KEYS; ++i)
        if (strncmp(gw_config_keys[i].path, name, len) == 0 && gw_config_keys[i].path[len] == '.')
            return 1;
    return 0;
}

/* Reads the value of `path` (a top-level key or section.key); anything not
 * in the table is an error, so a typo is never silently ignored. */
static int walk_key(const char *path, const json_t *v, gw_config_t *c, char *seen, char **err)
{
    const gw_config_key_t *k;

    if ((k = find_key(path)) == NULL)
        return gw_config_fail(err, path, "unknown key");
    seen[k - gw_config_keys] = 1;
    return read_key(k, v, c, err);
}

static int walk(const json_t *root, gw_config_t *c, char *seen, char **err)
{
    char path[GW_CONFIG_MAX_PATH_LEN];
    const char *name, *key;
    json_t *section, *value;

    json_object_foreach((json_t *)root, name, section)
    {
        if (!is_section(name)) {
            gw_config_path_key(path, sizeof(path), "", name);
            if (walk_key(path, section, c, seen, err) != 0)
                return -1;
            continue;
        }
        if (gw_config_get_object(err, name, section) != 0)
            return -1;
        json_object_foreach(section, key, value)
        {
            gw_config_path_key(path, sizeof(path), name, key);
            if (walk_key(path, value, c, seen, err) != 0)
                return -1;
        }
    }
    return 0;
}

/* Every key the file did not set gets the table's default, through the same reader. */
static int apply_defaults(gw_config_t *c, const char *seen, char **err)
{
    size_t i;

    for (i = 0; i != NUM_KEYS; ++i) {
        const gw_config_key_t *k = &gw_config_keys[i];
        json_t *v;
        int rc;

        if (seen[i] || k->dflt == NULL)
            continue;
        if ((v = json_loads(k->dflt, JSON_DECODE_ANY, NULL)) == NULL)
            return gw_config_fail(err, k->path, "the default %s is not JSON", k->dflt); /* a bug in the table */
        rc = read_key(k, v, c, err);
        json_decref(v);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static int was_set(const char *seen, const char *path)
{
    return seen[find_key(path) - gw_config_keys];
}

static char *default_instance_id(void)
{
    char host[256];

    if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
        return h2o_strdup(NULL, "lizard-gateway", SIZE_MAX).base;
    host[sizeof(host) - 1] = '\0';
    return h2o_strdup(NULL, host, SIZE_MAX).base;
}

static unsigned resolve_workers(char *from, size_t len)
{
    unsigned n = gw_cpus_usable(NULL, from, len);

    return n > MAX_WORKERS ? MAX_WORKERS : n;
}

/* Every key was valid on its own; now what holds across keys. */
static int check_across_keys(gw_config_t *c, const char *seen, char **err)
{
    size_t i;

    /* Sentinel mode: the sentinels name the primary, so a fixed address would be ignored */
    if (c->redis.num_sentinels != 0) {
        if (was_set(seen, "redis.address"))
            return gw_config_fail(err, "redis.address", "set redis.address or redis.sentinels, not both");
        if (c->redis.master_name == NULL)
            return gw_config_fail(err, "redis.master_name",
                                  "missing, required with redis.sentinels (the name the sentinels monitor)");
    } else if (c->redis.master_name != NULL) {
        return gw_config_fail(err, "redis.master_name", "only meaningful with redis.sentinels");
    } else if (c->redis.sentinel_password_env != NULL) {
        return gw_config_fail(err, "redis.sentinel_password_env", "only meaningful with redis.sentinels");
    }
    if (gw_config_read_secrets(c, err) != 0)
        return -1;

    if (c->num_domains == 0)
        return gw_config_fail(err, "domains", "missing, expected a non-empty array of hostnames such as [\"lizard.app\"]");
    for (i = 0; i != c->num_listen; ++i) {
        if (c->listen[i].tls && c->tls.num_certificates == 0)
            return gw_config_fail(err, "tls.certificates",
                                  "missing, expected at least one {\"cert\": PATH, \"key\": PATH}: listen[%zu] (\"%s\") uses TLS",
                                  i, c->listen[i].address);
    }
    return 0;
}

int gw_config_load_string(const char *json, const char *name, gw_config_t **out, char **err)
{
    char desc[GW_CONFIG_MAX_GOT_LEN + 16], seen[NUM_KEYS] = {0};
    gw_config_t *c;
    json_error_t jerr;
    json_t *root;

    *out = NULL;
    *err = NULL;
    if ((root = json_loadb(json, strlen(json), JSON_REJECT_DUPLICATES, &jerr)) == NULL)
        return gw_config_fail(err, NULL, "%s:%d:%d: %s", name, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        gw_config_describe(root, desc, sizeof(desc));
        json_decref(root);
        return gw_config_fail(err, name, "expected a JSON object at the top level, got %s", desc);
    }
    c = gw_config_calloc(1, sizeof(*c));
    if (walk(root, c, seen, err) != 0 || apply_defaults(c, seen, err) != 0 || check_across_keys(c, seen, err) != 0) {
        gw_config_free(c);
        json_decref(root);
        return -1;
    }
    json_decref(root);
    if (c->instance_id == NULL)
        c->instance_id = default_instance_id();
    if (c->workers == 0)
        c->workers = resolve_workers(c->workers_from, sizeof(c->workers_from));
    *out = c;
    return 0;
}

int gw_config_load(const char *path, gw_config_t **out, char **err)
{
    char *buf;
    size_t len;
    FILE *fp;
    int rc = -1;

    *out = NULL;
    *err = NULL;
    if ((fp = fopen(path, "rb")) == NULL)
        return gw_config_fail(err, NULL, "%s: %s", path, strerror(errno));
    buf = h2o_mem_alloc(MAX_FILE_SIZE + 1);
    len = fread(buf, 1, MAX_FILE_SIZE + 1, fp);
    if (ferror(fp))
        gw_config_fail(err, NULL, "%s: %s", path, strerror(errno));
    else if (len > MAX_FILE_SIZE)
        gw_config_fail(err, NULL, "%s: larger than %d bytes", path, MAX_FILE_SIZE);
    else if (memchr(buf, '\0', len) != NULL)
        gw_config_fail(err, NULL, "%s: contains a NUL byte; expected a JSON text", path);
    else
        rc = 0;
    fclose(fp);
    if (rc == 0) {
        buf[len] = '\0';
        rc = gw_config_load_string(buf, path, out, err);
    }
    free(buf);
    if (rc == 0 && gw_config_check_spill_dir((*out)->metering.spill_file, err) != 0) {
        gw_config_free(*out);
        *out = NULL;
        rc = -1;
    }
    return rc;
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
    free(c->tls.sealed_key_env);
    OPENSSL_cleanse(c->tls.sealed_key, sizeof(c->tls.sealed_key));

    free(c->redis.address);
    free(c->redis.password_env);
    gw_config_free_secret_string(c->redis.password);
    free(c->redis.prefix);
    for (i = 0; i != c->redis.num_sentinels; ++i)
        free(c->redis.sentinels[i]);
    free(c->redis.sentinels);
    free(c->redis.sentinel_addrs);
    free(c->redis.master_name);
    free(c->redis.sentinel_password_env);
    gw_config_free_secret_string(c->redis.sentinel_password);

    free(c->auth.cookie_secrets_env);
    free(c->auth.cookie_secrets_file);
    gw_cookie_secrets_free(c->auth.cookie_secrets, c->auth.num_cookie_secrets);
    free(c->auth.cookie_name);
    free(c->auth.link_keys_env);
    free(c->auth.link_keys_file);
    for (i = 0; i != c->auth.num_oauth_authorization_servers; ++i)
        free(c->auth.oauth_authorization_servers[i]);
    free(c->auth.oauth_authorization_servers);

    free(c->upstream.allowed_networks);
    free(c->metering.spill_file);
    free(c->desktop.viewer_dir);
    free(c->admin.address);
    free(c->log.access);
    free(c->instance_id);
    OPENSSL_cleanse(c, sizeof(*c));
    free(c);
}
