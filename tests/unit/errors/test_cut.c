/*
 * Unit tests for errors/cut.c: the reason a request's response was cut,
 * recorded beside its error code and found again.
 */
#include <check.h>
#include <string.h>
#include "common/engine.h"
#include "errors/cut.h"
#include "errors/errors.h"

static h2o_req_t req;

static void setup(void)
{
    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&req.pool);
}

START_TEST(test_cut_note_and_of)
{
    int r;

    ck_assert_int_eq(gw_cut_of(&req), GW_CUT_NONE);
    gw_cut_note(&req, GW_CUT_NONE);
    ck_assert_uint_eq(gw_req_tag_count(&req), 0);
    /* next to an error code: both are found */
    gw_error_note(&req, GW_ERR_UPSTREAM_TIMEOUT);
    gw_cut_note(&req, GW_CUT_FIRST_BYTE_TIMEOUT);
    ck_assert_int_eq(gw_cut_of(&req), GW_CUT_FIRST_BYTE_TIMEOUT);
    ck_assert_int_eq(gw_error_code_of(&req), GW_ERR_UPSTREAM_TIMEOUT);
    /* the first reason stays */
    gw_cut_note(&req, GW_CUT_REVOKED);
    ck_assert_int_eq(gw_cut_of(&req), GW_CUT_FIRST_BYTE_TIMEOUT);
    for (r = GW_CUT_NONE + 1; r != GW_CUT_NUM; ++r) {
        gw_req_tag_truncate(&req, 0);
        gw_cut_note(&req, r);
        ck_assert_int_eq(gw_cut_of(&req), r);
    }
    ck_assert_str_eq(gw_cut_reason_name(GW_CUT_UPSTREAM_RESET), "upstream_reset");
    ck_assert_str_eq(gw_cut_reason_name(GW_CUT_NUM), "");
}
END_TEST

static Suite *cut_suite(void)
{
    Suite *s = suite_create("cut");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cut_note_and_of);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cut_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
