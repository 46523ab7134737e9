/*
 * The hiredis 0.14 async client on an h2o evloop: readiness events through an h2o_socket_t on a dup of hiredis's
 * fd, plus what hiredis lacks (command deadlines, cancellation, connect timeout, AUTH before "ready", reconnect with
 * backoff), with every user callback kept off the caller's stack. Sentinel discovery is in redis_sentinel.c.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <hiredis/async.h>
#include "common/engine.h"
#include "common/redis_internal.h"

struct st_gw_redis_req_t {
    gw_redis_t *redis;
    gw_redis_reply_cb cb; /* NULL once completed or cancelled; the struct lives until hiredis lets go */
    void *data;
    uint64_t deadline;
    uint64_t conn_id;
    uint64_t replies_at_send;
    h2o_linklist_t link; /* in redis->pending while cb != NULL */
};

/* connection state */

void gw_redis_log_failure(gw_redis_t *r, const char *what, const char *detail)
{
    /* one line per failure streak: a Redis outage must not flood the log */
    if (r->failing)
        return;
    r->failing = 1;
    fprintf(stderr, "lizard-gateway: redis %s: %s%s%s\n", r->addr_text, what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
}

void gw_redis_schedule_reconnect(gw_redis_t *r)
{
    r->state = ST_IDLE;
    if (r->closing)
        return;
    /* up to a quarter less than the step, so that a fleet of workers does not reconnect in lockstep */
    uint64_t delay = r->backoff_ms, spread = delay / 4;
    r->jitter_state ^= r->jitter_state << 13;
    r->jitter_state ^= r->jitter_state >> 17;
    r->jitter_state ^= r->jitter_state << 5;
    if (spread != 0)
        delay -= r->jitter_state % (spread + 1);
    gw_delay_timer_link(r->loop, &r->conn_timer, delay);
    r->backoff_ms = r->backoff_ms * 2 < r->conf.reconnect_max_ms ? r->backoff_ms * 2 : r->conf.reconnect_max_ms;
}

/* Called once per connection that is gone, whoever noticed first. */
static void connection_lost(gw_redis_t *r, int was_ready)
{
    gw_timer_unlink(&r->conn_timer.entry);
    gw_redis_schedule_reconnect(r);
    if (was_ready && r->state_cb != NULL && !r->closing)
        r->state_cb(r->state_data, 0);
}

/* Closes the current connection on our initiative: its pending callbacks get
 * "disconnected" (now, or right after the hiredis callback we are in). */
void gw_redis_drop_connection(gw_redis_t *r, const char *why)
{
    redisAsyncContext *ac = r->ac;
    int was_ready = r->state == ST_READY;

    r->ac = NULL; /* the adapter's cleanup sees a stale context and stays quiet */
    gw_redis_log_failure(r, why, NULL);
    if (ac != NULL)
        redisAsyncFree(ac);
    connection_lost(r, was_ready);
}

static void become_ready(gw_redis_t *r)
{
    r->state = ST_READY;
    gw_timer_unlink(&r->conn_timer.entry);
    r->backoff_ms = r->conf.reconnect_min_ms;
    if (r->failing) {
        fprintf(stderr, "lizard-gateway: redis %s: connected\n", r->addr_text);
        r->failing = 0;
    }
    if (r->state_cb != NULL)
        r->state_cb(r->state_data, 1);
}

/* the hiredis adapter */

static void on_readable(h2o_socket_t *sock, const char *err)
{
    gw_redis_conn_t *conn = sock->data;
    gw_redis_t *r = conn->redis;

    (void)err; /* H2O_SOCKET_FLAG_DONT_READ: h2o only reports readiness; hiredis reads and sees errors */
    ++r->depth;
    redisAsyncHandleRead(conn->ac); /* may free conn */
    --r->depth;
}

static void on_writable(h2o_socket_t *sock, const char *err)
{
    gw_redis_conn_t *conn = sock->data;
    gw_redis_t *r = conn->redis;

    (void)err;
    conn->write_notified = 0;
    if (!conn->want_write)
        return; /* a wake-up requested before hiredis said delWrite */
    ++r->depth;
    redisAsyncHandleWrite(conn->ac); /* may free conn */
    --r->depth;
}

static void ev_add_read(void *data)
{
    gw_redis_conn_t *conn = data;
    if (!conn->reading) {
        conn->reading = 1;
        h2o_socket_read_start(conn->sock, on_readable);
    }
}

static void ev_del_read(void *data)
{
    gw_redis_conn_t *conn = data;
    if (conn->reading) {
        conn->reading = 0;
        h2o_socket_read_stop(conn->sock);
    }
}

static void ev_add_write(void *data)
{
    gw_redis_conn_t *conn = data;
    conn->want_write = 1;
    if (!conn->write_notified) {
        conn->write_notified = 1;
        h2o_socket_notify_write(conn->sock, on_writable);
    }
}

static void ev_del_write(void *data)
{
    gw_redis_conn_t *conn = data;
    conn->want_write = 0;
}

/* hiredis frees the context after this; every path that ends a connection
 * passes here, including a failed connect (which skips onDisconnect). */
static void ev_cleanup(void *data)
{
    gw_redis_conn_t *conn = data;
    gw_redis_t *r = conn->redis;
    redisAsyncContext *ac = conn->ac;

    int kind = conn->kind;

    h2o_socket_close(conn->sock);
    free(conn);
    if (kind == CONN_ASK) {
        if (ac == r->sentinel.ask) {
            r->sentinel.ask = NULL;
            gw_redis_sentinel_ask_failed(r, ac->c.errstr[0] != '\0' ? ac->c.errstr : "connection lost");
        }
        return;
    }
    if (kind == CONN_WATCH) {
        /* noticed again at the next discovery; meanwhile a lost primary is still seen by its connection */
        if (ac == r->sentinel.watch)
            r->sentinel.watch = NULL;
        return;
    }
    if (ac == r->ac) {
        /* the server or the network ended it, not us */
        int was_ready = r->state == ST_READY;
        r->ac = NULL;
        gw_redis_log_failure(r, was_ready ? "connection lost" : "cannot connect", ac->c.errstr[0] != '\0' ? ac->c.errstr : NULL);
        connection_lost(r, was_ready);
    }
}

static int attach(gw_redis_t *r, redisAsyncContext *ac, int kind)
{
    gw_redis_conn_t *conn;
    int fd;

    if ((fd = fcntl(ac->c.fd, F_DUPFD_CLOEXEC, 0)) == -1)
        return -1;
    if ((conn = calloc(1, sizeof(*conn))) == NULL) {
        close(fd);
        return -1;
    }
    conn->redis = r;
    conn->ac = ac;
    conn->kind = kind;
    conn->sock = h2o_evloop_socket_create(r->loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    conn->sock->data = conn;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    ac->ev.data = conn;
    return 0;
}

/* the handshake: [AUTH] PING [SUBSCRIBE], then ready */

static void send_subscribe(gw_redis_t *r);

void gw_redis_handshake_done(gw_redis_t *r)
{
    if (r->sub.channel != NULL)
        send_subscribe(r); /* ready once the server confirms the subscription */
    else
        become_ready(r);
}

int gw_redis_is_current(gw_redis_t *r, redisAsyncContext *ac, void *reply)
{
    if (reply == NULL || ac != r->ac)
        return 0; /* the connection is going away; ev_cleanup or gw_redis_drop_connection handles it */
    ++r->replies;
    return 1;
}

static void on_auth(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply;

    if (!gw_redis_is_current(r, ac, reply))
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        /* the server's text ("WRONGPASS ...") never contains the password */
        gw_redis_log_failure(r, "AUTH failed", reply->str);
        gw_redis_drop_connection(r, "AUTH failed");
    }
}

static void on_ping(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply;

    if (!gw_redis_is_current(r, ac, reply))
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        /* NOAUTH, LOADING, ...: not usable yet */
        gw_redis_log_failure(r, "not ready", reply->str);
        gw_redis_drop_connection(r, "not ready");
        return;
    }
    if (r->sentinel.addrs != NULL)
        return; /* ROLE, queued after PING, decides */
    gw_redis_handshake_done(r);
}

