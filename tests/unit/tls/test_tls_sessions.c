/*
 * tls/tls.c: session resumption (session IDs, TLS 1.2 and 1.3 tickets)
 * within a certificate, never across certificates, and across a reload.
 */
#include "tls_test.h"

static const mode_t_ all_modes[] = {MODE_TLS12_SESSION_ID, MODE_TLS12_TICKET, MODE_TLS13_TICKET};
#define NUM_MODES (sizeof(all_modes) / sizeof(all_modes[0]))

START_TEST(test_resumption_within_a_certificate)
{
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    size_t i;

    for (i = 0; i != NUM_MODES; ++i) {
        mode_t_ mode = all_modes[i];
        SSL_SESSION *wild = new_session(front, "a.lizard.test", mode), *exact = new_session(front, "exact.other.test", mode);

        ck_assert_msg(resumed(front, "a.lizard.test", mode, wild), "%s: same name not resumed", mode_name(mode));
        /* another name of the same certificate */
        ck_assert_msg(resumed(front, "b.lizard.test", mode, wild), "%s: same certificate not resumed", mode_name(mode));
        ck_assert_msg(resumed(front, "exact.other.test", mode, exact), "%s: exact name not resumed", mode_name(mode));
        SSL_SESSION_free(wild);
        SSL_SESSION_free(exact);
    }
    gw_tls_free(t);
}
END_TEST

START_TEST(test_no_resumption_across_certificates)
{
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    size_t i;

    for (i = 0; i != NUM_MODES; ++i) {
        mode_t_ mode = all_modes[i];
        SSL_SESSION *wild = new_session(front, "a.lizard.test", mode), *exact = new_session(front, "exact.other.test", mode),
                    *fresh = NULL;
        result_t r;

        r = resume(front, "x.lizard.test", mode, exact, NULL);
        ck_assert_msg(!r.reused, "%s: a session of exact.other.test resumed under *.lizard.test", mode_name(mode));
        ck_assert_str_eq(r.cn, "wild-1");
        r = resume(front, NULL, mode, exact, NULL);
        ck_assert_msg(!r.reused, "%s: a session of exact.other.test resumed without SNI (default certificate)", mode_name(mode));
        r = resume(front, "exact.other.test", mode, wild, &fresh);
        ck_assert_msg(!r.reused, "%s: a session of *.lizard.test resumed under exact.other.test", mode_name(mode));
        ck_assert_str_eq(r.cn, "exact-1");
        ck_assert_msg(!resumed(front, "cnonly.test", mode, wild), "%s: resumed under cnonly.test", mode_name(mode));
        ck_assert_msg(!resumed(front, "unknown.example", mode, exact), "%s: resumed under the default", mode_name(mode));

        /* the full handshake that followed made a session of the right certificate */
        ck_assert_ptr_nonnull(fresh);
        ck_assert_msg(resumed(front, "exact.other.test", mode, fresh), "%s: the new session does not resume", mode_name(mode));
        SSL_SESSION_free(wild);
        SSL_SESSION_free(exact);
        SSL_SESSION_free(fresh);
    }
    gw_tls_free(t);
}
END_TEST

START_TEST(test_sessions_across_certificate_reload)
{
    gw_tls_cert_conf_t conf[] = {{path_of("live2.pem"), path_of("live2.key")}, {path_of("exact.pem"), path_of("exact.key")}};
    SSL_SESSION *sess[NUM_MODES];
    char *err = NULL;
    gw_tls_t *t;
    size_t i;

    copy_file("wild.pem", "live2.pem");
    copy_file("wild.key", "live2.key");
    t = gw_tls_new(conf, 2, &err);
    ck_assert_msg(t != NULL, "%s", err);
    for (i = 0; i != NUM_MODES; ++i)
        sess[i] = new_session(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i]);

    /* the same certificate reloaded: sessions still resume */
    ck_assert_msg(gw_tls_reload(t, &err) == 0, "%s", err);
    for (i = 0; i != NUM_MODES; ++i)
        ck_assert_msg(resumed(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i], sess[i]), "%s after a reload",
                      mode_name(all_modes[i]));

    /* another certificate under the same path: they do not */
    copy_file("wild2.pem", "live2.pem");
    copy_file("wild2.key", "live2.key");
    ck_assert_msg(gw_tls_reload(t, &err) == 0, "%s", err);
    for (i = 0; i != NUM_MODES; ++i) {
        result_t r = resume(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i], sess[i], NULL);
        ck_assert_msg(!r.reused, "%s: resumed under the replaced certificate", mode_name(all_modes[i]));
        ck_assert_str_eq(r.cn, "wild-2");
        SSL_SESSION_free(sess[i]);
    }
    gw_tls_free(t);
}
END_TEST

static Suite *tls_sessions_suite(void)
{
    Suite *s = suite_create("tls_sessions");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_resumption_within_a_certificate);
    tcase_add_test(tc, test_no_resumption_across_certificates);
    tcase_add_test(tc, test_sessions_across_certificate_reload);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(tls_sessions_suite());
}
