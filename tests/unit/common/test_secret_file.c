/* Unit tests for common/secret_file.c: bounded reads of files that must stay private. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/secret_file.h"

static char dir[] = "/tmp/gw-secret-file-XXXXXX";

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
}

static const char *write_file(const char *name, const char *text, size_t len, mode_t mode)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
    return path;
}

START_TEST(test_reads_whole_file)
{
    const char *path = write_file("ok", "s3cret line\nsecond\n", 19, 0640);
    char *buf, *err;
    size_t len;

    ck_assert_int_eq(gw_secret_file_read(path, 64, &buf, &len, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_uint_eq(len, 19);
    ck_assert_str_eq(buf, "s3cret line\nsecond\n"); /* NUL-terminated */
    free(buf);
}
END_TEST

START_TEST(test_exactly_the_limit_and_one_more)
{
    char text[65];
    char *buf, *err;
    size_t len;

    memset(text, 'k', sizeof(text));
    ck_assert_int_eq(gw_secret_file_read(write_file("max", text, 64, 0600), 64, &buf, &len, &err), 0);
    ck_assert_uint_eq(len, 64);
    free(buf);
    ck_assert_int_eq(gw_secret_file_read(write_file("big", text, 65, 0600), 64, &buf, &len, &err), -1);
    ck_assert_ptr_null(buf);
    ck_assert_ptr_nonnull(strstr(err, ": larger than 64 bytes"));
    free(err);
}
END_TEST

START_TEST(test_refused_files_name_the_problem_not_the_bytes)
{
    char *buf, *err;
    size_t len;
    const char *path = write_file("open", "TOPSECRETVALUE\n", 15, 0644);

    ck_assert_int_eq(gw_secret_file_read(path, 64, &buf, &len, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "readable or writable by others (mode 0644)"));
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_null(strstr(err, "TOPSECRET"));
    free(err);

    ck_assert_int_eq(gw_secret_file_read(dir, 64, &buf, &len, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, ": not a regular file"));
    free(err);

    char missing[300];
    snprintf(missing, sizeof(missing), "%s/none", dir);
    ck_assert_int_eq(gw_secret_file_read(missing, 64, &buf, &len, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, ": No such file or directory"));
    free(err);
}
END_TEST

START_TEST(test_lines_skip_blanks_and_comments_and_count_every_line)
{
    static const char text[] = "# keys\n\n  first secret \t\r\n\t# indented comment\nsecond\n   \nlast-without-newline";
    size_t pos = 0, lineno = 0, len;
    const char *line;

    ck_assert_int_eq(gw_secret_file_next_line(text, sizeof(text) - 1, &pos, &lineno, &line, &len), 1);
    ck_assert_uint_eq(lineno, 3);
    ck_assert_int_eq((int)len, 12);
    ck_assert(memcmp(line, "first secret", 12) == 0);
    ck_assert_int_eq(gw_secret_file_next_line(text, sizeof(text) - 1, &pos, &lineno, &line, &len), 1);
    ck_assert_uint_eq(lineno, 5);
    ck_assert(len == 6 && memcmp(line, "second", 6) == 0);
    ck_assert_int_eq(gw_secret_file_next_line(text, sizeof(text) - 1, &pos, &lineno, &line, &len), 1);
    ck_assert_uint_eq(lineno, 7);
    ck_assert(len == 20 && memcmp(line, "last-without-newline", 20) == 0);
    ck_assert_int_eq(gw_secret_file_next_line(text, sizeof(text) - 1, &pos, &lineno, &line, &len), 0);
    ck_assert_int_eq(gw_secret_file_next_line(text, sizeof(text) - 1, &pos, &lineno, &line, &len), 0);
    pos = lineno = 0;
    ck_assert_int_eq(gw_secret_file_next_line("", 0, &pos, &lineno, &line, &len), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("secret_file");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reads_whole_file);
    tcase_add_test(tc, test_exactly_the_limit_and_one_more);
    tcase_add_test(tc, test_refused_files_name_the_problem_not_the_bytes);
    tcase_add_test(tc, test_lines_skip_blanks_and_comments_and_count_every_line);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
