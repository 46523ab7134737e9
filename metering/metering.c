/*
 * Metering: per-worker byte counts (gw_meter_t, no lock), the process-wide
 * queue of batches (gw_metering_t, one mutex), the flusher that writes them
 * with MULTI/EXEC on worker 0's loop, the blocking final flush at exit, and
 * the spill file (JSON lines) for what Redis could not take.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <hiredis/hiredis.h>
#include "metering/metering.h"

#define INITIAL_BUCKETS 64
#define GATEWAY_NAME_MAX 128
#define LOG_PREFIX "lizard-gateway: metering: "

/* --- a small hash table of records keyed by sandbox id ------------------ */

typedef struct st_entry_t {
    struct st_entry_t *next;
    gw_metering_record_t rec;
    uint64_t last_ms; /* meter: last route or bytes seen */
} entry_t;

typedef struct st_table_t {
    entry_t **buckets;
    size_t num_buckets; /* a power of two; 0 until the first insert */
    size_t count;
} table_t;

static uint64_t hash_id(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (; *s != '\0'; ++s)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void record_dispose(gw_metering_record_t *r)
{
    free(r->project);
    free(r->gateway);
    r->project = NULL;
    r->gateway = NULL;
}

static int has_bytes(const gw_metering_record_t *r)
{
    return r->egress != 0 || r->ingress != 0;
}

/* project NULL: any project */
static entry_t *table_find(const table_t *t, const char *id, const char *project)
{
    entry_t *e;

    if (t->num_buckets == 0)
        return NULL;
    for (e = t->buckets[hash_id(id) & (t->num_buckets - 1)]; e != NULL; e = e->next)
        if (strcmp(e->rec.sandbox, id) == 0 && (project == NULL || strcmp(e->rec.project, project) == 0))
            return e;
    return NULL;
}

static int table_grow(table_t *t)
{
    size_t n = t->num_buckets == 0 ? INITIAL_BUCKETS : t->num_buckets * 2, i;
    entry_t **buckets = calloc(n, sizeof(*buckets));

    if (buckets == NULL)
        return -1;
    for (i = 0; i != t->num_buckets; ++i) {
        entry_t *e, *next;
        for (e = t->buckets[i]; e != NULL; e = next) {
            next = e->next;
            size_t b = hash_id(e->rec.sandbox) & (n - 1);
            e->next = buckets[b];
            buckets[b] = e;
        }
    }
    free(t->buckets);
    t->buckets = buckets;
    t->num_buckets = n;
    return 0;
}

/* Takes ownership of `project` (malloc'd) on success. NULL on OOM. */
static entry_t *table_insert(table_t *t, const char *id, char *project)
{
    entry_t *e;
    size_t b;

    if (t->count >= t->num_buckets && table_grow(t) != 0 && t->num_buckets == 0)
        return NULL; /* a failed grow only lengthens the chains */
    if ((e = calloc(1, sizeof(*e))) == NULL)
        return NULL;
    snprintf(e->rec.sandbox, sizeof(e->rec.sandbox), "%s", id);
    e->rec.project = project;
    b = hash_id(e->rec.sandbox) & (t->num_buckets - 1);
    e->next = t->buckets[b];
    t->buckets[b] = e;
    ++t->count;
    return e;
}

/* Removes (and frees, strings too) the entries for which pred is true. */
static void table_remove_if(table_t *t, int (*pred)(const entry_t *, const void *), const void *arg)
{
    size_t i;

    for (i = 0; i != t->num_buckets; ++i) {
        entry_t **slot = &t->buckets[i];
        while (*slot != NULL) {
            entry_t *e = *slot;
            if (pred(e, arg)) {
                *slot = e->next;
                record_dispose(&e->rec);
                free(e);
                --t->count;
            } else {
                slot = &e->next;
            }
        }
    }
}

static int always(const entry_t *e, const void *arg)
{
    (void)e;
    (void)arg;
    return 1;
}

static void table_dispose(table_t *t)
{
    table_remove_if(t, always, NULL);
    free(t->buckets);
    memset(t, 0, sizeof(*t));
}

/* Length of the well-formed UTF-8 sequence at s (avail bytes there), 0 when
 * there is none: the rules jansson checks (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). NUL counts as ill-formed: the strings
 * here end at it. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    uint32_t cp;
    size_t n, i;

    if (s[0] >= 0x01 && s[0] <= 0x7f)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n > avail)
        return 0;
    for (i = 1; i != n; ++i) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Copies a project id as it can be written everywhere (JSON in the spill
 * file, a Redis field): at most GW_METERING_PROJECT_MAX bytes, cut between
 * characters, each byte that is not part of well-formed UTF-8 (or is NUL)
 * replaced by '?'. out holds GW_METERING_PROJECT_MAX + 1 bytes; returns the
 * length written before its NUL. */
static size_t clean_project(const char *s, size_t len, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0, n;

    while (i != len) {
        if ((n = utf8_len(u + i, len - i)) == 0) {
            if (o + 1 > GW_METERING_PROJECT_MAX)
                break;
            out[o++] = '?';
            ++i;
            continue;
        }
        if (o + n > GW_METERING_PROJECT_MAX)
            break; /* a whole character or none */
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return o;
}

static char *dup_project(const char *s, size_t len)
{
    char clean[GW_METERING_PROJECT_MAX + 1];

    clean_project(s, len, clean);
    return strdup(clean);
}

/* A malloc'd string; NULL on OOM. */
static char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strf(const char *fmt, ...)
{
    va_list args;
    char *p;
    int n;

    va_start(args, fmt);
    n = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (n < 0 || (p = malloc((size_t)n + 1)) == NULL)
        return NULL;
    va_start(args, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, args);
    va_end(args);
    return p;
}

/* --- the per-worker meter ------------------------------------------------ */

struct st_gw_meter_t {
    table_t table;
};

gw_meter_t *gw_meter_new(void)
{
    return calloc(1, sizeof(gw_meter_t));
}

void gw_meter_free(gw_meter_t *m)
{
    if (m == NULL)
        return;
    table_dispose(&m->table);
    free(m);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int is_idle_before(const entry_t *e, const void *arg)
{
    return !has_bytes(&e->rec) && e->last_ms <= *(const uint64_t *)arg;
}

/* At the cap: forgets the quarter of the idle sandboxes seen longest ago
 * (amortised O(log n) per insert). Entries with counts are kept: if all are
 * busy the table goes past the cap rather than lose bytes. */
static void forget_idle(gw_meter_t *m)
{
    uint64_t *ages, threshold;
    size_t i, n = 0;

    if ((ages = malloc(m->table.count * sizeof(*ages))) == NULL)
        return;
    for (i = 0; i != m->table.num_buckets; ++i)
        for (entry_t *e = m->table.buckets[i]; e != NULL; e = e->next)
            if (!has_bytes(&e->rec))
                ages[n++] = e->last_ms;
    if (n != 0) {
        qsort(ages, n, sizeof(*ages), cmp_u64);
        threshold = ages[n / 4];
        table_remove_if(&m->table, is_idle_before, &threshold);
    }
    free(ages);
}

static entry_t *meter_entry(gw_meter_t *m, const char *sandbox_id)
{
    entry_t *e;
    char *project;

    if ((e = table_find(&m->table, sandbox_id, NULL)) != NULL)
        return e;
    if (m->table.count >= GW_METER_MAX_SANDBOXES)
        forget_idle(m);
    if ((project = dup_project("", 0)) == NULL)
        return NULL;
    if ((e = table_insert(&m->table, sandbox_id, project)) == NULL)
        free(project);
    return e;
}

void gw_meter_set_project(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t now_ms)
{
    char clean[GW_METERING_PROJECT_MAX + 1], *copy;
    entry_t *e;

    if ((e = meter_entry(m, sandbox_id)) == NULL)
        return;
    e->last_ms = now_ms;
    clean_project(project.base, project.len, clean);
    if (strcmp(e->rec.project, clean) == 0)
        return;
    /* a new project (or the first one): counts not yet handed over go with it */
    if ((copy = strdup(clean)) == NULL)
        return;
    free(e->rec.project);
    e->rec.project = copy;
}

void gw_meter_add(gw_meter_t *m, const char *sandbox_id, uint64_t egress, uint64_t ingress, uint64_t now_ms)
{
    entry_t *e;

    if ((egress == 0 && ingress == 0) || (e = meter_entry(m, sandbox_id)) == NULL)
        return;
    if (!has_bytes(&e->rec))
        e->rec.from_ms = now_ms;
    e->rec.egress += egress;
    e->rec.ingress += ingress;
    e->last_ms = now_ms;
}

size_t gw_meter_num_sandboxes(const gw_meter_t *m)
{
    return m->table.count;
}

/* --- the process-wide queue ---------------------------------------------- */

struct st_gw_metering_t {
    pthread_mutex_t mutex;
    char *prefix;
    char *instance_id;
    char *spill_file; /* NULL: none */
    int lock_fd;      /* holds the flock on "<spill_file>.lock" for the life of m; -1: none */
    /* under mutex */
    table_t open; /* not sealed yet: no seq; one record per (sandbox, project) */
    gw_metering_batch_t *head, *tail;
    size_t num_batches;
    int head_in_flight;
    size_t spill_batches;      /* sealed batches loaded from the spill file, not yet written */
    int spill_unreadable;      /* the file exists but could not be read: only ever append to it */
    int spill_malformed_lines; /* the file has lines that were skipped: set it aside, never delete it */
    uint64_t next_seq;
    gw_metering_stats_t stats;
    /* the flusher's, on its thread only */
    gw_redis_t *redis;
    gw_metering_batch_t *sending; /* from MULTI until EXEC and, with replicas, WAIT said it is written */
    int failing;                  /* the last attempt failed: log only when that changes */
    int waiting_replica;          /* the last WAIT saw no replica acknowledge: log only when that changes */
};

static void batch_free(gw_metering_batch_t *b)
{
    size_t i;

    if (b == NULL)
        return;
    for (i = 0; i != b->num_records; ++i)
        record_dispose(b->records + i);
    free(b->records);
    free(b);
}

static gw_metering_batch_t *batch_new(size_t capacity)
{
    gw_metering_batch_t *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return NULL;
    if ((b->records = calloc(capacity, sizeof(*b->records))) == NULL) {
        free(b);
        return NULL;
    }
    return b;
}

/* under mutex */
static void append_batch(gw_metering_t *m, gw_metering_batch_t *b)
{
    if (m->tail != NULL)
        m->tail->next = b;
    else
        m->head = b;
    m->tail = b;
    ++m->num_batches;
}

static int check_sandbox_id(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || len > GW_SANDBOX_ID_MAX)
        return -1;
    for (i = 0; i != len; ++i)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return -1;
    return 0;
}

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
    if (!json_is_string(v) || check_sandbox_id(json_string_value(v), json_string_length(v)) != 0) {
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
    if ((out->project = dup_project(json_string_value(v), json_string_length(v))) == NULL) {
        *err = "out of memory";
        goto Error;
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
    if ((out->gateway = strdup(s)) == NULL) {
        *err = "out of memory";
        goto Error;
    }
    if (get_uint(obj, "egress", &out->egress) != 0 || get_uint(obj, "ingress", &out->ingress) != 0 ||
        get_uint(obj, "from_ms", &out->from_ms) != 0 || get_uint(obj, "to_ms", &out->to_ms) != 0 ||
        get_uint(obj, "seq", &out->seq) != 0 || out->seq == 0) {
        *err = "egress, ingress, from_ms, to_ms, seq: expected integers from 0 (seq from 1)";
        goto Error;
    }
    json_decref(obj);
    return 0;

Error:
    record_dispose(out);
    json_decref(obj);
    return -1;
}

static void report_malformed(gw_metering_t *m, size_t lineno, const char *why)
{
    fprintf(stderr, LOG_PREFIX "%s:%zu: skipping a malformed spill line: %s\n", m->spill_file, lineno, why);
    ++m->stats.spill_malformed;
    m->spill_malformed_lines = 1;
}

/* The spill file had lines that could not be read: rather than removing
 * (or replacing) it, keep it under a name of its own for a person to look
 * at. Under mutex, or before any thread shares m. */
static void set_aside_spill(gw_metering_t *m)
{
    char *aside = strf("%s.malformed-%lld", m->spill_file, (long long)time(NULL));

    m->spill_malformed_lines = 0;
    if (aside != NULL && rename(m->spill_file, aside) == 0)
        fprintf(stderr, LOG_PREFIX "%s: it had malformed lines: kept as %s\n", m->spill_file, aside);
    else
        fprintf(stderr, LOG_PREFIX "%s: it had malformed lines but could not be kept under another name: %s\n", m->spill_file,
                aside != NULL ? strerror(errno) : "out of memory");
    free(aside);
}

/* Reads the spill file left by a previous run into sealed batches, first in
 * the queue. Returns the highest seq read (0: none). Called before any
 * thread shares m. */
static uint64_t load_spill(gw_metering_t *m)
{
    gw_metering_batch_t *b = NULL;
    gw_metering_record_t rec;
    uint64_t max_seq = 0;
    size_t lineno = 0, loaded = 0, cap = 0, len;
    char *line = NULL;
    const char *why;
    ssize_t got;
    FILE *f;

    if (m->spill_file == NULL)
        return 0;
    if ((f = fopen(m->spill_file, "re")) == NULL) {
        if (errno != ENOENT) {
            fprintf(stderr, LOG_PREFIX "%s: cannot read the spill file, leaving it as is: %s\n", m->spill_file, strerror(errno));
            m->spill_unreadable = 1;
        }
        return 0;
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
            report_malformed(m, lineno, "longer than GW_METERING_SPILL_LINE_MAX");
            continue;
        }
        if (memchr(line, '\0', len) != NULL) {
            report_malformed(m, lineno, "contains a NUL byte");
            continue;
        }
        if (gw_metering_parse_spill_line(line, len, &rec, &why) != 0) {
            report_malformed(m, lineno, why);
            continue;
        }
        if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS) {
            if ((b = batch_new(GW_METERING_MAX_BATCH_RECORDS)) == NULL) {
                record_dispose(&rec);
                fprintf(stderr, LOG_PREFIX "%s: out of memory reading the spill file, leaving it as is\n", m->spill_file);
                m->spill_unreadable = 1;
                break;
            }
            b->from_spill = 1;
            append_batch(m, b);
            ++m->spill_batches;
        }
        b->records[b->num_records++] = rec;
        if (rec.seq > max_seq)
            max_seq = rec.seq;
        ++loaded;
    }
    if (ferror(f)) {
        fprintf(stderr, LOG_PREFIX "%s: error reading the spill file, leaving it as is\n", m->spill_file);
        m->spill_unreadable = 1;
    }
    free(line);
    fclose(f);
    m->stats.spill_replayed += loaded;
    m->stats.pending_records += loaded;
    if (loaded != 0) {
        fprintf(stderr, LOG_PREFIX "%s: %zu records from the previous run will be written first\n", m->spill_file, loaded);
    } else if (!m->spill_unreadable) {
        /* empty, or nothing in it could be read (each line reported above) */
        if (m->spill_malformed_lines)
            set_aside_spill(m);
        else
            unlink(m->spill_file);
    }
    return max_seq;
}

/* Takes the lock that makes m the only user of its spill file (and of the
 * temporary files next to it) on this host, held until gw_metering_free.
 * Returns 0, or -1 with *err (malloc'd). */
/* The lock file says who holds it: "instance <instance_id>\n". */
#define LOCK_OWNER_PREFIX "instance "

int gw_metering_check_spill(const char *spill_file, const char *instance_id, char **err)
{
    char *path, owner[GATEWAY_NAME_MAX + sizeof(LOCK_OWNER_PREFIX) + 2];
    int fd, ret = 0;

    *err = NULL;
    if (spill_file == NULL)
        return 0;
    if ((path = strf("%s.lock", spill_file)) == NULL) {
        *err = strdup("metering: out of memory");
        return -1;
    }
    /* read-only and never created: a check leaves nothing behind */
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
            ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
            size_t plen = sizeof(LOCK_OWNER_PREFIX) - 1, ilen = strlen(instance_id);
            /* the running gateway of this very instance is not a second one (checking a config
             * before a restart); another instance on the same file is */
            if (!(n > 0 && (size_t)n == plen + ilen + 1 && memcmp(owner, LOCK_OWNER_PREFIX, plen) == 0 &&
                  memcmp(owner + plen, instance_id, ilen) == 0 && owner[n - 1] == '\n')) {
                *err = strf("metering.spill_file %s is in use by another lizard-gateway; give each instance its own spill_file "
                            "(and instance_id)",
                            spill_file);
                ret = -1;
            }
        }
        close(fd); /* releases a lock we took */
    }
    free(path);
    if (ret != 0 && *err == NULL)
        *err = strdup("metering: out of memory");
    return ret;
}

