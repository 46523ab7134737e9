/*
 * The flusher (metering/flusher.h): on each connection first INFO
 * replication (which batches the primary holds), then for each batch
 * MULTI, its commands, EXEC and INFO replication queued in one go; while
 * batches wait for a replica, INFO replication every tick. A batch whose
 * EXEC got no answer is looked for in the stream (XREVRANGE) before it is
 * executed again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "metering/commands.h"
#include "metering/flusher.h"
#include "metering/quota.h"
#include "metering/replication.h"

#define LOG_PREFIX "lizard-gateway: metering: "

typedef struct st_gw_metering_flusher_t {
    gw_metering_t *m;
    gw_redis_t *redis;                       /* NULL while the flusher stops */
    gw_metering_batch_t *sending;            /* from MULTI until the INFO after its EXEC answered */
    int exec_ok;                             /* sending's EXEC was answered with its results */
    int exec_alone;                          /* the INFO after it could not be queued: on_exec settles the batch */
    int exec_unknown;                        /* sending's EXEC got no answer: it may have run */
    uint64_t sent_ms;                        /* when sending's EXEC went (wall clock) */
    unsigned search_pages;                   /* of the stream, for sending, whose EXEC may have run */
    uint64_t offset;                         /* the primary's master_repl_offset at its last INFO */
    int probed;                              /* the primary of this connection was compared with the queue */
    int asking;                              /* an INFO replication of ours (not a batch's) awaits its answer */
    int failing;                             /* the last attempt failed: log only when that changes */
    int need_replica;                        /* Sentinel: a batch is written only once a replica acknowledged it */
    char replid[GW_METERING_REPLID_MAX + 1]; /* of the primary this connection reaches */
    gw_quota_watch_t *quota;                 /* the sandboxes published at their egress_quota */
} flusher_t;

static const char *INFO_ARGV[] = {"INFO", "replication"};
static const size_t INFO_ARGVLEN[] = {4, 11};

static void send_next(flusher_t *f);

static void on_queued(void *data, const char *err, redisReply *reply)
{
    /* MULTI's +OK and each +QUEUED; a refused command makes EXEC fail, which
     * is where the batch's fate is decided */
    (void)data;
    (void)err;
    (void)reply;
}

static void set_failing(flusher_t *f, int failing, const char *why, size_t records)
{
    if (failing && !f->failing)
        fprintf(stderr, LOG_PREFIX "writing to Redis failed (%s); %zu records are kept and retried\n", why, records);
    else if (!failing && f->failing)
        fprintf(stderr, LOG_PREFIX "writing to Redis again\n");
    f->failing = failing;
}

/* An INFO replication answer (NULL: none). 0 with *out, or -1. */
static int read_info(const char *err, const redisReply *reply, gw_repl_info_t *out)
{
    if (err != NULL || reply == NULL || reply->type != REDIS_REPLY_STRING)
        return -1;
    return gw_repl_info_parse(reply->str, reply->len, out);
}

/* What an INFO of this connection's primary says: on its first, which
 * waiting batches it holds; on every one, which a replica acknowledged. */
static void learn(flusher_t *f, const gw_repl_info_t *info)
{
    if (!f->probed) {
        gw_metering_primary_now(f->m, info);
        snprintf(f->replid, sizeof(f->replid), "%s", info->replid);
        f->probed = 1;
    } else if (strcmp(f->replid, info->replid) != 0) {
        /* the same server (one connection) renamed its history: Redis does when a primary without a
         * backlog (one promoted before it ever synced, or just started) gets its first replica */
        gw_metering_history_renamed(f->m, f->replid, info);
        snprintf(f->replid, sizeof(f->replid), "%s", info->replid);
    }
    f->offset = info->offset;
    if (f->need_replica)
        gw_metering_acked(f->m, info);
}

static void on_info(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;
    gw_repl_info_t info;

    f->asking = 0;
    if (f->redis == NULL || read_info(err, reply, &info) != 0 || !info.is_primary)
        return; /* asked again at the next tick (a replica's answer: the connection is being replaced) */
    learn(f, &info);
    send_next(f);
}

static void ask_info(flusher_t *f)
{
    if (f->asking || f->redis == NULL || !gw_redis_is_ready(f->redis))
        return;
    f->asking = gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_info, f, 2, INFO_ARGV, INFO_ARGVLEN) != NULL;
}

static void on_published(void *data, const char *err, redisReply *reply)
{
    (void)data;
    (void)reply;
    if (err != NULL)
        fprintf(stderr, LOG_PREFIX "publishing a sandbox at its egress_quota failed (%s); gateways see it at their cache TTL\n",
                err);
}

