/*
 * The final flush (metering/final_flush.h): hiredis's blocking API with a
 * timeout (redisConnectWithTimeout, redisSetTimeout) against one deadline
 * for the whole exit, the same commands as the flusher, then the journal.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "metering/commands.h"
#include "metering/final_flush.h"
#include "metering/replication.h"
#include "common/netaddr.h"

#define LOG_PREFIX "lizard-gateway: metering: "

typedef struct st_final_t {
    uint64_t deadline;                       /* CLOCK_MONOTONIC ms */
    char why[256];                           /* the last failure, for the log line */
    char replid[GW_METERING_REPLID_MAX + 1]; /* of the primary connected to */
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

/* INFO replication of a primary into *info. 0, or -1 with f->why. */
static int info_blocking(final_t *f, redisContext *c, gw_repl_info_t *info)
{
    static const char *argv[] = {"INFO", "replication"};
    static const size_t argvlen[] = {4, 11};
    redisReply *reply;
    int ok;

    redisSetTimeout(c, remaining_tv(f));
    if ((reply = redisCommandArgv(c, 2, argv, argvlen)) == NULL) {
        set_why(f, "no answer to INFO");
        return -1;
    }
    ok = reply->type == REDIS_REPLY_STRING && gw_repl_info_parse(reply->str, reply->len, info) == 0 && info->is_primary;
    freeReplyObject(reply);
    if (!ok)
        set_why(f, "the server is not a primary any more");
    return ok ? 0 : -1;
}

/* MULTI, the batch, EXEC and INFO replication in one go, as the flusher
 * sends them. 0 when EXEC ran (b is then executed, or written), or -1. */
static int send_batch_blocking(final_t *f, redisContext *c, gw_metering_t *m, gw_metering_batch_t *b, int need_replica)
{
    static const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"}, *info[] = {"INFO", "replication"};
    static const size_t multi_len[] = {5}, exec_len[] = {4}, info_len[] = {4, 11};
    gw_repl_info_t where;
    redisReply *reply = NULL;
    long commands;
    size_t i, replies;
    int ok = 0, have = 0;

    redisSetTimeout(c, remaining_tv(f));
    redisAppendCommandArgv(c, 1, multi, multi_len);
    if ((commands = gw_metering_emit_batch(m->prefix, m->instance_id, b, append_command, c)) < 0) {
        set_why(f, "could not queue the commands");
        return -1;
    }
    redisAppendCommandArgv(c, 1, exec, exec_len);
    redisAppendCommandArgv(c, 2, info, info_len);
    replies = (size_t)commands + 3;
    for (i = 0; i != replies; ++i) {
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
            set_why(f, c->errstr[0] != '\0' ? c->errstr : "connection lost");
            break;
        }
        if (i == replies - 2) {
            if ((ok = reply->type == REDIS_REPLY_ARRAY) != 0)
                gw_metering_count_lost(m, gw_metering_report_exec_errors(reply));
            else
                set_why(f, reply->type == REDIS_REPLY_ERROR ? "transaction aborted" : "unexpected reply to EXEC");
        } else if (i == replies - 1) {
            have = reply->type == REDIS_REPLY_STRING && gw_repl_info_parse(reply->str, reply->len, &where) == 0;
        }
        freeReplyObject(reply);
    }
    if (!ok) {
        if (i != replies) /* no answer to the EXEC: it may have run */
            gw_metering_batch_unknown(m, b, (uint64_t)time(NULL) * 1000);
        else
            gw_metering_batch_failed(m, b);
        return -1;
    }
    gw_metering_batch_executed(m, b, have ? where.replid : f->replid, have ? where.offset : GW_METERING_OFFSET_UNKNOWN,
                               need_replica);
    return 0;
}

/* A batch whose EXEC got no answer (the flusher's connection died under
 * it): 1 when the stream holds it, 0 when not, -1 when that cannot be told. */
static int search_blocking(final_t *f, redisContext *c, gw_metering_t *m, const gw_metering_batch_t *b)
{
    const gw_metering_record_t *r = b->records;
    uint64_t since = b->unknown_since_ms > GW_METERING_SEARCH_MARGIN_MS ? b->unknown_since_ms - GW_METERING_SEARCH_MARGIN_MS : 0;
    char key[300], end[66] = "+", start[32], count[16], last[64];
    const char *argv[] = {"XREVRANGE", key, end, start, "COUNT", count};
    size_t argvlen[6] = {9, 0, 1, 0, 5, 0};
    redisReply *reply;
    int found = 0;

    argvlen[1] = (size_t)snprintf(key, sizeof(key), "%segress", m->prefix);
    argvlen[3] = (size_t)snprintf(start, sizeof(start), "%llu-0", (unsigned long long)since);
    argvlen[5] = (size_t)snprintf(count, sizeof(count), "%d", GW_METERING_SEARCH_PAGE);
    for (int page = 0; page != GW_METERING_SEARCH_PAGES && found == 0; ++page) {
        redisSetTimeout(c, remaining_tv(f));
        if (argvlen[1] >= sizeof(key) || (reply = redisCommandArgv(c, 6, argv, argvlen)) == NULL)
            return -1;
        found = gw_metering_search_page(reply, r->gateway != NULL ? r->gateway : m->instance_id, r->seq, last, sizeof(last));
        freeReplyObject(reply);
        if (found != 0 || last[0] == '\0')
            break;
        argvlen[2] = (size_t)snprintf(end, sizeof(end), "(%s", last);
    }
    return found;
}

