/*
 * upstream/upstream_pool.c: idle keep-alive connections are reused per
 * (sandbox, lifecycle, port, address) only; past the per-key count they
 * expire sooner instead of closing at once, so steady concurrency reuses
 * them; the worker-wide cap holds; they close when the peer closes or talks,
 * when idle too long, and when a lifecycle is dropped.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <h2o.h>
#include "upstream/upstream_pool.h"

typedef struct st_conn_pair_t {
    h2o_socket_t *sock; /* the gateway's side, given to the pool */
    int peer;           /* the app's side */
} conn_pair_t;

static h2o_loop_t *loop;
static gw_netaddr_t addr_a, addr_b;

static void setup(void)
{
    struct sockaddr_in *sin;

    /* one loop for all tests: libh2o 2.2.5 cannot destroy one */
    if (loop == NULL)
        loop = h2o_evloop_create();
    memset(&addr_a, 0, sizeof(addr_a));
    sin = (void *)&addr_a.ss;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(0x0a000001);
    sin->sin_port = htons(3000);
    addr_a.len = sizeof(*sin);
    addr_b = addr_a;
    ((struct sockaddr_in *)&addr_b.ss)->sin_addr.s_addr = htonl(0x0a000002);
}

static void teardown(void)
{
    /* frees the sockets closed by the test */
    h2o_evloop_run(loop, 0);
}

static conn_pair_t make_pair(void)
{
    int fds[2];
    conn_pair_t p;

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    p.sock = h2o_evloop_socket_create(loop, fds[0], 0);
    p.peer = fds[1];
    return p;
}

/* a pool without the surplus timeout and with a worker cap that is never reached, unless a test says otherwise */
static gw_upstream_pool_t *new_pool(uint64_t idle_timeout_ms, size_t max_idle_per_key)
{
    gw_upstream_pool_conf_t conf = {idle_timeout_ms, 0, max_idle_per_key, 100000};
    return gw_upstream_pool_new(loop, &conf);
}

static gw_upstream_key_t key(const char *sandbox, const char *lifecycle, uint16_t port, const gw_netaddr_t *addr)
{
    gw_upstream_key_t k = {sandbox, h2o_iovec_init(lifecycle, strlen(lifecycle)), port, addr};
    return k;
}

/* 1 when the gateway's side of the pair has been closed */
static int peer_sees_close(int peer)
{
    char c;
    ssize_t r = recv(peer, &c, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void run_loop_until_idle_is(gw_upstream_pool_t *pool, size_t want, int max_ms)
{
    int waited = 0;
    while (gw_upstream_pool_num_idle(pool) != want && waited < max_ms) {
        h2o_evloop_run(loop, 10);
        waited += 10;
    }
}

START_TEST(test_reuse_same_key_only)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c = make_pair();

    gw_upstream_pool_put(pool, &k, c.sock);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 1);

    gw_upstream_key_t other_lifecycle = key("sbx1", "lc2", 3000, &addr_a);
    gw_upstream_key_t other_port = key("sbx1", "lc1", 3001, &addr_a);
    gw_upstream_key_t other_addr = key("sbx1", "lc1", 3000, &addr_b);
    gw_upstream_key_t other_sandbox = key("sbx2", "lc1", 3000, &addr_a);
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &other_lifecycle));
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &other_port));
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &other_addr));
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &other_sandbox));

    h2o_socket_t *got = gw_upstream_pool_take(pool, &k);
    ck_assert_ptr_eq(got, c.sock);
    ck_assert_ptr_null(got->data);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &k));

    h2o_socket_close(got);
    close(c.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

/* A set is made again at each put after a take emptied it: short keys reuse its memory, a long one gets its own (ASan
 * sees either freed the way it was allocated). */
START_TEST(test_set_made_again_short_and_long_keys)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    char lifecycle[300];
    int round;

    memset(lifecycle, 'l', sizeof(lifecycle) - 1);
    lifecycle[sizeof(lifecycle) - 1] = '\0';
    gw_upstream_key_t keys[2] = {key("sbx1", "lc1", 3000, &addr_a), key("sbx1", lifecycle, 3000, &addr_a)};
    for (round = 0; round != 6; ++round) {
        gw_upstream_key_t *k = keys + round % 2;
        conn_pair_t c = make_pair();
        gw_upstream_pool_put(pool, k, c.sock);
        ck_assert_ptr_null(gw_upstream_pool_take(pool, keys + (round + 1) % 2));
        h2o_socket_t *got = gw_upstream_pool_take(pool, k);
        ck_assert_ptr_eq(got, c.sock);
        ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
        h2o_socket_close(got);
        close(c.peer);
    }
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_past_the_key_count_connections_expire_sooner)
{
    /* a burst left 5 idle: 2 are kept for the idle timeout (long here), the 3
     * past the count for the surplus timeout, none is closed at once */
    gw_upstream_pool_conf_t conf = {600000, 50, 2, 100};
    gw_upstream_pool_t *pool = gw_upstream_pool_new(loop, &conf);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c[5];
    int i;

    for (i = 0; i != 5; ++i) {
        c[i] = make_pair();
        gw_upstream_pool_put(pool, &k, c[i].sock);
    }
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 5);
    for (i = 0; i != 5; ++i)
        ck_assert(!peer_sees_close(c[i].peer));
    /* the bound only keeps a broken timer from hanging the test */
    run_loop_until_idle_is(pool, 2, 10000);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 2);
    for (i = 2; i != 5; ++i)
        ck_assert(peer_sees_close(c[i].peer));
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &k), c[1].sock);
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &k), c[0].sock);
    h2o_socket_close(c[0].sock);
    h2o_socket_close(c[1].sock);
    for (i = 0; i != 5; ++i)
        close(c[i].peer);
    gw_upstream_pool_free(pool);
}
END_TEST

