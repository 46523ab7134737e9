/*
 * The unit tests' Redis fixture (redis_fixture.h).
 */
#include "tests/unit/redis_fixture.h"
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common/netaddr.h"

#define REDIS_SERVER "/usr/bin/redis-server"

/* redis-server processes */

#define MAX_SERVERS 8
static pid_t started[MAX_SERVERS];

void kill_all_servers(void)
{
    for (size_t i = 0; i != MAX_SERVERS; ++i) {
        if (started[i] > 0) {
            kill(started[i], SIGKILL);
            waitpid(started[i], NULL, 0);
            started[i] = 0;
        }
    }
}

static void track(pid_t pid, int add)
{
    for (size_t i = 0; i != MAX_SERVERS; ++i) {
        if (add ? started[i] == 0 : started[i] == pid) {
            started[i] = add ? pid : 0;
            return;
        }
    }
    ck_abort_msg("too many redis-server processes");
}

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int free_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    close(fd);
    return ntohs(sin.sin_port);
}

/* A blocking client for setting up data and checking readiness (tests only). */
redisContext *admin_connect(const server_t *srv)
{
    struct timeval tv = {1, 0};
    redisContext *c =
        srv->port != 0 ? redisConnectWithTimeout("127.0.0.1", srv->port, tv) : redisConnectUnixWithTimeout(srv->sock, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (srv->password != NULL) {
        redisReply *r = redisCommand(c, "AUTH %s", srv->password);
        if (r != NULL)
            freeReplyObject(r);
    }
    return c;
}

/* A blocking command for setting up data (tests only); returns the integer
 * reply, 0 for any other kind of reply. */
long long admin(const server_t *srv, const char *fmt, ...)
{
    redisContext *c = admin_connect(srv);
    va_list ap;
    long long ret;
    ck_assert_ptr_nonnull(c);
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "admin command failed: %s", r->str);
    ret = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    redisFree(c);
    return ret;
}

void server_start(server_t *srv)
{
    char port[16];
    pid_t pid;

    snprintf(port, sizeof(port), "%d", srv->port);
    if (srv->dir[0] == '\0') {
        snprintf(srv->dir, sizeof(srv->dir), "/tmp/gw-test-redis-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(srv->dir));
        if (srv->port == 0)
            snprintf(srv->sock, sizeof(srv->sock), "%s/redis.sock", srv->dir);
    }
    ck_assert_int_ge(pid = fork(), 0);
    if (pid == 0) {
        /* dies with the test process, whatever way the test ends */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 1);
        dup2(devnull, 2);
        const char *argv[32];
        int n = 0;
        argv[n++] = "redis-server";
        argv[n++] = "--port";
        argv[n++] = port;
        argv[n++] = "--bind";
        argv[n++] = srv->bind != NULL ? srv->bind : "127.0.0.1";
        argv[n++] = "--save";
        argv[n++] = "";
        argv[n++] = "--appendonly";
        argv[n++] = "no";
        argv[n++] = "--dir";
        argv[n++] = srv->dir;
        if (srv->port == 0) {
            argv[n++] = "--unixsocket";
            argv[n++] = srv->sock;
            argv[n++] = "--unixsocketperm";
            argv[n++] = "700";
        }
        if (srv->password != NULL) {
            argv[n++] = "--requirepass";
            argv[n++] = srv->password;
        }
        argv[n] = NULL;
        execv(REDIS_SERVER, (char **)argv);
        _exit(127);
    }
    srv->pid = pid;
    track(pid, 1);

    /* wait until it answers (an error such as NOAUTH counts) */
    uint64_t deadline = now_ms() + 5000;
    while (now_ms() < deadline) {
        redisContext *c = admin_connect(srv);
        if (c != NULL) {
            redisReply *r = redisCommand(c, "PING");
            redisFree(c);
            if (r != NULL) {
                freeReplyObject(r);
                return;
            }
        }
        usleep(20000);
    }
    ck_abort_msg("redis-server did not start");
}

void server_kill(server_t *srv)
{
    if (srv->pid > 0) {
        kill(srv->pid, SIGCONT);
        kill(srv->pid, SIGKILL);
        waitpid(srv->pid, NULL, 0);
        track(srv->pid, 0);
        srv->pid = 0;
    }
}

void server_cleanup(server_t *srv)
{
    server_kill(srv);
    if (srv->sock[0] != '\0')
        unlink(srv->sock);
    if (srv->dir[0] != '\0')
        rmdir(srv->dir);
}

void server_tcp(server_t *srv)
{
    memset(srv, 0, sizeof(*srv));
    srv->port = free_port();
    server_start(srv);
}

/* the loop */

h2o_evloop_t *loop;

static void loop_setup(void)
{
    signal(SIGPIPE, SIG_IGN); /* as in the gateway: a write to a dead peer is an error, not a signal */
    loop = h2o_evloop_create();
}

static void loop_teardown(void)
{
    /* let disposed sockets be freed, then the loop (every timer must be gone by now) */
    h2o_evloop_run(loop, 0);
    h2o_evloop_run(loop, 0);
    h2o_evloop_destroy(loop);
    loop = NULL;
    kill_all_servers();
}

/* Runs the loop until *flag is non-zero or timeout_ms passes; returns *flag. */
int run_until(volatile int *flag, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (!*flag && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    return *flag;
}

uint64_t counter(atomic_uint_fast64_t *c)
{
    return atomic_load(c);
}

/* Runs the loop until *c reaches n; returns whether it did. */
int run_until_counter(atomic_uint_fast64_t *c, uint64_t n, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (counter(c) < n && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    return counter(c) >= n;
}

void run_for(uint64_t ms)
{
    int never = 0;
    run_until(&never, ms);
}

/* Runs the loop until `r` is ready or timeout_ms passes; returns whether it is. */
int wait_ready(gw_redis_t *r, uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    while (!gw_redis_is_ready(r) && now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    return gw_redis_is_ready(r);
}

gw_redis_conf_t conf_for(const server_t *srv)
{
    /* a connect may take a while on a loaded machine; the tests that need a dead peer stop it */
    gw_redis_conf_t conf = {.connect_timeout_ms = 1000, .reconnect_min_ms = 20, .reconnect_max_ms = 200};
    char addr[160];
    const char *err;
    if (srv->port != 0)
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", srv->port);
    else
        snprintf(addr, sizeof(addr), "unix:%s", srv->sock);
    ck_assert_int_eq(gw_netaddr_parse(addr, 1, &conf.addr, &err), 0);
    conf.password = srv->password;
    return conf;
}

int redis_fixture_main(const char *name, unsigned timeout_s, SFun setup, SFun teardown, const TTest *const tests[], size_t n)
{
    atexit(kill_all_servers);

    Suite *s = suite_create(name);
    TCase *tc = tcase_create("redis-server");
    tcase_set_timeout(tc, timeout_s);
    tcase_add_checked_fixture(tc, loop_setup, loop_teardown);
    if (setup != NULL || teardown != NULL)
        tcase_add_checked_fixture(tc, setup, teardown);
    for (size_t i = 0; i != n; ++i)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
