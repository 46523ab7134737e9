/*
 * The unit tests' Redis fixture, written once and linked into every test that
 * talks to a real redis-server (common/test_redis, routing/test_keyed_cache,
 * test_route_store, test_wake, metering/test_activity, test_final_flush):
 * start, kill and restart servers on loopback TCP or a unix socket, optionally
 * with requirepass; a blocking admin client to set up data; the h2o event
 * loop the tests drive their clients with; and the main() that runs a suite
 * with the loop set up around each test and every server killed at the end.
 */
#ifndef GW_TESTS_UNIT_REDIS_FIXTURE_H
#define GW_TESTS_UNIT_REDIS_FIXTURE_H

#include <check.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"

/* redis-server processes */

typedef struct {
    pid_t pid;
    int port; /* 0: unix socket only */
    char dir[64];
    char sock[128];
    const char *password;
    const char *bind; /* NULL: 127.0.0.1 */
} server_t;

/* Starts srv (port, password and bind as set; a temporary directory, and for
 * port 0 a unix socket in it, on first start) and waits until it answers. */
void server_start(server_t *srv);
/* A new server on a free loopback port. */
void server_tcp(server_t *srv);
/* SIGKILL (after SIGCONT, in case the test stopped it); srv can start again. */
void server_kill(server_t *srv);
/* server_kill, then its socket and directory removed. */
void server_cleanup(server_t *srv);
void kill_all_servers(void);

int free_port(void);
uint64_t now_ms(void);

/* A blocking client for setting up data and checking readiness (tests only);
 * NULL: not reachable. */
redisContext *admin_connect(const server_t *srv);
/* A blocking command (tests only); fails the test on an error reply; returns
 * the integer reply, 0 for any other kind of reply. */
long long admin(const server_t *srv, const char *fmt, ...);

/* The client configuration for srv: its address and password, quick reconnects. */
gw_redis_conf_t conf_for(const server_t *srv);

/* the loop, created and destroyed around each test */

extern h2o_evloop_t *loop;

/* Runs the loop until *flag is non-zero or timeout_ms passes; returns *flag. */
int run_until(volatile int *flag, uint64_t timeout_ms);
uint64_t counter(atomic_uint_fast64_t *c);
/* Runs the loop until *c reaches n; returns whether it did. */
int run_until_counter(atomic_uint_fast64_t *c, uint64_t n, uint64_t timeout_ms);
void run_for(uint64_t ms);
/* Runs the loop until `r` is ready or timeout_ms passes; returns whether it is. */
int wait_ready(gw_redis_t *r, uint64_t timeout_ms);

/* main(): runs tests[0..n) as the suite `name`, each in its own process with
 * the loop set up and torn down around it (and setup/teardown, when not NULL,
 * inside that), every server killed at exit; returns main's exit status. */
int redis_fixture_main(const char *name, unsigned timeout_s, SFun setup, SFun teardown, const TTest *const tests[], size_t n);

#endif
