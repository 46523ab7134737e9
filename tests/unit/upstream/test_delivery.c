/*
 * upstream/delivery.c: egress is billed as the client's TCP acknowledges it,
 * over a real loopback TCP connection: a client that reads everything is
 * billed all of it (also when the gateway closes first), one that never
 * reads and resets is billed what its kernel took, several sandboxes on one
 * connection are billed in stream order; TLS plaintext is never
 * over-estimated.
 */
#include <check.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <h2o.h>
#include "upstream/delivery.h"

static h2o_loop_t *loop;
static uint64_t billed[2];

static void setup(void)
{
    /* one loop for all tests: libh2o 2.2.5 cannot destroy one */
    if (loop == NULL)
        loop = h2o_evloop_create();
    memset(billed, 0, sizeof(billed));
}

static void on_bill(void *data, const char *sandbox_id, int no_activity, uint64_t egress)
{
    (void)data;
    (void)no_activity;
    billed[sandbox_id[3] == '2'] += egress;
}

/* A loopback TCP connection: *gw is the gateway's side (an h2o socket), the
 * client's side returned. rcvbuf > 0 sets the client's receive buffer. */
static int tcp_pair(h2o_socket_t **gw, int rcvbuf)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = socket(AF_INET, SOCK_STREAM, 0), sfd;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(lfd, (void *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(lfd, 1), 0);
    ck_assert_int_eq(getsockname(lfd, (void *)&sin, &len), 0);
    if (rcvbuf > 0)
        setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    ck_assert_int_eq(connect(cfd, (void *)&sin, sizeof(sin)), 0);
    ck_assert_int_ge(sfd = accept(lfd, NULL, NULL), 0);
    close(lfd);
    *gw = h2o_evloop_socket_create(loop, sfd, H2O_SOCKET_FLAG_DONT_READ);
    return cfd;
}

/* Writes n bytes as the gateway would (h2o counts them in bytes_written);
 * returns what the kernel took. */
static size_t gw_write(h2o_socket_t *sock, size_t n)
{
    static char buf[65536];
    size_t done = 0;

    while (done < n) {
        ssize_t r = send(h2o_socket_get_fd(sock), buf, n - done < sizeof(buf) ? n - done : sizeof(buf), MSG_DONTWAIT);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    sock->bytes_written += done;
    return done;
}

static size_t drain(int fd, size_t want)
{
    char buf[65536];
    size_t got = 0;
    ssize_t r;

    while (got < want && (r = recv(fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)r;
    return got;
}

static void wait_acked(h2o_socket_t *sock)
{
    int q = 1, i;
    for (i = 0; i != 1000 && q != 0; ++i) {
        ioctl(h2o_socket_get_fd(sock), SIOCOUTQ, &q);
        if (q != 0)
            usleep(1000);
    }
    ck_assert_int_eq(q, 0);
}

START_TEST(test_reading_client_is_billed_everything)
{
    gw_deliveries_t *d = gw_deliveries_new(loop, 0, on_bill, NULL);
    h2o_socket_t *gw;
    int client = tcp_pair(&gw, 0);
    size_t a = gw_write(gw, 100000), b;

    gw_deliveries_hold(d, gw, "sbx1", 0, a, 1);
    b = gw_write(gw, 30000);
    gw_deliveries_hold(d, gw, "sbx2", 0, b, 1);
    /* a final piece, billed as it is handed over */
    gw_deliveries_hold(d, gw, "sbx2", 0, 5000, 0);
    gw_write(gw, 5000);
    ck_assert_uint_eq(gw_deliveries_held(d), a + b + 5000);
    ck_assert_uint_eq(drain(client, a + b + 5000), a + b + 5000);
    wait_acked(gw);
    gw_deliveries_settle_all(d);
    ck_assert_uint_eq(billed[0], a);
    ck_assert_uint_eq(billed[1], b + 5000);
    gw_deliveries_close(d, gw);
    ck_assert_uint_eq(gw_deliveries_held(d), 0);
    close(client);
    h2o_socket_close(gw);
    gw_deliveries_free(d);
}
END_TEST

START_TEST(test_reset_by_a_client_that_never_read)
{
    gw_deliveries_t *d = gw_deliveries_new(loop, 0, on_bill, NULL);
    h2o_socket_t *gw;
    int client = tcp_pair(&gw, 4096), queued = 0, i;
    struct linger lg = {1, 0};
    size_t written = gw_write(gw, 8 * 1024 * 1024);

    gw_deliveries_hold(d, gw, "sbx1", 0, written, 1);
    for (i = 0; i != 100 && queued == 0; ++i) {
        usleep(1000);
        ioctl(client, FIONREAD, &queued);
    }
    ck_assert_int_gt(queued, 0);
    ck_assert_uint_gt(written, 10 * (size_t)queued);
    /* the client's close with unread bytes: RST */
    setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(client);
    usleep(20000);
    gw_deliveries_close(d, gw);
    ck_assert_uint_le(billed[0], (uint64_t)queued);
    ck_assert_uint_eq(gw_deliveries_held(d), 0);
    h2o_socket_close(gw);
    gw_deliveries_free(d);
}
END_TEST

START_TEST(test_graceful_close_in_flight_is_followed)
{
    /* checked every 100 ms, so followed for 1 s: longer than the client's
     * delayed ACK (at most 200 ms) on a loaded machine */
    gw_deliveries_t *d = gw_deliveries_new(loop, 100, on_bill, NULL);
    h2o_socket_t *gw;
    int client = tcp_pair(&gw, 4096), i;
    size_t written = gw_write(gw, 1000000), got;

    gw_deliveries_hold(d, gw, "sbx1", 0, written, 1);
    /* h2o closes its side while most of it is still in the kernel */
    gw_deliveries_close(d, gw);
    h2o_socket_close(gw);
    got = drain(client, SIZE_MAX);
    ck_assert_uint_eq(got, written); /* the FIN came after all of it */
    for (i = 0; i != 300 && billed[0] != written; ++i)
        h2o_evloop_run(loop, 10);
    ck_assert_uint_eq(billed[0], written);
    ck_assert_uint_eq(gw_deliveries_held(d), 0);
    close(client);
    gw_deliveries_free(d);
}
END_TEST

START_TEST(test_tls_plaintext_is_never_over_estimated)
{
    ck_assert_uint_eq(gw_delivery_plaintext(12345, 0), 12345);
    ck_assert_uint_eq(gw_delivery_plaintext(16406, 1), 16384);
    ck_assert_uint_eq(gw_delivery_plaintext(100, 1), 100);
    /* 64 records of 16 KiB with TLS 1.2's 29-byte overhead: the estimate is at least the plaintext */
    ck_assert_uint_ge(gw_delivery_plaintext(64 * (16384 + 29), 1), 64 * 16384);
    ck_assert_uint_le(gw_delivery_plaintext(64 * (16384 + 29), 1), 64 * 16384 + 64 * 7);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("upstream/delivery");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_reading_client_is_billed_everything);
    tcase_add_test(tc, test_reset_by_a_client_that_never_read);
    tcase_add_test(tc, test_graceful_close_in_flight_is_followed);
    tcase_add_test(tc, test_tls_plaintext_is_never_over_estimated);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
