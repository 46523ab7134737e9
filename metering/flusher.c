/*
 * The flusher (metering/flusher.h): INFO replication (the primary's
 * replication id), then MULTI, the batch's commands and EXEC queued in one
 * go, then ROLE and WAIT 1 before a batch counts as written: always with
 * Sentinel, else when the primary lists replicas. A batch that EXEC took
 * but no replica acknowledged is sent again as INCRBY 0 only to a primary
 * of the same replication id (metering/commands.h), so it never counts
 * twice there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metering/commands.h"
#include "metering/flusher.h"
#include "metering/quota.h"

#define LOG_PREFIX "lizard-gateway: metering: "

typedef struct st_gw_metering_flusher_t {
    gw_metering_t *m;
    gw_redis_t *redis;                       /* NULL while the flusher stops */
    gw_metering_batch_t *sending;            /* from MULTI until EXEC and, with replicas, WAIT said it is written */
    int failing;                             /* the last attempt failed: log only when that changes */
    int waiting_replica;                     /* the last WAIT saw no replica acknowledge: log only when that changes */
    int need_replica;                        /* Sentinel: a batch is written only once a replica acknowledged it */
    char replid[GW_METERING_REPLID_MAX + 1]; /* of the primary the batch in flight goes to */
    gw_quota_watch_t *quota;                 /* the sandboxes published at their egress_quota */
} flusher_t;

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

/* The batch in flight is settled: written (ok) or to be sent again. */
static void sending_done(flusher_t *f, int ok, const char *err)
{
    gw_metering_batch_t *b = f->sending;

    f->sending = NULL;
    if (f->redis != NULL) /* not while the flusher stops */
        set_failing(f, !ok, err != NULL ? err : "transaction aborted", b->num_records);
    gw_metering_batch_done(f->m, b, ok);
    if (ok && f->redis != NULL)
        send_next(f); /* a backlog after an outage drains without waiting for ticks */
}

static void check_replicas(flusher_t *f);

static void on_wait(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;

    if (err == NULL && reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer >= 1) {
        if (f->waiting_replica)
            fprintf(stderr, LOG_PREFIX "a replica acknowledged the batch\n");
        f->waiting_replica = 0;
        sending_done(f, 1, NULL);
        return;
    }
    if (err != NULL || f->redis == NULL || !gw_redis_is_ready(f->redis)) {
        /* the primary went away before a replica had the batch: it is sent again (same seq) to
         * whichever server is primary next */
        sending_done(f, 0, err != NULL ? err : "disconnected before a replica acknowledged");
        return;
    }
    if (!f->waiting_replica)
        fprintf(stderr, LOG_PREFIX "no replica acknowledged the last batch within %d ms; waiting\n", GW_METERING_WAIT_MS);
    f->waiting_replica = 1;
    check_replicas(f); /* the replicas may be gone for good: then the primary's copy is all there is */
}

static void on_role(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;
    long replicas = err == NULL ? gw_metering_role_replicas(reply) : -1;
    char timeout[24];
    const char *argv[] = {"WAIT", "1", timeout};
    size_t argvlen[] = {4, 1, 0};

    if (replicas < 0) {
        sending_done(f, 0, err != NULL ? err : "the server is not a primary any more");
        return;
    }
    if (replicas == 0 && !f->need_replica) {
        /* no replica to fail over to: the primary's copy is the copy (without Sentinel nothing
         * promotes a replica that is still in its first sync, which ROLE does not list) */
        f->waiting_replica = 0;
        sending_done(f, 1, NULL);
        return;
    }
    argvlen[2] = (size_t)snprintf(timeout, sizeof(timeout), "%d", GW_METERING_WAIT_MS);
    if (f->redis == NULL ||
        gw_redis_command_argv(f->redis, GW_METERING_WAIT_MS + GW_METERING_EXEC_TIMEOUT_MS, on_wait, f, 3, argv, argvlen) == NULL)
        sending_done(f, 0, "disconnected before a replica acknowledged");
}

/* After EXEC: with replicas, the batch is written once one of them has it
 * (WAIT 1): a primary that dies right after EXEC must not take it along. */
static void check_replicas(flusher_t *f)
{
    static const char *role[] = {"ROLE"};
    static const size_t role_len[] = {4};

    if (f->redis == NULL || gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_role, f, 1, role, role_len) == NULL)
        sending_done(f, 0, "disconnected before a replica acknowledged");
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

static void on_exec(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;

    if (err != NULL || reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        sending_done(f, 0, err);
        return;
    }
    gw_metering_count_lost(f->m, gw_metering_report_exec_errors(reply));
    gw_metering_count_quota_reached(f->m, gw_quota_watch_exec(f->quota, f->sending, f->replid, reply, publish_reached, f));
    /* in this primary's data set now: never executed on it again, whatever becomes of the WAIT */
    gw_metering_mark_executed(f->sending, f->replid);
    check_replicas(f);
}

static void on_redis_state(void *data, int connected)
{
    if (connected)
        send_next(data);
}

/* gw_metering_emit_cb: one command inside the transaction, its reply ignored */
static int queue_command(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    flusher_t *f = arg;

    return gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_queued, NULL, argc, argv, argvlen) != NULL ? 0 : -1;
}

/* Queues MULTI, the batch and EXEC on the connection within one call, so no
 * other command can land inside the transaction. Returns 0 or -1. */
static int send_batch(flusher_t *f, gw_metering_batch_t *b)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *discard[] = {"DISCARD"};
    static const size_t multi_len[] = {5}, exec_len[] = {4}, discard_len[] = {7};

    if (queue_command(f, 1, multi, multi_len) != 0)
        return -1;
    if (gw_metering_emit_batch(f->m->prefix, f->m->instance_id, b, f->replid, queue_command, f) < 0)
        goto Discard;
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_exec, f, 1, exec, exec_len) == NULL)
        goto Discard;
    return 0;

Discard:
    queue_command(f, 1, discard, discard_len);
    return -1;
}

/* INFO replication's answer: the replication id of the primary that gets the
 * batch, asked on the same connection right before it (a reconnect in
 * between fails both). */
static void on_info(void *data, const char *err, redisReply *reply)
{
    flusher_t *f = data;

    if (f->redis == NULL || err != NULL || gw_metering_info_replid(reply, f->replid) != 0) {
        sending_done(f, 0, err != NULL ? err : "the server is not a primary any more");
        return;
    }
    if (send_batch(f, f->sending) != 0)
        sending_done(f, 0, "could not queue the commands");
}

static void send_next(flusher_t *f)
{
    static const char *info[] = {"INFO", "replication"};
    static const size_t info_len[] = {4, 11};
    gw_metering_batch_t *b;

    if (f->redis == NULL || f->sending != NULL || !gw_redis_is_ready(f->redis))
        return;
    if ((b = gw_metering_next_batch(f->m)) == NULL)
        return;
    f->sending = b;
    if (gw_redis_command_argv(f->redis, GW_METERING_EXEC_TIMEOUT_MS, on_info, f, 2, info, info_len) == NULL) {
        f->sending = NULL;
        set_failing(f, 1, "could not queue the commands", b->num_records);
        gw_metering_batch_done(f->m, b, 0);
    }
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

void gw_metering_flush(gw_metering_t *m)
{
    gw_metering_seal(m, 0);
    if (m->flusher != NULL)
        send_next(m->flusher);
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
    /* a batch in flight gets "disconnected" now and stays first in the queue */
    gw_redis_free(r);
    gw_quota_watch_free(f->quota);
    m->flusher = NULL;
    free(f);
}
