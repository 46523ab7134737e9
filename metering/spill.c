/*
 * The journal's lock (metering/spill.h), the records of its entries and of
 * spill files of version 1 (JSON objects), and setting a file aside for a
 * person to look at.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
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

int gw_metering_record_from_json(json_t *obj, int sealed, gw_metering_record_t *out, char *executed_on, const char **err)
{
    json_t *v;
    const char *s;
    size_t slen, i;

    memset(out, 0, sizeof(*out));
    if (executed_on != NULL)
        executed_on[0] = '\0';
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
    if (!sealed) {
        /* counts not sealed yet: no gateway (this instance's) and no seq */
        if (get_uint(obj, "egress", &out->egress) != 0 || get_uint(obj, "ingress", &out->ingress) != 0 ||
            get_uint(obj, "from_ms", &out->from_ms) != 0 || get_uint(obj, "to_ms", &out->to_ms) != 0) {
            *err = "egress, ingress, from_ms, to_ms: expected integers from 0";
            goto Error;
        }
        return 0;
    }
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
        if (executed_on != NULL)
            memcpy(executed_on, s, slen + 1);
    }
    return 0;

Error:
    gw_metering_record_dispose(out);
    return -1;
}

int gw_metering_parse_spill_line(const char *line, size_t len, gw_metering_record_t *out, char *executed_on, const char **err)
{
    json_error_t jerr;
    json_t *obj;
    int ret;

    memset(out, 0, sizeof(*out));
    if ((obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
        *err = "not JSON";
        return -1;
    }
    ret = gw_metering_record_from_json(obj, 1, out, executed_on, err);
    json_decref(obj);
    return ret;
}

char *gw_metering_spill_set_aside(const char *path, const char *why)
{
    char *aside = gw_strf("%s.%s-%lld", path, why, (long long)time(NULL));

    if (rename(path, aside) == 0) {
        fprintf(stderr, LOG_PREFIX "%s: kept as %s\n", path, aside);
        return aside;
    }
    if (errno != ENOENT)
        fprintf(stderr, LOG_PREFIX "%s: could not be kept under another name: %s\n", path, strerror(errno));
    free(aside);
    return NULL;
}