static void on_sub(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_t *r = data;
    redisReply *reply = _reply, *kind;

    if (!gw_redis_is_current(r, ac, reply))
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || (kind = reply->element[0])->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(kind->str, "subscribe") == 0) {
        if (r->state == ST_HANDSHAKE)
            become_ready(r);
    } else if (strcmp(kind->str, "message") == 0 && reply->element[2]->type == REDIS_REPLY_STRING) {
        r->sub.cb(r->sub.data, reply->element[2]->str, reply->element[2]->len);
    }
}

static void send_subscribe(gw_redis_t *r)
{
    const char *argv[] = {"SUBSCRIBE", r->sub.channel};
    size_t argvlen[] = {9, strlen(r->sub.channel)};

    if (redisAsyncCommandArgv(r->ac, on_sub, r, 2, argv, argvlen) != REDIS_OK)
        gw_redis_drop_connection(r, "cannot send SUBSCRIBE");
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    gw_redis_t *r = ac->data;

    if (status != REDIS_OK || ac != r->ac)
        return; /* a failed connect: hiredis frees the context next and ev_cleanup reports it */
    /* AUTH and PING were queued with the connect; the connect deadline still runs until the PING
     * (or SUBSCRIBE) answer */
    r->state = ST_HANDSHAKE;
}

