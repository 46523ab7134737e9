/*
 * limits/revocation.c: which grants a sandbox's new record refuses
 * (gw_grant_recheck), and the per-sandbox registry that closes exactly the
 * refused exchanges and tunnels of exactly that sandbox.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include "limits/revocation.h"
#include "tests/unit/sandbox_record.h"

#define TOKEN_A "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define TOKEN_B "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
#define NOW 1700000000

static gw_sandbox_t *running(const char *id, const char *token, const char *lifecycle, const char *access)
{
    const char *kv[] = {"state",        "running", "addr",      "10.0.0.7", "lifecycle", lifecycle,
                        "token_sha256", token,     "port:3000", access,     NULL};
    return record(id, kv);
}

START_TEST(test_recheck)
{
    gw_sandbox_t *then = running("sbx1", TOKEN_A, "l1", "private");
    gw_grant_t token = {then, 3000, GW_GRANT_TOKEN, 0, 0, 0}, cookie = {then, 3000, GW_GRANT_COOKIE, NOW + 60, 0, 0},
               pre = {then, 3000, GW_GRANT_PREFLIGHT, 0, 0, 0}, pub = {then, 3000, GW_GRANT_PUBLIC, 0, 0, 0},
               link = {then, 3000, GW_GRANT_LINK, NOW + 60, 0, 0};
    gw_sandbox_t *same = running("sbx1", TOKEN_A, "l1", "private"), *rotated = running("sbx1", TOKEN_B, "l1", "private"),
                 *relife = running("sbx1", TOKEN_A, "l2", "private"), *now_public = running("sbx1", TOKEN_B, "l1", "public");
    const char *stopped_kv[] = {"state",        "stopped", "addr",      "10.0.0.7", "lifecycle", "l1",
                                "token_sha256", TOKEN_A,   "port:3000", "private",  NULL};
    const char *unexposed_kv[] = {"state",        "running", "addr",      "10.0.0.7", "lifecycle", "l1",
                                  "token_sha256", TOKEN_A,   "port:3001", "private",  NULL};
    gw_sandbox_t *stopped = record("sbx1", stopped_kv), *unexposed = record("sbx1", unexposed_kv);

    /* nothing changed that matters */
    ck_assert_int_eq(gw_grant_recheck(&token, same, NOW), -1);
    ck_assert_int_eq(gw_grant_recheck(&cookie, same, NOW), -1);
    ck_assert_int_eq(gw_grant_recheck(&pre, rotated, NOW), -1);
    ck_assert_int_eq(gw_grant_recheck(&token, now_public, NOW), -1);
    /* each kind of revocation */
    ck_assert_int_eq(gw_grant_recheck(&token, NULL, NOW), GW_ERR_SANDBOX_NOT_FOUND);
    ck_assert_int_eq(gw_grant_recheck(&token, unexposed, NOW), GW_ERR_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_grant_recheck(&pub, unexposed, NOW), GW_ERR_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_grant_recheck(&token, rotated, NOW), GW_ERR_INVALID_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&cookie, rotated, NOW), GW_ERR_INVALID_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&cookie, same, NOW + 60), GW_ERR_INVALID_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&pub, same, NOW), GW_ERR_MISSING_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&token, stopped, NOW), GW_ERR_SANDBOX_NOT_RUNNING);
    ck_assert_int_eq(gw_grant_recheck(&token, relife, NOW), GW_ERR_SANDBOX_NOT_RUNNING);
    /* a share link: the access token's rotation leaves it be; a new link_epoch or its expiry ends it */
    const char *epoch1_kv[] = {"state", "running",   "addr",    "10.0.0.7",   "lifecycle", "l1", "token_sha256",
                               TOKEN_A, "port:3000", "private", "link_epoch", "1",         NULL};
    gw_sandbox_t *epoch1 = record("sbx1", epoch1_kv);
    ck_assert_int_eq(gw_grant_recheck(&link, same, NOW), -1);
    ck_assert_int_eq(gw_grant_recheck(&link, rotated, NOW), -1);
    ck_assert_int_eq(gw_grant_recheck(&link, epoch1, NOW), GW_ERR_INVALID_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&link, same, NOW + 60), GW_ERR_INVALID_TOKEN);
    ck_assert_int_eq(gw_grant_recheck(&link, unexposed, NOW), GW_ERR_PORT_NOT_EXPOSED);
    link.link_epoch = 1;
    ck_assert_int_eq(gw_grant_recheck(&link, epoch1, NOW), -1);
    gw_sandbox_release(epoch1);

    gw_sandbox_release(then);
    gw_sandbox_release(same);
    gw_sandbox_release(rotated);
    gw_sandbox_release(relife);
    gw_sandbox_release(now_public);
    gw_sandbox_release(stopped);
    gw_sandbox_release(unexposed);
}
END_TEST

