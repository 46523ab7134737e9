/*
 * common/redis.c against a real redis-server
 * started by the test on loopback: connect, AUTH, deadlines, dead-server
 * detection, reconnect, cancel, pub/sub.
 */
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"
#include "tests/unit/redis_fixture.h"

/* Time in these tests is the loop's clock (h2o_now), the one deadlines are
 * set by: a deadline's lower bound is then exact whatever the load. Upper
 * bounds are not asserted: an error string or the order of events shows
 * which of two things came first, and a deadline missed altogether waits for
 * ever, which WAIT_MS (generous: a loaded machine, sanitizers) catches. */
#define WAIT_MS 10000

/* what callbacks saw */

typedef struct {
    int connects, disconnects, last;
} states_t;

static void on_state(void *data, int connected)
{
    states_t *s = data;
    s->last = connected;
    if (connected)
        ++s->connects;
    else
        ++s->disconnects;
}

typedef struct {
    int called;
    char err[128];
    int type;
    char str[128];
    uint64_t at;
} result_t;

static void on_result(void *data, const char *err, redisReply *reply)
{
    result_t *res = data;
    ++res->called;
    res->at = h2o_now(loop);
    res->err[0] = '\0';
    res->str[0] = '\0';
    if (err != NULL) {
        ck_assert_ptr_null(reply);
        snprintf(res->err, sizeof(res->err), "%s", err);
        return;
    }
    ck_assert_ptr_nonnull(reply);
    res->type = reply->type;
    if (reply->str != NULL)
        snprintf(res->str, sizeof(res->str), "%.*s", (int)reply->len, reply->str);
}

static gw_redis_req_t *command(gw_redis_t *r, uint64_t timeout_ms, result_t *res, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i != argc; ++i)
        lens[i] = strlen(argv[i]);
    memset(res, 0, sizeof(*res));
    return gw_redis_command_argv(r, timeout_ms, on_result, res, argc, argv, lens);
}

static gw_redis_t *connect_ready(const server_t *srv, states_t *states)
{
    gw_redis_conf_t conf = conf_for(srv);
    gw_redis_t *r = gw_redis_new(loop, &conf);
    ck_assert_ptr_nonnull(r);
    if (states != NULL)
        gw_redis_set_state_cb(r, on_state, states);
    ck_assert_int_eq(gw_redis_is_ready(r), 0); /* connecting takes a loop turn at least */
    ck_assert(wait_ready(r, WAIT_MS));
    return r;
}

/* tests */

START_TEST(set_get_roundtrip)
{
    server_t srv;
    states_t states = {0};
    result_t res;

    server_tcp(&srv);
    gw_redis_t *r = connect_ready(&srv, &states);
    ck_assert_int_eq(states.connects, 1);
    ck_assert_int_eq(states.last, 1);

    const char *set[] = {"SET", "gw:key", "hello world"};
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 3, set));
    ck_assert_int_eq(res.called, 0); /* never from inside the call */
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.err, "");
    ck_assert_int_eq(res.type, REDIS_REPLY_STATUS);
    ck_assert_str_eq(res.str, "OK");

    const char *get[] = {"GET", "gw:key"};
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, get));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.type, REDIS_REPLY_STRING);
    ck_assert_str_eq(res.str, "hello world");

    /* a server error reaches the callback as err, with its text */
    const char *bad[] = {"INCR", "gw:key"};
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, bad));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_msg(strncmp(res.err, "ERR", 3) == 0, "err = \"%s\"", res.err);

    /* many at once, in order */
    result_t many[50];
    for (int i = 0; i != 50; ++i)
        ck_assert_ptr_nonnull(command(r, WAIT_MS, &many[i], 2, get));
    run_until(&many[49].called, WAIT_MS);
    for (int i = 0; i != 50; ++i) {
        ck_assert_int_eq(many[i].called, 1);
        ck_assert_str_eq(many[i].str, "hello world");
    }

    /* still pending at free: completed with "disconnected" */
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, get));
    gw_redis_free(r);
    ck_assert_int_eq(res.called, 1);
    ck_assert_str_eq(res.err, "disconnected");
    ck_assert_int_eq(states.disconnects, 0); /* freeing is not an outage */
    server_cleanup(&srv);
}
END_TEST

START_TEST(ipv6_loopback)
{
    /* "[::1]:port" when the host has IPv6 loopback; skipped quietly otherwise */
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        return;

    server_t srv;
    result_t res;
    memset(&srv, 0, sizeof(srv));
    srv.port = free_port();
    srv.bind = "127.0.0.1 ::1";
    server_start(&srv);
    gw_redis_conf_t conf = conf_for(&srv);
    char addr[64];
    const char *err;
    snprintf(addr, sizeof(addr), "[::1]:%d", srv.port);
    ck_assert_int_eq(gw_netaddr_parse(addr, 0, &conf.addr, &err), 0);
    gw_redis_t *r = gw_redis_new(loop, &conf);
    ck_assert(wait_ready(r, WAIT_MS));
    const char *echo[] = {"ECHO", "over v6"};
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, echo));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.str, "over v6");
    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