/* Queued before anything else on a new context, so that commands callers send while we connect
 * follow them on the wire (hiredis writes its buffer in order once connected). */
static void queue_handshake(gw_redis_t *r, redisAsyncContext *ac)
{
    const char *ping[] = {"PING"};
    size_t ping_len[] = {4};

    if (r->password != NULL) {
        const char *auth[] = {"AUTH", r->password};
        size_t auth_len[] = {4, strlen(r->password)};
        redisAsyncCommandArgv(ac, on_auth, r, 2, auth, auth_len);
    }
    redisAsyncCommandArgv(ac, on_ping, r, 1, ping, ping_len);
    if (r->sentinel.addrs != NULL) {
        const char *role[] = {"ROLE"};
        size_t role_len[] = {4};
        redisAsyncCommandArgv(ac, gw_redis_sentinel_on_role, r, 1, role, role_len);
    }
}

/* A non-blocking connect to `addr`, attached to the loop. NULL with *why
 * (static or hiredis's) on failure. */
redisAsyncContext *gw_redis_connect_to(gw_redis_t *r, const gw_netaddr_t *addr, int kind, const char **why)
{
    redisAsyncContext *ac;

    if (addr->ss.ss_family == AF_UNIX) {
        ac = redisAsyncConnectUnix(((const struct sockaddr_un *)&addr->ss)->sun_path);
    } else {
        char ip[INET6_ADDRSTRLEN];
        const void *a = addr->ss.ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)&addr->ss)->sin_addr
                                                      : (const void *)&((const struct sockaddr_in6 *)&addr->ss)->sin6_addr;
        if (inet_ntop(addr->ss.ss_family, a, ip, sizeof(ip)) == NULL) {
            *why = "bad address";
            return NULL;
        }
        ac = redisAsyncConnect(ip, gw_netaddr_port(addr));
    }
    if (ac == NULL) {
        *why = "out of memory";
        return NULL;
    }
    if (ac->err != 0 || attach(r, ac, kind) != 0) {
        static __thread char errbuf[128];
        snprintf(errbuf, sizeof(errbuf), "%s", ac->err != 0 ? ac->errstr : "out of file descriptors");
        *why = errbuf;
        redisAsyncFree(ac); /* nothing attached, no callbacks: frees at once */
        return NULL;
    }
    ac->data = r;
    if (addr->ss.ss_family != AF_UNIX)
        redisEnableKeepAlive(&ac->c);
    return ac;
}