static int lock_spill(gw_metering_t *m, char **err)
{
    char *path;
    int fd = -1;

    *err = NULL;
    if ((path = strf("%s.lock", m->spill_file)) == NULL)
        goto Error;
    if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) == -1) {
        *err = strf("metering.spill_file %s: cannot open its lock file %s: %s", m->spill_file, path, strerror(errno));
        goto Error;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            *err = strf("metering.spill_file %s is in use by another lizard-gateway; give each instance its own spill_file (and "
                        "instance_id)",
                        m->spill_file);
        else
            *err = strf("metering.spill_file %s: cannot lock %s: %s", m->spill_file, path, strerror(errno));
        goto Error;
    }
    free(path);
    m->lock_fd = fd;
    {
        /* for --check (gw_metering_check_spill); the lock itself is what keeps a second process out */
        char *owner = strf(LOCK_OWNER_PREFIX "%s\n", m->instance_id);
        if (owner != NULL && ftruncate(fd, 0) == 0 && pwrite(fd, owner, strlen(owner), 0) < 0)
            fprintf(stderr, LOG_PREFIX "cannot write the owner of %s.lock: %s\n", m->spill_file, strerror(errno));
        free(owner);
    }
    return 0;

Error:
    if (*err == NULL)
        *err = strdup("metering: out of memory");
    if (fd != -1)
        close(fd);
    free(path);
    return -1;
}

