/*
 * What the metering unit tests share: a temporary directory for the spill
 * file and its neighbours (a checked fixture), and small readers of files
 * and batches.
 */
#ifndef GW_TEST_METERING_H
#define GW_TEST_METERING_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <h2o.h>
#include "metering/metering.h"

#define NOW 1700000000000ull

static char dir[64];
static char spill[128];

static inline void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/gw-metering-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(spill, sizeof(spill), "%s/egress.spill", dir);
}

/* the spill file, its lock, temporary and set-aside files */
static inline void teardown(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[400];

    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

static inline gw_metering_t *new_metering(const char *spill_file, uint64_t now)
{
    gw_metering_conf_t conf = {"lizard:", "gw-test", spill_file, 0};
    char *err = NULL;
    gw_metering_t *m = gw_metering_new(&conf, now, &err);
    ck_assert_msg(m != NULL, "%s", err);
    ck_assert_ptr_null(err);
    return m;
}

/* The flusher's outcome for b without Sentinel: EXEC answered (ok), or failed. */
static inline void batch_done(gw_metering_t *m, gw_metering_batch_t *b, int ok)
{
    if (ok)
        gw_metering_batch_executed(m, b, "0123456789abcdef0123456789abcdef01234567", 1000, 0);
    else
        gw_metering_batch_failed(m, b);
}

/* The malloc'd path of the file "<spill>.malformed-<t>" in dir; NULL: none.
 * Fails when there are several. */
static inline char *find_set_aside(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char prefix[64], *found = NULL;

    snprintf(prefix, sizeof(prefix), "%s.malformed-", strrchr(spill, '/') + 1);
    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        ck_assert_msg(found == NULL, "two set-aside files: %s, %s", found, de->d_name);
        found = malloc(strlen(dir) + strlen(de->d_name) + 2);
        snprintf(found, strlen(dir) + strlen(de->d_name) + 2, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    return found;
}

/* The file's bytes (at most 64 KiB), NUL-terminated; the caller frees. */
static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = malloc(65536);
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static inline h2o_iovec_t iov(const char *s)
{
    return h2o_iovec_init(s, strlen(s));
}

static inline const gw_metering_record_t *find(const gw_metering_batch_t *b, const char *sandbox)
{
    for (size_t i = 0; i != b->num_records; ++i)
        if (strcmp(b->records[i].sandbox, sandbox) == 0)
            return b->records + i;
    return NULL;
}

static inline int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static inline size_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;
    int c;

    ck_assert_ptr_nonnull(f);
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

#endif