void gw_redis_start_connect(gw_redis_t *r)
{
    if (r->sentinel.addrs != NULL) {
        /* every attempt asks first: the primary may have changed since the last one */
        r->state = ST_DISCOVERING;
        r->sentinel.tried = 0;
        gw_redis_sentinel_ask_failed(r, NULL);
        return;
    }
    gw_redis_connect_primary(r);
}

/* Connects to r->conf.addr (the configured server, or the primary the sentinels named). */
void gw_redis_connect_primary(gw_redis_t *r)
{
    redisAsyncContext *ac;
    const char *why;

    ++r->conn_id;
    r->replies = 0;
    if ((ac = gw_redis_connect_to(r, &r->conf.addr, CONN_MAIN, &why)) == NULL) {
        gw_redis_log_failure(r, "cannot connect", why);
        gw_redis_schedule_reconnect(r);
        return;
    }
    r->ac = ac;
    r->state = ST_CONNECTING;
    redisAsyncSetConnectCallback(ac, on_connect); /* also asks for the first write event */
    queue_handshake(r, ac);
    gw_delay_timer_link(r->loop, &r->conn_timer, r->conf.connect_timeout_ms);
}

static void on_conn_timer(gw_timer_t *entry)
{
    gw_redis_t *r = H2O_STRUCT_FROM_MEMBER(gw_redis_t, conn_timer.entry, entry);

    ++r->depth;
    if (r->state == ST_IDLE) {
        gw_redis_start_connect(r);
    } else if (r->state == ST_DISCOVERING) {
        redisAsyncContext *ask = r->sentinel.ask;
        r->sentinel.ask = NULL; /* its cleanup stays quiet */
        if (ask != NULL)
            redisAsyncFree(ask);
        gw_redis_sentinel_ask_failed(r, "timed out");
    } else if (r->state != ST_READY) {
        gw_redis_drop_connection(r, "timed out connecting");
    }
    --r->depth;
}

/* requests */

static void arm_req_timer(gw_redis_t *r)
{
    uint64_t now = h2o_now(r->loop), at;

    if (h2o_linklist_is_empty(&r->pending)) {
        gw_timer_unlink(&r->req_timer.entry);
        r->req_timer_at = UINT64_MAX;
        return;
    }
    at = H2O_STRUCT_FROM_MEMBER(gw_redis_req_t, link, r->pending.next)->deadline;
    if (at == r->req_timer_at && gw_timer_is_linked(&r->req_timer.entry))
        return;
    r->req_timer_at = at;
    gw_delay_timer_link(r->loop, &r->req_timer, at > now ? at - now : 0);
}

static void on_req_timer(gw_timer_t *entry)
{
    gw_redis_t *r = H2O_STRUCT_FROM_MEMBER(gw_redis_t, req_timer.entry, entry);
    uint64_t now = h2o_now(r->loop), dead_conn = 0;

    ++r->depth;
    r->req_timer_at = UINT64_MAX;
    while (!h2o_linklist_is_empty(&r->pending)) {
        gw_redis_req_t *req = H2O_STRUCT_FROM_MEMBER(gw_redis_req_t, link, r->pending.next);
        gw_redis_reply_cb cb = req->cb;
        if (req->deadline > now)
            break;
        h2o_linklist_unlink(&req->link);
        req->cb = NULL;
        /* nothing at all came back since this was sent: the server or the path is dead */
        if (r->ac != NULL && req->conn_id == r->conn_id && r->replies == req->replies_at_send)
            dead_conn = req->conn_id;
        cb(req->data, "timeout", NULL);
    }
    if (dead_conn != 0 && r->ac != NULL && r->conn_id == dead_conn)
        gw_redis_drop_connection(r, "no reply before the command deadline, reconnecting");
    arm_req_timer(r);
    --r->depth;
}

