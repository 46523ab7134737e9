/*
 * Inside the config module (config*.c and its unit test only): the key
 * table's row type, the messages every reader words the same way, the
 * typed value readers, the parsers of the keys that are not scalars, and
 * what is resolved outside the JSON (secrets, files).
 */
#ifndef GW_CONFIG_CONFIG_INTERNAL_H
#define GW_CONFIG_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <jansson.h>
#include <h2o/memory.h>
#include "config/config.h"

#define GW_CONFIG_MAX_PATH_LEN 256 /* of a key path in messages, e.g. "tls.certificates[3].key" */
#define GW_CONFIG_MAX_GOT_LEN 64   /* of a value quoted back in a message */

typedef enum {
    GW_CONFIG_UINT,     /* integer min..max into a uint64_t, size_t or unsigned field */
    GW_CONFIG_STRING,   /* min..max bytes, no NUL, optionally checked by `valid` */
    GW_CONFIG_ENV_NAME, /* the name of an environment variable */
    GW_CONFIG_ENUM,     /* one of `names`; the field (an enum) gets the index */
    GW_CONFIG_BOOL,     /* true or false into an int field */
    GW_CONFIG_ADDRESS,  /* "ip:port" (or "unix:/path" with allow_unix) into a string and the gw_netaddr_t at aux_offset */
    GW_CONFIG_LIST,     /* anything else (arrays, objects): read by `parse` */
} gw_config_type_t;

/* One row of the key table (config.c). */
typedef struct st_gw_config_key_t {
    const char *path; /* "routing.cache_ttl_ms": a top-level key or section.key */
    gw_config_type_t type;
    size_t offset, size; /* of the field in gw_config_t */
    uint64_t min, max;   /* UINT: the range; STRING: the length in bytes */
    /* The default as JSON text, read by the same reader as the file's value
     * when the key is absent; NULL: none (unset, required, or computed at
     * load, e.g. instance_id). Checked against docs/gen/configuration.md and the example. */
    const char *dflt;
    int allow_unix;              /* ADDRESS */
    int nullable;                /* null is accepted and leaves the field NULL ("null to disable") */
    const char *expected_type;   /* nullable: what a value that is neither null nor a string is told */
    int (*valid)(const char *s); /* STRING: an extra rule, 0 when the value keeps it */
    const char *expected_valid;  /* STRING: what a value breaking `valid` is told */
    const char *const *names;    /* ENUM: NULL-terminated; index i is enum value i */
    size_t aux_offset;           /* ADDRESS: the gw_netaddr_t */
    int (*parse)(const struct st_gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err); /* LIST */
} gw_config_key_t;

extern const gw_config_key_t gw_config_keys[];
extern const size_t gw_config_num_keys;

/* A zeroed array of n elements (n may be 0); aborts when out of memory, as h2o does. */
static inline void *gw_config_calloc(size_t n, size_t size)
{
    return memset(h2o_mem_alloc(n != 0 ? n * size : 1), 0, n != 0 ? n * size : 1);
}

/* Messages: "config: <path>: <what>" (no path: "config: <what>"); each
 * returns -1 after setting *err (malloc'd). */
int gw_config_fail(char **err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "config: <path>: expected <expected>, got <the value>" */
int gw_config_fail_expected(char **err, const char *path, const char *expected, const json_t *got);
/* What a value is, for "got ...": its JSON text (a string quoted and cut at
 * GW_CONFIG_MAX_GOT_LEN) or "an object" / "an array". */
void gw_config_describe(const json_t *v, char *buf, size_t size);
/* "parent.key" (bytes that would garble a message become '?'); "parent[index]" */
void gw_config_path_key(char *buf, size_t size, const char *parent, const char *key);
void gw_config_path_index(char *buf, size_t size, const char *parent, size_t index);

/* Typed readers (config_values.c): each checks one value and stores it, or
 * fails naming `path`. Strings replace (free) what *out held. */
int gw_config_get_uint(char **err, const char *path, const json_t *v, uint64_t min, uint64_t max, uint64_t *out);
int gw_config_get_bool(char **err, const char *path, const json_t *v, int *out);
int gw_config_get_string(char **err, const char *path, const json_t *v, size_t min_len, size_t max_len, char **out);
int gw_config_get_enum(char **err, const char *path, const json_t *v, const char *const *names, int *out);
int gw_config_get_object(char **err, const char *path, const json_t *v);
int gw_config_get_address(char **err, const char *path, const json_t *v, int allow_unix, char **out, gw_netaddr_t *addr);
int gw_config_get_env_name(char **err, const char *path, const json_t *v, char **out);

/* The parsers of the keys that are not scalars (config_lists.c), for the
 * table's LIST rows. */
int gw_config_parse_listen(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);
int gw_config_parse_domains(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);
int gw_config_parse_certificates(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);
int gw_config_parse_sentinels(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);
int gw_config_parse_allowed_networks(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);
int gw_config_parse_oauth_servers(const gw_config_key_t *key, const json_t *v, gw_config_t *c, char **err);

/* What the config names outside itself (config_secrets.c): the Redis
 * passwords and cookie secrets from the environment or their file, and the
 * ticket keys file, read now so that --check refuses a bad one. */
int gw_config_read_secrets(gw_config_t *c, char **err);
/* The spill file's directory can take it (gw_config_load only). */
int gw_config_check_spill_dir(const char *spill, char **err);
/* Wipes and frees a string that held a secret; NULL is a no-op. */
void gw_config_free_secret_string(char *s);

#endif
