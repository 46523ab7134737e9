/*
 * An asynchronous Redis connection (hiredis) driven by an h2o event loop:
 * never blocks the loop, gives every command a deadline, reconnects with
 * exponential backoff, authenticates with a password when configured, and
 * with Redis Sentinel finds the primary and follows failovers.
 * One gw_redis_t belongs to one thread.
 */
#ifndef GW_ROUTING_REDIS_H
#define GW_ROUTING_REDIS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/netaddr.h"

typedef struct st_gw_redis_t gw_redis_t;
typedef struct st_gw_redis_req_t gw_redis_req_t;

typedef struct st_gw_redis_conf_t {
    gw_netaddr_t addr;    /* TCP or unix */
    const char *password; /* NULL: no AUTH */
    uint64_t connect_timeout_ms;
    uint64_t reconnect_min_ms; /* first backoff step */
    uint64_t reconnect_max_ms; /* backoff cap */
    /* Sentinel mode when num_sentinels != 0 (`addr` is then ignored): before
     * every connection attempt the sentinels are asked in turn (SENTINEL
     * get-master-addr-by-name, connect_timeout_ms each) for the primary of
     * master_name; a server whose ROLE is not "master" is refused; the
     * connection is dropped and the sentinels asked again on a READONLY
     * error and when a sentinel announces +switch-master. Commands are only
     * taken once ROLE has been checked. Copied by gw_redis_new. */
    const gw_netaddr_t *sentinels;
    size_t num_sentinels;
    const char *master_name;
    const char *sentinel_password; /* NULL: no AUTH to the sentinels */
} gw_redis_conf_t;

/* Called with err == NULL and the reply (owned by hiredis, valid only during
 * the call) on success; with err set ("timeout", "disconnected", or the
 * server's error text for a REDIS_REPLY_ERROR) and reply NULL otherwise. */
typedef void (*gw_redis_reply_cb)(void *data, const char *err, redisReply *reply);

/* Called on the loop when the connection becomes ready (after AUTH) and when
 * it is lost; used by subscribers and by readiness reporting. */
typedef void (*gw_redis_state_cb)(void *data, int connected);

/* Creates the connection object and starts connecting in the background.
 * The conf is copied (the password string too). Never NULL (out of memory
 * aborts). */
gw_redis_t *gw_redis_new(h2o_loop_t *loop, const gw_redis_conf_t *conf);

/* Disconnects and frees; pending requests are completed with "disconnected"
 * unless cancelled. NULL is a no-op. */
void gw_redis_free(gw_redis_t *r);

/* 1 when connected and authenticated (and, with sentinels, to a primary). */
int gw_redis_is_ready(const gw_redis_t *r);

/* Registers a state callback (one per connection; NULL removes). */
void gw_redis_set_state_cb(gw_redis_t *r, gw_redis_state_cb cb, void *data);

/* Starts a connection attempt now when the connection is waiting out its
 * backoff (e.g. another connection to the same server just came back). */
void gw_redis_reconnect_now(gw_redis_t *r);

/* Sends a command. Returns NULL without calling cb when Redis is known to be
 * down, i.e. between connection attempts (the caller answers "unavailable" at
 * once); while an attempt is under way the command queues behind the
 * handshake. Otherwise cb is called exactly once, later,
 * from the loop: with the reply, or with "timeout" after timeout_ms, or with
 * "disconnected" -- unless gw_redis_req_cancel was called first. */
gw_redis_req_t *gw_redis_command_argv(gw_redis_t *r, uint64_t timeout_ms, gw_redis_reply_cb cb, void *data, int argc,
                                      const char **argv, const size_t *argvlen);

/* After this, the request's callback is never called. Safe until the
 * callback has run; never call it from inside the callback. */
void gw_redis_req_cancel(gw_redis_req_t *req);

/* Subscriber mode (its own connection, see H2O_NOTES): after ready, SUBSCRIBE
 * to `channel` and call on_message(data, payload, len) for every message.
 * Resubscribes after every reconnect (the state callback says when). Returns 0. */
typedef void (*gw_redis_message_cb)(void *data, const char *payload, size_t len);
int gw_redis_subscribe(gw_redis_t *r, const char *channel, gw_redis_message_cb on_message, void *data);

#endif
