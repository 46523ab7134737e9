/*
 * observe/mcp.c: the MCP headers found in one pass, the closed label set,
 * the session hash (never the id).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "observe/mcp.h"

START_TEST(test_headers_and_labels)
{
    h2o_mem_pool_t pool;
    h2o_headers_t h = {NULL};
    gw_mcp_headers_t m;
    char hash[GW_MCP_SESSION_HASH_LEN + 1];

    h2o_mem_init_pool(&pool);
    gw_mcp_headers_find(&h, &m);
    ck_assert_ptr_null(m.method.base);
    ck_assert_ptr_null(gw_mcp_method_header(&h).base);
    h2o_add_header(&pool, &h, H2O_TOKEN_ACCEPT, NULL, H2O_STRLIT("*/*"));
    h2o_add_header_by_str(&pool, &h, H2O_STRLIT("mcp-name"), 0, NULL, H2O_STRLIT("echo"));
    h2o_add_header_by_str(&pool, &h, H2O_STRLIT("mcp-session-id"), 0, NULL, H2O_STRLIT("session-1"));
    h2o_add_header_by_str(&pool, &h, H2O_STRLIT("mcp-method"), 0, NULL, H2O_STRLIT("tools/call"));
    h2o_add_header_by_str(&pool, &h, H2O_STRLIT("mcp-method"), 0, NULL, H2O_STRLIT("second"));
    gw_mcp_headers_find(&h, &m);
    ck_assert(h2o_memis(m.method.base, m.method.len, H2O_STRLIT("tools/call")));
    ck_assert(h2o_memis(m.name.base, m.name.len, H2O_STRLIT("echo")));
    ck_assert(h2o_memis(m.session.base, m.session.len, H2O_STRLIT("session-1")));
    ck_assert_int_eq(gw_mcp_method_of(gw_mcp_method_header(&h)), GW_MCP_TOOLS_CALL);
    ck_assert_int_eq(gw_mcp_method_of(h2o_iovec_init(H2O_STRLIT("initialize"))), GW_MCP_INITIALIZE);
    ck_assert_int_eq(gw_mcp_method_of(h2o_iovec_init(H2O_STRLIT("prompts/get"))), GW_MCP_PROMPTS_GET);
    ck_assert_int_eq(gw_mcp_method_of(h2o_iovec_init(H2O_STRLIT("Tools/Call"))), GW_MCP_OTHER);
    ck_assert_int_eq(gw_mcp_method_of(h2o_iovec_init(H2O_STRLIT("tools/call2"))), GW_MCP_OTHER);
    ck_assert_int_eq(gw_mcp_method_of(h2o_iovec_init(H2O_STRLIT(""))), GW_MCP_OTHER);
    ck_assert_str_eq(gw_mcp_method_name(GW_MCP_RESOURCES_READ), "resources/read");
    ck_assert_str_eq(gw_mcp_method_name(GW_MCP_NUM_METHODS), "other");
    /* the first 16 hex digits of sha256("session-1"): the id never shows */
    gw_mcp_session_hash(m.session, hash);
    ck_assert_uint_eq(strlen(hash), GW_MCP_SESSION_HASH_LEN);
    ck_assert_str_eq(hash, "84097828fc31a8c8");
    h2o_mem_clear_pool(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mcp");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_headers_and_labels);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
