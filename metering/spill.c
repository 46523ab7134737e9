/*
 * The spill file (metering/spill.h): its lock, the replay at start (JSON
 * lines, malformed ones reported and kept for a person) and the write at
 * exit (a temporary file renamed over it, fsync'd).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "metering/spill.h"
#include "common/errfmt.h"
#include "common/sandbox_id.h"

#define GATEWAY_NAME_MAX 128
#define LOG_PREFIX "lizard-gateway: metering: "
/* The lock file says who holds it: "instance <instance_id>\n". */
#define LOCK_OWNER_PREFIX "instance "

/* A malloc'd string (h2o_mem_alloc: never NULL). */

/* --- the lock --------------------------------------------------------------- */

static char *in_use(const char *path)
{
    return gw_strf("metering.spill_file %s is in use by another lizard-gateway; give each instance its own spill_file (and "
                   "instance_id)",
                   path);
}

int gw_metering_check_spill(const char *spill_file, const char *instance_id, char **err)
{
    size_t plen = sizeof(LOCK_OWNER_PREFIX) - 1, ilen, cap;
    char *path, *owner;
    int fd, ret = 0;

    *err = NULL;
    if (spill_file == NULL)
        return 0;
    path = gw_strf("%s.lock", spill_file);
    /* read-only and never created: a check leaves nothing behind */
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
            /* one byte more than this instance's line: a longer owner does not match */
            ilen = strlen(instance_id);
            cap = plen + ilen + 2;
            owner = h2o_mem_alloc(cap);
            ssize_t n = pread(fd, owner, cap, 0);
            /* the running gateway of this very instance is not a second one (checking a config
             * before a restart); another instance on the same file is */
            if (!(n > 0 && (size_t)n == plen + ilen + 1 && memcmp(owner, LOCK_OWNER_PREFIX, plen) == 0 &&
                  memcmp(owner + plen, instance_id, ilen) == 0 && owner[n - 1] == '\n')) {
                *err = in_use(spill_file);
                ret = -1;
            }
            free(owner);
        }
        close(fd); /* releases a lock we took */
    }
    free(path);
    return ret;
}

