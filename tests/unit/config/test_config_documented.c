/*
 * The key table (config/config.c) against what documents it: the
 * configuration table of docs/gen/configuration.md (the words docs/gen/gen.py
 * writes into docs/configuration.md) and deploy/gateway.example.json hold
 * every key with its default and no other key (each failure names the key),
 * and the example loads.
 */
#include <jansson.h>
#include "config/config_internal.h"
#include "config_test.h"

#define EXAMPLE_SPILL_DIR "/var/lib/lizard-gateway"
/* The configuration table people write: docs/gen/gen.py makes docs/configuration.md of it and config.c. */
#define CONFIG_DOC "docs/gen/configuration.md"

/* deploy/gateway.example.json with its spill file moved from
 * EXAMPLE_SPILL_DIR (systemd's StateDirectory, absent on a build machine) to
 * /tmp; the caller unlinks and frees the path. */
static char *example_in_tmp(void)
{
    FILE *f = fopen(GW_TEST_SRCDIR "/../deploy/gateway.example.json", "r");
    char text[16384], out[16384 + 64], *at, *path;
    size_t len;

    ck_assert_ptr_nonnull(f);
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_ptr_nonnull(at = strstr(text, EXAMPLE_SPILL_DIR "/"));
    snprintf(out, sizeof(out), "%.*s/tmp/%s", (int)(at - text), text, at + sizeof(EXAMPLE_SPILL_DIR));
    path = write_temp(out);
    return path;
}

START_TEST(test_example_file)
{
    gw_config_t *c = NULL;
    char *err = NULL, *path = example_in_tmp();

    setenv("REDIS_PASSWORD", "example-redis-password", 1);
    setenv("LIZARD_COOKIE_SECRETS", SECRET_A "," SECRET_B, 1);
    ck_assert_msg(gw_config_load(path, &c, &err) == 0, "%s", err);
    ck_assert_str_eq(c->domains[0], "lizard.app");
    ck_assert_uint_ge(c->tls.num_certificates, 1);
    ck_assert_str_eq(c->redis.password, "example-redis-password");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 2);
    ck_assert_uint_ge(c->workers, 1);
    ck_assert_str_eq(c->metering.spill_file, "/tmp/egress.spill");
    gw_config_free(c);

    /* as shipped: fine where its spill directory is writable, else that is the error */
    if (gw_config_load(GW_TEST_SRCDIR "/../deploy/gateway.example.json", &c, &err) == 0) {
        ck_assert_int_eq(access(EXAMPLE_SPILL_DIR, W_OK), 0);
        gw_config_free(c);
    } else {
        ck_assert_msg(strstr(err, "metering.spill_file") != NULL && strstr(err, EXAMPLE_SPILL_DIR) != NULL, "%s", err);
        free(err);
    }

    /* the secrets it names are required */
    unsetenv("LIZARD_COOKIE_SECRETS");
    ck_assert_int_eq(gw_config_load(path, &c, &err), -1);
    ck_assert_msg(strstr(err, "LIZARD_COOKIE_SECRETS") != NULL, "%s", err);
    free(err);
    unlink(path);
    free(path);
}
END_TEST

/* Keys of the table that deploy/gateway.example.json cannot hold, and why;
 * every other key is in it, with the table's default when it has one. */
static const struct {
    const char *path, *why;
} not_in_example[] = {
    {"tls.ticket_keys_file", "the file must exist for the example to load"},
    {"redis.sentinels", "replaces redis.address (deploy/kubernetes/configmap.yaml shows Sentinel mode)"},
    {"redis.master_name", "only with redis.sentinels"},
    {"redis.sentinel_password_env", "only with redis.sentinels"},
    {"auth.cookie_secrets_file", "set instead of auth.cookie_secrets_env, never with it"},
    {"auth.link_keys_env", "share links are off until the control plane shares keys (docs/share-links.md)"},
    {"auth.link_keys_file", "set instead of auth.link_keys_env, never with it"},
    {"tls.sealed_key_env", "custom domains are off until the control plane shares a sealing key (docs/custom-domains.md)"},
};