/* Steady concurrency above max_idle_per_key (issue 11: 256 requests in flight
 * to one sandbox with 64 kept per pool reconnected 0.65 times per request):
 * once warm, every round of requests finds a pooled connection for each, and
 * no connection is closed. */
START_TEST(test_steady_concurrency_needs_no_new_connection)
{
    enum { CONCURRENCY = 200, ROUNDS = 20 };
    gw_upstream_pool_conf_t conf = {600000, 600000, 64, 1024};
    gw_upstream_pool_t *pool = gw_upstream_pool_new(loop, &conf);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    static conn_pair_t c[CONCURRENCY];
    h2o_socket_t *in_use[CONCURRENCY];
    size_t fresh = 0;
    int i, round;

    /* warm-up: the first round opens its connections */
    for (i = 0; i != CONCURRENCY; ++i)
        c[i] = make_pair();
    for (round = 0; round != ROUNDS; ++round) {
        /* the requests of a round all start, then their responses all complete
         * in one loop pass (the worst case for a count: all idle at once) */
        for (i = 0; i != CONCURRENCY; ++i) {
            if ((in_use[i] = gw_upstream_pool_take(pool, &k)) == NULL) {
                ck_assert_int_eq(round, 0);
                in_use[i] = c[i].sock;
                ++fresh;
            }
        }
        for (i = 0; i != CONCURRENCY; ++i)
            gw_upstream_pool_put(pool, &k, in_use[i]);
        ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), CONCURRENCY);
        h2o_evloop_run(loop, 0);
    }
    ck_assert_uint_eq(fresh, CONCURRENCY);
    for (i = 0; i != CONCURRENCY; ++i)
        ck_assert(!peer_sees_close(c[i].peer));
    gw_upstream_pool_free(pool);
    for (i = 0; i != CONCURRENCY; ++i)
        close(c[i].peer);
}
END_TEST