int gw_metering_spill_open(gw_metering_spill_t *s, const char *path, const char *instance_id, char **err)
{
    char *lock_path, *owner;
    int fd;

    memset(s, 0, sizeof(*s));
    s->lock_fd = -1;
    *err = NULL;
    if (path == NULL)
        return 0;
    s->path = h2o_strdup(NULL, path, SIZE_MAX).base;
    lock_path = gw_strf("%s.lock", path);
    if ((fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
        *err = gw_strf("metering.spill_file %s: cannot open its lock file %s: %s", path, lock_path, strerror(errno));
        goto Error;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        *err = errno == EWOULDBLOCK ? in_use(path)
                                    : gw_strf("metering.spill_file %s: cannot lock %s: %s", path, lock_path, strerror(errno));
        close(fd);
        goto Error;
    }
    free(lock_path);
    s->lock_fd = fd;
    /* for --check (gw_metering_check_spill); the lock itself is what keeps a second process out */
    owner = gw_strf(LOCK_OWNER_PREFIX "%s\n", instance_id);
    if (ftruncate(fd, 0) == 0 && pwrite(fd, owner, strlen(owner), 0) < 0)
        fprintf(stderr, LOG_PREFIX "cannot write the owner of %s.lock: %s\n", path, strerror(errno));
    free(owner);
    return 0;

Error:
    free(lock_path);
    return -1;
}

void gw_metering_spill_close(gw_metering_spill_t *s)
{
    if (s->lock_fd != -1)
        close(s->lock_fd); /* the lock goes with it; the lock file stays, or a newcomer could lock a removed one */
    free(s->path);
    memset(s, 0, sizeof(*s));
    s->lock_fd = -1;
}

/* --- reading it back ------------------------------------------------------------ */

static int get_uint(json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int gw_metering_parse_spill_line(const char *line, size_t len, gw_metering_record_t *out, const char **err)
{
    json_t *obj = NULL, *v;
    json_error_t jerr;
    const char *s;
    size_t slen, i;

    memset(out, 0, sizeof(*out));
    if ((obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
        *err = "not JSON";
        goto Error;
    }
    if (!json_is_object(obj)) {
        *err = "not a JSON object";
        goto Error;
    }
    v = json_object_get(obj, "sandbox");
    if (!json_is_string(v) || !gw_sandbox_id_valid(json_string_value(v), json_string_length(v))) {
        *err = "sandbox: expected 1 to 56 of [a-z0-9]";
        goto Error;
    }
    memcpy(out->sandbox, json_string_value(v), json_string_length(v) + 1);
    v = json_object_get(obj, "project");
    if (!json_is_string(v) || json_string_length(v) > GW_METERING_PROJECT_MAX ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        *err = "project: expected a string of at most 256 bytes";
        goto Error;
    }
    out->project = gw_metering_project_dup(json_string_value(v), json_string_length(v));
    v = json_object_get(obj, "gateway");
    s = json_is_string(v) ? json_string_value(v) : NULL;
    slen = s != NULL ? json_string_length(v) : 0;
    for (i = 0; i != slen; ++i)
        if (s[i] <= ' ' || s[i] == 0x7f)
            break;
    if (s == NULL || slen == 0 || slen > GATEWAY_NAME_MAX || i != slen) {
        *err = "gateway: expected a name without spaces";
        goto Error;
    }
    out->gateway = h2o_strdup(NULL, s, slen).base;
    if (get_uint(obj, "egress", &out->egress) != 0 || get_uint(obj, "ingress", &out->ingress) != 0 ||
        get_uint(obj, "from_ms", &out->from_ms) != 0 || get_uint(obj, "to_ms", &out->to_ms) != 0 ||
        get_uint(obj, "seq", &out->seq) != 0 || out->seq == 0) {
        *err = "egress, ingress, from_ms, to_ms, seq: expected integers from 0 (seq from 1)";
        goto Error;
    }
    if ((v = json_object_get(obj, "executed_on")) != NULL) {
        s = json_is_string(v) ? json_string_value(v) : NULL;
        slen = s != NULL ? json_string_length(v) : 0;
        for (i = 0; i != slen; ++i)
            if (!isxdigit((unsigned char)s[i]))
                break;
        if (s == NULL || slen == 0 || slen > GW_METERING_REPLID_MAX || i != slen) {
            *err = "executed_on: expected a replication id (hex digits)";
            goto Error;
        }
        memcpy(out->executed_on, s, slen + 1);
    }
    json_decref(obj);
    return 0;

Error:
    gw_metering_record_dispose(out);
    json_decref(obj);
    return -1;
}

static void report_malformed(gw_metering_spill_t *s, size_t lineno, const char *why, size_t *malformed)
{
    fprintf(stderr, LOG_PREFIX "%s:%zu: skipping a malformed spill line: %s\n", s->path, lineno, why);
    ++*malformed;
    s->malformed_lines = 1;
}

/* The spill file had lines that could not be read: rather than removing
 * (or replacing) it, keep it under a name of its own for a person to look at. */
static void set_aside(gw_metering_spill_t *s)
{
    char *aside = gw_strf("%s.malformed-%lld", s->path, (long long)time(NULL));

    s->malformed_lines = 0;
    if (rename(s->path, aside) == 0)
        fprintf(stderr, LOG_PREFIX "%s: it had malformed lines: kept as %s\n", s->path, aside);
    else
        fprintf(stderr, LOG_PREFIX "%s: it had malformed lines but could not be kept under another name: %s\n", s->path,
                strerror(errno));
    free(aside);
}

void gw_metering_spill_replayed(gw_metering_spill_t *s)
{
    if (s->unreadable)
        return;
    if (s->malformed_lines)
        set_aside(s);
    else if (unlink(s->path) == 0)
        fprintf(stderr, LOG_PREFIX "%s: replayed, removed\n", s->path);
}

gw_metering_batch_t *gw_metering_spill_load(gw_metering_spill_t *s, size_t *loaded, size_t *malformed, uint64_t *max_seq)
{
    gw_metering_batch_t *head = NULL, **tail = &head, *b = NULL;
    gw_metering_record_t rec;
    size_t lineno = 0, cap = 0, len;
    char *line = NULL;
    const char *why;
    ssize_t got;
    FILE *f;

    *loaded = 0;
    *malformed = 0;
    *max_seq = 0;
    if (s->path == NULL)
        return NULL;
    if ((f = fopen(s->path, "re")) == NULL) {
        if (errno != ENOENT) {
            fprintf(stderr, LOG_PREFIX "%s: cannot read the spill file, leaving it as is: %s\n", s->path, strerror(errno));
            s->unreadable = 1;
        }
        return NULL;
    }
    /* getline's buffer grows to the longest line, which the file's size
     * bounds; its length (not strlen) is the line's, NUL bytes included */
    while ((got = getline(&line, &cap, f)) != -1) {
        ++lineno;
        len = (size_t)got;
        if (len != 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (len > GW_METERING_SPILL_LINE_MAX) {
            report_malformed(s, lineno, "longer than GW_METERING_SPILL_LINE_MAX", malformed);
            continue;
        }
        if (memchr(line, '\0', len) != NULL) {
            report_malformed(s, lineno, "contains a NUL byte", malformed);
            continue;
        }
        if (gw_metering_parse_spill_line(line, len, &rec, &why) != 0) {
            report_malformed(s, lineno, why, malformed);
            continue;
        }
        if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS) {
            b = gw_metering_batch_new(GW_METERING_MAX_BATCH_RECORDS);
            b->from_spill = 1;
            *tail = b;
            tail = &b->next;
            ++s->batches;
        }
        b->records[b->num_records++] = rec;
        if (rec.seq > *max_seq)
            *max_seq = rec.seq;
        ++*loaded;
    }
    if (ferror(f)) {
        fprintf(stderr, LOG_PREFIX "%s: error reading the spill file, leaving it as is\n", s->path);
        s->unreadable = 1;
    }
    free(line);
    fclose(f);
    if (*loaded != 0) {
        fprintf(stderr, LOG_PREFIX "%s: %zu records from the previous run will be written first\n", s->path, *loaded);
    } else if (!s->unreadable) {
        /* empty, or nothing in it could be read (each line reported above) */
        if (s->malformed_lines)
            set_aside(s);
        else
            unlink(s->path);
    }
    return head;
}

/* --- writing it ------------------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t len)
{
    while (len != 0) {
        ssize_t n = write(fd, p, len);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Returns 0 (written), 1 when the record cannot be put into JSON (nothing
 * written), or -1 with errno when writing failed. */
static int write_record(int fd, const gw_metering_record_t *r, const char *instance_id)
{
    json_t *obj =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:I}", "sandbox", r->sandbox, "project", r->project, "egress",
                  (json_int_t)r->egress, "ingress", (json_int_t)r->ingress, "from_ms", (json_int_t)r->from_ms, "to_ms",
                  (json_int_t)r->to_ms, "gateway", r->gateway != NULL ? r->gateway : instance_id, "seq", (json_int_t)r->seq);
    char *line = NULL;
    int ret = 1, werr = 0;

    if (obj == NULL)
        return 1;
    /* EXEC took it on that primary, no replica acknowledged it: the next start does not execute it there again */
    if (r->executed_on[0] != '\0' && json_object_set_new(obj, "executed_on", json_string(r->executed_on)) != 0) {
        json_decref(obj);
        return 1;
    }
    if ((line = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER)) != NULL) {
        size_t len = strlen(line);
        line[len] = '\n'; /* json_dumps allocated len + 1 */
        if ((ret = write_all(fd, line, len + 1)) != 0)
            werr = errno;
        free(line);
    }
    json_decref(obj);
    errno = werr;
    return ret;
}

