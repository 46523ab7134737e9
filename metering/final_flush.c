/*
 * The final flush (metering/final_flush.h): hiredis's blocking API with a
 * timeout (redisConnectWithTimeout, redisSetTimeout) against one deadline
 * for the whole exit, the same commands as the flusher, then the spill file.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include "metering/commands.h"
#include "metering/final_flush.h"
#include "common/netaddr.h"

#define LOG_PREFIX "lizard-gateway: metering: "

typedef struct st_final_t {
    uint64_t deadline; /* CLOCK_MONOTONIC ms */
    char why[256];     /* the last failure, for the log line */
} final_t;

static void set_why(final_t *f, const char *why)
{
    snprintf(f->why, sizeof(f->why), "%s", why);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What is left of the deadline, at least 1 ms (a zero timeval would mean no timeout to hiredis). */
static struct timeval remaining_tv(const final_t *f)
{
    uint64_t now = mono_ms(), left = f->deadline > now ? f->deadline - now : 1;
    struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
    return tv;
}

/* A blocking connection with AUTH, connected within the deadline, each
 * later call bounded by it too (redisSetTimeout). NULL with f->why on failure. */
static redisContext *connect_blocking(final_t *f, const gw_netaddr_t *addr, const char *password)
{
    char host[NI_MAXHOST];
    redisContext *c;
    redisReply *reply;

    if (addr->ss.ss_family == AF_UNIX) {
        c = redisConnectUnixWithTimeout(((const struct sockaddr_un *)&addr->ss)->sun_path, remaining_tv(f));
    } else if (getnameinfo((const struct sockaddr *)&addr->ss, addr->len, host, sizeof(host), NULL, 0, NI_NUMERICHOST) == 0) {
        c = redisConnectWithTimeout(host, gw_netaddr_port(addr), remaining_tv(f));
    } else {
        set_why(f, "cannot format the address");
        return NULL;
    }
    if (c == NULL || c->err != 0) {
        set_why(f, c != NULL ? c->errstr : "out of memory");
        goto Error;
    }
    redisSetTimeout(c, remaining_tv(f));
    if (password != NULL) {
        const char *argv[] = {"AUTH", password};
        size_t argvlen[] = {4, strlen(password)};
        if ((reply = redisCommandArgv(c, 2, argv, argvlen)) == NULL || reply->type == REDIS_REPLY_ERROR) {
            set_why(f, reply == NULL ? "no answer to AUTH" : "AUTH refused");
            freeReplyObject(reply);
            goto Error;
        }
        freeReplyObject(reply);
    }
    return c;

Error:
    if (c != NULL)
        redisFree(c);
    return NULL;
}

/* gw_metering_emit_cb: appended to the context's output buffer, sent with EXEC */
static int append_command(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    return redisAppendCommandArgv(arg, argc, argv, argvlen) == REDIS_OK ? 0 : -1;
}

/* INFO replication: the primary's replication id into replid. 0 or -1 with f->why. */
static int replid_blocking(final_t *f, redisContext *c, char *replid)
{
    static const char *info[] = {"INFO", "replication"};
    static const size_t info_len[] = {4, 11};
    redisReply *reply;
    int ret;

    redisSetTimeout(c, remaining_tv(f));
    if ((reply = redisCommandArgv(c, 2, info, info_len)) == NULL) {
        set_why(f, "no answer to INFO");
        return -1;
    }
    if ((ret = gw_metering_info_replid(reply, replid)) != 0)
        set_why(f, "the server is not a primary any more");
    freeReplyObject(reply);
    return ret;
}

static int send_batch_blocking(final_t *f, redisContext *c, gw_metering_t *m, gw_metering_batch_t *b)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    static const size_t multi_len[] = {5}, exec_len[] = {4};
    char replid[GW_METERING_REPLID_MAX + 1];
    redisReply *reply = NULL;
    long commands;
    size_t i, replies;
    int ok = 0;

    /* a batch the flusher's EXEC took on this very primary is not executed again (INCRBY 0 only) */
    if (replid_blocking(f, c, replid) != 0)
        return -1;
    redisSetTimeout(c, remaining_tv(f));
    redisAppendCommandArgv(c, 1, multi, multi_len);
    if ((commands = gw_metering_emit_batch(m->prefix, m->instance_id, b, replid, append_command, c)) < 0) {
        set_why(f, "could not queue the commands");
        return -1;
    }
    redisAppendCommandArgv(c, 1, exec, exec_len);
    replies = (size_t)commands + 2;
    for (i = 0; i != replies; ++i) {
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
            set_why(f, c->errstr[0] != '\0' ? c->errstr : "connection lost");
            return -1;
        }
        if (i == replies - 1) {
            ok = reply->type == REDIS_REPLY_ARRAY;
            if (ok)
                gw_metering_count_lost(m, gw_metering_report_exec_errors(reply));
            else
                set_why(f, reply->type == REDIS_REPLY_ERROR ? "transaction aborted" : "unexpected reply to EXEC");
        }
        freeReplyObject(reply);
    }
    if (ok)
        gw_metering_mark_executed(b, replid); /* so the spill file says so, should no replica acknowledge it */
    return ok ? 0 : -1;
}

