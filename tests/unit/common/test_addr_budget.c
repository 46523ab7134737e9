/*
 * common/addr_budget.c: a client's burst then its rate, clients apart,
 * IPv6 counted by /64 and IPv4-mapped as IPv4, the bucket of everyone, both
 * or none taken, the bound on remembered addresses, and 0 turning a bound
 * off. Times are given (take_at), so nothing here depends on the clock.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <string.h>
#include "common/addr_budget.h"

#define S 1000000ull /* a second in microseconds */

static struct sockaddr_storage addr(const char *text)
{
    struct sockaddr_storage ss;

    memset(&ss, 0, sizeof(ss));
    if (strchr(text, ':') != NULL) {
        struct sockaddr_in6 *a = (void *)&ss;
        a->sin6_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (void *)&ss;
        a->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, text, &a->sin_addr), 1);
    }
    return ss;
}

static gw_addr_budget_result_t take(gw_addr_budget_t *b, const char *text, uint64_t now)
{
    struct sockaddr_storage ss = addr(text);
    return gw_addr_budget_take_at(b, (void *)&ss, sizeof(ss), now);
}

/* n takes of `text` at `now`: how many were granted */
static int takes(gw_addr_budget_t *b, const char *text, uint64_t now, int n)
{
    int ok = 0;
    while (n-- > 0)
        ok += take(b, text, now) == GW_ADDR_BUDGET_OK;
    return ok;
}

START_TEST(test_burst_then_rate)
{
    gw_addr_budget_conf_t conf = {.per_client_rate = 10, .per_client_burst = 5};
    gw_addr_budget_t *b = gw_addr_budget_new(&conf);

    ck_assert_int_eq(takes(b, "192.0.2.1", 100 * S, 20), 5);
    ck_assert_int_eq(take(b, "192.0.2.1", 100 * S), GW_ADDR_BUDGET_CLIENT);
    /* 10 a second: one more every 100 ms, never more than the burst */
    ck_assert_int_eq(takes(b, "192.0.2.1", 100 * S + S / 10, 3), 1);
    ck_assert_int_eq(takes(b, "192.0.2.1", 102 * S, 20), 5);
    ck_assert_int_eq(takes(b, "192.0.2.1", 200 * S, 20), 5);
    gw_addr_budget_counters_t *c = gw_addr_budget_counters(b);
    ck_assert_uint_eq(c->taken, 16);
    ck_assert_uint_eq(c->refused_client, 48);
    ck_assert_uint_eq(c->refused_total, 0);
    gw_addr_budget_free(b);
}
END_TEST

START_TEST(test_clients_apart_and_ipv6_by_prefix)
{
    gw_addr_budget_conf_t conf = {.per_client_rate = 1, .per_client_burst = 2};
    gw_addr_budget_t *b = gw_addr_budget_new(&conf);

    ck_assert_int_eq(takes(b, "192.0.2.1", S, 5), 2);
    ck_assert_int_eq(takes(b, "192.0.2.2", S, 5), 2); /* another client: its own bucket */
    /* an IPv4-mapped address is that IPv4 client */
    ck_assert_int_eq(takes(b, "::ffff:192.0.2.1", S, 5), 0);
    /* IPv6: the /64 is the client; another /64 is another */
    ck_assert_int_eq(takes(b, "2001:db8:1:2::1", S, 1), 1);
    ck_assert_int_eq(takes(b, "2001:db8:1:2:ffff:ffff:ffff:ffff", S, 5), 1);
    ck_assert_int_eq(takes(b, "2001:db8:1:3::1", S, 5), 2);
    /* no address (a socket without one): one client, "unknown" */
    ck_assert_int_eq(gw_addr_budget_take_at(b, NULL, 0, S), GW_ADDR_BUDGET_OK);
    ck_assert_int_eq(gw_addr_budget_take_at(b, NULL, 0, S), GW_ADDR_BUDGET_OK);
    ck_assert_int_eq(gw_addr_budget_take_at(b, NULL, 0, S), GW_ADDR_BUDGET_CLIENT);
    gw_addr_budget_free(b);
}
END_TEST

START_TEST(test_everyone_bounded)
{
    gw_addr_budget_conf_t conf = {.per_client_rate = 100, .per_client_burst = 3, .total_rate = 10, .total_burst = 10};
    gw_addr_budget_t *b = gw_addr_budget_new(&conf);
    char text[32];
    int ok = 0, i;

    /* 100 clients, 3 takes each at once: 10 granted in all */
    for (i = 0; i != 100; ++i) {
        snprintf(text, sizeof(text), "198.51.100.%d", i);
        ok += takes(b, text, 10 * S, 3);
    }
    ck_assert_int_eq(ok, 10);
    ck_assert_uint_eq(gw_addr_budget_counters(b)->refused_total, 290);
    /* both or none: refused by everyone's bucket, a client kept its own token (3 still, a second later) */
    ck_assert_int_eq(takes(b, "198.51.100.99", 11 * S, 3), 3);
    gw_addr_budget_free(b);
}
END_TEST

START_TEST(test_off)
{
    gw_addr_budget_conf_t conf = {0};
    gw_addr_budget_t *b = gw_addr_budget_new(&conf);

    ck_assert_int_eq(takes(b, "192.0.2.1", S, 100000), 100000);
    ck_assert_uint_eq(gw_addr_budget_num_clients(b), 0); /* nothing remembered */
    gw_addr_budget_free(b);
}
END_TEST

START_TEST(test_remembered_addresses_are_bounded)
{
    gw_addr_budget_conf_t conf = {.per_client_rate = 1, .per_client_burst = 1};
    gw_addr_budget_t *b = gw_addr_budget_new(&conf);
    struct sockaddr_in a = {.sin_family = AF_INET};
    uint32_t i;

    for (i = 0; i != GW_ADDR_BUDGET_MAX_CLIENTS + 1000; ++i) {
        a.sin_addr.s_addr = htonl(0x0a000000 + i);
        ck_assert_int_eq(gw_addr_budget_take_at(b, (void *)&a, sizeof(a), S), GW_ADDR_BUDGET_OK);
    }
    ck_assert_uint_eq(gw_addr_budget_num_clients(b), GW_ADDR_BUDGET_MAX_CLIENTS);
    /* the most recent ones are remembered (empty bucket), the first ones were forgotten (a full one) */
    ck_assert_int_eq(gw_addr_budget_take_at(b, (void *)&a, sizeof(a), S), GW_ADDR_BUDGET_CLIENT);
    a.sin_addr.s_addr = htonl(0x0a000000);
    ck_assert_int_eq(gw_addr_budget_take_at(b, (void *)&a, sizeof(a), S), GW_ADDR_BUDGET_OK);
    gw_addr_budget_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("addr_budget");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_burst_then_rate);
    tcase_add_test(tc, test_clients_apart_and_ipv6_by_prefix);
    tcase_add_test(tc, test_everyone_bounded);
    tcase_add_test(tc, test_off);
    tcase_add_test(tc, test_remembered_addresses_are_bounded);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