START_TEST(test_worker_cap_holds_over_all_keys)
{
    gw_upstream_pool_conf_t conf = {0, 0, 4, 3};
    gw_upstream_pool_t *pool = gw_upstream_pool_new(loop, &conf);
    gw_upstream_key_t a = key("sbx1", "lc1", 3000, &addr_a), b = key("sbx2", "lc1", 3000, &addr_b);
    conn_pair_t c[6];
    int i;

    for (i = 0; i != 6; ++i) {
        c[i] = make_pair();
        gw_upstream_pool_put(pool, i % 2 == 0 ? &a : &b, c[i].sock);
        ck_assert_uint_le(gw_upstream_pool_num_idle(pool), 3);
    }
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 3);
    /* the three idle longest went, whichever pool they were in */
    for (i = 0; i != 3; ++i)
        ck_assert(peer_sees_close(c[i].peer));
    for (i = 3; i != 6; ++i)
        ck_assert(!peer_sees_close(c[i].peer));
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &a), c[4].sock);
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &a));
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &b), c[5].sock);
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &b), c[3].sock);
    for (i = 3; i != 6; ++i)
        h2o_socket_close(c[i].sock);
    /* a cap of 0 disables pooling */
    gw_upstream_pool_free(pool);
    conf.max_idle = 0;
    pool = gw_upstream_pool_new(loop, &conf);
    conn_pair_t d = make_pair();
    gw_upstream_pool_put(pool, &a, d.sock);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert(peer_sees_close(d.peer));
    close(d.peer);
    for (i = 0; i != 6; ++i)
        close(c[i].peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_pooling_disabled)
{
    gw_upstream_pool_t *pool = new_pool(0, 0);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c = make_pair();

    gw_upstream_pool_put(pool, &k, c.sock);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert(peer_sees_close(c.peer));
    close(c.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_peer_close_removes)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c = make_pair();

    gw_upstream_pool_put(pool, &k, c.sock);
    close(c.peer);
    run_loop_until_idle_is(pool, 0, 1000);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &k));
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_peer_data_removes)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c = make_pair();

    gw_upstream_pool_put(pool, &k, c.sock);
    ck_assert_int_eq(write(c.peer, "HTTP/1.1 408 x\r\n\r\n", 18), 18);
    run_loop_until_idle_is(pool, 0, 1000);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert(peer_sees_close(c.peer));
    close(c.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_idle_timeout)
{
    gw_upstream_pool_t *pool = new_pool(50, 4);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c = make_pair();

    gw_upstream_pool_put(pool, &k, c.sock);
    /* kept at first (no loop pass here: on a loaded machine the loop's clock
     * may already be 50 ms old, and the first pass would fire the timer) */
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 1);
    ck_assert(!peer_sees_close(c.peer));
    /* the bound only keeps a broken timer from hanging the test */
    run_loop_until_idle_is(pool, 0, 10000);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 0);
    ck_assert(peer_sees_close(c.peer));
    close(c.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_drop_other_lifecycles)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    gw_upstream_key_t a1 = key("sbx1", "lc1", 3000, &addr_a), a2 = key("sbx1", "lc2", 3000, &addr_a),
                      b1 = key("sbx2", "lc1", 3000, &addr_a);
    conn_pair_t c1 = make_pair(), c2 = make_pair(), c3 = make_pair();

    gw_upstream_pool_put(pool, &a1, c1.sock);
    gw_upstream_pool_put(pool, &a2, c2.sock);
    gw_upstream_pool_put(pool, &b1, c3.sock);

    gw_upstream_pool_drop(pool, "sbx1", "lc2");
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 2);
    ck_assert(peer_sees_close(c1.peer));
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &a1));

    gw_upstream_pool_drop(pool, "sbx1", NULL);
    ck_assert_uint_eq(gw_upstream_pool_num_idle(pool), 1);
    ck_assert(peer_sees_close(c2.peer));
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &b1), c3.sock);

    h2o_socket_close(c3.sock);
    close(c1.peer);
    close(c2.peer);
    close(c3.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_drop_spares_other_sandboxes)
{
    gw_upstream_pool_t *pool = new_pool(0, 4);
    gw_upstream_key_t a = key("sbx1", "lc1", 3000, &addr_a), b = key("sbx10", "lc1", 3000, &addr_a);
    conn_pair_t c1 = make_pair(), c2 = make_pair();

    gw_upstream_pool_put(pool, &a, c1.sock);
    gw_upstream_pool_put(pool, &b, c2.sock);
    gw_upstream_key_t b_other_port = key("sbx10", "lc1", 3001, &addr_a);
    ck_assert_ptr_null(gw_upstream_pool_take(pool, &b_other_port));
    gw_upstream_pool_drop(pool, "sbx1", NULL);
    ck_assert(peer_sees_close(c1.peer));
    ck_assert_ptr_eq(gw_upstream_pool_take(pool, &b), c2.sock);
    h2o_socket_close(c2.sock);
    close(c1.peer);
    close(c2.peer);
    gw_upstream_pool_free(pool);
}
END_TEST

START_TEST(test_free_closes_idle)
{
    gw_upstream_pool_t *pool = new_pool(1000, 4);
    gw_upstream_key_t k = key("sbx1", "lc1", 3000, &addr_a);
    conn_pair_t c1 = make_pair(), c2 = make_pair();

    gw_upstream_pool_put(pool, &k, c1.sock);
    gw_upstream_pool_put(pool, &k, c2.sock);
    gw_upstream_pool_free(pool);
    ck_assert(peer_sees_close(c1.peer));
    ck_assert(peer_sees_close(c2.peer));
    close(c1.peer);
    close(c2.peer);
    gw_upstream_pool_free(NULL);
}
END_TEST

static Suite *upstream_pool_suite(void)
{
    Suite *s = suite_create("upstream_pool");
    TCase *tc = tcase_create("pool");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_reuse_same_key_only);
    tcase_add_test(tc, test_past_the_key_count_connections_expire_sooner);
    tcase_add_test(tc, test_steady_concurrency_needs_no_new_connection);
    tcase_add_test(tc, test_worker_cap_holds_over_all_keys);
    tcase_add_test(tc, test_pooling_disabled);
    tcase_add_test(tc, test_peer_close_removes);
    tcase_add_test(tc, test_peer_data_removes);
    tcase_add_test(tc, test_idle_timeout);
    tcase_add_test(tc, test_drop_other_lifecycles);
    tcase_add_test(tc, test_drop_spares_other_sandboxes);
    tcase_add_test(tc, test_free_closes_idle);
    tcase_add_test(tc, test_set_made_again_short_and_long_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(upstream_pool_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
