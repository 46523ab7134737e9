/*
 * Unit tests for errors/errors.c: the contract's code table, the choice
 * between HTML and JSON, and bodies that escape every reflected value.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "common/engine.h"
#include "errors/errors.h"

static h2o_mem_pool_t pool;

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

static h2o_iovec_t iov(const char *s)
{
    return s != NULL ? h2o_iovec_init(s, strlen(s)) : h2o_iovec_init(NULL, 0);
}

/* A NUL-terminated copy of a rendered body. */
static char *render(gw_error_code_t code, int html, const char *sandbox_id, uint16_t port, const char *detail)
{
    h2o_iovec_t body = gw_error_render(&pool, code, html, sandbox_id, port, detail);
    char *s;

    ck_assert_ptr_nonnull(body.base);
    ck_assert_uint_gt(body.len, 0);
    s = gw_pool_alloc(&pool, body.len + 1);
    memcpy(s, body.base, body.len);
    s[body.len] = '\0';
    ck_assert_uint_eq(strlen(s), body.len);
    return s;
}

START_TEST(test_code_table)
{
    static const struct {
        gw_error_code_t code;
        const char *name;
        int status;
    } table[] = {
        {GW_ERR_BAD_HOST, "bad_host", 400},
        {GW_ERR_UNKNOWN_HOST, "unknown_host", 404},
        {GW_ERR_SANDBOX_NOT_FOUND, "sandbox_not_found", 404},
        {GW_ERR_PORT_NOT_EXPOSED, "port_not_exposed", 404},
        {GW_ERR_MISSING_TOKEN, "missing_token", 401},
        {GW_ERR_INVALID_TOKEN, "invalid_token", 403},
        {GW_ERR_SANDBOX_NOT_RUNNING, "sandbox_not_running", 503},
        {GW_ERR_PORT_NOT_OPEN, "port_not_open", 502},
        {GW_ERR_UPSTREAM_FORBIDDEN, "upstream_forbidden", 502},
        {GW_ERR_UPSTREAM_TIMEOUT, "upstream_timeout", 504},
        {GW_ERR_TOO_MANY_CONNECTIONS, "too_many_connections", 429},
        {GW_ERR_ROUTING_UNAVAILABLE, "routing_unavailable", 503},
        {GW_ERR_BODY_TOO_LARGE, "body_too_large", 413},
        {GW_ERR_BAD_UPSTREAM_RESPONSE, "bad_upstream_response", 502},
        {GW_ERR_HEADERS_TOO_LARGE, "headers_too_large", 431},
        {GW_ERR_NOT_HTTP_PORT, "not_http_port", 400},
        {GW_ERR_IP_NOT_ALLOWED, "ip_not_allowed", 403},
        {GW_ERR_RATE_LIMITED, "rate_limited", 429},
        {GW_ERR_EGRESS_QUOTA_EXCEEDED, "egress_quota_exceeded", 429},
        {GW_ERR_ORIGIN_NOT_ALLOWED, "origin_not_allowed", 403},
    };
    size_t i;

    ck_assert_uint_eq(sizeof(table) / sizeof(table[0]), GW_ERR_NUM_CODES);
    for (i = 0; i != sizeof(table) / sizeof(table[0]); ++i) {
        ck_assert_str_eq(gw_error_code_name(table[i].code), table[i].name);
        ck_assert_int_eq(gw_error_status(table[i].code), table[i].status);
    }
}
END_TEST

#define BROWSER_ACCEPT "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