/* A sandbox's running total reached its egress_quota: PUBLISH <prefix>routes
 * <id>, as the control plane does after a change, so that every gateway
 * (this one's workers too) reads its record and total again. */
static void publish_reached(void *arg, const char *sandbox)
{
    flusher_t *f = arg;
    size_t prefix_len = strlen(f->m->prefix);
    char *channel = h2o_mem_alloc(prefix_len + sizeof("routes"));
    const char *argv[] = {"PUBLISH", channel, sandbox};
    size_t argvlen[] = {7, prefix_len + sizeof("routes") - 1, strlen(sandbox)};

    memcpy(channel, f->m->prefix, prefix_len);
    memcpy(channel + prefix_len, "routes", sizeof("routes"));
    /* f->redis is set: an EXEC answered on it */
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_published, NULL, 3, argv, argvlen) == NULL)
        on_published(NULL, "disconnected", NULL);
    free(channel);
}

static void on_exec_info(void *data, const char *err, redisReply *reply);

static void on_exec(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;

    if (err != NULL || reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        f->exec_ok = 0;
        /* no answer (an error reply means it did not run) */
        f->exec_unknown = err != NULL && (strcmp(err, "disconnected") == 0 || strcmp(err, "timeout") == 0);
        if (f->redis != NULL) /* not while the flusher stops */
            set_failing(f, 1, err != NULL ? err : "transaction aborted", f->sending->num_records);
    } else {
        f->exec_ok = 1;
        gw_metering_count_lost(f->m, gw_metering_report_exec_errors(reply));
        if (f->redis != NULL)
            gw_metering_count_quota_reached(f->m, gw_quota_watch_exec(f->quota, f->sending, reply, publish_reached, f));
    }
    if (f->exec_alone) {
        f->exec_alone = 0;
        on_exec_info(f, "not sent", NULL);
    }
}

/* The INFO queued right after the EXEC: where the batch went. */
static void on_exec_info(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;
    gw_metering_batch_t *b = f->sending;
    gw_repl_info_t info;
    int have = read_info(err, reply, &info) == 0 && info.is_primary;

    f->sending = NULL;
    if (!f->exec_ok) {
        if (f->exec_unknown)
            gw_metering_batch_unknown(f->m, b, f->sent_ms); /* looked for in the stream before it goes again */
        else
            gw_metering_batch_failed(f->m, b);
        return; /* sent again at the next tick or reconnect, not in a tight loop */
    }
    set_failing(f, 0, NULL, 0);
    /* the EXEC ran on this connection's primary: its offset now is where the batch ends (or later,
     * should another client's write have come in between) */
    gw_metering_batch_executed(f->m, b, have ? info.replid : f->replid, have ? info.offset : GW_METERING_OFFSET_UNKNOWN,
                               f->need_replica);
    if (have)
        learn(f, &info);
    if (f->redis != NULL)
        send_next(f); /* a backlog drains without waiting for ticks */
}

/* gw_metering_emit_cb: one command inside the transaction, its reply ignored */
static int queue_command(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    flusher_t *f = arg;

    return gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, argc, argv, argvlen) != NULL ? 0 : -1;
}

/* Queues MULTI, the batch, EXEC and INFO replication on the connection
 * within one call, so no other command of ours lands in between. Returns 0
 * or -1 (nothing will answer). */
static int send_batch(flusher_t *f, gw_metering_batch_t *b)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *discard[] = {"DISCARD"};
    static const size_t multi_len[] = {5}, exec_len[] = {4}, discard_len[] = {7};

    if (queue_command(f, 1, multi, multi_len) != 0)
        return -1;
    if (gw_metering_emit_batch(f->m->prefix, f->m->instance_id, b, queue_command, f) < 0)
        goto Discard;
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_exec, f, 1, exec, exec_len) == NULL)
        goto Discard;
    /* once EXEC is queued its answer comes (or "disconnected"), and this one right after it */
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_exec_info, f, 2, INFO_ARGV, INFO_ARGVLEN) == NULL)
        f->exec_alone = 1;
    return 0;

Discard:
    queue_command(f, 1, discard, discard_len);
    return -1;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sends f->sending (set, SENDING). */
static void execute(flusher_t *f)
{
    gw_metering_batch_t *b = f->sending;

    f->exec_ok = 0;
    f->exec_alone = 0;
    f->exec_unknown = 0;
    f->sent_ms = wall_ms();
    if (send_batch(f, b) != 0) {
        f->sending = NULL;
        set_failing(f, 1, "could not queue the commands", b->num_records);
        gw_metering_batch_failed(f->m, b);
    }
}

static void search(flusher_t *f, const char *end);

