/*
 * upstream/tunnel.c: the byte tunnel a WebSocket upgrade hands its two
 * sockets to. What each side had already sent when the tunnel took over goes
 * first and in order; a side whose peer does not read stops the other side
 * from being read (the gateway holds one read per direction, not the
 * stream); every byte written is reported once; one side closing closes
 * both, after what it said last has been delivered; an idle tunnel closes.
 * Each test runs twice: copying (_i 0), and spliced (_i 1: the bytes that
 * follow the hand-over move through a pipe, reported by on_spliced).
 * Real sockets (socketpairs) on a real h2o loop.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include "upstream/tunnel.h"

static h2o_loop_t *loop;

typedef struct st_counts_t {
    uint64_t to_client, to_upstream, spliced;
    int closed;
} counts_t;

static void on_bytes(void *data, uint64_t to_client, uint64_t to_upstream, int keepalive)
{
    counts_t *c = data;

    (void)keepalive; /* frames are not tracked here (no Pings): test_ws_track covers what is activity */
    c->to_client += to_client;
    c->to_upstream += to_upstream;
}

static void on_close(void *data)
{
    ((counts_t *)data)->closed++;
}

static void on_spliced(void *data, uint64_t bytes)
{
    ((counts_t *)data)->spliced += bytes;
}

static const gw_tunnel_callbacks_t callbacks = {on_bytes, on_close, NULL, on_spliced};

/* a new tunnel, spliced in the second run of each test */
static gw_tunnel_t *new_tunnel(h2o_socket_t *up, h2o_timeout_t *idle, counts_t *c, int spliced)
{
    gw_tunnel_t *t = gw_tunnel_new(loop, up, idle, &callbacks, c);
    if (spliced)
        gw_tunnel_set_splice(t);
    return t;
}