/* With Sentinel: WAIT 1 for what this connection wrote (it makes the
 * replicas acknowledge at once), then INFO replication until every batch is
 * acknowledged or the deadline is near. */
static void wait_acks_blocking(final_t *f, redisContext *c, gw_metering_t *m, int wrote)
{
    gw_repl_info_t info;
    redisReply *reply;
    uint64_t now = mono_ms();
    char timeout[24];
    const char *argv[] = {"WAIT", "1", timeout};
    size_t argvlen[] = {4, 1, 0};

    if (wrote && f->deadline > now + 300) {
        argvlen[2] = (size_t)snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)(f->deadline - now - 250));
        redisSetTimeout(c, remaining_tv(f));
        freeReplyObject(redisCommandArgv(c, 3, argv, argvlen));
    }
    while (gw_metering_has_unacked(m) && info_blocking(f, c, &info) == 0) {
        gw_metering_acked(m, &info);
        if (!gw_metering_has_unacked(m) || mono_ms() + 200 > f->deadline)
            break;
        usleep(100 * 1000);
    }
    if (gw_metering_has_unacked(m))
        set_why(f, "no replica acknowledged the batches");
    (void)reply;
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
    final_t f = {mono_ms() + timeout_ms, "?", ""};
    gw_netaddr_t primary = conf->addr;
    redisContext *c = NULL;

    if (conf->num_sentinels == 0 || ask_sentinels_blocking(&f, conf, &primary) == 0)
        c = connect_blocking(&f, &primary, conf->password);
    if (c == NULL)
        snprintf(why, why_size, "%s", f.why);
    return c;
}

/* Writes the activity, then every batch the primary does not hold, in
 * order, until one fails; then, with Sentinel, waits for a replica's
 * acknowledgement. Returns the records written. */
static size_t write_batches(final_t *f, gw_metering_t *m, const gw_redis_conf_t *conf)
{
    gw_netaddr_t primary = conf->addr;
    gw_metering_batch_t *b;
    gw_metering_stats_t before, after;
    gw_repl_info_t info;
    redisContext *c;
    int need_replica = conf->num_sentinels != 0, wrote = 0;

    gw_metering_get_stats(m, &before);
    if (conf->num_sentinels != 0 && ask_sentinels_blocking(f, conf, &primary) != 0)
        return 0;
    if ((c = connect_blocking(f, &primary, conf->password)) == NULL)
        return 0;
    write_activity_blocking(f, c, m); /* first: a few commands that the batches must not crowd out */
    /* which batches that wait for a replica this primary holds, and which it lacks (executed below) */
    if (info_blocking(f, c, &info) == 0) {
        gw_metering_primary_now(m, &info);
        snprintf(f->replid, sizeof(f->replid), "%s", info.replid);
        while ((b = gw_metering_next_batch(m)) != NULL) {
            int found = b->unknown_since_ms != 0 ? search_blocking(f, c, m, b) : 0;
            if (found < 0) {
                set_why(f, "cannot search the stream");
                gw_metering_batch_unknown(m, b, b->unknown_since_ms);
                break;
            }
            if (found) {
                gw_metering_batch_found(m, b, info.replid, info.offset, need_replica);
                continue;
            }
            if (b->unknown_since_ms != 0)
                gw_metering_batch_lacking(m, b);
            if (send_batch_blocking(f, c, m, b, need_replica) != 0)
                break;
            wrote = 1;
        }
        if (need_replica)
            wait_acks_blocking(f, c, m, wrote);
    }
    redisFree(c);
    gw_metering_get_stats(m, &after);
    return (size_t)(after.records_written - before.records_written);
}

int gw_metering_final_flush(gw_metering_t *m, const gw_redis_conf_t *conf, uint64_t timeout_ms)
{
    final_t f = {mono_ms() + timeout_ms, "?", ""};
    gw_metering_stats_t st;
    size_t written = 0;
    char *err = NULL;

    gw_metering_seal(m, 1);
    /* the flusher's loop is gone: a batch it had in flight is sent again, same seq */
    gw_metering_requeue_in_flight(m);
    gw_metering_get_stats(m, &st);
    if (st.pending_batches != 0 || (m->activity != NULL && gw_activity_num_pending(m->activity) != 0))
        written = write_batches(&f, m, conf);

    gw_metering_get_stats(m, &st);
    if (st.pending_records != 0)
        fprintf(stderr, LOG_PREFIX "final flush: Redis did not take everything (%s), %zu records written, keeping %llu in %s\n",
                f.why, written, (unsigned long long)st.pending_records, m->spill.path != NULL ? m->spill.path : "(no journal)");
    else if (written != 0)
        fprintf(stderr, LOG_PREFIX "final flush: %zu records written\n", written);
    if (gw_metering_journal_finish(m, &err) != 0) {
        fprintf(stderr, LOG_PREFIX "%s; %llu records are lost\n", err, (unsigned long long)st.pending_records);
        gw_metering_count_lost(m, st.pending_records);
        free(err);
        return -1;
    }
    return 0;
}
