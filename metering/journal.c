/*
 * The journal's file and thread (metering/journal.h): replay at start,
 * appends with fdatasync every interval off the event loops, rewrites
 * through a temporary file, and what a failed write does: the file is set
 * aside at once (so that a crash never replays a journal that missed what
 * came after) and the next write rewrites it whole.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "common/errfmt.h"
#include "metering/journal.h"
#include "metering/queue.h"

#define LOG_PREFIX "lizard-gateway: metering: "

/* --- the file ----------------------------------------------------------------- */

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

static void fsync_dir(const char *path)
{
    char *dir = h2o_strdup(NULL, path, SIZE_MAX).base;
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (dfd != -1) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
}

/* Replaces the file with `text` through "<path>.tmp.<pid>", fsync'd, the
 * rename too. Returns the new file's descriptor (for appends), or -1 with
 * *why (errno's text, static) and errno. */
static int rewrite_file(const char *path, const gw_jbuf_t *text, const char **why)
{
    char *tmp = gw_strf("%s.tmp.%ld", path, (long)getpid());
    int fd, saved;

    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600)) == -1) {
        *why = "open";
        goto Error;
    }
    if (write_all(fd, text->base, text->len) != 0) {
        *why = "write";
        goto Error;
    }
    if (fsync(fd) != 0) {
        *why = "fsync";
        goto Error;
    }
    if (rename(tmp, path) != 0) {
        *why = "rename";
        goto Error;
    }
    fsync_dir(path);
    free(tmp);
    return fd;

Error:
    saved = errno;
    if (fd != -1)
        close(fd);
    unlink(tmp);
    free(tmp);
    errno = saved;
    return -1;
}

/* The whole file (NULL, 0: none). 0, or -1 with errno. */
static int read_file(const char *path, char **text, size_t *len)
{
    struct stat st;
    size_t got = 0;
    int fd;

    *text = NULL;
    *len = 0;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return errno == ENOENT ? 0 : -1;
    if (fstat(fd, &st) != 0)
        goto Error;
    *text = h2o_mem_alloc((size_t)st.st_size + 1);
    while (got != (size_t)st.st_size) {
        ssize_t n = read(fd, *text + got, (size_t)st.st_size - got);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            goto Error;
        if (n == 0)
            break; /* shorter than it was: what is there */
        got += (size_t)n;
    }
    *len = got;
    close(fd);
    return 0;

Error:
    free(*text);
    *text = NULL;
    close(fd);
    return -1;
}

/* --- what goes in --------------------------------------------------------------- */

/* Under mutex: every record of m as it stands, journaled now. */
static void put_state(gw_metering_t *m, gw_jbuf_t *out)
{
    gw_hashtab_node_t *n;

    gw_journal_put_header(out);
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next)
        gw_journal_put_batch(out, b, m->instance_id);
    for (n = gw_hashtab_first(&m->open); n != NULL; n = gw_hashtab_next(&m->open, n)) {
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        if (gw_metering_record_has_bytes(&e->rec))
            gw_journal_put_open(out, &e->rec, e->rec.egress, e->rec.ingress);
        e->journaled_egress = e->rec.egress;
        e->journaled_ingress = e->rec.ingress;
    }
}

/* Under mutex: what the open batch gained since it was last journaled. */
static void put_open_gains(gw_metering_t *m, gw_jbuf_t *out)
{
    gw_hashtab_node_t *n;

    for (n = gw_hashtab_first(&m->open); n != NULL; n = gw_hashtab_next(&m->open, n)) {
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        if (e->rec.egress == e->journaled_egress && e->rec.ingress == e->journaled_ingress)
            continue;
        gw_journal_put_open(out, &e->rec, e->rec.egress - e->journaled_egress, e->rec.ingress - e->journaled_ingress);
        e->journaled_egress = e->rec.egress;
        e->journaled_ingress = e->rec.ingress;
    }
}

/* --- writing -------------------------------------------------------------------- */

/* Under mutex, after a write: its outcome. */
static void write_done(gw_metering_t *m, int ok, int rewrote, size_t len, int newfd, const char *what, int errnum)
{
    gw_metering_journal_t *j = &m->journal;

    if (ok) {
        if (rewrote) {
            if (j->fd != -1)
                close(j->fd);
            j->fd = newfd;
            j->file_bytes = j->rewrite_bytes = len;
            j->appended = 0;
            j->rewrite = 0;
        } else {
            j->file_bytes += len;
            j->appended += len;
        }
        if (j->failing && rewrote) {
            /* this rewrite holds everything pending: what was set aside is stale */
            fprintf(stderr, LOG_PREFIX "journal %s: written again%s%s\n", m->spill.path, j->aside != NULL ? "; removed " : "",
                    j->aside != NULL ? j->aside : "");
            if (j->aside != NULL)
                unlink(j->aside);
            free(j->aside);
            j->aside = NULL;
            j->failing = 0;
        }
    } else {
        ++m->stats.journal_failures;
        j->rewrite = 1;
        if (!j->failing) {
            /* the file now misses what this write had: a crash must not replay it as if it were whole
             * (a batch written meanwhile would count twice), so it goes aside for a person until the
             * next write succeeds; counts stay in memory and go to Redis as usual */
            fprintf(stderr,
                    LOG_PREFIX "journal %s: %s failed: %s; counts are kept in memory and written to Redis, a crash now "
                               "would lose them; retried every interval\n",
                    m->spill.path, what, strerror(errnum));
            free(j->aside);
            j->aside = gw_metering_spill_set_aside(m->spill.path, "unwritable");
        }
        j->failing = 1;
        if (j->fd != -1)
            close(j->fd);
        j->fd = -1;
        j->file_bytes = 0;
    }
    m->stats.journal_bytes = j->file_bytes;
}