gw_metering_t *gw_metering_new(const gw_metering_conf_t *conf, uint64_t now_ms, char **err)
{
    gw_metering_t *m;
    uint64_t max_seq;

    *err = NULL;
    if ((m = calloc(1, sizeof(*m))) == NULL)
        goto NoMem;
    pthread_mutex_init(&m->mutex, NULL);
    m->lock_fd = -1;
    if ((m->prefix = strdup(conf->prefix)) == NULL || (m->instance_id = strdup(conf->instance_id)) == NULL ||
        (conf->spill_file != NULL && (m->spill_file = strdup(conf->spill_file)) == NULL))
        goto NoMem;
    /* before reading the file: another process may be writing it */
    if (m->spill_file != NULL && lock_spill(m, err) != 0)
        goto Error;
    max_seq = load_spill(m);
    /* Above every seq of an earlier run without persisting a counter: an
     * earlier run started before now_ms and took fewer than
     * GW_METERING_SEQ_PER_MS values per ms it ran; and above what it spilled,
     * should the clock have stepped back. */
    m->next_seq = now_ms * GW_METERING_SEQ_PER_MS;
    if (m->next_seq <= max_seq)
        m->next_seq = max_seq + 1;
    return m;

NoMem:
    *err = strdup("metering: out of memory");
Error:
    gw_metering_free(m);
    return NULL;
}