/* A page of the stream, newest first, looking for the batch whose EXEC got no answer. */
static void on_search(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;
    gw_metering_batch_t *b = f->sending;
    const gw_metering_record_t *r = b->records;
    char last[64], end[66];
    int found = err == NULL ? gw_metering_search_page(reply, r->gateway != NULL ? r->gateway : f->m->instance_id, r->seq, last,
                                                      sizeof(last))
                            : -1;

    if (found < 0 || f->redis == NULL) {
        f->sending = NULL;
        gw_metering_batch_unknown(f->m, b, b->unknown_since_ms); /* still unknown: searched again later */
        return;
    }
    if (found) {
        /* it ran: this primary holds it; its offset now bounds where */
        f->sending = NULL;
        gw_metering_batch_found(f->m, b, f->replid, f->offset, f->need_replica);
        fprintf(stderr, LOG_PREFIX "a batch that may have run (its EXEC got no answer, or the primary's history is new) is in the "
                                   "stream: not executed again\n");
        send_next(f);
        return;
    }
    if (last[0] != '\0' && ++f->search_pages < GW_METERING_SEARCH_PAGES) {
        snprintf(end, sizeof(end), "(%s", last);
        search(f, end);
        return;
    }
    gw_metering_batch_lacking(f->m, b);
    execute(f);
}

static void search(flusher_t *f, const char *end)
{
    gw_metering_batch_t *b = f->sending;
    size_t prefix_len = strlen(f->m->prefix);
    char *key = h2o_mem_alloc(prefix_len + sizeof("egress")), start[32], count[16];
    uint64_t since = b->unknown_since_ms > GW_METERING_SEARCH_MARGIN_MS ? b->unknown_since_ms - GW_METERING_SEARCH_MARGIN_MS : 0;
    const char *argv[] = {"XREVRANGE", key, end, start, "COUNT", count};
    size_t argvlen[] = {9, prefix_len + sizeof("egress") - 1, strlen(end), 0, 5, 0};

    memcpy(key, f->m->prefix, prefix_len);
    memcpy(key + prefix_len, "egress", sizeof("egress"));
    argvlen[3] = (size_t)snprintf(start, sizeof(start), "%llu-0", (unsigned long long)since);
    argvlen[5] = (size_t)snprintf(count, sizeof(count), "%d", GW_METERING_SEARCH_PAGE);
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_search, f, 6, argv, argvlen) == NULL) {
        f->sending = NULL;
        gw_metering_batch_unknown(f->m, b, b->unknown_since_ms);
    }
    free(key);
}

static void send_next(flusher_t *f)
{
    gw_metering_batch_t *b;

    if (f->redis == NULL || f->sending != NULL || !f->probed || !gw_redis_is_ready(f->redis))
        return;
    if ((b = gw_metering_next_batch(f->m)) == NULL)
        return;
    f->sending = b;
    if (b->unknown_since_ms != 0) {
        /* its EXEC may have run (on this primary, or on one this one was promoted from): only if the
         * stream does not hold it is it executed again */
        f->search_pages = 0;
        search(f, "+");
        return;
    }
    execute(f);
}

static void on_redis_state(void *data, int connected)
{
    flusher_t *f = data;

    /* a new connection may reach a new primary: nothing is sent before its INFO said what it holds */
    f->probed = 0;
    if (connected)
        ask_info(f);
}

void gw_metering_start_flusher(gw_metering_t *m, h2o_loop_t *loop, const gw_redis_conf_t *conf)
{
    flusher_t *f = h2o_mem_alloc(sizeof(*f));

    memset(f, 0, sizeof(*f));
    f->m = m;
    f->need_replica = conf->num_sentinels != 0;
    f->redis = gw_redis_new(loop, conf); /* never NULL */
    f->quota = gw_quota_watch_new();
    gw_redis_set_state_cb(f->redis, on_redis_state, f);
    m->flusher = f;
}

void gw_metering_flush(gw_metering_t *m, int seal)
{
    flusher_t *f = m->flusher;

    if (seal)
        gw_metering_seal(m, 0);
    if (f == NULL)
        return;
    if (!f->probed || (f->need_replica && gw_metering_has_unacked(m)))
        ask_info(f);
    send_next(f);
}

int gw_metering_in_flight(const gw_metering_t *m)
{
    return m->flusher != NULL && m->flusher->sending != NULL;
}

void gw_metering_stop_flusher(gw_metering_t *m)
{
    flusher_t *f = m->flusher;
    gw_redis_t *r;

    if (f == NULL)
        return;
    r = f->redis;
    f->redis = NULL;
    /* a batch in flight gets "disconnected" now and is SEALED again */
    gw_redis_free(r);
    gw_quota_watch_free(f->quota);
    m->flusher = NULL;
    free(f);
}
