/*
 * The journal (metering.spill_file): what the queue holds that Redis has
 * not taken, on disk, so that a gateway killed with SIGKILL or whose
 * machine dies loses at most one journal interval. A thread of its own
 * appends what changed (metering/journal_format.h) every half
 * metering.journal_interval_ms (the workers hand their counts over as
 * often: a count is on disk within one interval) and fsyncs, and writes
 * nothing when nothing changed; workers never wait for the disk:
 * changes are formatted into a buffer under the queue's mutex (seals,
 * executions, acknowledgements as they happen; open counts once per
 * interval, by the thread). When the file has grown to several times what
 * it holds, or a write failed, it is rewritten whole (a temporary file
 * renamed over it). Start-up replays it; a clean exit with nothing left
 * removes it.
 */
#ifndef GW_METERING_JOURNAL_H
#define GW_METERING_JOURNAL_H

#include <pthread.h>
#include <stdint.h>
#include "metering/journal_format.h"

/* The file is rewritten when its appends pass this and twice its last
 * rewrite: its size stays within about 3x what it holds, plus this. */
#define GW_JOURNAL_COMPACT_MIN_BYTES (256 * 1024)

struct st_gw_metering_t;

typedef struct st_gw_metering_journal_t {
    uint64_t interval_ms; /* 0: no thread */
    int fd;               /* the file, appended to; -1: none (no journal, or a rewrite is due) */
    int running;          /* the thread was started */
    pthread_t thread;
    pthread_cond_t cond; /* with the queue's mutex */
    /* under the queue's mutex */
    gw_jbuf_t pending; /* entries since the last write, in order */
    int stop;          /* the thread ends after one last write */
    int wake;          /* write now (an exec entry: the next start must know it) */
    int rewrite;       /* write the whole state instead of appending (a write failed, or the file grew) */
    int failing;       /* the last write failed: said once, and the file was set aside */
    char *aside;       /* where it was set aside (malloc'd): removed once a rewrite holds everything again */
    uint64_t file_bytes, rewrite_bytes, appended;
} gw_metering_journal_t;

/* Before anything else (no file, no thread yet). */
void gw_metering_journal_init(gw_metering_journal_t *j);

/* At start (m's lock held, nothing else running): reads m->spill.path into
 * m's queue (sealed batches first, then what was open), reporting skipped
 * entries and setting a file that had any aside ("<path>.malformed-<t>"),
 * then rewrites the journal with what was read and starts the thread
 * (conf's interval; 0: none). Returns 0, or -1 with *err (malloc'd) when
 * the file cannot be read or is of a later version (nothing is changed). */
int gw_metering_journal_open(struct st_gw_metering_t *m, uint64_t interval_ms, char **err);

/* One write of what changed (or of everything, when due); the thread calls
 * it every interval, tests directly. Returns 0, or -1 when it failed
 * (counted, said once per streak; the next write rewrites the file). */
int gw_metering_journal_write(struct st_gw_metering_t *m);

/* Stops the thread after a last write. No journal or no thread: no-op. */
void gw_metering_journal_stop(struct st_gw_metering_t *m);

/* At exit, after the final flush (the thread stopped): removes the journal
 * when nothing is pending, else rewrites it with everything pending (sealed
 * first). Returns 0, or -1 with *err (malloc'd) when it could not be
 * written (or there is no journal) while records are pending. */
int gw_metering_journal_finish(struct st_gw_metering_t *m, char **err);

/* Closes the file (the thread stopped). */
void gw_metering_journal_close(struct st_gw_metering_t *m);

#endif