void gw_metering_free(gw_metering_t *m)
{
    if (m == NULL)
        return;
    while (m->head != NULL) {
        gw_metering_batch_t *b = m->head;
        m->head = b->next;
        batch_free(b);
    }
    table_dispose(&m->open);
    if (m->lock_fd != -1)
        close(m->lock_fd); /* the lock goes with it; the lock file stays, or a newcomer could lock a removed one */
    free(m->prefix);
    free(m->instance_id);
    free(m->spill_file);
    pthread_mutex_destroy(&m->mutex);
    free(m);
}

void gw_metering_submit(gw_metering_t *m, gw_meter_t *meter, uint64_t now_ms)
{
    size_t i;

    pthread_mutex_lock(&m->mutex);
    for (i = 0; i != meter->table.num_buckets; ++i) {
        for (entry_t *e = meter->table.buckets[i]; e != NULL; e = e->next) {
            gw_metering_record_t *r = &e->rec;
            entry_t *o;
            if (!has_bytes(r))
                continue;
            if ((o = table_find(&m->open, r->sandbox, r->project)) == NULL) {
                char *project = strdup(r->project);
                if (project == NULL || (o = table_insert(&m->open, r->sandbox, project)) == NULL) {
                    free(project);
                    continue; /* out of memory: the counts stay in the meter for the next flush */
                }
                o->rec.from_ms = r->from_ms;
                ++m->stats.pending_records;
            } else if (r->from_ms < o->rec.from_ms) {
                o->rec.from_ms = r->from_ms;
            }
            o->rec.egress += r->egress;
            o->rec.ingress += r->ingress;
            if (now_ms > o->rec.to_ms)
                o->rec.to_ms = now_ms;
            r->egress = 0;
            r->ingress = 0;
        }
    }
    pthread_mutex_unlock(&m->mutex);
}

size_t gw_metering_seal(gw_metering_t *m, int force)
{
    gw_metering_batch_t *b = NULL;
    size_t i, sealed = 0;

    pthread_mutex_lock(&m->mutex);
    if (m->open.count == 0 || (!force && m->num_batches >= GW_METERING_MAX_BATCHES))
        goto Exit; /* at the cap the open batch keeps merging: one record per sandbox, whatever the outage */
    for (i = 0; i != m->open.num_buckets; ++i) {
        entry_t *e, *next;
        for (e = m->open.buckets[i]; e != NULL; e = next) {
            next = e->next;
            if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS) {
                size_t left = m->open.count;
                if ((b = batch_new(left < GW_METERING_MAX_BATCH_RECORDS ? left : GW_METERING_MAX_BATCH_RECORDS)) == NULL)
                    goto Exit; /* out of memory: what is left stays open */
                append_batch(m, b);
                ++sealed;
            }
            /* the record (and its strings) moves into the batch */
            b->records[b->num_records] = e->rec;
            b->records[b->num_records++].seq = m->next_seq++;
            m->open.buckets[i] = next;
            --m->open.count;
            free(e);
        }
    }
Exit:
    pthread_mutex_unlock(&m->mutex);
    return sealed;
}

gw_metering_batch_t *gw_metering_next_batch(gw_metering_t *m)
{
    gw_metering_batch_t *b = NULL;

    pthread_mutex_lock(&m->mutex);
    if (m->head != NULL && !m->head_in_flight) {
        m->head_in_flight = 1;
        b = m->head;
    }
    pthread_mutex_unlock(&m->mutex);
    return b;
}

