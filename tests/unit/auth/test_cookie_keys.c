/*
 * auth/cookie_keys.c: the live cookie secrets and their file's reader.
 * Signing uses the first secret, verifying all of them; a reload swaps in a
 * re-read file, keeps the current set when the file is bad, and leaves an
 * environment set alone; readers on other threads never see a torn set.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <check.h>
#include "auth/cookie_keys.h"

#define SECRET_A "0123456789abcdef0123456789abcdef-A"
#define SECRET_B "fedcba9876543210fedcba9876543210-B"
#define TOKEN_HASH "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define NOW 1800000000u

static char path[64];

/* h2o keeps freed pool chunks on a thread-local free list that is not
 * released when a thread exits (the reader threads below): not a leak of the
 * code under test. Read by LeakSanitizer in the ASan build only. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:h2o_mem_alloc_recycle\n";
}

static void write_file(const char *text)
{
    char tmp[80];
    FILE *f;

    /* replaced by rename, as deployment tools do */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    ck_assert_ptr_nonnull(f = fopen(tmp, "w"));
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(tmp, 0600), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static void setup(void)
{
    int fd;

    snprintf(path, sizeof(path), "/tmp/gw-cookie-keys-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static void teardown(void)
{
    unlink(path);
}

/* The secrets as the gateway's config holds them after load. */
typedef struct st_loaded_t {
    gw_cookie_secret_t *secrets;
    size_t num;
} loaded_t;

/* A set from the file holding `text`, as the gateway builds it. */
static gw_cookie_keys_t *from_file(const char *text, loaded_t *loaded)
{
    char *err = NULL;

    write_file(text);
    ck_assert_msg(gw_cookie_secrets_read_file(path, &loaded->secrets, &loaded->num, &err) == 0, "%s", err);
    return gw_cookie_keys_new(&(gw_cookie_keys_config_t){path, loaded->secrets, loaded->num});
}

/* The cookie `secret` alone would sign, for comparison. */
static h2o_iovec_t sign_with(h2o_mem_pool_t *pool, const char *secret)
{
    gw_cookie_secret_t s = {(const unsigned char *)secret, strlen(secret)};
    return gw_cookie_sign(pool, &s, "sbx1", 3000, NOW + 3600, TOKEN_HASH);
}

static h2o_iovec_t sign(gw_cookie_keys_t *keys, h2o_mem_pool_t *pool)
{
    h2o_iovec_t v = {NULL, 0};
    ck_assert_int_eq(gw_cookie_keys_sign(keys, pool, "sbx1", 3000, NOW + 3600, TOKEN_HASH, &v), 0);
    return v;
}

static gw_cookie_result_t verify(gw_cookie_keys_t *keys, h2o_iovec_t v)
{
    return gw_cookie_keys_verify(keys, v, "sbx1", 3000, NOW, TOKEN_HASH);
}

static int same(h2o_iovec_t a, h2o_iovec_t b)
{
    return a.len == b.len && memcmp(a.base, b.base, a.len) == 0;
}

START_TEST(test_rotation)
{
    loaded_t config;
    gw_cookie_keys_t *keys = from_file(SECRET_A "\n", &config);
    h2o_mem_pool_t pool;
    h2o_iovec_t cookie_a, cookie_b;
    char *err = (char *)1;

    h2o_mem_init_pool(&pool);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 1);
    ck_assert_str_eq(gw_cookie_keys_file(keys), path);
    cookie_a = sign(keys, &pool);
    ck_assert(same(cookie_a, sign_with(&pool, SECRET_A)));
    ck_assert_int_eq(verify(keys, cookie_a), GW_COOKIE_OK);
    /* the binding still holds */
    ck_assert_int_eq(gw_cookie_keys_verify(keys, cookie_a, "sbx2", 3000, NOW, TOKEN_HASH), GW_COOKIE_WRONG_SANDBOX);

    /* step 1: B signs, A still verifies */
    write_file(SECRET_B "\n" SECRET_A "\n");
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 2);
    cookie_b = sign(keys, &pool);
    ck_assert(same(cookie_b, sign_with(&pool, SECRET_B)));
    ck_assert_int_eq(verify(keys, cookie_a), GW_COOKIE_OK);
    ck_assert_int_eq(verify(keys, cookie_b), GW_COOKIE_OK);

    /* step 2: A retired */
    write_file(SECRET_B "\n");
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), 0);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 1);
    ck_assert_int_eq(verify(keys, cookie_a), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(verify(keys, cookie_b), GW_COOKIE_OK);

    /* the config's own copy is untouched by reloads */
    ck_assert_uint_eq(config.num, 1);
    ck_assert(memcmp(config.secrets[0].bytes, SECRET_A, strlen(SECRET_A)) == 0);

    h2o_mem_clear_pool(&pool);
    gw_cookie_keys_free(keys);
    gw_cookie_secrets_free(config.secrets, config.num);
}
END_TEST