typedef struct st_item_t {
    gw_revocable_t revocable;
    gw_revocation_t *registry;
    int revoked;            /* the code + 1 */
    struct st_item_t *also; /* closed together with this one (an HTTP/2 connection) */
} item_t;

static void on_revoke(gw_revocable_t *r, gw_error_code_t code)
{
    item_t *item = H2O_STRUCT_FROM_MEMBER(item_t, revocable, r);
    item->revoked = (int)code + 1;
    if (item->also != NULL)
        gw_revocation_remove(item->registry, &item->also->revocable);
}

START_TEST(test_registry_closes_only_what_is_refused)
{
    gw_revocation_t *reg = gw_revocation_new(NULL, NULL);
    gw_sandbox_t *a = running("sbxa", TOKEN_A, "l1", "private"), *b = running("sbxb", TOKEN_A, "l1", "private");
    gw_sandbox_t *a_rotated = running("sbxa", TOKEN_B, "l1", "private");
    item_t items[4];
    int i;

    memset(items, 0, sizeof(items));
    for (i = 0; i != 4; ++i) {
        items[i].registry = reg;
        items[i].revocable.grant = (gw_grant_t){i < 3 ? a : b, 3000, i == 2 ? GW_GRANT_PREFLIGHT : GW_GRANT_TOKEN, 0, 0, 0};
        items[i].revocable.on_revoke = on_revoke;
        gw_revocation_add(reg, &items[i].revocable);
    }
    /* closing item 0 ends item 1 too, before its turn */
    items[0].also = &items[1];
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxa"), 3);
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxb"), 1);

    gw_revocation_check(reg, "sbxa", a_rotated, NOW);
    ck_assert_int_eq(items[0].revoked, GW_ERR_INVALID_TOKEN + 1);
    ck_assert_int_eq(items[1].revoked, 0); /* ended by item 0 before its turn: not revoked twice */
    ck_assert_int_eq(items[2].revoked, 0); /* a preflight needs no token */
    ck_assert_int_eq(items[3].revoked, 0); /* another sandbox */
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxa"), 1);
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxb"), 1);

    /* gone: the rest of sbxa goes, sbxb stays */
    gw_revocation_check(reg, "sbxa", NULL, NOW);
    ck_assert_int_eq(items[2].revoked, GW_ERR_SANDBOX_NOT_FOUND + 1);
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxa"), 0);
    ck_assert_int_eq(items[3].revoked, 0);
    /* removal after revocation is a no-op */
    gw_revocation_remove(reg, &items[0].revocable);
    gw_revocation_remove(reg, &items[3].revocable);
    gw_revocation_remove(reg, &items[3].revocable);
    ck_assert_uint_eq(gw_revocation_count(reg, "sbxb"), 0);

    gw_revocation_free(reg);
    gw_sandbox_release(a);
    gw_sandbox_release(b);
    gw_sandbox_release(a_rotated);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("revocation");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_recheck);
    tcase_add_test(tc, test_registry_closes_only_what_is_refused);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
