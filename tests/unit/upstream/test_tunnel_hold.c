/*
 * upstream/tunnel_hold.c: what a WebSocket or TCP tunnel takes over from its
 * exchange at the hand-over and gives back when it closes. After the take
 * the exchange holds nothing (its dispose gives back nothing twice), the
 * tunnel is what a publish revokes, and the slots are still counted; after
 * the release every slot is free and the grant is out of the registry (its
 * record released: the ASan tree's leak check sees one kept).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/exchange.h"
#include "upstream/tunnel_hold.h"
#include "tests/unit/sandbox_record.h"

#define TOKEN_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define TOKEN_B "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

static gw_sandbox_t *running(const char *token)
{
    const char *kv[] = {"state", "running", "addr", "10.0.0.7", "token_sha256", token, "port:3000", "private", NULL};
    return record("sbx1", kv);
}

static int revoked; /* the code + 1 */
static gw_revocable_t *revoked_item;

static void on_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    revoked = (int)code + 1;
    revoked_item = item;
}

static void on_exchange_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    (void)item;
    (void)code;
    ck_abort_msg("the exchange was revoked after the hand-over");
}

/* An exchange of sbx1 from 192.0.2.1 holding both slots and a token grant, as the pipeline leaves it. */
static void exchange(gw_exchange_t *ex, gw_proxy_t *p, gw_conn_limit_t *conns, gw_conn_limit_t *clients, gw_sandbox_t *rec)
{
    memset(ex, 0, sizeof(*ex));
    ex->proxy = p;
    ex->sandbox_id = "sbx1";
    ex->client_addr = "192.0.2.1";
    ex->no_activity = 1;
    ex->slot_worker = 1;
    ck_assert_int_eq(gw_conn_limit_acquire(conns, 1, "sbx1"), 1);
    ex->slot = conns;
    ck_assert_int_eq(gw_conn_limit_acquire(clients, 1, "192.0.2.1"), 1);
    ex->client_slot = clients;
    gw_sandbox_retain(rec);
    ex->revocable.grant = (gw_grant_t){rec, 3000, GW_GRANT_TOKEN, 0, 0, 0};
    ex->revocable.on_revoke = on_exchange_revoke;
    if (p->revocation != NULL)
        gw_revocation_add(p->revocation, &ex->revocable);
}

START_TEST(test_take_then_release)
{
    gw_proxy_t p = {.revocation = gw_revocation_new(NULL, NULL)};
    gw_conn_limit_t *conns = gw_conn_limit_new(10, 2), *clients = gw_conn_limit_new(10, 2);
    gw_sandbox_t *rec = running(TOKEN_A), *rotated = running(TOKEN_B);
    gw_exchange_t ex;
    gw_tunnel_hold_t h = {0};

    exchange(&ex, &p, conns, clients, rec);
    gw_tunnel_hold_take(&h, &ex, on_revoke);
    /* the exchange holds nothing now */
    ck_assert_ptr_null(ex.slot);
    ck_assert_ptr_null(ex.client_slot);
    ck_assert_ptr_null(ex.revocable.grant.record);
    /* the tunnel holds all of it: its own copies of the strings, the same slots */
    ck_assert_str_eq(h.sandbox_id, "sbx1");
    ck_assert_ptr_ne(h.sandbox_id, ex.sandbox_id);
    ck_assert_str_eq(h.client_addr, "192.0.2.1");
    ck_assert_int_eq(h.no_activity, 1);
    ck_assert_uint_eq(gw_conn_limit_count(conns, "sbx1"), 1);
    ck_assert_uint_eq(gw_conn_limit_count(clients, "192.0.2.1"), 1);
    ck_assert_uint_eq(gw_revocation_count(p.revocation, "sbx1"), 1);

    /* a publish that refuses the grant revokes the tunnel, not the exchange */
    gw_revocation_check(p.revocation, "sbx1", rotated, 0);
    ck_assert_int_eq(revoked, GW_ERR_INVALID_TOKEN + 1);
    ck_assert_ptr_eq(revoked_item, &h.revocable);

    gw_tunnel_hold_release(&h);
    ck_assert_uint_eq(gw_conn_limit_count(conns, "sbx1"), 0);
    ck_assert_uint_eq(gw_conn_limit_count(clients, "192.0.2.1"), 0);
    ck_assert_uint_eq(gw_revocation_count(p.revocation, "sbx1"), 0);
    ck_assert_ptr_null(h.sandbox_id);
    ck_assert_ptr_null(h.revocable.grant.record);

    gw_revocation_free(p.revocation);
    gw_conn_limit_free(conns);
    gw_conn_limit_free(clients);
    gw_sandbox_release(rec);
    gw_sandbox_release(rotated);
}
END_TEST

/* Without a client slot, a registry or a grant (a public port with
 * revocation off): the take copies what there is and the release gives back
 * the connection slot only. */
START_TEST(test_what_is_not_there_is_not_given_back)
{
    gw_proxy_t p = {.revocation = NULL};
    gw_conn_limit_t *conns = gw_conn_limit_new(10, 2), *clients = gw_conn_limit_new(10, 2);
    gw_sandbox_t *rec = running(TOKEN_A);
    gw_exchange_t ex;
    gw_tunnel_hold_t h = {0};

    exchange(&ex, &p, conns, clients, rec);
    gw_conn_limit_release(ex.client_slot, 1, ex.client_addr);
    ex.client_slot = NULL;
    gw_sandbox_release(ex.revocable.grant.record);
    ex.revocable.grant.record = NULL;

    gw_tunnel_hold_take(&h, &ex, on_revoke);
    ck_assert_ptr_null(ex.slot);
    ck_assert_ptr_null(h.client_slot);
    ck_assert_ptr_null(h.client_addr);
    ck_assert_ptr_null(h.revocable.grant.record);
    gw_tunnel_hold_release(&h);
    ck_assert_uint_eq(gw_conn_limit_count(conns, "sbx1"), 0);

    gw_conn_limit_free(conns);
    gw_conn_limit_free(clients);
    gw_sandbox_release(rec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tunnel_hold");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_take_then_release);
    tcase_add_test(tc, test_what_is_not_there_is_not_given_back);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