START_TEST(test_prefers_html_matrix)
{
    /* Sec-Fetch-Mode decides when present */
    ck_assert_int_eq(gw_error_prefers_html(iov("navigate"), iov(BROWSER_ACCEPT)), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov("navigate"), iov(NULL)), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov("Navigate"), iov("application/json")), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov("cors"), iov(BROWSER_ACCEPT)), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov("no-cors"), iov("text/html")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov("same-origin"), iov("text/html")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov("websocket"), iov(NULL)), 0);

    /* otherwise Accept */
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov(BROWSER_ACCEPT)), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("*/*")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov(NULL)), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("application/json")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("application/json, text/plain, */*")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/html;q=0, */*")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/html; q=0.0")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/html;q=0.5, application/json")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/html;q=0.5, application/json;q=0.5")), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("application/json;q=0.4, text/html;q=0.5")), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/html;q=0.5, application/*;q=0.9")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("TEXT/HTML")), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("application/xhtml+xml")), 1);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov(" text/html ; charset=utf-8 ; q=0.7 , */*;q=0.1")), 1);
    /* a text/html in a parameter or a prefix is not text/html */
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/htmlx, */*")), 0);
    ck_assert_int_eq(gw_error_prefers_html(iov(NULL), iov("text/plain;x=text/html")), 0);
}
END_TEST

/* Parses a JSON body and returns the "error" object's string field, or NULL. */
static json_t *parse_error(const char *body)
{
    json_error_t jerr;
    json_t *root = json_loads(body, 0, &jerr), *error;

    ck_assert_msg(root != NULL, "invalid JSON (%s): %s", jerr.text, body);
    error = json_object_get(root, "error");
    ck_assert_msg(json_is_object(error), "no error object: %s", body);
    ck_assert_uint_eq(json_object_size(root), 1);
    json_incref(error);
    json_decref(root);
    return error;
}

START_TEST(test_json_fields)
{
    json_t *error = parse_error(render(GW_ERR_PORT_NOT_OPEN, 0, "sbx7f3a9", 3000, NULL));
    const char *message;

    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "port_not_open");
    ck_assert_str_eq(json_string_value(json_object_get(error, "sandboxId")), "sbx7f3a9");
    ck_assert_int_eq(json_integer_value(json_object_get(error, "port")), 3000);
    ck_assert(json_is_integer(json_object_get(error, "port")));
    message = json_string_value(json_object_get(error, "message"));
    ck_assert_ptr_nonnull(message);
    ck_assert_ptr_nonnull(strstr(message, "port 3000"));
    ck_assert_ptr_nonnull(strstr(message, "sbx7f3a9"));
    json_decref(error);
}
END_TEST

START_TEST(test_json_every_code_parses)
{
    int code;

    for (code = 0; code != GW_ERR_NUM_CODES; ++code) {
        json_t *error = parse_error(render(code, 0, "sbx1", 8080, NULL));
        ck_assert_str_eq(json_string_value(json_object_get(error, "code")), gw_error_code_name(code));
        ck_assert_uint_gt(strlen(json_string_value(json_object_get(error, "message"))), 10);
        json_decref(error);
    }
}
END_TEST

START_TEST(test_json_omits_unknown_fields)
{
    json_t *error = parse_error(render(GW_ERR_UNKNOWN_HOST, 0, NULL, 0, NULL));

    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "unknown_host");
    ck_assert_ptr_null(json_object_get(error, "sandboxId"));
    ck_assert_ptr_null(json_object_get(error, "port"));
    json_decref(error);
}
END_TEST

START_TEST(test_json_escapes_hostile_values)
{
    const char *hostile = "x\"}},\"code\":\"ok\\\n\r\t\x01</script><b>&";
    const char *detail = "It is \"paused\".\n<img src=x onerror=alert(1)>";
    char *body = render(GW_ERR_SANDBOX_NOT_RUNNING, 0, hostile, 1, detail);
    json_t *error = parse_error(body);

    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "sandbox_not_running");
    ck_assert_str_eq(json_string_value(json_object_get(error, "sandboxId")), hostile);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), detail));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), hostile));
    /* no raw markup in the bytes either */
    ck_assert_ptr_null(strchr(body, '<'));
    json_decref(error);
}
END_TEST

START_TEST(test_json_invalid_utf8_stays_valid)
{
    json_t *error = parse_error(render(GW_ERR_SANDBOX_NOT_FOUND, 0,
                                       "a\xff\xc0\x80"
                                       "b\xe2\x82",
                                       0, "caf\xc3\xa9"));

    ck_assert_str_eq(json_string_value(json_object_get(error, "sandboxId")), "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                                                                             "b\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), "caf\xc3\xa9"));
    json_decref(error);
}
END_TEST