void gw_metering_batch_done(gw_metering_t *m, gw_metering_batch_t *b, int ok)
{
    int remove_spill = 0;

    pthread_mutex_lock(&m->mutex);
    /* b == m->head: only the head is ever handed out */
    m->head_in_flight = 0;
    if (!ok) {
        ++m->stats.flush_failures;
        pthread_mutex_unlock(&m->mutex);
        return;
    }
    if ((m->head = b->next) == NULL)
        m->tail = NULL;
    --m->num_batches;
    m->stats.pending_records -= b->num_records;
    m->stats.records_written += b->num_records;
    if (b->from_spill && --m->spill_batches == 0 && !m->spill_unreadable) {
        /* every record replayed from it is in Redis now (once, metadata only) */
        if (m->spill_malformed_lines)
            set_aside_spill(m);
        else
            remove_spill = 1;
    }
    pthread_mutex_unlock(&m->mutex);

    if (remove_spill && unlink(m->spill_file) == 0)
        fprintf(stderr, LOG_PREFIX "%s: replayed, removed\n", m->spill_file);
    batch_free(b);
}

void gw_metering_get_stats(gw_metering_t *m, gw_metering_stats_t *out)
{
    pthread_mutex_lock(&m->mutex);
    *out = m->stats;
    out->pending_batches = m->num_batches;
    pthread_mutex_unlock(&m->mutex);
}

/* --- the commands -------------------------------------------------------- */

#define CMD_MAX_ARGS 19

typedef struct st_cmd_t {
    int argc;
    const char *argv[CMD_MAX_ARGS];
    size_t argvlen[CMD_MAX_ARGS];
    char key[64 + sizeof("egress:{}") + GW_SANDBOX_ID_MAX];
    char num[6][24];
} cmd_t;

static void cmd_arg(cmd_t *c, const char *s)
{
    c->argv[c->argc] = s;
    c->argvlen[c->argc++] = strlen(s);
}

static const char *cmd_num(cmd_t *c, size_t slot, uint64_t v)
{
    snprintf(c->num[slot], sizeof(c->num[slot]), "%llu", (unsigned long long)v);
    return c->num[slot];
}

static void cmd_xadd(cmd_t *c, const gw_metering_t *m, const gw_metering_record_t *r)
{
    c->argc = 0;
    snprintf(c->key, sizeof(c->key), "%segress", m->prefix);
    cmd_arg(c, "XADD");
    cmd_arg(c, c->key);
    cmd_arg(c, "*");
    cmd_arg(c, "sandbox");
    cmd_arg(c, r->sandbox);
    cmd_arg(c, "project");
    cmd_arg(c, r->project);
    cmd_arg(c, "egress");
    cmd_arg(c, cmd_num(c, 0, r->egress));
    cmd_arg(c, "ingress");
    cmd_arg(c, cmd_num(c, 1, r->ingress));
    cmd_arg(c, "from_ms");
    cmd_arg(c, cmd_num(c, 2, r->from_ms));
    cmd_arg(c, "to_ms");
    cmd_arg(c, cmd_num(c, 3, r->to_ms));
    cmd_arg(c, "gateway");
    cmd_arg(c, r->gateway != NULL ? r->gateway : m->instance_id);
    cmd_arg(c, "seq");
    cmd_arg(c, cmd_num(c, 4, r->seq));
}

static void cmd_incrby(cmd_t *c, const gw_metering_t *m, const gw_metering_record_t *r)
{
    c->argc = 0;
    snprintf(c->key, sizeof(c->key), "%segress:{%s}", m->prefix, r->sandbox);
    cmd_arg(c, "INCRBY");
    cmd_arg(c, c->key);
    cmd_arg(c, cmd_num(c, 5, r->egress));
}

/* Errors of single commands inside an EXEC that ran (say INCRBY on a key
 * that is not a number) are reported, not retried: a retry would fail the
 * same way and hold up every later batch. */
static void report_exec_errors(const redisReply *reply)
{
    size_t i, n = 0;
    const char *first = NULL;

    for (i = 0; i != reply->elements; ++i) {
        if (reply->element[i]->type == REDIS_REPLY_ERROR) {
            if (first == NULL)
                first = reply->element[i]->str;
            ++n;
        }
    }
    if (n != 0)
        fprintf(stderr, LOG_PREFIX "%zu commands of a written batch failed in Redis: %s\n", n, first);
}

/* --- the flusher (worker 0's loop) --------------------------------------- */

static void send_next(gw_metering_t *m);

static void on_queued(void *data, const char *err, redisReply *reply)
{
    /* MULTI's +OK and each +QUEUED; a refused command makes EXEC fail, which
     * is where the batch's fate is decided */
    (void)data;
    (void)err;
    (void)reply;
}

static void set_failing(gw_metering_t *m, int failing, const char *why, size_t records)
{
    if (failing && !m->failing)
        fprintf(stderr, LOG_PREFIX "writing to Redis failed (%s); %zu records are kept and retried\n", why, records);
    else if (!failing && m->failing)
        fprintf(stderr, LOG_PREFIX "writing to Redis again\n");
    m->failing = failing;
}

/* The batch in flight is settled: written (ok) or to be sent again. */
static void sending_done(gw_metering_t *m, int ok, const char *err)
{
    gw_metering_batch_t *b = m->sending;

    m->sending = NULL;
    if (m->redis != NULL) /* not while the flusher stops */
        set_failing(m, !ok, err != NULL ? err : "transaction aborted", b->num_records);
    gw_metering_batch_done(m, b, ok);
    if (ok && m->redis != NULL)
        send_next(m); /* a backlog after an outage drains without waiting for ticks */
}