START_TEST(test_failed_reload_keeps_the_set)
{
    loaded_t config;
    gw_cookie_keys_t *keys = from_file(SECRET_A "\n" SECRET_B "\n", &config);
    h2o_mem_pool_t pool;
    h2o_iovec_t cookie_a;
    char *err = NULL, expected[256];

    h2o_mem_init_pool(&pool);
    cookie_a = sign(keys, &pool);

    write_file(SECRET_B "\nshort-secret-in-the-file\n");
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), -1);
    snprintf(expected, sizeof(expected), "%s: line 2: the secret is shorter than 32 bytes", path);
    ck_assert_str_eq(err, expected);
    free(err);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 2);
    ck_assert(same(sign(keys, &pool), cookie_a)); /* A still signs */
    ck_assert_int_eq(verify(keys, cookie_a), GW_COOKIE_OK);

    write_file("# emptied by mistake\n");
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "holds no secret"));
    free(err);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 2);

    write_file(SECRET_B "\n");
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "readable or writable by others"));
    ck_assert_ptr_null(strstr(err, SECRET_B));
    free(err);
    ck_assert(same(sign(keys, &pool), cookie_a));

    unlink(path);
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
    free(err);
    ck_assert_int_eq(verify(keys, cookie_a), GW_COOKIE_OK);

    h2o_mem_clear_pool(&pool);
    gw_cookie_keys_free(keys);
    gw_cookie_secrets_free(config.secrets, config.num);
}
END_TEST

START_TEST(test_environment_set_is_fixed)
{
    gw_cookie_secret_t secrets[] = {{(const unsigned char *)SECRET_A, strlen(SECRET_A)},
                                    {(const unsigned char *)SECRET_B, strlen(SECRET_B)}};
    gw_cookie_keys_t *keys = gw_cookie_keys_new(&(gw_cookie_keys_config_t){NULL, secrets, 2});
    h2o_mem_pool_t pool;
    h2o_iovec_t cookie;
    char *err = (char *)1;

    h2o_mem_init_pool(&pool);
    ck_assert_ptr_null(gw_cookie_keys_file(keys));
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 2);
    cookie = sign(keys, &pool);
    ck_assert(same(cookie, sign_with(&pool, SECRET_A)));

    /* a no-op that succeeds: the caller says "restart to change them" */
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 2);
    ck_assert_int_eq(verify(keys, sign_with(&pool, SECRET_B)), GW_COOKIE_OK);

    h2o_mem_clear_pool(&pool);
    gw_cookie_keys_free(keys);
}
END_TEST

START_TEST(test_no_secrets)
{
    gw_cookie_keys_t *keys = gw_cookie_keys_new(&(gw_cookie_keys_config_t){NULL, NULL, 0});
    h2o_mem_pool_t pool;
    h2o_iovec_t v = {NULL, 0};
    char *err = (char *)1;

    h2o_mem_init_pool(&pool);
    ck_assert_ptr_nonnull(keys);
    ck_assert_uint_eq(gw_cookie_keys_count(keys), 0);
    ck_assert_int_eq(gw_cookie_keys_sign(keys, &pool, "sbx1", 3000, NOW + 3600, TOKEN_HASH, &v), -1);
    ck_assert_ptr_null(v.base);
    /* nothing verifies against an empty set, not even a well-formed cookie */
    ck_assert_int_eq(verify(keys, sign_with(&pool, SECRET_A)), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_keys_reload(keys, &err), 0);
    ck_assert_ptr_null(err);
    h2o_mem_clear_pool(&pool);
    gw_cookie_keys_free(keys);
    gw_cookie_keys_free(NULL);
}
END_TEST

/* Workers verify and sign while main reloads: every reload's file holds A,
 * so every verification of an A cookie must succeed, and every signature is
 * made with one whole secret (A or B), never a torn one. */