START_TEST(test_html_page)
{
    char *body = render(GW_ERR_PORT_NOT_OPEN, 1, "sbx7f3a9", 3000, NULL);

    ck_assert_ptr_nonnull(strstr(body, "<!DOCTYPE html>"));
    ck_assert_ptr_nonnull(strstr(body, "<title>502 "));
    ck_assert_ptr_nonnull(strstr(body, "Nothing is listening on port 3000 in sandbox sbx7f3a9."));
    ck_assert_ptr_nonnull(strstr(body, "0.0.0.0 (not 127.0.0.1)"));
    ck_assert_ptr_nonnull(strstr(body, "port_not_open"));
    /* self-contained: no scripts, no external assets */
    ck_assert_ptr_null(strstr(body, "<script"));
    ck_assert_ptr_null(strstr(body, "src="));
    ck_assert_ptr_null(strstr(body, "href="));
    ck_assert_ptr_null(strstr(body, "http"));
}
END_TEST

START_TEST(test_html_missing_token_says_what_to_do)
{
    char *body = render(GW_ERR_MISSING_TOKEN, 1, "sbx1", 443, NULL);

    ck_assert_ptr_nonnull(strstr(body, "<title>401 "));
    ck_assert_ptr_nonnull(strstr(body, "?lizard_token="));
    ck_assert_ptr_nonnull(strstr(body, "X-Lizard-Access-Token"));
}
END_TEST

static char *render_why(gw_error_code_t code, gw_error_why_t why, int html)
{
    h2o_iovec_t body = gw_error_render_why(&pool, code, why, html, "sbx1", 3000, NULL);
    char *s = gw_pool_alloc(&pool, body.len + 1);

    memcpy(s, body.base, body.len);
    s[body.len] = '\0';
    return s;
}

/* The person reads what happened and what to do first; the header names come below, in the technical part. */
START_TEST(test_html_technical_detail_below)
{
    char *body = render(GW_ERR_MISSING_TOKEN, 1, "sbx1", 3000, NULL);
    char *tech = strstr(body, "class=\"tech\"");

    ck_assert_ptr_nonnull(tech);
    ck_assert_ptr_nonnull(strstr(body, "preview link"));
    ck_assert(strstr(body, "preview link") < tech);
    ck_assert(strstr(body, "X-Lizard-Access-Token") > tech);
}
END_TEST

START_TEST(test_why_variants)
{
    int why;
    char *body;
    json_t *error;

    /* every cause renders in both formats, under its own code */
    for (why = 1; why != GW_WHY_NUM; ++why) {
        gw_error_code_t code = why == GW_WHY_EMBEDDED_SAME_SITE ? GW_ERR_MISSING_TOKEN : GW_ERR_INVALID_TOKEN;
        body = render_why(code, why, 1);
        ck_assert_ptr_nonnull(strstr(body, gw_error_code_name(code)));
        ck_assert_ptr_null(strstr(body, "$"));
        ck_assert_ptr_null(strstr(body, "may have been rotated"));
        error = parse_error(render_why(code, why, 0));
        ck_assert_str_eq(json_string_value(json_object_get(error, "code")), gw_error_code_name(code));
        json_decref(error);
    }
    /* the embedding explanation, in JSON too */
    error = parse_error(render_why(GW_ERR_MISSING_TOKEN, GW_WHY_EMBEDDED_SAME_SITE, 0));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), "auth.cookie_same_site: \"none\""));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), "blocked"));
    json_decref(error);
    /* a cause of another code is ignored */
    ck_assert_str_eq(render_why(GW_ERR_PORT_NOT_EXPOSED, GW_WHY_EMBEDDED_SAME_SITE, 1),
                     render(GW_ERR_PORT_NOT_EXPOSED, 1, "sbx1", 3000, NULL));
    ck_assert_str_eq(render_why(GW_ERR_INVALID_TOKEN, GW_WHY_EMBEDDED_SAME_SITE, 0),
                     render(GW_ERR_INVALID_TOKEN, 0, "sbx1", 3000, NULL));
}
END_TEST

START_TEST(test_html_every_code_renders)
{
    int code;
    char status[8];

    for (code = 0; code != GW_ERR_NUM_CODES; ++code) {
        char *body = render(code, 1, NULL, 0, NULL);
        snprintf(status, sizeof(status), "%d", gw_error_status(code));
        ck_assert_ptr_nonnull(strstr(body, status));
        ck_assert_ptr_nonnull(strstr(body, gw_error_code_name(code)));
        ck_assert_ptr_null(strstr(body, "(null)"));
        ck_assert_ptr_null(strstr(body, "$"));
    }
}
END_TEST