int gw_metering_journal_write(gw_metering_t *m)
{
    gw_metering_journal_t *j = &m->journal;
    gw_jbuf_t text = {NULL, 0, 0};
    const char *what = "write";
    int rewrite, ok, fd = -1, errnum = 0;

    if (m->spill.path == NULL)
        return 0;
    pthread_mutex_lock(&m->mutex);
    rewrite = j->rewrite || j->fd == -1 || (j->appended > GW_JOURNAL_COMPACT_MIN_BYTES && j->appended > 2 * j->rewrite_bytes);
    if (rewrite) {
        put_state(m, &text); /* everything pending so far is in it */
        gw_jbuf_dispose(&j->pending);
    } else {
        put_open_gains(m, &j->pending);
        text = j->pending;
        memset(&j->pending, 0, sizeof(j->pending));
    }
    fd = j->fd;
    pthread_mutex_unlock(&m->mutex);

    /* the disk, with no lock held: workers and the flusher go on */
    if (rewrite) {
        ok = (fd = rewrite_file(m->spill.path, &text, &what)) != -1;
    } else {
        ok = text.len == 0 || (write_all(fd, text.base, text.len) == 0 && (what = "fdatasync", fdatasync(fd) == 0));
    }
    errnum = errno;

    pthread_mutex_lock(&m->mutex);
    write_done(m, ok, rewrite, text.len, fd, what, errnum);
    pthread_mutex_unlock(&m->mutex);
    gw_jbuf_dispose(&text);
    return ok ? 0 : -1;
}

static void *journal_main(void *arg)
{
    gw_metering_t *m = arg;
    gw_metering_journal_t *j = &m->journal;
    struct timespec until;

    pthread_setname_np(pthread_self(), "lz-journal"); /* its own line in top -H; the bench counts its CPU */
    pthread_mutex_lock(&m->mutex);
    while (!j->stop) {
        if (!j->wake) {
            /* every half interval, as the workers hand over: a count is on disk within one interval */
            uint64_t half = j->interval_ms / 2 != 0 ? j->interval_ms / 2 : 1;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += (time_t)(half / 1000);
            until.tv_nsec += (long)(half % 1000) * 1000000;
            if (until.tv_nsec >= 1000000000) {
                ++until.tv_sec;
                until.tv_nsec -= 1000000000;
            }
            while (!j->wake && !j->stop && pthread_cond_timedwait(&j->cond, &m->mutex, &until) == 0)
                ;
        }
        j->wake = 0;
        pthread_mutex_unlock(&m->mutex);
        gw_metering_journal_write(m);
        pthread_mutex_lock(&m->mutex);
    }
    pthread_mutex_unlock(&m->mutex);
    gw_metering_journal_write(m); /* what came with the stop */
    return NULL;
}

/* --- start, stop, exit --------------------------------------------------------------- */

static void report_entry(void *arg, size_t lineno, const char *why)
{
    fprintf(stderr, LOG_PREFIX "%s:%zu: skipping a malformed journal entry: %s\n", (const char *)arg, lineno, why);
}

/* The replay's batches go first, in order; what was open stays open. Before any thread runs. */
static void install(gw_metering_t *m, gw_journal_replay_t *r)
{
    gw_hashtab_node_t *n, *next;
    gw_metering_batch_t *b;
    size_t open = 0;

    while ((b = r->head) != NULL) {
        r->head = b->next;
        b->next = NULL;
        if (m->tail != NULL)
            m->tail->next = b;
        else
            m->head = b;
        m->tail = b;
        ++m->num_batches;
        if (b->state == GW_METERING_BATCH_EXECUTED) {
            m->unacked_records += b->num_records;
        } else {
            /* the journal does not say it ran, yet it may have: a SIGKILL between its EXEC and the entry
             * saying where it went, or that entry damaged. The stream is searched for it first. */
            b->unknown_since_ms = b->sealed_ms != 0 ? b->sealed_ms : 1;
            ++m->num_unsent;
        }
    }
    for (n = gw_hashtab_first(&r->open); n != NULL; n = next) {
        next = gw_hashtab_next(&r->open, n);
        gw_hashtab_remove(&r->open, n);
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        gw_hashtab_insert(&m->open, &e->node, e->rec.sandbox, strlen(e->rec.sandbox));
        ++open;
    }
    m->stats.spill_replayed = r->records + open;
    m->stats.spill_malformed = r->malformed;
    m->stats.pending_records = r->records + open;
    if (r->max_seq >= m->next_seq)
        m->next_seq = r->max_seq + 1;
    if (r->records + open != 0)
        fprintf(stderr, LOG_PREFIX "%s: %zu sealed and %zu open records from the previous run will be written first\n",
                m->spill.path, r->records, open);
}