/* ROLE then, with Sentinel or with replicas, WAIT 1: as the flusher does.
 * 0 when the batch counts as written. */
static int wait_replica_blocking(final_t *f, redisContext *c, int need_replica)
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

    redisSetTimeout(c, remaining_tv(f));
    if ((reply = redisCommandArgv(c, 1, role, role_len)) == NULL) {
        set_why(f, "no answer to ROLE");
        return -1;
    }
    replicas = gw_metering_role_replicas(reply);
    freeReplyObject(reply);
    if (replicas < 0 || (replicas == 0 && !need_replica)) {
        set_why(f, "the server is not a primary any more");
        return replicas == 0 ? 0 : -1;
    }
    /* WAIT answers shortly before the deadline, with the number it has */
    argvlen[2] = (size_t)snprintf(timeout, sizeof(timeout), "%llu",
                                  (unsigned long long)(f->deadline > now + 100 ? f->deadline - now - 100 : 1));
    if ((reply = redisCommandArgv(c, 3, argv, argvlen)) == NULL) {
        set_why(f, "no answer to WAIT");
        return -1;
    }
    ok = reply->type == REDIS_REPLY_INTEGER && reply->integer >= 1;
    freeReplyObject(reply);
    if (!ok)
        set_why(f, "no replica acknowledged the batch");
    return ok ? 0 : -1;
}

/* Sentinel mode: asks each sentinel in turn for the primary. 0 and *out, or -1 with f->why. */
static int ask_sentinels_blocking(final_t *f, const gw_redis_conf_t *conf, gw_netaddr_t *out)
{
    size_t i;

    for (i = 0; i != conf->num_sentinels && mono_ms() < f->deadline; ++i) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", conf->master_name};
        size_t argvlen[] = {8, 23, strlen(conf->master_name)};
        redisContext *c;
        redisReply *reply;
        uint16_t port;
        int ok;

        if ((c = connect_blocking(f, conf->sentinels + i, conf->sentinel_password)) == NULL)
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
        set_why(f, "no sentinel named the primary");
    }
    return -1;
}

/* ZADD <prefix>activity GT for the last interval of every worker: best-effort,
 * never spilled (CONTRACT.md "Activity"). */
static void write_activity_blocking(final_t *f, redisContext *c, gw_metering_t *m)
{
    redisReply *reply;
    size_t commands, i;

    if (m->activity == NULL || gw_activity_num_pending(m->activity) == 0)
        return;
    redisSetTimeout(c, remaining_tv(f));
    commands = gw_activity_emit(m->activity, m->prefix, append_command, c);
    for (i = 0; i != commands; ++i) {
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
            fprintf(stderr, "activity: final ZADD: %s\n", c->errstr[0] != '\0' ? c->errstr : "connection lost");
            return;
        }
        if (reply->type == REDIS_REPLY_ERROR)
            fprintf(stderr, "activity: final ZADD: %s\n", reply->str);
        freeReplyObject(reply);
    }
}