START_TEST(auth_over_unix_socket)
{
    server_t srv;
    result_t res;

    memset(&srv, 0, sizeof(srv));
    srv.password = "s3cret-pass";
    server_start(&srv);

    /* the right password: ready, and commands work */
    gw_redis_t *r = connect_ready(&srv, NULL);
    const char *set[] = {"SET", "k", "v"};
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 3, set));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.err, "");
    ck_assert_str_eq(res.str, "OK");

    /* a wrong password never becomes ready, and commands never get an answer: refused at once between
     * connection attempts, or failed with an error when sent while an attempt is under way */
    gw_redis_conf_t conf = conf_for(&srv);
    conf.password = "wrong";
    gw_redis_t *bad = gw_redis_new(loop, &conf);
    states_t states = {0};
    gw_redis_set_state_cb(bad, on_state, &states);
    /* no password at all against a server that wants one: not ready either */
    conf.password = NULL;
    gw_redis_t *none = gw_redis_new(loop, &conf);
    run_for(800);
    ck_assert_int_eq(gw_redis_is_ready(bad), 0);
    ck_assert_int_eq(gw_redis_is_ready(none), 0);
    ck_assert_int_eq(states.connects, 0);
    for (int round = 0; round != 5; ++round) {
        gw_redis_t *conns[] = {bad, none};
        for (int i = 0; i != 2; ++i) {
            if (command(conns[i], WAIT_MS, &res, 3, set) == NULL) {
                run_for(20);
                ck_assert_int_eq(res.called, 0); /* refused: no callback ever */
            } else {
                ck_assert(run_until(&res.called, WAIT_MS));
                ck_assert_str_ne(res.err, ""); /* "disconnected" (AUTH failed) or the server's NOAUTH */
            }
        }
        run_for(100);
    }
    ck_assert_int_eq(states.connects, 0);
    /* the good one was not disturbed */
    ck_assert_int_eq(gw_redis_is_ready(r), 1);

    gw_redis_free(bad);
    gw_redis_free(none);
    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

START_TEST(timeout_when_server_stops)
{
    server_t srv;
    states_t states = {0};
    result_t res, res2;

    server_tcp(&srv);
    gw_redis_t *r = connect_ready(&srv, &states);

    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    const char *get[] = {"GET", "x"};
    uint64_t sent = h2o_now(loop);
    ck_assert_ptr_nonnull(command(r, 200, &res, 2, get));
    ck_assert_ptr_nonnull(command(r, 400, &res2, 2, get));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.err, "timeout");
    ck_assert_uint_ge(res.at - sent, 200);
    /* nothing came back since the command was sent: the connection is dead, so the
     * other request is not left waiting for its own deadline ("disconnected", not "timeout") */
    ck_assert(run_until(&res2.called, WAIT_MS));
    ck_assert_str_eq(res2.err, "disconnected");
    ck_assert_int_eq(gw_redis_is_ready(r), 0);
    ck_assert_int_eq(states.disconnects, 1);
    ck_assert_int_eq(res.called, 1); /* exactly once */
    /* while down, commands are refused at once */
    ck_assert_ptr_null(command(r, 200, &res, 2, get));

    /* still stopped: reconnect attempts time out (the kernel accepts, nobody answers) */
    run_for(500);
    ck_assert_int_eq(gw_redis_is_ready(r), 0);

    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert(wait_ready(r, WAIT_MS));
    ck_assert_int_eq(states.connects, 2);
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, get));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.err, "");
    ck_assert_int_eq(res.type, REDIS_REPLY_NIL);

    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