void gw_metering_journal_init(gw_metering_journal_t *j)
{
    pthread_condattr_t attr;

    memset(j, 0, sizeof(*j));
    j->fd = -1;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cond, &attr);
    pthread_condattr_destroy(&attr);
}

int gw_metering_journal_open(gw_metering_t *m, uint64_t interval_ms, char **err)
{
    gw_metering_journal_t *j = &m->journal;
    gw_journal_replay_t replay;
    const char *why = NULL;
    size_t len;
    char *text;

    j->interval_ms = interval_ms;
    if (m->spill.path == NULL)
        return 0;
    if (read_file(m->spill.path, &text, &len) != 0) {
        *err = gw_strf("metering.spill_file %s: cannot read the journal: %s", m->spill.path, strerror(errno));
        return -1;
    }
    if (gw_journal_parse(text, len, &replay, report_entry, m->spill.path, &why) != 0) {
        free(text);
        gw_journal_replay_dispose(&replay);
        *err = gw_strf("metering.spill_file %s: %s; start that version on it, or move the file away", m->spill.path, why);
        return -1;
    }
    free(text);
    install(m, &replay);
    if (replay.malformed != 0) /* kept for a person; what could be read is rewritten below */
        free(gw_metering_spill_set_aside(m->spill.path, "malformed"));
    gw_journal_replay_dispose(&replay);
    /* what the previous run had not sealed is sealed now (its own records, this run's seq): it goes first */
    gw_metering_seal(m, 1);
    j->rewrite = 1;
    gw_metering_journal_write(m); /* a failure is said and retried by the thread */
    if (interval_ms != 0) {
        j->running = pthread_create(&j->thread, NULL, journal_main, m) == 0;
        if (!j->running)
            fprintf(stderr, LOG_PREFIX "journal %s: cannot start its thread: written at exit only\n", m->spill.path);
    }
    return 0;
}

void gw_metering_journal_stop(gw_metering_t *m)
{
    gw_metering_journal_t *j = &m->journal;

    if (!j->running)
        return;
    pthread_mutex_lock(&m->mutex);
    j->stop = 1;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&m->mutex);
    pthread_join(j->thread, NULL);
    j->running = 0;
}

int gw_metering_journal_finish(gw_metering_t *m, char **err)
{
    gw_metering_journal_t *j = &m->journal;
    gw_jbuf_t text = {NULL, 0, 0};
    const char *what = "write";
    uint64_t pending;
    int fd;

    *err = NULL;
    gw_metering_journal_stop(m);
    pthread_mutex_lock(&m->mutex);
    pending = m->stats.pending_records;
    if (pending != 0 && m->spill.path != NULL)
        put_state(m, &text);
    pthread_mutex_unlock(&m->mutex);
    if (m->spill.path == NULL) {
        if (pending == 0)
            return 0;
        *err = h2o_strdup(NULL, H2O_STRLIT("no metering.spill_file configured")).base;
        return -1;
    }
    if (pending == 0) {
        if (unlink(m->spill.path) == 0)
            fprintf(stderr, LOG_PREFIX "journal %s: everything is written, removed\n", m->spill.path);
        return 0;
    }
    if ((fd = rewrite_file(m->spill.path, &text, &what)) == -1) {
        *err = gw_strf("journal %s: %s: %s", m->spill.path, what, strerror(errno));
        gw_jbuf_dispose(&text);
        return -1;
    }
    if (j->fd != -1)
        close(j->fd);
    j->fd = fd;
    gw_jbuf_dispose(&text);
    m->stats.spill_written = pending;
    fprintf(stderr, LOG_PREFIX "journal %s: %llu records kept, written at the next start\n", m->spill.path,
            (unsigned long long)pending);
    return 0;
}

void gw_metering_journal_close(gw_metering_t *m)
{
    gw_metering_journal_t *j = &m->journal;

    gw_metering_journal_stop(m);
    if (j->fd != -1)
        close(j->fd);
    j->fd = -1;
    gw_jbuf_dispose(&j->pending);
    free(j->aside);
    j->aside = NULL;
    pthread_cond_destroy(&j->cond);
}