/* Replicas of the primary that ROLE lists (connected and in sync), or -1. */
static long role_replicas(const redisReply *reply)
{
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || reply->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(reply->element[0]->str, "master") != 0 || reply->element[2]->type != REDIS_REPLY_ARRAY)
        return -1;
    return (long)reply->element[2]->elements;
}

static void check_replicas(gw_metering_t *m);

static void on_wait(void *data, const char *err, redisReply *reply)
{
    gw_metering_t *m = data;

    if (err == NULL && reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer >= 1) {
        if (m->waiting_replica)
            fprintf(stderr, LOG_PREFIX "a replica acknowledged the batch\n");
        m->waiting_replica = 0;
        sending_done(m, 1, NULL);
        return;
    }
    if (err != NULL || m->redis == NULL || !gw_redis_is_ready(m->redis)) {
        /* the primary went away before a replica had the batch: it is sent again (same seq) to
         * whichever server is primary next */
        sending_done(m, 0, err != NULL ? err : "disconnected before a replica acknowledged");
        return;
    }
    if (!m->waiting_replica)
        fprintf(stderr, LOG_PREFIX "no replica acknowledged the last batch within %d ms; waiting\n", GW_METERING_WAIT_MS);
    m->waiting_replica = 1;
    check_replicas(m); /* the replicas may be gone for good: then the primary's copy is all there is */
}

static void on_role(void *data, const char *err, redisReply *reply)
{
    gw_metering_t *m = data;
    long replicas = err == NULL ? role_replicas(reply) : -1;
    char timeout[24];
    const char *argv[] = {"WAIT", "1", timeout};
    size_t argvlen[] = {4, 1, 0};

    if (replicas < 0) {
        sending_done(m, 0, err != NULL ? err : "the server is not a primary any more");
        return;
    }
    if (replicas == 0) {
        /* no replica to fail over to: the primary's copy is the copy */
        m->waiting_replica = 0;
        sending_done(m, 1, NULL);
        return;
    }
    argvlen[2] = (size_t)snprintf(timeout, sizeof(timeout), "%d", GW_METERING_WAIT_MS);
    if (m->redis == NULL ||
        gw_redis_command_argv(m->redis, GW_METERING_WAIT_MS + GW_METERING_EXEC_TIMEOUT_MS, on_wait, m, 3, argv, argvlen) == NULL)
        sending_done(m, 0, "disconnected before a replica acknowledged");
}

/* After EXEC: with replicas, the batch is written once one of them has it
 * (WAIT 1): a primary that dies right after EXEC must not take it along. */
static void check_replicas(gw_metering_t *m)
{
    static const char *role[] = {"ROLE"};
    static const size_t role_len[] = {4};

    if (m->redis == NULL || gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_role, m, 1, role, role_len) == NULL)
        sending_done(m, 0, "disconnected before a replica acknowledged");
}

static void on_exec(void *data, const char *err, redisReply *reply)
{
    gw_metering_t *m = data;
    int ok = err == NULL && reply != NULL && reply->type == REDIS_REPLY_ARRAY;

    if (!ok) {
        sending_done(m, 0, err);
        return;
    }
    report_exec_errors(reply);
    check_replicas(m);
}

static void on_redis_state(void *data, int connected)
{
    gw_metering_t *m = data;

    if (connected)
        send_next(m);
}

/* Queues MULTI, the batch and EXEC on the connection within one call, so no
 * other command can land inside the transaction. Returns 0 or -1. */
static int send_batch(gw_metering_t *m, gw_metering_batch_t *b)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *discard[] = {"DISCARD"};
    static const size_t multi_len[] = {5}, exec_len[] = {4}, discard_len[] = {7};
    cmd_t cmd;
    size_t i;

    if (gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, 1, multi, multi_len) == NULL)
        return -1;
    for (i = 0; i != b->num_records; ++i) {
        cmd_xadd(&cmd, m, b->records + i);
        if (gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, cmd.argc, cmd.argv, cmd.argvlen) == NULL)
            goto Discard;
        cmd_incrby(&cmd, m, b->records + i);
        if (gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, cmd.argc, cmd.argv, cmd.argvlen) == NULL)
            goto Discard;
    }
    m->sending = b;
    if (gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_exec, m, 1, exec, exec_len) == NULL) {
        m->sending = NULL;
        goto Discard;
    }
    return 0;

Discard:
    gw_redis_command_argv(m->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, 1, discard, discard_len);
    return -1;
}

static void send_next(gw_metering_t *m)
{
    gw_metering_batch_t *b;

    if (m->redis == NULL || m->sending != NULL || !gw_redis_is_ready(m->redis))
        return;
    if ((b = gw_metering_next_batch(m)) == NULL)
        return;
    if (send_batch(m, b) != 0) {
        set_failing(m, 1, "could not queue the commands", b->num_records);
        gw_metering_batch_done(m, b, 0);
    }
}

int gw_metering_start_flusher(gw_metering_t *m, h2o_loop_t *loop, const gw_redis_conf_t *conf)
{
    if ((m->redis = gw_redis_new(loop, conf)) == NULL)
        return -1;
    gw_redis_set_state_cb(m->redis, on_redis_state, m);
    return 0;
}

void gw_metering_flush(gw_metering_t *m)
{
    gw_metering_seal(m, 0);
    send_next(m);
}

int gw_metering_in_flight(const gw_metering_t *m)
{
    return m->sending != NULL;
}

void gw_metering_stop_flusher(gw_metering_t *m)
{
    gw_redis_t *r = m->redis;

    if (r == NULL)
        return;
    m->redis = NULL;
    /* a batch in flight gets "disconnected" now and stays first in the queue */
    gw_redis_free(r);
}

/* --- the final flush (no loop running) ----------------------------------- */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct timeval remaining_tv(uint64_t deadline)
{
    uint64_t now = mono_ms(), left = deadline > now ? deadline - now : 1;
    struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
    return tv;
}

