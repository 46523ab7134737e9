/*
 * metering/meter.c: per-sandbox counts and projects, handing them over,
 * and the cap on remembered sandboxes (idle ones are forgotten, never counts).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* the .c itself: the test looks up entries in the meter's table */
#include "metering/meter.c"

#define NOW 1700000000000ull

typedef struct st_taken_t {
    size_t n;
    gw_metering_record_t last;
} taken_t;

static void take(void *arg, const gw_metering_record_t *r)
{
    taken_t *t = arg;
    ++t->n;
    t->last = *r; /* strings borrowed: read before the meter changes */
}

static h2o_iovec_t iov(const char *s)
{
    return h2o_iovec_init(s, strlen(s));
}

START_TEST(test_hand_over_takes_counts_once)
{
    gw_meter_t *meter = gw_meter_new();
    taken_t t = {0};

    gw_meter_set_project(meter, "sbx1", iov("proj-a"), NOW);
    gw_meter_add(meter, "sbx1", 0, 300, NOW + 10);
    gw_meter_add(meter, "sbx1", 120, 0, NOW + 20);
    gw_meter_add(meter, "sbx2", 0, 0, NOW + 20);         /* nothing moved: not even remembered */
    gw_meter_set_project(meter, "sbx3", iov("p3"), NOW); /* routed, idle: remembered, no counts */
    ck_assert_uint_eq(gw_meter_num_sandboxes(meter), 2);
    gw_meter_hand_over(meter, take, &t);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_str_eq(t.last.sandbox, "sbx1");
    ck_assert_str_eq(t.last.project, "proj-a");
    ck_assert_uint_eq(t.last.egress, 120);
    ck_assert_uint_eq(t.last.ingress, 300);
    ck_assert_uint_eq(t.last.from_ms, NOW + 10);
    /* handed over: nothing the second time, the project stays */
    t.n = 0;
    gw_meter_hand_over(meter, take, &t);
    ck_assert_uint_eq(t.n, 0);
    gw_meter_add(meter, "sbx1", 1, 0, NOW + 30);
    gw_meter_hand_over(meter, take, &t);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_str_eq(t.last.project, "proj-a");
    ck_assert_uint_eq(t.last.from_ms, NOW + 30);
    gw_meter_free(meter);
    gw_meter_free(NULL);
}
END_TEST

START_TEST(test_meter_forgets_idle_sandboxes_only)
{
    gw_meter_t *meter = gw_meter_new();
    taken_t t = {0};
    char id[16];
    size_t i;

    /* the oldest sandbox has counts not handed over yet: it must survive */
    gw_meter_set_project(meter, "keep", iov("pk"), NOW);
    gw_meter_add(meter, "keep", 42, 0, NOW);
    for (i = 0; i != GW_METER_MAX_SANDBOXES + 1000; ++i) {
        snprintf(id, sizeof(id), "x%zu", i);
        gw_meter_set_project(meter, id, iov("p"), NOW + 1 + i);
    }
    ck_assert_uint_le(gw_meter_num_sandboxes(meter), GW_METER_MAX_SANDBOXES);
    ck_assert_ptr_nonnull(gw_metering_entry_find(&meter->table, "keep", NULL));
    /* the most recent ones are still known */
    snprintf(id, sizeof(id), "x%zu", (size_t)GW_METER_MAX_SANDBOXES + 999);
    ck_assert_ptr_nonnull(gw_metering_entry_find(&meter->table, id, NULL));

    gw_meter_hand_over(meter, take, &t);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_str_eq(t.last.project, "pk");
    ck_assert_uint_eq(t.last.egress, 42);
    gw_meter_free(meter);
}
END_TEST

static Suite *meter_suite(void)
{
    Suite *s = suite_create("meter");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_hand_over_takes_counts_once);
    tcase_add_test(tc, test_meter_forgets_idle_sandboxes_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(meter_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
