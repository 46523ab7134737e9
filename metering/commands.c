/*
 * The commands of a metering batch and the reading of their replies
 * (metering/commands.h). Keys are sized from the prefix and the sandbox id
 * at hand, not from a limit of the config.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/memory.h>
#include "metering/commands.h"

#define LOG_PREFIX "lizard-gateway: metering: "
#define CMD_MAX_ARGS 19

typedef struct st_cmd_t {
    int argc;
    const char *argv[CMD_MAX_ARGS];
    size_t argvlen[CMD_MAX_ARGS];
    char num[5][24];
} cmd_t;

static void cmd_arg(cmd_t *c, const char *s, size_t len)
{
    c->argv[c->argc] = s;
    c->argvlen[c->argc++] = len;
}

static void cmd_str(cmd_t *c, const char *s)
{
    cmd_arg(c, s, strlen(s));
}

static void cmd_num(cmd_t *c, size_t slot, uint64_t v)
{
    cmd_arg(c, c->num[slot], (size_t)snprintf(c->num[slot], sizeof(c->num[slot]), "%llu", (unsigned long long)v));
}

/* XADD <prefix>egress * sandbox .. project .. egress .. ingress .. from_ms .. to_ms .. gateway .. seq .. */
static void cmd_xadd(cmd_t *c, h2o_iovec_t stream_key, const char *instance_id, const gw_metering_record_t *r)
{
    c->argc = 0;
    cmd_str(c, "XADD");
    cmd_arg(c, stream_key.base, stream_key.len);
    cmd_str(c, "*");
    cmd_str(c, "sandbox");
    cmd_str(c, r->sandbox);
    cmd_str(c, "project");
    cmd_str(c, r->project);
    cmd_str(c, "egress");
    cmd_num(c, 0, r->egress);
    cmd_str(c, "ingress");
    cmd_num(c, 1, r->ingress);
    cmd_str(c, "from_ms");
    cmd_num(c, 2, r->from_ms);
    cmd_str(c, "to_ms");
    cmd_num(c, 3, r->to_ms);
    cmd_str(c, "gateway");
    cmd_str(c, r->gateway != NULL ? r->gateway : instance_id);
    cmd_str(c, "seq");
    cmd_num(c, 4, r->seq);
}

/* INCRBY <prefix>egress:{<sandbox>} <egress>; key is the caller's buffer */
static void cmd_incrby(cmd_t *c, char *key, size_t keycap, const char *prefix, const gw_metering_record_t *r)
{
    c->argc = 0;
    cmd_str(c, "INCRBY");
    cmd_arg(c, key, (size_t)snprintf(key, keycap, "%segress:{%s}", prefix, r->sandbox));
    cmd_num(c, 0, r->egress);
}

long gw_metering_emit_batch(const char *prefix, const char *instance_id, const gw_metering_batch_t *b, gw_metering_emit_cb emit,
                            void *arg)
{
    size_t prefix_len = strlen(prefix), keycap, i;
    char *stream, *key;
    long emitted = 0;
    cmd_t cmd;

    /* the longest key of the batch: "<prefix>egress:{<sandbox>}" with a sandbox id of at most GW_SANDBOX_ID_MAX */
    keycap = prefix_len + sizeof("egress:{}") + GW_SANDBOX_ID_MAX;
    key = h2o_mem_alloc(keycap);
    stream = h2o_mem_alloc(prefix_len + sizeof("egress"));
    h2o_iovec_t stream_key = h2o_iovec_init(stream, (size_t)snprintf(stream, prefix_len + sizeof("egress"), "%segress", prefix));

    /* per record */
    for (i = 0; i != b->num_records; ++i) {
        const gw_metering_record_t *r = b->records + i;
        cmd_xadd(&cmd, stream_key, instance_id, r);
        if (emit(arg, cmd.argc, cmd.argv, cmd.argvlen) != 0)
            goto Error;
        cmd_incrby(&cmd, key, keycap, prefix, r);
        if (emit(arg, cmd.argc, cmd.argv, cmd.argvlen) != 0)
            goto Error;
        emitted += 2;
    }

    free(stream);
    free(key);
    return emitted;

Error:
    free(stream);
    free(key);
    return -1;
}

size_t gw_metering_report_exec_errors(const redisReply *reply)
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
    return n;
}

/* The value of `field` in an entry's [field, value, ...] array, or NULL. */
static const redisReply *entry_field(const redisReply *fields, const char *field)
{
    size_t i;

    for (i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->type == REDIS_REPLY_STRING && strcmp(fields->element[i]->str, field) == 0)
            return fields->element[i + 1];
    return NULL;
}

int gw_metering_search_page(const redisReply *reply, const char *gateway, uint64_t seq, char *last, size_t last_size)
{
    char want[24];
    size_t i;

    last[0] = '\0';
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return -1;
    snprintf(want, sizeof(want), "%llu", (unsigned long long)seq);
    for (i = 0; i != reply->elements; ++i) {
        const redisReply *e = reply->element[i], *g, *s;
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
            return -1;
        if ((g = entry_field(e->element[1], "gateway")) != NULL && (s = entry_field(e->element[1], "seq")) != NULL &&
            g->type == REDIS_REPLY_STRING && s->type == REDIS_REPLY_STRING && strcmp(g->str, gateway) == 0 &&
            strcmp(s->str, want) == 0)
            return 1;
    }
    if (reply->elements == GW_METERING_SEARCH_PAGE)
        snprintf(last, last_size, "%s", reply->element[reply->elements - 1]->element[0]->str);
    return 0;
}