static void on_reply(redisAsyncContext *ac, void *_reply, void *data)
{
    gw_redis_req_t *req = data;
    gw_redis_t *r = req->redis;
    redisReply *reply = _reply;
    gw_redis_reply_cb cb = req->cb;
    /* a primary demoted under us (sentinel mode): the sentinels know the new one */
    int demoted = r->sentinel.addrs != NULL && reply != NULL && ac == r->ac && reply->type == REDIS_REPLY_ERROR &&
                  strncmp(reply->str, "READONLY", 8) == 0;

    if (reply != NULL && ac == r->ac)
        ++r->replies;
    if (cb != NULL) {
        h2o_linklist_unlink(&req->link);
        req->cb = NULL;
        if (reply == NULL)
            cb(req->data, "disconnected", NULL);
        else if (reply->type == REDIS_REPLY_ERROR)
            cb(req->data, reply->str, NULL);
        else
            cb(req->data, NULL, reply);
    }
    free(req);
    if (demoted && ac == r->ac)
        gw_redis_sentinel_follow_switch(r, "the server is a replica now (READONLY)");
}

/* public API */

gw_redis_t *gw_redis_new(h2o_loop_t *loop, const gw_redis_conf_t *conf)
{
    gw_redis_t *r;

    r = h2o_mem_alloc(sizeof(*r)); /* out of memory aborts, as everywhere */
    memset(r, 0, sizeof(*r));
    r->loop = loop;
    r->conf = *conf;
    if (conf->password != NULL)
        r->password = h2o_strdup(NULL, conf->password, SIZE_MAX).base;
    r->conf.password = r->password;
    r->conf.sentinels = NULL;
    r->conf.master_name = NULL;
    r->conf.sentinel_password = NULL;
    if (conf->num_sentinels != 0) {
        r->sentinel.addrs = h2o_mem_alloc(conf->num_sentinels * sizeof(gw_netaddr_t));
        r->sentinel.master_name = h2o_strdup(NULL, conf->master_name, SIZE_MAX).base;
        if (conf->sentinel_password != NULL)
            r->sentinel.password = h2o_strdup(NULL, conf->sentinel_password, SIZE_MAX).base;
        memcpy(r->sentinel.addrs, conf->sentinels, conf->num_sentinels * sizeof(gw_netaddr_t));
        r->sentinel.num = conf->num_sentinels;
    }
    if (r->conf.reconnect_min_ms == 0)
        r->conf.reconnect_min_ms = 1;
    if (r->conf.reconnect_max_ms < r->conf.reconnect_min_ms)
        r->conf.reconnect_max_ms = r->conf.reconnect_min_ms;
    if (r->conf.connect_timeout_ms == 0)
        r->conf.connect_timeout_ms = 1;
    r->backoff_ms = r->conf.reconnect_min_ms;
    r->jitter_state = (uint32_t)((uintptr_t)r >> 4) ^ (uint32_t)h2o_now(loop) ^ (uint32_t)getpid();
    if (r->jitter_state == 0)
        r->jitter_state = 1;
    if (r->sentinel.addrs != NULL)
        snprintf(r->addr_text, sizeof(r->addr_text), "primary of %s (from the sentinels)", r->sentinel.master_name);
    else if (gw_netaddr_format(&r->conf.addr, r->addr_text, sizeof(r->addr_text)) < 0)
        snprintf(r->addr_text, sizeof(r->addr_text), "(address)");
    gw_delay_timer_init(loop, &r->conn_timer, on_conn_timer);
    gw_delay_timer_init(loop, &r->req_timer, on_req_timer);
    r->req_timer_at = UINT64_MAX;
    h2o_linklist_init_anchor(&r->pending);

    gw_redis_start_connect(r);
    return r;
}

void gw_redis_free(gw_redis_t *r)
{
    redisAsyncContext *ac;

    if (r == NULL)
        return;
    /* Not from inside one of this connection's callbacks: hiredis would defer freeing the
     * context past our free, and h2o may be walking this object's timeouts. Workers free
     * their connections after their loop stops. */
    assert(r->depth == 0);
    r->closing = 1;
    if ((ac = r->ac) != NULL) {
        r->ac = NULL;
        redisAsyncFree(ac); /* completes pending requests with "disconnected" */
    }
    if ((ac = r->sentinel.ask) != NULL) {
        r->sentinel.ask = NULL;
        redisAsyncFree(ac);
    }
    if ((ac = r->sentinel.watch) != NULL) {
        r->sentinel.watch = NULL;
        redisAsyncFree(ac);
    }
    r->state = ST_IDLE;
    assert(h2o_linklist_is_empty(&r->pending));
    gw_delay_timer_dispose(r->loop, &r->conn_timer);
    gw_delay_timer_dispose(r->loop, &r->req_timer);
    if (r->password != NULL) {
        explicit_bzero(r->password, strlen(r->password));
        free(r->password);
    }
    free(r->sub.channel);
    free(r->sentinel.addrs);
    free(r->sentinel.master_name);
    if (r->sentinel.password != NULL) {
        explicit_bzero(r->sentinel.password, strlen(r->sentinel.password));
        free(r->sentinel.password);
    }
    free(r);
}

