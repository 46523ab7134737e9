/*
 * upstream/tunnel.c: the byte tunnel a WebSocket upgrade hands its two
 * sockets to. What each side had already sent when the tunnel took over goes
 * first and in order; a side whose peer does not read stops the other side
 * from being read (the gateway holds one read per direction, not the
 * stream); every byte written is reported once; one side closing closes
 * both, after what it said last has been delivered; an idle tunnel closes.
 * Past the client's frame bounds, both sides get a Close and the tunnel
 * closes once they have (or after the close wait). Each test runs twice:
 * copying (_i 0), and spliced (_i 1: the bytes that follow the hand-over
 * move through a pipe, reported by on_spliced; with bounds, the app's only).
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
#include "common/engine.h"
#include "upstream/tunnel.h"

static h2o_loop_t *loop;

typedef struct st_counts_t {
    uint64_t to_client, to_upstream, spliced;
    int closed;
    uint16_t refused;
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

static void on_refused(void *data, uint16_t code)
{
    ck_assert_uint_eq(((counts_t *)data)->refused, 0);
    ((counts_t *)data)->refused = code;
}

static const gw_tunnel_callbacks_t callbacks = {on_bytes, on_close, NULL, on_spliced, on_refused};

/* a new tunnel, spliced in the second run of each test */
static gw_tunnel_t *new_tunnel(h2o_socket_t *up, gw_timeout_t *idle, counts_t *c, int spliced)
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
    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
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

    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
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

    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
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
    gw_timeout_t idle;
    gw_tunnel_t *t;
    char buf[8];
    int i;

    gw_timeout_init(loop, &idle, 100);
    t = new_tunnel(up, &idle, &c, _i);
    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
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
    gw_timeout_dispose(loop, &idle);
}
END_TEST

/* Reads exactly n bytes from fd (the loop turning meanwhile). */
static void read_exact(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    ssize_t r;
    int rounds;

    for (rounds = 0; got < n && rounds != 500; ++rounds) {
        spin(1);
        if ((r = recv(fd, buf + got, n - got, 0)) > 0)
            got += (size_t)r;
    }
    ck_assert_uint_eq(got, n);
}

/* A client's frame past the bounds (a message over 1 MiB): the client's
 * frames before it reach the app, then the gateway's masked Close 1009;
 * the client gets a Close 1009 after the app's frame (copied: that ends
 * between frames; spliced: the app's direction is spliced, its end is not
 * known, so it gets none); both are shut down; the tunnel closes once both
 * peers have closed. */