START_TEST(timeout_on_a_live_connection_keeps_it)
{
    /* a command misses its deadline but replies to earlier commands keep arriving after it
     * was sent: the connection is alive, only that request times out */
    server_t srv;
    states_t states = {0};
    result_t first, second, after;

    server_tcp(&srv);
    gw_redis_t *r = connect_ready(&srv, &states);
    /* Both block until the test pushes: the order of events is the test's, not
     * the scheduler's. The first is answered after the second was sent; the
     * second's deadline passes with its reply still held back. The one
     * assumption on time: the first reply, pushed at once, is read within the
     * second's 2 s deadline. */
    const char *blpop_a[] = {"BLPOP", "gw:wait:a", "0"};
    const char *blpop_b[] = {"BLPOP", "gw:wait:b", "0"};
    uint64_t sent = h2o_now(loop);
    ck_assert_ptr_nonnull(command(r, 60000, &first, 3, blpop_a));
    ck_assert_ptr_nonnull(command(r, 2000, &second, 3, blpop_b));
    admin(&srv, "LPUSH gw:wait:a one");
    ck_assert(run_until(&first.called, WAIT_MS));
    ck_assert_str_eq(first.err, "");
    ck_assert_int_eq(first.type, REDIS_REPLY_ARRAY); /* [key, "one"] */
    ck_assert_int_eq(second.called, 0);
    ck_assert(run_until(&second.called, WAIT_MS));
    ck_assert_str_eq(second.err, "timeout");
    ck_assert_uint_ge(second.at - sent, 2000);
    /* a reply came after the second was sent: alive, not dropped */
    ck_assert_int_eq(states.disconnects, 0);
    ck_assert(gw_redis_is_ready(r));
    /* the late reply is swallowed: the PING behind it gets PONG, not [key, "two"] */
    admin(&srv, "LPUSH gw:wait:b two");
    const char *ping[] = {"PING"};
    ck_assert_ptr_nonnull(command(r, 60000, &after, 1, ping));
    ck_assert(run_until(&after.called, WAIT_MS));
    ck_assert_str_eq(after.err, "");
    ck_assert_str_eq(after.str, "PONG");
    ck_assert_int_eq(second.called, 1);
    ck_assert_int_eq(admin(&srv, "LLEN gw:wait:b"), 0); /* the reply was taken, by the timed-out BLPOP */
    ck_assert_int_eq(states.connects, 1);
    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

typedef struct {
    gw_redis_t *redis;
    result_t res;
    int ready_in_cb;
    int command_in_cb; /* 1 when a command issued from the callback was accepted */
} reentry_t;

static void on_result_reenter(void *data, const char *err, redisReply *reply)
{
    reentry_t *re = data;
    const char *ping[] = {"PING"};
    size_t len[] = {4};
    result_t ignored;
    on_result(&re->res, err, reply);
    re->ready_in_cb = gw_redis_is_ready(re->redis);
    re->command_in_cb = gw_redis_command_argv(re->redis, 100, on_result, &ignored, 1, ping, len) != NULL;
}

START_TEST(reconnect_after_restart)
{
    server_t srv;
    states_t states = {0};
    result_t res, inflight;

    server_tcp(&srv);
    gw_redis_t *r = connect_ready(&srv, &states);

    /* a command on its way when the server dies gets "disconnected"; from that callback the
     * connection already looks down */
    const char *get[] = {"GET", "k"};
    size_t get_len[] = {3, 1};
    reentry_t re = {.redis = r, .ready_in_cb = -1, .command_in_cb = -1};
    ck_assert_ptr_nonnull(gw_redis_command_argv(r, 5000, on_result_reenter, &re, 2, get, get_len));
    server_kill(&srv);
    ck_assert(run_until(&re.res.called, WAIT_MS));
    inflight = re.res;
    /* at the close, not at its 5 s deadline ("timeout") */
    ck_assert_str_eq(inflight.err, "disconnected");
    ck_assert_int_eq(re.ready_in_cb, 0);
    ck_assert_int_eq(re.command_in_cb, 0);
    ck_assert_int_eq(gw_redis_is_ready(r), 0);
    ck_assert_int_eq(states.disconnects, 1);
    ck_assert_int_eq(states.last, 0);

    /* while down: NULL at once, no callback ever */
    ck_assert_ptr_null(command(r, WAIT_MS, &res, 2, get));
    run_for(400); /* several backoff rounds against a closed port */
    ck_assert_int_eq(res.called, 0);
    ck_assert_int_eq(gw_redis_is_ready(r), 0);

    server_start(&srv); /* same port */
    uint64_t restarted = now_ms();
    ck_assert(wait_ready(r, WAIT_MS));
    /* the point: the backoff is capped (200 ms), so a server back is found soon; generous
     * for a loaded machine, far below what uncapped doubling would reach */
    ck_assert_uint_lt(now_ms() - restarted, 2500);
    ck_assert_int_eq(states.connects, 2);
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &res, 2, get));
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_str_eq(res.err, "");

    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

START_TEST(never_started)
{
    /* nothing listens: not ready, no crash, no leak, free works while retrying */
    server_t srv;
    memset(&srv, 0, sizeof(srv));
    srv.port = free_port();
    gw_redis_conf_t conf = conf_for(&srv);
    gw_redis_t *r = gw_redis_new(loop, &conf);
    run_for(300);
    ck_assert_int_eq(gw_redis_is_ready(r), 0);
    gw_redis_free(r);

    /* a unix socket that does not exist */
    const char *err;
    ck_assert_int_eq(gw_netaddr_parse("unix:/nonexistent/redis.sock", 1, &conf.addr, &err), 0);
    r = gw_redis_new(loop, &conf);
    run_for(100);
    ck_assert_int_eq(gw_redis_is_ready(r), 0);
    gw_redis_free(r);
    gw_redis_free(NULL);
}
END_TEST