int gw_redis_is_ready(const gw_redis_t *r)
{
    /* a context hiredis is tearing down (its callbacks get "disconnected" first) is not ready */
    return r->state == ST_READY && r->ac != NULL && (r->ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) == 0;
}

void gw_redis_set_state_cb(gw_redis_t *r, gw_redis_state_cb cb, void *data)
{
    r->state_cb = cb;
    r->state_data = data;
}

gw_redis_req_t *gw_redis_command_argv(gw_redis_t *r, uint64_t timeout_ms, gw_redis_reply_cb cb, void *data, int argc,
                                      const char **argv, const size_t *argvlen)
{
    gw_redis_req_t *req;
    h2o_linklist_t *pos;

    /* A connection being set up takes commands too: they queue behind AUTH and PING, and a failed
     * attempt completes them with "disconnected", so nothing waits past its deadline. Between
     * attempts (backoff) Redis is known down: answer at once. */
    /* With sentinels nothing queues before ROLE said "master": it would run on whatever server answered. */
    if (!(gw_redis_is_ready(r) ||
          (r->sub.channel == NULL && r->sentinel.addrs == NULL && (r->state == ST_CONNECTING || r->state == ST_HANDSHAKE) &&
           r->ac != NULL && (r->ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) == 0)))
        return NULL;
    if ((req = calloc(1, sizeof(*req))) == NULL)
        return NULL;
    req->redis = r;
    req->cb = cb;
    req->data = data;
    req->deadline = h2o_now(r->loop) + timeout_ms;
    req->conn_id = r->conn_id;
    req->replies_at_send = r->replies;
    /* hiredis only buffers the command and asks for a write event: no callback can run from here */
    if (redisAsyncCommandArgv(r->ac, on_reply, req, argc, argv, argvlen) != REDIS_OK) {
        free(req);
        return NULL;
    }

    /* keep `pending` sorted by deadline; most requests share a timeout, so this walks little */
    for (pos = r->pending.prev; pos != &r->pending; pos = pos->prev)
        if (H2O_STRUCT_FROM_MEMBER(gw_redis_req_t, link, pos)->deadline <= req->deadline)
            break;
    h2o_linklist_insert(pos->next, &req->link);
    if (req->deadline < r->req_timer_at)
        arm_req_timer(r);
    return req;
}

void gw_redis_reconnect_now(gw_redis_t *r)
{
    /* only between attempts: an attempt under way goes on */
    if (r->state != ST_IDLE || r->closing)
        return;
    r->backoff_ms = r->conf.reconnect_min_ms;
    gw_timer_unlink(&r->conn_timer.entry);
    ++r->depth;
    gw_redis_start_connect(r);
    --r->depth;
}

void gw_redis_req_cancel(gw_redis_req_t *req)
{
    /* the struct stays queued in hiredis until its reply or the disconnect frees it */
    if (req->cb != NULL) {
        h2o_linklist_unlink(&req->link);
        req->cb = NULL;
    }
}

int gw_redis_subscribe(gw_redis_t *r, const char *channel, gw_redis_message_cb on_message, void *data)
{
    char *copy;

    if ((copy = strdup(channel)) == NULL)
        return -1;
    free(r->sub.channel);
    r->sub.channel = copy;
    r->sub.cb = on_message;
    r->sub.data = data;
    if (r->state == ST_READY)
        send_subscribe(r);
    return 0;
}