static char *errorf(const char *what, const char *path, int errnum)
{
    return gw_strf("spill file %s: %s: %s", path, what, strerror(errnum));
}

int gw_metering_spill_write(gw_metering_spill_t *s, const gw_metering_batch_t *head, const char *instance_id, size_t *written,
                            size_t *skipped, char **err)
{
    /* Records loaded from the file are pending too, so the file is replaced
     * (atomically, through a temporary file of this process: the lock taken
     * at start keeps every other gateway away from this path); one that
     * could not be read is only appended to. */
    int append = s->unreadable, fd, dfd, rc;
    char *tmp = append ? NULL : gw_strf("%s.tmp.%ld", s->path, (long)getpid()), *dir;
    const char *target = append ? s->path : tmp;
    size_t i;

    *written = 0;
    *skipped = 0;
    *err = NULL;
    if ((fd = append ? open(s->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)
                     : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1) {
        *err = errorf("open", target, errno);
        goto Error;
    }
    for (const gw_metering_batch_t *b = head; b != NULL; b = b->next) {
        for (i = 0; i != b->num_records; ++i) {
            const gw_metering_record_t *r = b->records + i;
            if ((rc = write_record(fd, r, instance_id)) == -1) {
                *err = errorf("write", target, errno);
                goto Error;
            }
            if (rc == 0) {
                ++*written;
                continue;
            }
            /* one record that cannot be encoded costs that record only */
            fprintf(stderr,
                    LOG_PREFIX "%s: cannot write the record of sandbox %s (seq %llu, %llu bytes out) as JSON: skipped, lost\n",
                    s->path, r->sandbox, (unsigned long long)r->seq, (unsigned long long)r->egress);
            ++*skipped;
        }
    }
    if (fsync(fd) != 0) {
        *err = errorf("fsync", target, errno);
        goto Error;
    }
    close(fd);
    fd = -1;
    if (!append) {
        /* the lines of the old file that could not be read stay for a person */
        if (s->malformed_lines)
            set_aside(s);
        if (rename(tmp, s->path) != 0) {
            *err = errorf("rename", s->path, errno);
            goto Error;
        }
    }
    /* the rename itself must survive a crash */
    dir = h2o_strdup(NULL, s->path, SIZE_MAX).base;
    if ((dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(tmp);
    return 0;

Error:
    if (fd != -1)
        close(fd);
    if (tmp != NULL)
        unlink(tmp);
    free(tmp);
    return -1;
}