static const gw_config_key_t *table_key(const char *path)
{
    size_t i;

    for (i = 0; i != gw_config_num_keys; ++i)
        if (strcmp(gw_config_keys[i].path, path) == 0)
            return &gw_config_keys[i];
    return NULL;
}

static char *read_source_file(const char *name)
{
    char path[512], *text = malloc(1 << 20);
    FILE *f;
    size_t len;

    snprintf(path, sizeof(path), GW_TEST_SRCDIR "/../%s", name);
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: cannot open", path);
    len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[len] = '\0';
    return text;
}

/* The configuration table of docs/gen/configuration.md: key (without a trailing "[]") and default cell of each row. */
typedef struct st_doc_row_t {
    char key[128], dflt[256];
} doc_row_t;

static size_t doc_rows(doc_row_t *rows, size_t max)
{
    char *text = read_source_file(CONFIG_DOC), *p;
    size_t n = 0;

    ck_assert_msg((p = strstr(text, "\n| key | default | meaning |\n")) != NULL,
                  CONFIG_DOC ": no \"| key | default | meaning |\" table");
    while ((p = strstr(p, "\n| `")) != NULL) {
        char *key = p + 4, *key_end = strchr(key, '`'), *cell, *cell_end;

        ck_assert_uint_lt(n, max);
        ck_assert_ptr_nonnull(key_end);
        snprintf(rows[n].key, sizeof(rows[n].key), "%.*s", (int)(key_end - key), key);
        if (strlen(rows[n].key) > 2 && strcmp(rows[n].key + strlen(rows[n].key) - 2, "[]") == 0)
            rows[n].key[strlen(rows[n].key) - 2] = '\0';
        ck_assert_msg((cell = strstr(key_end, " | ")) != NULL && (cell_end = strstr(cell + 3, " | ")) != NULL,
                      CONFIG_DOC ": the row of %s has no default column", rows[n].key);
        snprintf(rows[n].dflt, sizeof(rows[n].dflt), "%.*s", (int)(cell_end - cell - 3), cell + 3);
        ++n;
        p = key_end;
    }
    free(text);
    return n;
}

/* How the configuration table writes the default `dflt` (JSON text) of a scalar key: 1000, `lax`. */
static void doc_default(const char *dflt, char *buf, size_t size)
{
    json_t *v = json_loads(dflt, JSON_DECODE_ANY, NULL);

    ck_assert_ptr_nonnull(v);
    if (json_is_string(v))
        snprintf(buf, size, "`%s`", json_string_value(v));
    else
        snprintf(buf, size, "%s", dflt);
    json_decref(v);
}

/* The example's value at `path` ("redis.prefix"), or NULL. */
static json_t *example_value(json_t *example, const char *path)
{
    const char *dot = strchr(path, '.');
    char section[64];
    json_t *obj;

    if (dot == NULL)
        return json_object_get(example, path);
    snprintf(section, sizeof(section), "%.*s", (int)(dot - path), path);
    return (obj = json_object_get(example, section)) != NULL ? json_object_get(obj, dot + 1) : NULL;
}

