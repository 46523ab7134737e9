/*
 * The process-wide queue (metering/queue.h): the open batch that workers'
 * counts merge into, sealing with seq values, the sealed batches in order
 * and where each stands (executed where, acknowledged), the journal's
 * entries as that changes, and what /metrics reports of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "metering/quota.h"
#include "metering/queue.h"

#define LOG_PREFIX "lizard-gateway: metering: "

/* under mutex */
static void append_batch(gw_metering_t *m, gw_metering_batch_t *b)
{
    b->next = NULL;
    if (m->tail != NULL)
        m->tail->next = b;
    else
        m->head = b;
    m->tail = b;
    ++m->num_batches;
}

gw_metering_t *gw_metering_new(const gw_metering_conf_t *conf, uint64_t now_ms, char **err)
{
    gw_metering_t *m = h2o_mem_alloc(sizeof(*m));

    memset(m, 0, sizeof(*m));
    m->prefix = h2o_strdup(NULL, conf->prefix, SIZE_MAX).base;
    m->instance_id = h2o_strdup(NULL, conf->instance_id, SIZE_MAX).base;
    pthread_mutex_init(&m->mutex, NULL);
    gw_hashtab_init(&m->open);
    gw_metering_journal_init(&m->journal);
    /* Above every seq of an earlier run without persisting a counter: an
     * earlier run started before now_ms and took fewer than
     * GW_METERING_SEQ_PER_MS values per ms it ran; and above what its
     * journal holds (the replay raises it), should the clock have stepped back. */
    m->next_seq = now_ms * GW_METERING_SEQ_PER_MS;
    /* the lock before reading the file: another process may be writing it */
    if (gw_metering_spill_open(&m->spill, conf->spill_file, conf->instance_id, err) != 0 ||
        gw_metering_journal_open(m, conf->journal_interval_ms, err) != 0) {
        gw_metering_free(m);
        return NULL;
    }
    return m;
}

void gw_metering_free(gw_metering_t *m)
{
    if (m == NULL)
        return;
    gw_metering_journal_close(m);
    while (m->head != NULL) {
        gw_metering_batch_t *b = m->head;
        m->head = b->next;
        gw_metering_batch_free(b);
    }
    gw_metering_entries_dispose(&m->open);
    gw_activity_free(m->activity);
    gw_metering_spill_close(&m->spill);
    free(m->prefix);
    free(m->instance_id);
    pthread_mutex_destroy(&m->mutex);
    free(m);
}

struct merge_ctx {
    gw_metering_t *m;
    uint64_t now_ms;
};

/* One sandbox's counts from a meter, under mutex. */
static void merge_open(void *arg, const gw_metering_record_t *r)
{
    struct merge_ctx *ctx = arg;
    gw_metering_t *m = ctx->m;
    gw_metering_entry_t *o;

    if ((o = gw_metering_entry_find(&m->open, r->sandbox, r->project)) == NULL) {
        o = gw_metering_entry_add(&m->open, r->sandbox, h2o_strdup(NULL, r->project, SIZE_MAX).base);
        o->rec.from_ms = r->from_ms;
        ++m->stats.pending_records;
    } else if (r->from_ms < o->rec.from_ms) {
        o->rec.from_ms = r->from_ms;
    }
    o->rec.egress += r->egress;
    o->rec.ingress += r->ingress;
    o->rec.egress_quota = gw_quota_merge(o->rec.egress_quota, r->egress_quota);
    if (ctx->now_ms > o->rec.to_ms)
        o->rec.to_ms = ctx->now_ms;
}

void gw_metering_submit(gw_metering_t *m, gw_meter_t *meter, uint64_t now_ms)
{
    struct merge_ctx ctx = {m, now_ms};

    pthread_mutex_lock(&m->mutex);
    gw_meter_hand_over(meter, merge_open, &ctx);
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_submit_activity(gw_metering_t *m, gw_activity_t *a)
{
    pthread_mutex_lock(&m->mutex);
    if (m->activity == NULL)
        m->activity = gw_activity_new();
    gw_activity_merge(m->activity, a);
    pthread_mutex_unlock(&m->mutex);
}

size_t gw_metering_seal(gw_metering_t *m, int force)
{
    gw_metering_batch_t *b = NULL, *first = NULL;
    gw_hashtab_node_t *n, *next;
    size_t sealed = 0;

    pthread_mutex_lock(&m->mutex);
    if (gw_hashtab_size(&m->open) == 0 || (!force && m->num_unsent >= GW_METERING_MAX_BATCHES))
        goto Exit; /* at the cap the open batch keeps merging: one record per sandbox, whatever the outage */
    for (n = gw_hashtab_first(&m->open); n != NULL; n = next) {
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        next = gw_hashtab_next(&m->open, n);
        if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS) {
            size_t left = gw_hashtab_size(&m->open);
            b = gw_metering_batch_new(left < GW_METERING_MAX_BATCH_RECORDS ? left : GW_METERING_MAX_BATCH_RECORDS);
            append_batch(m, b);
            ++m->num_unsent;
            if (first == NULL)
                first = b;
            ++sealed;
        }
        /* the record (and its strings) moves into the batch */
        gw_hashtab_remove(&m->open, n);
        b->records[b->num_records] = e->rec;
        b->records[b->num_records++].seq = m->next_seq++;
        free(e);
    }
    /* each batch entry in the journal takes the place of everything open before it */
    for (b = first; b != NULL; b = b->next) {
        gw_metering_batch_sum(b);
        if (m->spill.path != NULL)
            gw_journal_put_batch(&m->journal.pending, b, m->instance_id);
    }
Exit:
    pthread_mutex_unlock(&m->mutex);
    return sealed;
}