START_TEST(test_html_escapes_hostile_values)
{
    char *body = render(GW_ERR_SANDBOX_NOT_RUNNING, 1, "<script>alert(1)</script>", 80, "\"><img src=x onerror='a()'>&amp;");

    ck_assert_ptr_null(strstr(body, "<script"));
    ck_assert_ptr_null(strstr(body, "<img"));
    ck_assert_ptr_null(strstr(body, "'a()'"));
    ck_assert_ptr_nonnull(strstr(body, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_nonnull(strstr(body, "&quot;&gt;&lt;img src=x onerror=&#39;a()&#39;&gt;&amp;amp;"));
}
END_TEST

START_TEST(test_detail_appended)
{
    json_t *error = parse_error(render(GW_ERR_SANDBOX_NOT_RUNNING, 0, "sbx1", 0, "It is paused."));

    ck_assert_str_eq(
        json_string_value(json_object_get(error, "message")),
        "Sandbox sbx1 is not running. It is paused. Start or resume the sandbox, then reload this page in a few seconds.");
    json_decref(error);
}
END_TEST

/* A program reads only the JSON message: it must carry what to do next. */
START_TEST(test_json_message_has_next_step)
{
    json_t *error = parse_error(render(GW_ERR_PORT_NOT_OPEN, 0, "sbx1", 3000, NULL));

    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(error, "message")), "0.0.0.0"));
    json_decref(error);
}
END_TEST

START_TEST(test_long_values_bounded)
{
    char *longv = malloc(100000);
    json_t *error;

    memset(longv, '<', 99999);
    longv[99999] = '\0';
    error = parse_error(render(GW_ERR_SANDBOX_NOT_FOUND, 0, longv, 1, longv));
    ck_assert_uint_le(strlen(json_string_value(json_object_get(error, "sandboxId"))), 512);
    json_decref(error);
    ck_assert_ptr_null(strstr(render(GW_ERR_SANDBOX_NOT_FOUND, 1, longv, 1, longv), "<<"));
    free(longv);
}
END_TEST

/* The code a request was answered with comes back as the enum, for every code. */
START_TEST(test_note_and_code_of)
{
    h2o_req_t req;
    static const char *const other_module = "some:module";
    int code;

    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    ck_assert_int_eq(gw_error_code_of(&req), -1);
    /* a tag of another module, even with a code's name, is not a code */
    gw_req_tag_add(&req, other_module, "bad_host");
    ck_assert_int_eq(gw_error_code_of(&req), -1);
    for (code = 0; code != GW_ERR_NUM_CODES; ++code) {
        gw_req_tag_truncate(&req, 1);
        gw_error_note(&req, code);
        ck_assert_int_eq(gw_error_code_of(&req), code);
        ck_assert_uint_eq(gw_req_tag_count(&req), 2);
        ck_assert_str_eq(gw_error_code_name(gw_error_code_of(&req)), gw_error_code_name(code));
    }
    h2o_mem_clear_pool(&req.pool);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_code_table);
    tcase_add_test(tc, test_prefers_html_matrix);
    tcase_add_test(tc, test_json_fields);
    tcase_add_test(tc, test_json_every_code_parses);
    tcase_add_test(tc, test_json_omits_unknown_fields);
    tcase_add_test(tc, test_json_escapes_hostile_values);
    tcase_add_test(tc, test_json_invalid_utf8_stays_valid);
    tcase_add_test(tc, test_html_page);
    tcase_add_test(tc, test_html_missing_token_says_what_to_do);
    tcase_add_test(tc, test_html_technical_detail_below);
    tcase_add_test(tc, test_why_variants);
    tcase_add_test(tc, test_html_every_code_renders);
    tcase_add_test(tc, test_html_escapes_hostile_values);
    tcase_add_test(tc, test_detail_appended);
    tcase_add_test(tc, test_json_message_has_next_step);
    tcase_add_test(tc, test_long_values_bounded);
    tcase_add_test(tc, test_note_and_code_of);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(errors_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
