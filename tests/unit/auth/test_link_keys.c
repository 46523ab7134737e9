/*
 * Unit tests for auth/link_keys.c: the live share-link keys, read from a
 * file or the environment, and their reload (SIGHUP): a rotated list takes
 * over, a bad file keeps the current one, the environment never changes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "auth/link_keys.h"

#define SECRET_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SECRET_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define NOW 1700000000u

static char path[64];
static h2o_mem_pool_t pool;

static void write_keys(const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(path, 0600);
}

static void setup(void)
{
    int fd;

    snprintf(path, sizeof(path), "/tmp/test_link_keys_XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ne(fd, -1);
    close(fd);
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    unlink(path);
    h2o_mem_clear_pool(&pool);
}

/* A link of sbx:3000 signed with (kid, secret). */
static h2o_iovec_t link_of(const char *kid, const char *secret)
{
    gw_link_key_t key = {.secret = (unsigned char *)secret, .secret_len = strlen(secret)};

    snprintf(key.kid, sizeof(key.kid), "%s", kid);
    return gw_share_link_sign(&pool, &key, "sbx", 3000, NOW + 60, 0);
}

static gw_link_result_t verify(gw_link_keys_t *keys, h2o_iovec_t link)
{
    static const uint64_t epoch = 0;
    return gw_link_keys_verify(keys, link, "sbx", 3000, &epoch, NOW, 3600, NULL);
}

START_TEST(test_off)
{
    char *err = NULL;
    gw_link_keys_t *keys = gw_link_keys_new(NULL, NULL, &err);

    ck_assert_ptr_nonnull(keys);
    ck_assert_uint_eq(gw_link_keys_count(keys), 0);
    ck_assert_int_eq(verify(keys, link_of("a", SECRET_A)), GW_LINK_UNKNOWN_KEY);
    ck_assert_int_eq(gw_link_keys_reload(keys, &err), 0);
    gw_link_keys_free(keys);
    gw_link_keys_free(NULL);
}
END_TEST

START_TEST(test_file_rotation)
{
    char *err = NULL;
    gw_link_keys_t *keys;

    write_keys("a:" SECRET_A "\n");
    keys = gw_link_keys_new(NULL, path, &err);
    ck_assert_ptr_nonnull(keys);
    ck_assert_str_eq(gw_link_keys_file(keys), path);
    ck_assert_int_eq(verify(keys, link_of("a", SECRET_A)), GW_LINK_OK);
    ck_assert_int_eq(verify(keys, link_of("b", SECRET_B)), GW_LINK_UNKNOWN_KEY);

    /* rotation: b added in front, a kept */
    write_keys("b:" SECRET_B "\na:" SECRET_A "\n");
    ck_assert_int_eq(gw_link_keys_reload(keys, &err), 0);
    ck_assert_uint_eq(gw_link_keys_count(keys), 2);
    ck_assert_int_eq(verify(keys, link_of("a", SECRET_A)), GW_LINK_OK);
    ck_assert_int_eq(verify(keys, link_of("b", SECRET_B)), GW_LINK_OK);

    /* a bad file keeps the current list */
    write_keys("b:short\n");
    ck_assert_int_eq(gw_link_keys_reload(keys, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "shorter than 32 bytes"));
    free(err);
    ck_assert_uint_eq(gw_link_keys_count(keys), 2);

    /* a retired key stops verifying */
    write_keys("b:" SECRET_B "\n");
    ck_assert_int_eq(gw_link_keys_reload(keys, &err), 0);
    ck_assert_int_eq(verify(keys, link_of("a", SECRET_A)), GW_LINK_UNKNOWN_KEY);
    ck_assert_int_eq(verify(keys, link_of("b", SECRET_B)), GW_LINK_OK);
    gw_link_keys_free(keys);
}
END_TEST

START_TEST(test_environment)
{
    char *err = NULL;
    gw_link_keys_t *keys;

    setenv("TEST_LINK_KEYS_ENV", "a:" SECRET_A, 1);
    keys = gw_link_keys_new("TEST_LINK_KEYS_ENV", NULL, &err);
    ck_assert_ptr_nonnull(keys);
    ck_assert_ptr_null(gw_link_keys_file(keys));
    setenv("TEST_LINK_KEYS_ENV", "b:" SECRET_B, 1);
    ck_assert_int_eq(gw_link_keys_reload(keys, &err), 0);
    ck_assert_int_eq(verify(keys, link_of("a", SECRET_A)), GW_LINK_OK);
    gw_link_keys_free(keys);

    ck_assert_ptr_null(gw_link_keys_new("TEST_LINK_KEYS_UNSET", NULL, &err));
    ck_assert_ptr_nonnull(strstr(err, "TEST_LINK_KEYS_UNSET is not set"));
    free(err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("link_keys");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_off);
    tcase_add_test(tc, test_file_rotation);
    tcase_add_test(tc, test_environment);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
