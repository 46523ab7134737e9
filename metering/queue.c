/*
 * The process-wide queue (metering/queue.h): the open batch that workers'
 * counts merge into, sealing with seq values, the sealed batches in order,
 * and what /metrics reports of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "metering/quota.h"
#include "metering/queue.h"

#define LOG_PREFIX "lizard-gateway: metering: "

/* under mutex, or before any thread shares m */
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
    gw_metering_batch_t *b, *next;
    size_t loaded, malformed;
    uint64_t max_seq;

    memset(m, 0, sizeof(*m));
    m->prefix = h2o_strdup(NULL, conf->prefix, SIZE_MAX).base;
    m->instance_id = h2o_strdup(NULL, conf->instance_id, SIZE_MAX).base;
    pthread_mutex_init(&m->mutex, NULL);
    gw_hashtab_init(&m->open);
    /* before reading the file: another process may be writing it */
    if (gw_metering_spill_open(&m->spill, conf->spill_file, conf->instance_id, err) != 0) {
        gw_metering_free(m);
        return NULL;
    }
    for (b = gw_metering_spill_load(&m->spill, &loaded, &malformed, &max_seq); b != NULL; b = next) {
        next = b->next;
        append_batch(m, b);
    }
    m->stats.spill_replayed = loaded;
    m->stats.spill_malformed = malformed;
    m->stats.pending_records = loaded;
    /* Above every seq of an earlier run without persisting a counter: an
     * earlier run started before now_ms and took fewer than
     * GW_METERING_SEQ_PER_MS values per ms it ran; and above what it spilled,
     * should the clock have stepped back. */
    m->next_seq = now_ms * GW_METERING_SEQ_PER_MS;
    if (m->next_seq <= max_seq)
        m->next_seq = max_seq + 1;
    return m;
}

void gw_metering_free(gw_metering_t *m)
{
    if (m == NULL)
        return;
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
    gw_metering_batch_t *b = NULL;
    gw_hashtab_node_t *n, *next;
    size_t sealed = 0;

    pthread_mutex_lock(&m->mutex);
    if (gw_hashtab_size(&m->open) == 0 || (!force && m->num_batches >= GW_METERING_MAX_BATCHES))
        goto Exit; /* at the cap the open batch keeps merging: one record per sandbox, whatever the outage */
    for (n = gw_hashtab_first(&m->open); n != NULL; n = next) {
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        next = gw_hashtab_next(&m->open, n);
        if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS) {
            size_t left = gw_hashtab_size(&m->open);
            b = gw_metering_batch_new(left < GW_METERING_MAX_BATCH_RECORDS ? left : GW_METERING_MAX_BATCH_RECORDS);
            append_batch(m, b);
            ++sealed;
        }
        /* the record (and its strings) moves into the batch */
        gw_hashtab_remove(&m->open, n);
        b->records[b->num_records] = e->rec;
        b->records[b->num_records++].seq = m->next_seq++;
        free(e);
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
    /* every record replayed from the file is in Redis now (once, metadata only) */
    if (b->from_spill && --m->spill.batches == 0)
        gw_metering_spill_replayed(&m->spill);
    pthread_mutex_unlock(&m->mutex);
    gw_metering_batch_free(b);
}

void gw_metering_requeue_in_flight(gw_metering_t *m)
{
    pthread_mutex_lock(&m->mutex);
    m->head_in_flight = 0;
    pthread_mutex_unlock(&m->mutex);
}

int gw_metering_write_spill(gw_metering_t *m, char **err)
{
    size_t written, skipped;
    int ret = 0;

    *err = NULL;
    if (m->spill.path == NULL) {
        *err = h2o_strdup(NULL, H2O_STRLIT("no metering.spill_file configured")).base;
        return -1;
    }
    gw_metering_seal(m, 1);
    pthread_mutex_lock(&m->mutex);
    if (m->head != NULL && (ret = gw_metering_spill_write(&m->spill, m->head, m->instance_id, &written, &skipped, err)) == 0) {
        m->stats.spill_written += written;
        m->stats.spill_malformed += skipped;
        fprintf(stderr, LOG_PREFIX "%s: %zu records written, replayed on the next start\n", m->spill.path, written);
    }
    pthread_mutex_unlock(&m->mutex);
    return ret;
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
    pthread_mutex_unlock(&m->mutex);
}
