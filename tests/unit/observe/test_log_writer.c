/* Unit tests for observe/log_writer.c: the access log's writer thread. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "observe/log_writer.h"

/* Reads the whole file behind fd from its start. */
static char *slurp(int fd, size_t *len)
{
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = malloc((size_t)size + 1);
    ck_assert_int_eq(pread(fd, buf, (size_t)size, 0), size);
    buf[size] = '\0';
    *len = (size_t)size;
    return buf;
}

static int temp_fd(void)
{
    char path[] = "/tmp/gw-log-writer-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ne(fd, -1);
    unlink(path);
    return fd;
}

START_TEST(test_lines_in_order_and_all_written_at_free)
{
    int fd = temp_fd();
    gw_log_writer_t *w = gw_log_writer_new(fd, 1 << 20);
    char line[64], *text;
    size_t len, i;

    for (i = 0; i != 1000; ++i) {
        int n = snprintf(line, sizeof(line), "line %zu\n", i);
        ck_assert_int_eq(gw_log_writer_append(w, line, (size_t)n), 0);
    }
    gw_log_writer_free(w); /* flushes */
    text = slurp(fd, &len);
    const char *p = text;
    for (i = 0; i != 1000; ++i) {
        int n = snprintf(line, sizeof(line), "line %zu\n", i);
        ck_assert_int_eq(strncmp(p, line, (size_t)n), 0);
        p += n;
    }
    ck_assert_ptr_eq(p, text + len);
    free(text);
    close(fd);
}
END_TEST

/* Drains a pipe to its end, counting bytes and checking every line is whole. */
typedef struct st_drain_t {
    int fd;
    size_t bytes;
    size_t lines;
} drain_t;

static void *drain(void *_d)
{
    drain_t *d = _d;
    char buf[4096];
    ssize_t r;

    while ((r = read(d->fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i != r; ++i)
            if (buf[i] == '\n')
                ++d->lines;
        d->bytes += (size_t)r;
    }
    return NULL;
}

/* A pipe nobody reads: the writer blocks in write(2) once the pipe is full,
 * and appending must still return at once: dropping, never waiting. */
START_TEST(test_full_buffer_drops_and_never_blocks)
{
    int fds[2];
    char line[100];
    size_t accepted = 0, refused = 0;
    drain_t d = {0};
    pthread_t reader;

    ck_assert_int_eq(pipe(fds), 0);
    gw_log_writer_t *w = gw_log_writer_new(fds[1], 8192); /* two halves of 4 KiB */
    memset(line, 'x', sizeof(line));
    line[sizeof(line) - 1] = '\n';
    /* 64 KiB of pipe + 8 KiB of buffer hold about 740 lines; 5,000 cannot all fit */
    for (int i = 0; i != 5000; ++i) {
        if (gw_log_writer_append(w, line, sizeof(line)) == 0)
            ++accepted;
        else
            ++refused;
    }
    ck_assert_uint_gt(refused, 0);
    ck_assert_uint_eq(gw_log_writer_dropped(w), refused);
    ck_assert_uint_le(accepted, (65536 + 8192) / sizeof(line) + 1);

    /* the reader comes back: everything accepted arrives, in whole lines */
    d.fd = fds[0];
    pthread_create(&reader, NULL, drain, &d);
    gw_log_writer_free(w); /* returns once the last accepted line is written */
    close(fds[1]);
    pthread_join(reader, NULL);
    close(fds[0]);
    ck_assert_uint_eq(d.bytes, accepted * sizeof(line));
    ck_assert_uint_eq(d.lines, accepted);
}
END_TEST

START_TEST(test_free_null)
{
    gw_log_writer_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log_writer");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_lines_in_order_and_all_written_at_free);
    tcase_add_test(tc, test_full_buffer_drops_and_never_blocks);
    tcase_add_test(tc, test_free_null);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