START_TEST(test_documented_keys)
{
    doc_row_t rows[128];
    size_t num_rows = doc_rows(rows, 128), i, j;
    char *text = read_source_file("deploy/gateway.example.json"), path[256], expected[256];
    json_t *example = json_loads(text, 0, NULL), *section, *value, *dflt;
    const char *name, *key;

    ck_assert_msg(example != NULL, "deploy/gateway.example.json is not JSON");

    /* every key documented is a key of the table */
    for (i = 0; i != num_rows; ++i)
        ck_assert_msg(table_key(rows[i].key) != NULL, CONFIG_DOC ": %s is not a key of the table (config/config.c)", rows[i].key);
    json_object_foreach(example, name, section)
    {
        if (table_key(name) != NULL)
            continue;
        ck_assert_msg(json_is_object(section), "deploy/gateway.example.json: %s is not a key of the table (config/config.c)", name);
        json_object_foreach(section, key, value)
        {
            snprintf(path, sizeof(path), "%s.%s", name, key);
            ck_assert_msg(table_key(path) != NULL, "deploy/gateway.example.json: %s is not a key of the table (config/config.c)",
                          path);
        }
    }
    for (j = 0; j != sizeof(not_in_example) / sizeof(not_in_example[0]); ++j)
        ck_assert_msg(table_key(not_in_example[j].path) != NULL, "not_in_example: %s is not a key of the table",
                      not_in_example[j].path);

    /* every key of the table is documented, with its default */
    for (i = 0; i != gw_config_num_keys; ++i) {
        const gw_config_key_t *k = &gw_config_keys[i];
        const doc_row_t *row = NULL;
        int exempt = 0;

        for (j = 0; j != num_rows; ++j)
            if (strcmp(rows[j].key, k->path) == 0)
                row = &rows[j];
        ck_assert_msg(row != NULL, CONFIG_DOC ": the configuration table has no row for %s", k->path);
        if (k->type != GW_CONFIG_LIST && k->dflt != NULL) {
            doc_default(k->dflt, expected, sizeof(expected));
            ck_assert_msg(strncmp(row->dflt, expected, strlen(expected)) == 0 &&
                              !(row->dflt[strlen(expected)] >= '0' && row->dflt[strlen(expected)] <= '9'),
                          CONFIG_DOC ": the default of %s is \"%s\"; the table (config/config.c) says %s", k->path, row->dflt,
                          expected);
        }

        for (j = 0; j != sizeof(not_in_example) / sizeof(not_in_example[0]); ++j)
            if (strcmp(not_in_example[j].path, k->path) == 0)
                exempt = 1;
        value = example_value(example, k->path);
        ck_assert_msg(value != NULL || exempt, "deploy/gateway.example.json: %s is missing (the table's default: %s)", k->path,
                      k->dflt != NULL ? k->dflt : "none");
        if (value != NULL && k->type != GW_CONFIG_LIST && k->dflt != NULL) {
            char *got = json_dumps(value, JSON_ENCODE_ANY);
            ck_assert_ptr_nonnull(dflt = json_loads(k->dflt, JSON_DECODE_ANY, NULL));
            ck_assert_msg(json_equal(value, dflt),
                          "deploy/gateway.example.json: %s is %s; the table's default (config/config.c) is %s", k->path, got,
                          k->dflt);
            json_decref(dflt);
            free(got);
        }
    }
    json_decref(example);
    free(text);
}
END_TEST

/* The keys of a listen[] item (config_lists.c), which the key table does not
 * list: each is accepted, named in the listen[] row of CONFIG_DOC and used by a
 * listener of the example. */
START_TEST(test_listener_keys)
{
    static const char *const keys[] = {"address", "tls", "trusted", "proxy_protocol"};
    char *doc = read_source_file(CONFIG_DOC), *text = read_source_file("deploy/gateway.example.json"), *row, *row_end;
    json_t *example = json_loads(text, 0, NULL), *item;
    size_t i, j;

    ck_assert_ptr_nonnull(row = strstr(doc, "\n| `listen[]` | "));
    ck_assert_ptr_nonnull(row_end = strchr(row + 1, '\n'));
    *row_end = '\0';
    for (i = 0; i != sizeof(keys) / sizeof(keys[0]); ++i) {
        char quoted[64], json[256];
        int used = 0;
        snprintf(quoted, sizeof(quoted), "\"%s\"", keys[i]);
        ck_assert_msg(strstr(row, quoted) != NULL, CONFIG_DOC ": the listen[] row does not name %s", quoted);
        json_array_foreach(json_object_get(example, "listen"), j, item) used |= json_object_get(item, keys[i]) != NULL;
        ck_assert_msg(used, "deploy/gateway.example.json: no listener sets %s", quoted);
        /* the key is one the parser takes (a value it refuses names the key) */
        snprintf(json, sizeof(json), "{" BASE ",'listen':[{'address':'0.0.0.0:443','%s':[]}]}", keys[i]);
        char *err = load_err(json);
        ck_assert_msg(strstr(err, "unknown key") == NULL, "%s", err);
        free(err);
    }
    json_decref(example);
    free(text);
    free(doc);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config_documented");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_example_file);
    tcase_add_test(tc, test_documented_keys);
    tcase_add_test(tc, test_listener_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(config_suite());
}