gw_metering_batch_t *gw_metering_next_batch(gw_metering_t *m)
{
    gw_metering_batch_t *b;

    pthread_mutex_lock(&m->mutex);
    for (b = m->head; b != NULL && b->state != GW_METERING_BATCH_SEALED; b = b->next)
        ;
    if (b != NULL)
        b->state = GW_METERING_BATCH_SENDING;
    pthread_mutex_unlock(&m->mutex);
    return b;
}

void gw_metering_batch_failed(gw_metering_t *m, gw_metering_batch_t *b)
{
    pthread_mutex_lock(&m->mutex);
    b->state = GW_METERING_BATCH_SEALED;
    ++m->stats.flush_failures;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_batch_unknown(gw_metering_t *m, gw_metering_batch_t *b, uint64_t sent_ms)
{
    pthread_mutex_lock(&m->mutex);
    b->state = GW_METERING_BATCH_SEALED;
    if (b->unknown_since_ms == 0 || sent_ms < b->unknown_since_ms)
        b->unknown_since_ms = sent_ms;
    ++m->stats.flush_failures;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_batch_lacking(gw_metering_t *m, gw_metering_batch_t *b)
{
    pthread_mutex_lock(&m->mutex);
    ++m->stats.batches_reexecuted;
    b->unknown_since_ms = 0;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_batch_found(gw_metering_t *m, gw_metering_batch_t *b, const char *replid, uint64_t offset, int need_replica)
{
    pthread_mutex_lock(&m->mutex);
    ++m->stats.batches_held;
    pthread_mutex_unlock(&m->mutex);
    b->unknown_since_ms = 0;
    gw_metering_batch_executed(m, b, replid, offset, need_replica);
}

/* Under mutex: b is written; out of the queue and the journal. */
static void written(gw_metering_t *m, gw_metering_batch_t *b)
{
    gw_metering_batch_t **link;

    for (link = &m->head; *link != b; link = &(*link)->next)
        ;
    *link = b->next;
    if (m->tail == b)
        m->tail = link == &m->head ? NULL : H2O_STRUCT_FROM_MEMBER(gw_metering_batch_t, next, link);
    --m->num_batches;
    if (b->state == GW_METERING_BATCH_EXECUTED)
        m->unacked_records -= b->num_records;
    else
        --m->num_unsent;
    m->stats.pending_records -= b->num_records;
    m->stats.records_written += b->num_records;
    if (m->spill.path != NULL)
        gw_journal_put_done(&m->journal.pending, b);
    gw_metering_batch_free(b);
}

/* Under mutex: at the bound, the oldest batches that only a primary holds are let go. */
static void release_unacked(gw_metering_t *m)
{
    gw_metering_batch_t *b, *next;
    size_t released = 0;

    for (b = m->head; b != NULL && m->unacked_records > GW_METERING_MAX_UNACKED_RECORDS; b = next) {
        next = b->next;
        if (b->state != GW_METERING_BATCH_EXECUTED)
            continue;
        released += b->num_records;
        m->stats.unacked_released += b->num_records;
        written(m, b);
    }
    if (released != 0 && !m->releasing)
        fprintf(stderr,
                LOG_PREFIX "more than %d records wait for a replica's acknowledgement: the oldest are released as written "
                           "(the primary holds them; losing it before a replica syncs would lose them)\n",
                GW_METERING_MAX_UNACKED_RECORDS);
    m->releasing = released != 0 || m->unacked_records > GW_METERING_MAX_UNACKED_RECORDS / 2;
}

void gw_metering_batch_executed(gw_metering_t *m, gw_metering_batch_t *b, const char *replid, uint64_t offset, int need_replica)
{
    pthread_mutex_lock(&m->mutex);
    --m->num_unsent;
    b->state = GW_METERING_BATCH_EXECUTED;
    b->unknown_since_ms = 0;
    snprintf(b->exec_replid, sizeof(b->exec_replid), "%s", replid);
    b->exec_offset = offset;
    m->unacked_records += b->num_records;
    if (!need_replica) {
        written(m, b); /* EXEC answered: that is written without Sentinel */
    } else {
        if (m->spill.path != NULL) {
            /* the next start must know where it went before it could execute it again: written now */
            gw_journal_put_exec(&m->journal.pending, b);
            m->journal.wake = 1;
            pthread_cond_signal(&m->journal.cond);
        }
        release_unacked(m);
    }
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_primary_now(gw_metering_t *m, const gw_repl_info_t *info)
{
    size_t held = 0, lacking = 0, unknown = 0;

    pthread_mutex_lock(&m->mutex);
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next) {
        if (b->state != GW_METERING_BATCH_EXECUTED || strcmp(b->exec_replid, info->replid) == 0)
            continue;
        if (gw_repl_holds(info, b->exec_replid, b->exec_offset)) {
            /* in this primary's history now, at the same offset (a promoted replica continues the offsets) */
            snprintf(b->exec_replid, sizeof(b->exec_replid), "%s", info->replid);
            if (m->spill.path != NULL)
                gw_journal_put_exec(&m->journal.pending, b);
            ++held;
            continue;
        }
        b->state = GW_METERING_BATCH_SEALED;
        m->unacked_records -= b->num_records;
        ++m->num_unsent;
        if (gw_repl_lacks(info, b->exec_replid, b->exec_offset)) {
            ++lacking;
        } else {
            /* a history unrelated to the batch's: a replica restarted from its own disk takes a new
             * replication id, yet may hold what it received before; its stream says */
            b->unknown_since_ms = b->sealed_ms != 0 ? b->sealed_ms : 1;
            ++unknown;
        }
    }
    m->stats.batches_held += held;
    m->stats.batches_reexecuted += lacking;
    pthread_mutex_unlock(&m->mutex);
    if (held + lacking + unknown != 0)
        fprintf(stderr,
                LOG_PREFIX "a new primary (%s): it holds %zu unacknowledged batches (not executed again), lacks %zu "
                           "(executed on it, same seq), and %zu are looked for in its stream\n",
                info->replid, held, lacking, unknown);
}

void gw_metering_history_renamed(gw_metering_t *m, const char *old_replid, const gw_repl_info_t *info)
{
    size_t renamed = 0;

    pthread_mutex_lock(&m->mutex);
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next) {
        if (b->state != GW_METERING_BATCH_EXECUTED || strcmp(b->exec_replid, old_replid) != 0 ||
            (b->exec_offset != GW_METERING_OFFSET_UNKNOWN && b->exec_offset > info->offset))
            continue;
        snprintf(b->exec_replid, sizeof(b->exec_replid), "%s", info->replid);
        if (m->spill.path != NULL)
            gw_journal_put_exec(&m->journal.pending, b);
        ++renamed;
    }
    pthread_mutex_unlock(&m->mutex);
    if (renamed != 0)
        fprintf(stderr,
                LOG_PREFIX "the primary's replication id changed from %s to %s (its first replica attached): %zu "
                           "unacknowledged batches follow it\n",
                old_replid, info->replid, renamed);
}

void gw_metering_acked(gw_metering_t *m, const gw_repl_info_t *info)
{
    gw_metering_batch_t *b, *next;

    pthread_mutex_lock(&m->mutex);
    for (b = m->head; b != NULL; b = next) {
        next = b->next;
        if (b->state != GW_METERING_BATCH_EXECUTED || strcmp(b->exec_replid, info->replid) != 0)
            continue;
        if (b->exec_offset == GW_METERING_OFFSET_UNKNOWN) {
            /* its EXEC came before this: this primary's offset now bounds it */
            b->exec_offset = info->offset;
            if (m->spill.path != NULL)
                gw_journal_put_exec(&m->journal.pending, b);
            continue;
        }
        if (gw_repl_acked(info, b->exec_replid, b->exec_offset))
            written(m, b);
    }
    pthread_mutex_unlock(&m->mutex);
}

int gw_metering_has_unacked(gw_metering_t *m)
{
    int ret;

    pthread_mutex_lock(&m->mutex);
    ret = m->num_batches > m->num_unsent;
    pthread_mutex_unlock(&m->mutex);
    return ret;
}

void gw_metering_requeue_in_flight(gw_metering_t *m)
{
    pthread_mutex_lock(&m->mutex);
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next)
        if (b->state == GW_METERING_BATCH_SENDING)
            b->state = GW_METERING_BATCH_SEALED;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_count_lost(gw_metering_t *m, uint64_t n)
{
    pthread_mutex_lock(&m->mutex);
    m->stats.records_lost += n;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_count_quota_reached(gw_metering_t *m, uint64_t n)
{
    pthread_mutex_lock(&m->mutex);
    m->stats.quota_reached += n;
    pthread_mutex_unlock(&m->mutex);
}

void gw_metering_get_stats(gw_metering_t *m, gw_metering_stats_t *out)
{
    pthread_mutex_lock(&m->mutex);
    *out = m->stats;
    out->pending_batches = m->num_batches;
    out->unacked_batches = 0;
    out->unacked_bytes = 0;
    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next) {
        if (b->state == GW_METERING_BATCH_EXECUTED) {
            ++out->unacked_batches;
            out->unacked_bytes += b->egress;
        }
    }
    pthread_mutex_unlock(&m->mutex);
}