/* a socketpair: the gateway's side as an h2o socket, the peer's as a non-blocking fd */
static h2o_socket_t *pair(int *peer)
{
    int fds[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ck_assert_int_eq(fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
    *peer = fds[1];
    return h2o_evloop_socket_create(loop, fds[0], 0);
}

static void setup(void)
{
    /* one loop for all tests: libh2o 2.2.5 cannot destroy one */
    if (loop == NULL)
        loop = h2o_evloop_create();
}

static void spin(int rounds)
{
    while (rounds-- > 0)
        h2o_evloop_run(loop, 10);
}

static unsigned char pattern(uint64_t i)
{
    return (unsigned char)(i * 131 + (i >> 9));
}

/* reads what is there (the loop turning meanwhile) into `got`, checking the pattern from `*at` */
static size_t drain(int fd, uint64_t *at, int rounds)
{
    unsigned char buf[65536];
    size_t total = 0;
    ssize_t r;
    int idle = 0;

    while (idle < rounds) {
        spin(1);
        if ((r = recv(fd, buf, sizeof(buf), 0)) > 0) {
            for (ssize_t i = 0; i != r; ++i, ++*at)
                ck_assert_msg(buf[i] == pattern(*at), "byte %llu out of order", (unsigned long long)*at);
            total += (size_t)r;
            idle = 0;
        } else {
            ++idle;
        }
    }
    return total;
}

/* Bytes each side had sent before the hand-over reach the other side first,
 * then what follows, in order, counted once. */
START_TEST(test_bytes_before_the_hand_over_go_first)
{
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    gw_tunnel_t *t;
    char buf[64];
    ssize_t n;

    /* the upstream's 101 response was read with the first frame after it; the client's first frame too */
    h2o_buffer_reserve(&up->input, 16);
    memcpy(up->input->bytes, "early-from-app|", 15);
    up->input->size = 15;
    h2o_buffer_reserve(&cl->input, 16);
    memcpy(cl->input->bytes, "early-from-client|", 18);
    cl->input->size = 18;
    t = new_tunnel(up, NULL, &c, _i);
    ck_assert_int_eq(send(up_peer, "later-from-app", 14, 0), 14);
    ck_assert_int_eq(send(cl_peer, "later-from-client", 17, 0), 17);
    gw_tunnel_start(t, cl);
    spin(20);

    n = recv(cl_peer, buf, sizeof(buf), 0);
    ck_assert_int_eq(n, 29);
    ck_assert(memcmp(buf, "early-from-app|later-from-app", 29) == 0);
    n = recv(up_peer, buf, sizeof(buf), 0);
    ck_assert_int_eq(n, 35);
    ck_assert(memcmp(buf, "early-from-client|later-from-client", 35) == 0);
    ck_assert_uint_eq(c.to_client, 29);
    ck_assert_uint_eq(c.to_upstream, 35);
    /* spliced: what came after the hand-over, once the early bytes were written */
    ck_assert_uint_eq(c.spliced, _i ? 14 + 17 : 0);

    gw_tunnel_close(t);
    ck_assert_int_eq(c.closed, 1);
    close(up_peer);
    close(cl_peer);
}
END_TEST

/* A client that does not read stops the upstream from being read: the app's
 * writes block (the gateway holds one read, not the stream); once the
 * client reads, every byte arrives in order and is counted once. */
START_TEST(test_a_client_that_does_not_read_stops_the_upstream)
{
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    gw_tunnel_t *t = new_tunnel(up, NULL, &c, _i);
    unsigned char chunk[16384];
    uint64_t sent = 0, at = 0;
    size_t got;
    int blocked = 0, rounds;

    gw_tunnel_start(t, cl);
    /* without back-pressure the gateway would read it all into memory and the app would never block */
    for (rounds = 0; rounds != 8192 && blocked < 50; ++rounds) {
        ssize_t w;
        for (size_t i = 0; i != sizeof(chunk); ++i)
            chunk[i] = pattern(sent + i);
        if ((w = send(up_peer, chunk, sizeof(chunk), MSG_DONTWAIT)) > 0) {
            sent += (uint64_t)w;
            blocked = 0;
        } else {
            ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
            ++blocked;
        }
        spin(1);
    }
    ck_assert_msg(blocked >= 50, "the app never blocked: %llu bytes taken from it", (unsigned long long)sent);
    ck_assert_msg(sent < 64 * 1024 * 1024, "%llu bytes taken", (unsigned long long)sent);
    /* what was billed to the client is what its socket took, never more than the app sent */
    ck_assert_uint_le(c.to_client, sent);

    got = drain(cl_peer, &at, 30);
    ck_assert_uint_eq(got, sent);
    ck_assert_uint_eq(c.to_client, sent);
    ck_assert_uint_eq(c.to_upstream, 0);
    ck_assert_uint_eq(c.spliced, _i ? sent : 0);
    gw_tunnel_close(t);
    close(up_peer);
    close(cl_peer);
}
END_TEST

/* The app closing after its last bytes: they reach the client, then both
 * sockets close and on_close runs once. */
START_TEST(test_one_side_closing_closes_both_after_its_last_bytes)
{
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    gw_tunnel_t *t = new_tunnel(up, NULL, &c, _i);
    char buf[64];
    ssize_t n;

    gw_tunnel_start(t, cl);
    ck_assert_int_eq(send(up_peer, "goodbye", 7, 0), 7);
    shutdown(up_peer, SHUT_WR);
    spin(20);
    ck_assert_int_eq(c.closed, 1);
    n = recv(cl_peer, buf, sizeof(buf), 0);
    ck_assert_int_eq(n, 7);
    ck_assert(memcmp(buf, "goodbye", 7) == 0);
    ck_assert_int_eq(recv(cl_peer, buf, sizeof(buf), 0), 0); /* then the client's end is closed */
    ck_assert_uint_eq(c.to_client, 7);
    ck_assert_uint_eq(c.spliced, _i ? 7 : 0);
    close(up_peer);
    close(cl_peer);
}
END_TEST

/* No byte either way for the idle timeout: the tunnel closes, once. */
START_TEST(test_an_idle_tunnel_closes)
{
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    h2o_timeout_t idle;
    gw_tunnel_t *t;
    char buf[8];
    int i;

    h2o_timeout_init(loop, &idle, 100);
    t = new_tunnel(up, &idle, &c, _i);
    gw_tunnel_start(t, cl);
    ck_assert_int_eq(send(cl_peer, "x", 1, 0), 1);
    for (i = 0; i != 500 && c.to_upstream == 0; ++i)
        spin(1);
    ck_assert_uint_eq(c.to_upstream, 1);
    ck_assert_int_eq((int)recv(up_peer, buf, sizeof(buf), 0), 1);
    /* then silence: each round waits up to 10 ms, so 1000 rounds are far past the 100 ms */
    for (i = 0; i != 1000 && c.closed == 0; ++i)
        spin(1);
    ck_assert_int_eq(c.closed, 1);
    ck_assert_int_eq(recv(cl_peer, buf, sizeof(buf), 0), 0);
    ck_assert_uint_eq(c.spliced, _i ? 1 : 0);
    close(up_peer);
    close(cl_peer);
    h2o_timeout_dispose(loop, &idle);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tunnel");
    TCase *tc = tcase_create("tunnel");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_bytes_before_the_hand_over_go_first, 0, 2);
    tcase_add_loop_test(tc, test_a_client_that_does_not_read_stops_the_upstream, 0, 2);
    tcase_add_loop_test(tc, test_one_side_closing_closes_both_after_its_last_bytes, 0, 2);
    tcase_add_loop_test(tc, test_an_idle_tunnel_closes, 0, 2);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
