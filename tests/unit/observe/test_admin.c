/*
 * Unit tests for observe/admin.c: /readyz's verdict on certificates follows
 * what is loaded (it once said true whatever was); a Redis outage is
 * reported and does not make the gateway unready (it once answered 503).
 */
#define _GNU_SOURCE /* mkdtemp */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "observe/admin.h"

static char dir[] = "/tmp/gw-test-admin-XXXXXX";

START_TEST(no_tls_listener_needs_no_certificate)
{
    ck_assert_int_eq(gw_admin_certificates_ready(0, NULL), 1);
}
END_TEST

START_TEST(tls_listener_without_certificates_is_not_ready)
{
    ck_assert_int_eq(gw_admin_certificates_ready(1, NULL), 0);
}
END_TEST

START_TEST(tls_listener_with_a_loaded_certificate_is_ready)
{
    gw_tls_cert_conf_t cert = {"cert.pem", "cert.key"};
    char *err = NULL;
    gw_tls_t *tls = gw_tls_new(&cert, 1, &err);

    ck_assert_msg(tls != NULL, "%s", err != NULL ? err : "");
    ck_assert_int_eq(gw_admin_certificates_ready(1, tls), 1);
    gw_tls_free(tls);
}
END_TEST

START_TEST(redis_down_is_reported_not_unready)
{
    char body[GW_ADMIN_READYZ_MAX];
    size_t len;

    ck_assert_int_eq(gw_admin_readyz(1, 0, 0, body, &len), 200);
    ck_assert_str_eq(body, "{\"ready\":true,\"redis\":false,\"certificates\":true,\"ktls\":false}\n");
    ck_assert_uint_eq(len, strlen(body));
    ck_assert_int_eq(gw_admin_readyz(1, 1, 0, body, &len), 200);
    ck_assert_str_eq(body, "{\"ready\":true,\"redis\":true,\"certificates\":true,\"ktls\":false}\n");
    ck_assert_int_eq(gw_admin_readyz(0, 1, 0, body, &len), 503);
    ck_assert_str_eq(body, "{\"ready\":false,\"redis\":true,\"certificates\":false,\"ktls\":false}\n");
    /* kTLS is reported, never a verdict */
    ck_assert_int_eq(gw_admin_readyz(1, 1, 1, body, &len), 200);
    ck_assert_str_eq(body, "{\"ready\":true,\"redis\":true,\"certificates\":true,\"ktls\":true}\n");
    ck_assert_int_eq(gw_admin_readyz(0, 1, 1, body, &len), 503);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("readyz");
    SRunner *sr;
    int failed;

    if (mkdtemp(dir) == NULL || chdir(dir) != 0 ||
        system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout cert.key -out cert.pem "
               "-subj /CN=admin.test -addext subjectAltName=DNS:admin.test -days 2 2>/dev/null") != 0) {
        fprintf(stderr, "cannot make a test certificate\n");
        return 2;
    }
    tcase_add_test(tc, no_tls_listener_needs_no_certificate);
    tcase_add_test(tc, tls_listener_without_certificates_is_not_ready);
    tcase_add_test(tc, tls_listener_with_a_loaded_certificate_is_ready);
    tcase_add_test(tc, redis_down_is_reported_not_unready);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    system("rm -rf cert.pem cert.key");
    rmdir(dir);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
