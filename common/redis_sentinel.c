/*
 * Redis Sentinel discovery for common/redis.c: asks the sentinels in turn
 * for the primary of a master name, checks that the server it names calls
 * itself a primary (ROLE), and follows failovers (+switch-master, READONLY).
 */
#include <stdio.h>
#include <string.h>
#include <hiredis/async.h>
#include "common/engine.h"
#include "common/redis_internal.h"

/* Sentinel mode: only a server that calls itself a primary is used. A
 * sentinel's answer may be old (a failover under way), or the server may
 * have been demoted since. */
void gw_redis_sentinel_on_role(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply;

    if (!gw_redis_is_current(r, ac, reply))
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        gw_redis_log_failure(r, "ROLE failed", reply->str);
        gw_redis_drop_connection(r, "ROLE failed");
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 || reply->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(reply->element[0]->str, "master") != 0) {
        gw_redis_log_failure(r, "not a primary (ROLE), asking the sentinels again",
                             reply->type == REDIS_REPLY_ARRAY && reply->elements != 0 &&
                                     reply->element[0]->type == REDIS_REPLY_STRING
                                 ? reply->element[0]->str
                                 : NULL);
        gw_redis_drop_connection(r, "not a primary");
        return;
    }
    gw_redis_handshake_done(r);
}

/* discovery */

static void set_primary_text(gw_redis_t *r)
{
    char addr[ADDR_TEXT_MAX / 2];

    if (gw_netaddr_format(&r->conf.addr, addr, sizeof(addr)) < 0)
        snprintf(addr, sizeof(addr), "(address)");
    snprintf(r->addr_text, sizeof(r->addr_text), "%s (primary of %s)", addr, r->sentinel.master_name);
}

/* Reconnects at once, asking the sentinels first: the primary changed. */
void gw_redis_sentinel_follow_switch(gw_redis_t *r, const char *why)
{
    if (r->state == ST_DISCOVERING || r->closing)
        return; /* already asking */
    if (r->ac != NULL)
        gw_redis_drop_connection(r, why);
    if (r->state == ST_IDLE) {
        r->backoff_ms = r->conf.reconnect_min_ms;
        gw_timer_unlink(&r->conn_timer.entry);
        gw_redis_start_connect(r);
    }
}

/* The next word of a +switch-master payload ("<name> <old-ip> <old-port> <new-ip> <new-port>"). */
static int next_word(const char **p, const char *end, const char **word, size_t *len)
{
    while (*p != end && **p == ' ')
        ++*p;
    *word = *p;
    while (*p != end && **p != ' ')
        ++*p;
    *len = (size_t)(*p - *word);
    return *len != 0 ? 0 : -1;
}

static void on_switch_master(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply, *payload;
    const char *p, *end, *w[5];
    size_t wl[5], i;
    uint16_t port;
    gw_netaddr_t primary;

    if (reply == NULL || ac != r->sentinel.watch || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING || strcmp(reply->element[0]->str, "message") != 0 ||
        (payload = reply->element[2])->type != REDIS_REPLY_STRING)
        return;
    p = payload->str;
    end = p + payload->len;
    for (i = 0; i != 5; ++i)
        if (next_word(&p, end, &w[i], &wl[i]) != 0)
            return;
    if (wl[0] != strlen(r->sentinel.master_name) || memcmp(w[0], r->sentinel.master_name, wl[0]) != 0)
        return; /* another master monitored by the same sentinels */
    if (gw_port_parse(w[4], wl[4], &port) != 0 || gw_netaddr_parse_ip(w[3], wl[3], port, &primary) != 0)
        return;
    ++r->depth;
    if (!(r->state == ST_READY && primary.len == r->conf.addr.len && memcmp(&primary.ss, &r->conf.addr.ss, primary.len) == 0)) {
        fprintf(stderr, "lizard-gateway: redis: sentinel: +switch-master %s, the new primary is %.*s:%.*s\n",
                r->sentinel.master_name, (int)wl[3], w[3], (int)wl[4], w[4]);
        gw_redis_sentinel_follow_switch(r, "the primary changed (+switch-master)");
    }
    --r->depth;
}

/* Turns the connection that just answered into the +switch-master watch. */
static int watch_start(gw_redis_t *r, redisAsyncContext *ac)
{
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    size_t argvlen[] = {9, 14};

    ((gw_redis_conn_t *)ac->ev.data)->kind = CONN_WATCH;
    r->sentinel.watch = ac;
    if (redisAsyncCommandArgv(ac, on_switch_master, r, 2, argv, argvlen) != REDIS_OK) {
        r->sentinel.watch = NULL;
        return -1;
    }
    return 0;
}

static void on_master_addr(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply;
    gw_netaddr_t primary;
    uint16_t port;

    if (reply == NULL || ac != r->sentinel.ask)
        return; /* the connection is going away: its cleanup or our timer handles it */
    r->sentinel.ask = NULL;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_STRING ||
        gw_port_parse(reply->element[1]->str, reply->element[1]->len, &port) != 0 ||
        gw_netaddr_parse_ip(reply->element[0]->str, reply->element[0]->len, port, &primary) != 0) {
        const char *why = reply->type == REDIS_REPLY_ERROR ? reply->str
                          : reply->type == REDIS_REPLY_NIL ? "does not monitor this master name"
                                                           : "unexpected answer";
        redisAsyncFree(ac); /* after this callback */
        gw_redis_sentinel_ask_failed(r, why);
        return;
    }
    gw_timer_unlink(&r->conn_timer.entry);
    r->sentinel.next = r->sentinel.asking; /* ask this one first next time */
    if (r->sentinel.watch != NULL || watch_start(r, ac) != 0)
        redisAsyncFree(ac); /* after this callback */
    r->conf.addr = primary;
    set_primary_text(r);
    gw_redis_connect_primary(r);
}

/* Asks the next sentinel of this round; why != NULL: the one asked last
 * failed. When every sentinel has failed, waits out the backoff. */
void gw_redis_sentinel_ask_failed(gw_redis_t *r, const char *why)
{
    size_t asklen[] = {8, 23, strlen(r->sentinel.master_name)};

    if (r->closing)
        return;
    if (why != NULL)
        r->sentinel.next = (r->sentinel.asking + 1) % r->sentinel.num;
    while (r->sentinel.tried < r->sentinel.num) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", r->sentinel.master_name};
        size_t i = r->sentinel.next;
        redisAsyncContext *ac;

        ++r->sentinel.tried;
        r->sentinel.asking = i;
        if ((ac = gw_redis_connect_to(r, &r->sentinel.addrs[i], CONN_ASK, &why)) == NULL) {
            r->sentinel.next = (i + 1) % r->sentinel.num;
            continue;
        }
        r->sentinel.ask = ac;
        if (r->sentinel.password != NULL) {
            /* a refused AUTH makes the question fail with NOAUTH */
            const char *auth[] = {"AUTH", r->sentinel.password};
            size_t auth_len[] = {4, strlen(r->sentinel.password)};
            redisAsyncCommandArgv(ac, NULL, NULL, 2, auth, auth_len);
        }
        redisAsyncCommandArgv(ac, on_master_addr, r, 3, argv, asklen);
        gw_delay_timer_link(r->loop, &r->conn_timer, r->conf.connect_timeout_ms);
        return;
    }
    gw_redis_log_failure(r, "no sentinel named the primary", why);
    gw_redis_schedule_reconnect(r);
}