START_TEST(cancel_means_no_callback)
{
    server_t srv;
    result_t res, other;

    server_tcp(&srv);
    gw_redis_t *r = connect_ready(&srv, NULL);
    const char *get[] = {"GET", "k"};

    /* cancelled before the reply */
    gw_redis_req_t *req = command(r, WAIT_MS, &res, 2, get);
    ck_assert_ptr_nonnull(req);
    ck_assert_ptr_nonnull(command(r, WAIT_MS, &other, 2, get));
    gw_redis_req_cancel(req);
    ck_assert(run_until(&other.called, WAIT_MS));
    run_for(50);
    ck_assert_int_eq(res.called, 0);

    /* cancelled before its deadline while the server hangs */
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    req = command(r, 100, &res, 2, get);
    ck_assert_ptr_nonnull(req);
    run_for(20);
    gw_redis_req_cancel(req);
    run_for(300);
    ck_assert_int_eq(res.called, 0);
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);

    /* cancelled and then the connection is freed: still no callback, no leak */
    ck_assert(wait_ready(r, WAIT_MS));
    req = command(r, WAIT_MS, &res, 2, get);
    ck_assert_ptr_nonnull(req);
    gw_redis_req_cancel(req);
    gw_redis_free(r);
    ck_assert_int_eq(res.called, 0);
    server_cleanup(&srv);
}
END_TEST

typedef struct {
    int count;
    char last[64];
} messages_t;

static void on_message(void *data, const char *payload, size_t len)
{
    messages_t *m = data;
    ++m->count;
    snprintf(m->last, sizeof(m->last), "%.*s", (int)len, payload);
}

static int wait_connects(states_t *states, int n, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (states->connects < n && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    return states->connects >= n;
}

START_TEST(subscribe_and_resubscribe)
{
    server_t srv;
    states_t states = {0};
    messages_t msgs = {0};

    server_tcp(&srv);
    gw_redis_conf_t conf = conf_for(&srv);
    gw_redis_t *sub = gw_redis_new(loop, &conf);
    gw_redis_set_state_cb(sub, on_state, &states);
    ck_assert_int_eq(gw_redis_subscribe(sub, "lizard:routes", on_message, &msgs), 0);
    /* "connected" means subscribed: a PUBLISH after it is not lost */
    ck_assert(wait_connects(&states, 1, WAIT_MS));
    admin(&srv, "PUBLISH lizard:routes sbx1");
    admin(&srv, "PUBLISH other-channel nope");
    ck_assert(run_until(&msgs.count, WAIT_MS));
    run_for(50);
    ck_assert_int_eq(msgs.count, 1);
    ck_assert_str_eq(msgs.last, "sbx1");

    /* restart: the state callback says so, and the subscription comes back by itself */
    server_kill(&srv);
    uint64_t deadline = now_ms() + WAIT_MS;
    while (states.disconnects < 1 && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    ck_assert_int_eq(states.disconnects, 1);
    server_start(&srv);
    ck_assert(wait_connects(&states, 2, WAIT_MS));
    admin(&srv, "PUBLISH lizard:routes sbx2");
    deadline = now_ms() + WAIT_MS;
    while (msgs.count < 2 && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    ck_assert_int_eq(msgs.count, 2);
    ck_assert_str_eq(msgs.last, "sbx2");

    gw_redis_free(sub);
    server_cleanup(&srv);
}
END_TEST

START_TEST(subscribe_after_ready)
{
    server_t srv;
    messages_t msgs = {0};

    server_tcp(&srv);
    gw_redis_t *sub = connect_ready(&srv, NULL);
    ck_assert_int_eq(gw_redis_subscribe(sub, "ch", on_message, &msgs), 0);
    /* no confirmation to wait for through the API: publish until one arrives */
    uint64_t deadline = now_ms() + WAIT_MS;
    while (msgs.count == 0 && now_ms() < deadline) {
        admin(&srv, "PUBLISH ch hello");
        run_for(50);
    }
    ck_assert_int_ge(msgs.count, 1);
    ck_assert_str_eq(msgs.last, "hello");
    gw_redis_free(sub);
    server_cleanup(&srv);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {set_get_roundtrip,
                            ipv6_loopback,
                            auth_over_unix_socket,
                            timeout_when_server_stops,
                            timeout_on_a_live_connection_keeps_it,
                            reconnect_after_restart,
                            never_started,
                            cancel_means_no_callback,
                            subscribe_and_resubscribe,
                            subscribe_after_ready};
    return redis_fixture_main("redis", 30, NULL, NULL, tests, sizeof(tests) / sizeof(tests[0]));
}