START_TEST(test_past_the_bounds_both_sides_get_a_close)
{
    static const uint8_t key[4] = {9, 8, 7, 6}, hello[] = {0x82, 5, 'h', 'e', 'l', 'l', 'o'};
    gw_ws_budget_conf_t conf = {.max_message_bytes = 1 << 20};
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    gw_timeout_t wait;
    gw_tunnel_t *t;
    uint8_t sent[64], got[64], close_frame[64];
    size_t n = 0, h, i;
    int rounds;

    gw_timeout_init(loop, &wait, 2000);
    t = new_tunnel(up, NULL, &c, _i);
    gw_tunnel_set_bounds(t, &conf, &wait);
    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
    ck_assert_int_eq(send(up_peer, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
    spin(5);
    /* 10 bytes of a message, then a fragment that takes it past 1 MiB (its first payload bytes with it) */
    n = gw_ws_header_encode(sent, 0, GW_WS_OP_BINARY, 10, key);
    memcpy(sent + n, "0123456789", 10);
    gw_ws_mask(sent + n, 10, key, 0);
    n += 10;
    h = n;
    n += gw_ws_header_encode(sent + n, 1, GW_WS_OP_CONTINUATION, 1 << 20, key);
    memset(sent + n, 0, 8), n += 8;
    ck_assert_int_eq(send(cl_peer, sent, n, 0), (ssize_t)n);
    spin(20);
    ck_assert_uint_eq(c.refused, GW_WS_CLOSE_TOO_BIG);

    /* the app: the frame before, then a masked Close 1009 "message too big", then its end */
    read_exact(up_peer, got, h);
    ck_assert_int_eq(memcmp(got, sent, h), 0);
    read_exact(up_peer, got, 2 + 4 + 2 + 15);
    ck_assert_uint_eq(got[0], 0x88);
    ck_assert_uint_eq(got[1], 0x80 | 17);
    gw_ws_mask(got + 6, 17, got + 2, 0);
    ck_assert_int_eq(memcmp(got + 6, "\x03\xf1message too big", 17), 0);
    ck_assert_int_eq(recv(up_peer, got, sizeof(got), 0), 0);
    ck_assert_uint_eq(c.to_upstream, h);

    /* the client: the app's frame, the Close (copied), its end */
    read_exact(cl_peer, got, sizeof(hello));
    ck_assert_int_eq(memcmp(got, hello, sizeof(hello)), 0);
    if (!_i) {
        i = gw_ws_close_frame_encode(close_frame, GW_WS_CLOSE_TOO_BIG, "message too big", 15);
        read_exact(cl_peer, got, i);
        ck_assert_int_eq(memcmp(got, close_frame, i), 0);
    }
    ck_assert_int_eq(recv(cl_peer, got, sizeof(got), 0), 0);

    /* what each sends now is dropped; the tunnel closes once both have closed */
    ck_assert_int_eq(send(cl_peer, "late", 4, 0), 4);
    close(up_peer);
    spin(5);
    ck_assert_int_eq(c.closed, 0);
    close(cl_peer);
    for (rounds = 0; rounds != 100 && c.closed == 0; ++rounds)
        spin(1);
    ck_assert_int_eq(c.closed, 1);
    ck_assert_uint_eq(c.to_upstream, h);
    gw_timeout_dispose(loop, &wait);
}
END_TEST

/* Peers that never close: the tunnel closes after the close wait anyway. */
START_TEST(test_a_refused_tunnel_closes_after_the_close_wait)
{
    static const uint8_t key[4] = {1, 1, 1, 1};
    gw_ws_budget_conf_t conf = {.frames_per_second = 1};
    int up_peer, cl_peer;
    h2o_socket_t *up = pair(&up_peer), *cl = pair(&cl_peer);
    counts_t c = {0};
    gw_timeout_t wait;
    gw_tunnel_t *t;
    uint8_t ping[6 * 20];
    size_t i;
    int rounds;

    gw_timeout_init(loop, &wait, 100);
    t = new_tunnel(up, NULL, &c, _i);
    gw_tunnel_set_bounds(t, &conf, &wait);
    gw_tunnel_start(t, gw_tunnel_end_socket(cl));
    /* 20 empty Pings: 10 pass (the allowance of 1 a second), the 11th is refused */
    for (i = 0; i != 20; ++i)
        gw_ws_header_encode(ping + 6 * i, 1, GW_WS_OP_PING, 0, key);
    ck_assert_int_eq(send(cl_peer, ping, sizeof(ping), 0), (ssize_t)sizeof(ping));
    /* each round waits up to 10 ms, so 100 rounds are past the 100 ms */
    for (rounds = 0; rounds != 100 && c.closed == 0; ++rounds)
        spin(1);
    ck_assert_uint_eq(c.refused, GW_WS_CLOSE_POLICY);
    ck_assert_int_eq(c.closed, 1);
    ck_assert_uint_eq(c.to_upstream, 6 * 10);
    close(up_peer);
    close(cl_peer);
    gw_timeout_dispose(loop, &wait);
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
    tcase_add_loop_test(tc, test_past_the_bounds_both_sides_get_a_close, 0, 2);
    tcase_add_loop_test(tc, test_a_refused_tunnel_closes_after_the_close_wait, 0, 2);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