typedef struct st_reader_t {
    gw_cookie_keys_t *keys;
    h2o_iovec_t cookie_a, by_a, by_b;
    atomic_int *stop;
    atomic_ulong rounds;
    unsigned long failures;
} reader_t;

static void *reader_main(void *arg)
{
    reader_t *r = arg;

    while (!atomic_load(r->stop)) {
        h2o_mem_pool_t pool;
        h2o_iovec_t v = {NULL, 0};
        h2o_mem_init_pool(&pool);
        if (gw_cookie_keys_verify(r->keys, r->cookie_a, "sbx1", 3000, NOW, TOKEN_HASH) != GW_COOKIE_OK)
            ++r->failures;
        if (gw_cookie_keys_sign(r->keys, &pool, "sbx1", 3000, NOW + 3600, TOKEN_HASH, &v) != 0 ||
            !(same(v, r->by_a) || same(v, r->by_b)))
            ++r->failures;
        h2o_mem_clear_pool(&pool);
        atomic_fetch_add(&r->rounds, 1);
    }
    return NULL;
}

START_TEST(test_concurrent_reload)
{
    loaded_t config;
    gw_cookie_keys_t *keys = from_file(SECRET_A "\n", &config);
    h2o_mem_pool_t pool;
    atomic_int stop = 0;
    reader_t readers[3];
    pthread_t threads[3];
    char *err = NULL;
    size_t i;
    int round;

    h2o_mem_init_pool(&pool);
    for (i = 0; i != 3; ++i) {
        readers[i] =
            (reader_t){keys, sign_with(&pool, SECRET_A), sign_with(&pool, SECRET_A), sign_with(&pool, SECRET_B), &stop, 0, 0};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, reader_main, &readers[i]), 0);
    }
    for (round = 0; round != 200; ++round) {
        write_file(round % 2 == 0 ? SECRET_B "\n" SECRET_A "\n" : SECRET_A "\n" SECRET_B "\n");
        ck_assert_msg(gw_cookie_keys_reload(keys, &err) == 0, "%s", err);
    }
    /* every reader has had its turn, however loaded the machine */
    for (i = 0; i != 3; ++i)
        for (round = 0; atomic_load(&readers[i].rounds) < 10 && round != 5000; ++round)
            usleep(1000);
    atomic_store(&stop, 1);
    for (i = 0; i != 3; ++i) {
        pthread_join(threads[i], NULL);
        ck_assert_uint_ge(atomic_load(&readers[i].rounds), 10);
        ck_assert_uint_eq(readers[i].failures, 0);
    }
    h2o_mem_clear_pool(&pool);
    gw_cookie_keys_free(keys);
    gw_cookie_secrets_free(config.secrets, config.num);
}
END_TEST

START_TEST(test_read_file)
{
    gw_cookie_secret_t *secrets = (gw_cookie_secret_t *)1;
    char *err = (char *)1;
    size_t n = 99;

    /* the reader load and SIGHUP use: messages name the file, never a secret */
    write_file("# rotated 2026-11-29\n\n  " SECRET_B "  \r\n\t# the previous one\n" SECRET_A "\n\n");
    ck_assert_int_eq(gw_cookie_secrets_read_file(path, &secrets, &n, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(secrets[0].len, strlen(SECRET_B));
    ck_assert(memcmp(secrets[1].bytes, SECRET_A, strlen(SECRET_A)) == 0);
    gw_cookie_secrets_free(secrets, n);
    gw_cookie_secrets_free(NULL, 0);

    unlink(path);
    ck_assert_int_eq(gw_cookie_secrets_read_file(path, &secrets, &n, &err), -1);
    ck_assert_ptr_null(secrets);
    ck_assert_uint_eq(n, 0);
    ck_assert(strncmp(err, path, strlen(path)) == 0);
    ck_assert_ptr_nonnull(strstr(err, ": No such file or directory"));
    free(err);
}
END_TEST

static Suite *cookie_keys_suite(void)
{
    Suite *s = suite_create("cookie_keys");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_rotation);
    tcase_add_test(tc, test_failed_reload_keeps_the_set);
    tcase_add_test(tc, test_environment_set_is_fixed);
    tcase_add_test(tc, test_no_secrets);
    tcase_add_test(tc, test_concurrent_reload);
    tcase_add_test(tc, test_read_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cookie_keys_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
