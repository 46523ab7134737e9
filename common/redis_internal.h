/*
 * Inside the Redis client (common/redis.c, common/redis_sentinel.c only):
 * the connection object's layout and the steps the connection code and the
 * Sentinel discovery call in each other.
 */
#ifndef GW_COMMON_REDIS_INTERNAL_H
#define GW_COMMON_REDIS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/async.h>
#include <h2o.h>
#include "common/engine.h"
#include "common/redis.h"

#define ADDR_TEXT_MAX 192

enum {
    ST_IDLE = 0,    /* no connection; conn_timer is the reconnect backoff (or nothing while closing) */
    ST_CONNECTING,  /* TCP/unix connect in progress; conn_timer is the connect deadline */
    ST_HANDSHAKE,   /* connected, AUTH / PING / SUBSCRIBE in flight; same deadline */
    ST_READY,       /* commands accepted */
    ST_DISCOVERING, /* asking a sentinel for the primary (sentinel.ask); conn_timer is that sentinel's deadline */
};

/* What a hiredis context of a gw_redis_t is for. */
enum {
    CONN_MAIN = 0, /* r->ac: the connection commands go to */
    CONN_ASK,      /* r->sentinel.ask: SENTINEL get-master-addr-by-name */
    CONN_WATCH,    /* r->sentinel.watch: SUBSCRIBEd to +switch-master */
};

/* The hiredis event-library adapter: what ac->ev.data points to. */
typedef struct st_gw_redis_conn_t {
    gw_redis_t *redis;
    redisAsyncContext *ac;
    int kind;           /* CONN_* */
    h2o_socket_t *sock; /* on a dup of ac->c.fd, so both sides close their own fd */
    int reading;
    int want_write;     /* hiredis wants writability events */
    int write_notified; /* an h2o_socket_notify_write is outstanding (it cannot be cancelled) */
} gw_redis_conn_t;

struct st_gw_redis_t {
    h2o_loop_t *loop;
    gw_redis_conf_t conf; /* conf.password points to `password` */
    char *password;
    char addr_text[ADDR_TEXT_MAX]; /* for log lines; never holds the password */
    redisAsyncContext *ac;         /* current connection, NULL while idle */
    int state;
    uint64_t conn_id; /* increases with every connection attempt */
    uint64_t replies; /* replies read on the current connection */
    uint64_t backoff_ms;
    uint32_t jitter_state; /* xorshift32, per connection object */
    int failing;           /* a failure was logged since the last time we were ready */
    int closing;
    unsigned depth; /* > 0 while one of our loop callbacks runs (gw_redis_free must not) */
    gw_delay_timer_t conn_timer;
    gw_delay_timer_t req_timer;
    uint64_t req_timer_at;  /* deadline req_timer is armed for; UINT64_MAX when idle */
    h2o_linklist_t pending; /* gw_redis_req_t whose callback is still due, by deadline */
    gw_redis_state_cb state_cb;
    void *state_data;
    struct {
        char *channel; /* NULL: not a subscriber */
        gw_redis_message_cb cb;
        void *data;
    } sub;
    struct {
        gw_netaddr_t *addrs; /* NULL: not in sentinel mode */
        size_t num;
        char *master_name;
        char *password;
        size_t next;  /* asked first: the sentinel that answered last */
        size_t tried; /* sentinels asked in this round */
        size_t asking;
        redisAsyncContext *ask;   /* the discovery in progress, or NULL */
        redisAsyncContext *watch; /* the +switch-master subscription, or NULL */
    } sentinel;
};

/* common/redis.c: the connection (each function is described where it is defined) */
void gw_redis_log_failure(gw_redis_t *r, const char *what, const char *detail);
void gw_redis_schedule_reconnect(gw_redis_t *r);
void gw_redis_drop_connection(gw_redis_t *r, const char *why);
void gw_redis_start_connect(gw_redis_t *r);
void gw_redis_connect_primary(gw_redis_t *r);
redisAsyncContext *gw_redis_connect_to(gw_redis_t *r, const gw_netaddr_t *addr, int kind, const char **why);
int gw_redis_is_current(gw_redis_t *r, redisAsyncContext *ac, void *reply);
void gw_redis_handshake_done(gw_redis_t *r);

/* common/redis_sentinel.c: Sentinel mode (r->sentinel.addrs != NULL) */
void gw_redis_sentinel_ask_failed(gw_redis_t *r, const char *why);
void gw_redis_sentinel_on_role(redisAsyncContext *ac, void *_reply, void *data); /* a hiredis callback, data = r */
void gw_redis_sentinel_follow_switch(gw_redis_t *r, const char *why);

#endif