/* A blocking connection with AUTH, connected within the deadline. NULL with
 * *why (static) on failure. */
static redisContext *connect_blocking(const gw_netaddr_t *addr, const char *password, uint64_t deadline, const char **why)
{
    redisContext *c = NULL;
    redisReply *reply;
    int fd, flags, soerr = 0;
    socklen_t soerrlen = sizeof(soerr);

    if ((fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1) {
        *why = strerror(errno);
        return NULL;
    }
    if (connect(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        uint64_t now = mono_ms();
        if (errno != EINPROGRESS && errno != EAGAIN) {
            *why = strerror(errno);
            goto Error;
        }
        if (poll(&pfd, 1, deadline > now ? (int)(deadline - now) : 0) != 1) {
            *why = "connect timed out";
            goto Error;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerrlen) != 0 || soerr != 0) {
            *why = strerror(soerr != 0 ? soerr : errno);
            goto Error;
        }
    }
    flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if ((c = redisConnectFd(fd)) == NULL) {
        *why = "out of memory";
        goto Error;
    }
    fd = -1; /* the context owns it */
    redisSetTimeout(c, remaining_tv(deadline));
    if (password != NULL) {
        const char *argv[] = {"AUTH", password};
        size_t argvlen[] = {4, strlen(password)};
        if ((reply = redisCommandArgv(c, 2, argv, argvlen)) == NULL || reply->type == REDIS_REPLY_ERROR) {
            *why = reply == NULL ? "no answer to AUTH" : "AUTH refused";
            freeReplyObject(reply);
            goto Error;
        }
        freeReplyObject(reply);
    }
    return c;

Error:
    if (fd != -1)
        close(fd);
    if (c != NULL)
        redisFree(c);
    return NULL;
}

static int send_batch_blocking(redisContext *c, const gw_metering_t *m, const gw_metering_batch_t *b, uint64_t deadline,
                               const char **why)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    static const size_t multi_len[] = {5}, exec_len[] = {4};
    size_t i, replies = 2 * b->num_records + 2;
    redisReply *reply = NULL;
    cmd_t cmd;
    int ok = 0;

    redisSetTimeout(c, remaining_tv(deadline));
    redisAppendCommandArgv(c, 1, multi, multi_len);
    for (i = 0; i != b->num_records; ++i) {
        cmd_xadd(&cmd, m, b->records + i);
        redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.argvlen);
        cmd_incrby(&cmd, m, b->records + i);
        redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.argvlen);
    }
    redisAppendCommandArgv(c, 1, exec, exec_len);
    for (i = 0; i != replies; ++i) {
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
            *why = c->errstr[0] != '\0' ? c->errstr : "connection lost";
            return -1;
        }
        if (i == replies - 1) {
            ok = reply->type == REDIS_REPLY_ARRAY;
            if (ok)
                report_exec_errors(reply);
            else
                *why = reply->type == REDIS_REPLY_ERROR ? "transaction aborted" : "unexpected reply to EXEC";
        }
        freeReplyObject(reply);
    }
    return ok ? 0 : -1;
}

/* ROLE then, with replicas, WAIT 1: as the flusher does. 0 when the batch
 * counts as written. */
static int wait_replica_blocking(redisContext *c, uint64_t deadline, const char **why)
{
    static const char *role[] = {"ROLE"};
    static const size_t role_len[] = {4};
    redisReply *reply;
    long replicas;
    char timeout[24];
    uint64_t now = mono_ms();
    const char *argv[] = {"WAIT", "1", timeout};
    size_t argvlen[] = {4, 1, 0};
    int ok;

    redisSetTimeout(c, remaining_tv(deadline));
    if ((reply = redisCommandArgv(c, 1, role, role_len)) == NULL) {
        *why = "no answer to ROLE";
        return -1;
    }
    replicas = role_replicas(reply);
    freeReplyObject(reply);
    if (replicas <= 0) {
        *why = "the server is not a primary any more";
        return replicas == 0 ? 0 : -1;
    }
    argvlen[2] =
        (size_t)snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)(deadline > now + 100 ? deadline - now - 100 : 1));
    if ((reply = redisCommandArgv(c, 3, argv, argvlen)) == NULL) {
        *why = "no answer to WAIT";
        return -1;
    }
    ok = reply->type == REDIS_REPLY_INTEGER && reply->integer >= 1;
    freeReplyObject(reply);
    if (!ok)
        *why = "no replica acknowledged the batch";
    return ok ? 0 : -1;
}

/* Sentinel mode: asks each sentinel in turn for the primary. 0 and *out, or -1 with *why. */
static int ask_sentinels_blocking(const gw_redis_conf_t *conf, uint64_t deadline, gw_netaddr_t *out, const char **why)
{
    size_t i;

    for (i = 0; i != conf->num_sentinels && mono_ms() < deadline; ++i) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", conf->master_name};
        size_t argvlen[] = {8, 23, strlen(conf->master_name)};
        redisContext *c;
        redisReply *reply;
        uint16_t port;
        int ok;

        if ((c = connect_blocking(conf->sentinels + i, conf->sentinel_password, deadline, why)) == NULL)
            continue;
        reply = redisCommandArgv(c, 3, argv, argvlen);
        ok = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
             reply->element[0]->type == REDIS_REPLY_STRING && reply->element[1]->type == REDIS_REPLY_STRING &&
             gw_port_parse(reply->element[1]->str, reply->element[1]->len, &port) == 0 &&
             gw_netaddr_parse_ip(reply->element[0]->str, reply->element[0]->len, port, out) == 0;
        freeReplyObject(reply);
        redisFree(c);
        if (ok)
            return 0;
        *why = "no sentinel named the primary";
    }
    return -1;
}

