/*
 * Unit tests for errors/grpc.c: gRPC requests told apart, the status
 * mapping, grpc-message's percent-encoding.
 */
#include <check.h>
#include <string.h>
#include "errors/errors.h"

static h2o_req_t req;

static void setup(void)
{
    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    req.method = h2o_iovec_init(H2O_STRLIT("POST"));
}

static void teardown(void)
{
    h2o_mem_clear_pool(&req.pool);
}

static int grpc_with(const char *content_type)
{
    req.headers.size = 0;
    if (content_type != NULL)
        h2o_add_header(&req.pool, &req.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type, strlen(content_type));
    return gw_error_is_grpc(&req);
}

START_TEST(test_is_grpc)
{
    ck_assert(grpc_with("application/grpc"));
    ck_assert(grpc_with("application/grpc+proto"));
    ck_assert(grpc_with("Application/GRPC+json"));
    ck_assert(grpc_with("application/grpc;charset=utf-8"));
    ck_assert(!grpc_with(NULL));
    ck_assert(!grpc_with("application/grpc-web"));
    ck_assert(!grpc_with("application/grpc-web+proto"));
    ck_assert(!grpc_with("application/grpcx"));
    ck_assert(!grpc_with("application/json"));
    ck_assert(!grpc_with("application/grp"));
    /* gRPC calls are POSTs */
    req.method = h2o_iovec_init(H2O_STRLIT("GET"));
    ck_assert(!grpc_with("application/grpc"));
}
END_TEST

START_TEST(test_status_mapping)
{
    /* CONTRACT.md, Long calls */
    ck_assert_int_eq(gw_error_grpc_status(401), 16);
    ck_assert_int_eq(gw_error_grpc_status(403), 7);
    ck_assert_int_eq(gw_error_grpc_status(404), 5);
    ck_assert_int_eq(gw_error_grpc_status(429), 8);
    ck_assert_int_eq(gw_error_grpc_status(504), 4);
    ck_assert_int_eq(gw_error_grpc_status(400), 14);
    ck_assert_int_eq(gw_error_grpc_status(502), 14);
    ck_assert_int_eq(gw_error_grpc_status(503), 14);
    ck_assert_int_eq(gw_error_grpc_status(413), 14);
}
END_TEST

START_TEST(test_percent_encoding)
{
    /* 0x20-0x7E but '%' as they are; '%', controls and UTF-8 bytes as %XX */
    static const char in[] = "Port 3000: 50% \"done\"\n\xc3\xa9~";
    h2o_iovec_t out = gw_error_grpc_percent_encode(&req.pool, in, sizeof(in) - 1);
    ck_assert_str_eq(out.base, "Port 3000: 50%25 \"done\"%0A%C3%A9~");
    ck_assert_uint_eq(out.len, strlen(out.base));
    /* bounded: a 2 KiB input at most */
    char big[5000];
    memset(big, '%', sizeof(big));
    out = gw_error_grpc_percent_encode(&req.pool, big, sizeof(big));
    ck_assert_uint_eq(out.len, 2048 * 3);
}
END_TEST

static Suite *grpc_suite(void)
{
    Suite *s = suite_create("grpc");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_is_grpc);
    tcase_add_test(tc, test_status_mapping);
    tcase_add_test(tc, test_percent_encoding);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(grpc_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
