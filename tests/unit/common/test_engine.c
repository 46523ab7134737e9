/* Unit tests for common/engine.h and common/recycle.h, the layer between the gateway and its engine (issue 40):
 * the delay timer takes a new delay at each link and never fires a 0 at once, our free list keeps at most `max`
 * objects and hands the last one kept back first, an unlinked timer unlinks as a no-op, and a 0 ms delay timer
 * re-linked from its own callback (the Redis client's deadline timer, common/redis.c) fires at most once a loop turn
 * and lets the loop poll its sockets (2.2.5 would run it again in the same turn without end, master's timer wheel up
 * to 10 times a turn). */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common/engine.h"
#include "common/recycle.h"

static int fired;

static void on_fire(gw_timer_t *t)
{
    (void)t;
    ++fired;
}

static void run_until_fired(h2o_loop_t *loop, int want)
{
    int turns;

    for (turns = 0; fired < want && turns != 500; ++turns)
        h2o_evloop_run(loop, 10);
}

START_TEST(a_delay_timer_takes_any_delay_each_time)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_delay_timer_t t;
    uint64_t at;

    fired = 0;
    gw_delay_timer_init(loop, &t, on_fire);
    ck_assert(!gw_timer_is_linked(&t.entry));
    gw_timer_unlink(&t.entry); /* unlinked: a no-op */
    at = h2o_now(loop);
    gw_delay_timer_link(loop, &t, 50);
    gw_delay_timer_link(loop, &t, 30); /* re-linked: the new delay, one firing */
    ck_assert_uint_eq(gw_timeout_ms(&t.timeout), 30);
    run_until_fired(loop, 1);
    ck_assert_int_eq(fired, 1);
    ck_assert_uint_ge(h2o_now(loop) - at, 30);
    ck_assert(!gw_timer_is_linked(&t.entry));
    gw_delay_timer_link(loop, &t, 0); /* taken as 1 ms: h2o 2.2.5 would fire a re-linked 0 in the same turn */
    ck_assert_uint_eq(gw_timeout_ms(&t.timeout), 1);
    run_until_fired(loop, 2);
    ck_assert_int_eq(fired, 2);
    gw_delay_timer_link(loop, &t, 10000);
    gw_delay_timer_dispose(loop, &t); /* unlinks what is linked */
    h2o_evloop_destroy(loop);         /* asserts that the loop has no timeout left */
}
END_TEST

static h2o_loop_t *relink_loop;
static gw_delay_timer_t relinked;
static int fired_this_turn, most_in_one_turn, socket_reads;

static void on_relink(gw_timer_t *t)
{
    (void)t;
    ++fired;
    if (++fired_this_turn > most_in_one_turn)
        most_in_one_turn = fired_this_turn;
    gw_delay_timer_link(relink_loop, &relinked, 0);
}

static void on_socket_read(h2o_socket_t *sock, const char *err)
{
    (void)err;
    ++socket_reads;
    h2o_buffer_consume(&sock->input, sock->input->size);
}

START_TEST(a_zero_delay_relinked_from_its_callback_fires_once_a_turn)
{
    int fds[2], turn;
    h2o_socket_t *sock;

    relink_loop = h2o_evloop_create();
    fired = most_in_one_turn = socket_reads = 0;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    sock = h2o_evloop_socket_create(relink_loop, fds[0], 0);
    h2o_socket_read_start(sock, on_socket_read);
    gw_delay_timer_init(relink_loop, &relinked, on_relink);
    gw_delay_timer_link(relink_loop, &relinked, 0);
    for (turn = 0; turn != 20; ++turn) {
        if (turn == 5)
            ck_assert_int_eq(write(fds[1], "x", 1), 1);
        fired_this_turn = 0;
        h2o_evloop_run(relink_loop, 10);
    }
    ck_assert_int_eq(most_in_one_turn, 1); /* never twice in one turn */
    ck_assert_int_ge(fired, 5);            /* and it keeps firing, 1 ms apart */
    ck_assert_int_eq(socket_reads, 1);     /* the loop still polls its sockets */
    gw_delay_timer_dispose(relink_loop, &relinked);
    h2o_socket_close(sock);
    close(fds[1]);
    h2o_evloop_destroy(relink_loop);
}
END_TEST

START_TEST(the_free_list_keeps_at_most_max_last_in_first_out)
{
    gw_recycle_t r = {.max = 2};
    void *a = gw_recycle_alloc(&r, 32), *b = gw_recycle_alloc(&r, 32), *c = gw_recycle_alloc(&r, 32);

    ck_assert_uint_eq(r.cnt, 0);
    gw_recycle_free(&r, a);
    gw_recycle_free(&r, b);
    gw_recycle_free(&r, c); /* past max: freed (LeakSanitizer checks it) */
    ck_assert_uint_eq(r.cnt, 2);
    ck_assert_ptr_eq(gw_recycle_alloc(&r, 32), b);
    ck_assert_ptr_eq(gw_recycle_alloc(&r, 32), a);
    ck_assert_uint_eq(r.cnt, 0);
    gw_recycle_free(&r, a);
    gw_recycle_free(&r, b);
    gw_recycle_clear(&r); /* frees both; r stays usable */
    ck_assert_uint_eq(r.cnt, 0);
    a = gw_recycle_alloc(&r, 32);
    gw_recycle_free(&r, a);
    gw_recycle_clear(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, a_delay_timer_takes_any_delay_each_time);
    tcase_add_test(tc, a_zero_delay_relinked_from_its_callback_fires_once_a_turn);
    tcase_add_test(tc, the_free_list_keeps_at_most_max_last_in_first_out);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