int gw_metering_final_flush(gw_metering_t *m, const gw_redis_conf_t *conf, uint64_t timeout_ms)
{
    gw_netaddr_t primary = conf->addr;
    uint64_t deadline = mono_ms() + timeout_ms;
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    redisContext *c = NULL;
    const char *why = NULL;
    size_t written = 0;
    uint64_t skipped;
    char *err = NULL;

    gw_metering_seal(m, 1);
    pthread_mutex_lock(&m->mutex);
    /* the flusher's loop is gone: a batch it had in flight is sent again, same seq */
    m->head_in_flight = 0;
    pthread_mutex_unlock(&m->mutex);
    m->sending = NULL;

    pthread_mutex_lock(&m->mutex);
    b = m->head;
    pthread_mutex_unlock(&m->mutex);
    if (b != NULL && (conf->num_sentinels == 0 || ask_sentinels_blocking(conf, deadline, &primary, &why) == 0))
        c = connect_blocking(&primary, conf->password, deadline, &why);
    while (c != NULL && (b = gw_metering_next_batch(m)) != NULL) {
        size_t n = b->num_records;
        /* a batch only counts when, with replicas, one of them has it; ROLE also keeps us off a
         * replica the sentinels named a moment before a failover */
        if (send_batch_blocking(c, m, b, deadline, &why) != 0 || wait_replica_blocking(c, deadline, &why) != 0) {
            gw_metering_batch_done(m, b, 0);
            break;
        }
        gw_metering_batch_done(m, b, 1);
        written += n;
    }
    if (c != NULL)
        redisFree(c);

    gw_metering_get_stats(m, &st);
    if (st.pending_records == 0) {
        if (written != 0)
            fprintf(stderr, LOG_PREFIX "final flush: %zu records written\n", written);
        return 0;
    }
    fprintf(stderr, LOG_PREFIX "final flush: Redis unavailable (%s), %zu records written, spilling %llu to %s\n",
            why != NULL ? why : "?", written, (unsigned long long)st.pending_records,
            m->spill_file != NULL ? m->spill_file : "(none)");
    if (gw_metering_write_spill(m, &err) != 0) {
        fprintf(stderr, LOG_PREFIX "%s; %llu records are lost\n", err, (unsigned long long)st.pending_records);
        free(err);
        return -1;
    }
    skipped = st.spill_malformed;
    gw_metering_get_stats(m, &st);
    return st.spill_malformed == skipped ? 0 : -1; /* records that could not be written were reported one by one */
}

/* --- the spill file ------------------------------------------------------- */

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
static int write_record(int fd, const gw_metering_t *m, const gw_metering_record_t *r)
{
    json_t *obj =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:I}", "sandbox", r->sandbox, "project", r->project, "egress",
                  (json_int_t)r->egress, "ingress", (json_int_t)r->ingress, "from_ms", (json_int_t)r->from_ms, "to_ms",
                  (json_int_t)r->to_ms, "gateway", r->gateway != NULL ? r->gateway : m->instance_id, "seq", (json_int_t)r->seq);
    char *line = NULL;
    int ret = 1, werr = 0;

    if (obj == NULL)
        return 1;
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
    return strf("spill file %s: %s: %s", path, what, strerror(errnum));
}

int gw_metering_write_spill(gw_metering_t *m, char **err)
{
    char *tmp = NULL, dir[4200];
    const char *path = m->spill_file, *target;
    int fd = -1, append, dfd, rc;
    size_t n = 0, skipped = 0, i;

    *err = NULL;
    if (path == NULL) {
        *err = strdup("no metering.spill_file configured");
        return -1;
    }
    gw_metering_seal(m, 1);
    pthread_mutex_lock(&m->mutex);
    if (m->head == NULL) {
        pthread_mutex_unlock(&m->mutex);
        return 0;
    }
    /* Records loaded from the file are pending too, so the file is replaced
     * (atomically, through a temporary file of this process: the lock taken
     * at start keeps every other gateway away from this path); one that
     * could not be read is only appended to. */
    append = m->spill_unreadable;
    if (!append && (tmp = strf("%s.tmp.%ld", path, (long)getpid())) == NULL)
        goto Error;
    target = append ? path : tmp;
    if ((fd = append ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)
                     : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1) {
        *err = errorf("open", target, errno);
        goto Error;
    }
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next) {
        for (i = 0; i != b->num_records; ++i) {
            const gw_metering_record_t *r = b->records + i;
            if ((rc = write_record(fd, m, r)) == -1) {
                *err = errorf("write", target, errno);
                goto Error;
            }
            if (rc == 0) {
                ++n;
                continue;
            }
            /* one record that cannot be encoded costs that record only */
            fprintf(stderr,
                    LOG_PREFIX "%s: cannot write the record of sandbox %s (seq %llu, %llu bytes out) as JSON: skipped, lost\n",
                    path, r->sandbox, (unsigned long long)r->seq, (unsigned long long)r->egress);
            ++skipped;
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
        if (m->spill_malformed_lines)
            set_aside_spill(m);
        if (rename(tmp, path) != 0) {
            *err = errorf("rename", path, errno);
            goto Error;
        }
    }
    /* the rename itself must survive a crash */
    snprintf(dir, sizeof(dir), "%s", path);
    if ((dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
        fsync(dfd);
        close(dfd);
    }
    m->stats.spill_written += n;
    m->stats.spill_malformed += skipped;
    pthread_mutex_unlock(&m->mutex);
    free(tmp);
    fprintf(stderr, LOG_PREFIX "%s: %zu records written, replayed on the next start\n", path, n);
    return 0;

Error:
    if (*err == NULL)
        *err = strdup("spill file: out of memory");
    if (fd != -1)
        close(fd);
    if (tmp != NULL)
        unlink(tmp);
    pthread_mutex_unlock(&m->mutex);
    free(tmp);
    return -1;
}