redisContext *gw_metering_connect_blocking(const gw_redis_conf_t *conf, uint64_t timeout_ms, char *why, size_t why_size)
{
    final_t f = {mono_ms() + timeout_ms, "?"};
    gw_netaddr_t primary = conf->addr;
    redisContext *c = NULL;

    if (conf->num_sentinels == 0 || ask_sentinels_blocking(&f, conf, &primary) == 0)
        c = connect_blocking(&f, &primary, conf->password);
    if (c == NULL)
        snprintf(why, why_size, "%s", f.why);
    return c;
}

/* Writes the activity, then EXECs every batch in order until one fails,
 * then one ROLE/WAIT for all of them (WAIT counts up to the connection's
 * last write): without a replica's acknowledgement none counts as written,
 * but the primary holds them all, and the spill file says so
 * (executed_on). Returns the records written. */
static size_t write_batches(final_t *f, gw_metering_t *m, const gw_redis_conf_t *conf)
{
    gw_netaddr_t primary = conf->addr;
    gw_metering_batch_t *b;
    redisContext *c;
    size_t written = 0, executed = 0, i;

    if (conf->num_sentinels != 0 && ask_sentinels_blocking(f, conf, &primary) != 0)
        return 0;
    if ((c = connect_blocking(f, &primary, conf->password)) == NULL)
        return 0;
    write_activity_blocking(f, c, m); /* first: a few commands that the batches' WAIT must not crowd out */
    /* the flusher's loop is gone and this thread is the only one left: the queue is walked as is */
    for (b = m->head; b != NULL && send_batch_blocking(f, c, m, b) == 0; b = b->next)
        ++executed;
    /* a batch only counts when, with Sentinel or replicas, one of them has it; ROLE also keeps us
     * off a replica the sentinels named a moment before a failover */
    if (executed != 0 && wait_replica_blocking(f, c, conf->num_sentinels != 0) == 0) {
        for (i = 0; i != executed && (b = gw_metering_next_batch(m)) != NULL; ++i) {
            written += b->num_records;
            gw_metering_batch_done(m, b, 1);
        }
    }
    redisFree(c);
    return written;
}

int gw_metering_final_flush(gw_metering_t *m, const gw_redis_conf_t *conf, uint64_t timeout_ms)
{
    final_t f = {mono_ms() + timeout_ms, "?"};
    gw_metering_stats_t st;
    size_t written = 0;
    uint64_t skipped;
    char *err = NULL;

    gw_metering_seal(m, 1);
    /* the flusher's loop is gone: a batch it had in flight is sent again, same seq */
    gw_metering_requeue_in_flight(m);
    gw_metering_get_stats(m, &st);
    if (st.pending_batches != 0 || (m->activity != NULL && gw_activity_num_pending(m->activity) != 0))
        written = write_batches(&f, m, conf);

    gw_metering_get_stats(m, &st);
    if (st.pending_records == 0) {
        if (written != 0)
            fprintf(stderr, LOG_PREFIX "final flush: %zu records written\n", written);
        return 0;
    }
    fprintf(stderr, LOG_PREFIX "final flush: Redis unavailable (%s), %zu records written, spilling %llu to %s\n", f.why, written,
            (unsigned long long)st.pending_records, m->spill.path != NULL ? m->spill.path : "(none)");
    if (gw_metering_write_spill(m, &err) != 0) {
        fprintf(stderr, LOG_PREFIX "%s; %llu records are lost\n", err, (unsigned long long)st.pending_records);
        gw_metering_count_lost(m, st.pending_records);
        free(err);
        return -1;
    }
    skipped = st.spill_malformed;
    gw_metering_get_stats(m, &st);
    if (st.spill_malformed == skipped)
        return 0;
    gw_metering_count_lost(m, st.spill_malformed - skipped); /* could not be written: reported one by one */
    return -1;
}
