/* Unit tests for common/hashtab.c: SipHash against references, and the table's links. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include "common/hashtab.c"

typedef struct {
    gw_hashtab_node_t node;
    char id[16];
    int seen;
} item_t;

static item_t *item_of(gw_hashtab_node_t *n)
{
    return n == NULL ? NULL : H2O_STRUCT_FROM_MEMBER(item_t, node, n);
}

static void insert(gw_hashtab_t *t, item_t *it, const char *id)
{
    snprintf(it->id, sizeof(it->id), "%s", id);
    gw_hashtab_insert(t, &it->node, it->id, strlen(it->id));
}

static item_t *find(gw_hashtab_t *t, const char *id)
{
    return item_of(gw_hashtab_find(t, id, strlen(id)));
}

/* OpenSSL's SipHash MAC with the given rounds: an implementation not ours */
static uint64_t openssl_siphash(unsigned c_rounds, unsigned d_rounds, const unsigned char key[16], const unsigned char *data,
                                size_t len)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
    EVP_MAC_CTX *ctx;
    size_t out_size = 8, out_len;
    unsigned char out[8];
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &out_size),
        OSSL_PARAM_construct_uint(OSSL_MAC_PARAM_C_ROUNDS, &c_rounds),
        OSSL_PARAM_construct_uint(OSSL_MAC_PARAM_D_ROUNDS, &d_rounds),
        OSSL_PARAM_construct_end(),
    };

    ck_assert_ptr_nonnull(mac);
    ck_assert_ptr_nonnull(ctx = EVP_MAC_CTX_new(mac));
    ck_assert_int_eq(EVP_MAC_init(ctx, key, 16, params), 1);
    ck_assert_int_eq(EVP_MAC_update(ctx, data, len), 1);
    ck_assert_int_eq(EVP_MAC_final(ctx, out, &out_len, sizeof(out)), 1);
    ck_assert_uint_eq(out_len, 8);
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    return read_le64(out);
}

START_TEST(test_siphash_2_4_paper_vector)
{
    unsigned char key[16], msg[15];

    for (size_t i = 0; i != sizeof(key); ++i)
        key[i] = (unsigned char)i;
    for (size_t i = 0; i != sizeof(msg); ++i)
        msg[i] = (unsigned char)i;
    /* Aumasson and Bernstein, "SipHash: a fast short-input PRF", appendix A */
    ck_assert_uint_eq(siphash(2, 4, read_le64(key), read_le64(key + 8), msg, sizeof(msg)), 0xa129ca6149be45e5ULL);
}
END_TEST

START_TEST(test_siphash_1_3_matches_openssl_at_every_length)
{
    unsigned char key[16], msg[64];

    for (size_t i = 0; i != sizeof(key); ++i)
        key[i] = (unsigned char)(0xf0 ^ i);
    for (size_t i = 0; i != sizeof(msg); ++i)
        msg[i] = (unsigned char)(i * 7 + 1);
    for (size_t len = 0; len <= sizeof(msg); ++len) {
        ck_assert_uint_eq(siphash(1, 3, read_le64(key), read_le64(key + 8), msg, len), openssl_siphash(1, 3, key, msg, len));
        ck_assert_uint_eq(siphash(2, 4, read_le64(key), read_le64(key + 8), msg, len), openssl_siphash(2, 4, key, msg, len));
    }
}
END_TEST

START_TEST(test_tables_are_seeded_apart)
{
    gw_hashtab_t a, b;

    gw_hashtab_init(&a);
    gw_hashtab_init(&b);
    /* 2^-128 to fail by chance */
    ck_assert(a.seed[0] != b.seed[0] || a.seed[1] != b.seed[1]);
    ck_assert(hash_key(&a, "sbx", 3) != hash_key(&b, "sbx", 3) || hash_key(&a, "sby", 3) != hash_key(&b, "sby", 3));
    gw_hashtab_dispose(&a);
    gw_hashtab_dispose(&b);
}
END_TEST

START_TEST(test_insert_find_remove)
{
    gw_hashtab_t t;
    item_t a, b, c;

    gw_hashtab_init(&t);
    ck_assert_ptr_null(find(&t, "a"));
    ck_assert_ptr_null(gw_hashtab_first(&t));
    insert(&t, &a, "abc");
    insert(&t, &b, "abcd");
    insert(&t, &c, "");
    ck_assert_uint_eq(gw_hashtab_size(&t), 3);
    ck_assert_ptr_eq(find(&t, "abc"), &a);
    ck_assert_ptr_eq(find(&t, "abcd"), &b);
    ck_assert_ptr_eq(find(&t, ""), &c);
    /* keys are bytes and a length: a prefix or a longer key is another key */
    ck_assert_ptr_null(find(&t, "ab"));
    ck_assert_ptr_null(find(&t, "abcde"));
    ck_assert_ptr_eq(item_of(gw_hashtab_find(&t, "abcdef", 3)), &a);
    ck_assert_ptr_null(find(&t, "ABC"));

    gw_hashtab_remove(&t, &a.node);
    ck_assert_uint_eq(gw_hashtab_size(&t), 2);
    ck_assert_ptr_null(find(&t, "abc"));
    ck_assert_ptr_eq(find(&t, "abcd"), &b);
    gw_hashtab_remove(&t, &b.node);
    gw_hashtab_remove(&t, &c.node);
    ck_assert_uint_eq(gw_hashtab_size(&t), 0);
    ck_assert_ptr_null(find(&t, "abcd"));
    ck_assert_ptr_null(gw_hashtab_first(&t));
    gw_hashtab_dispose(&t);
}
END_TEST

START_TEST(test_a_key_linked_twice)
{
    gw_hashtab_t t;
    item_t a1, a2, other;
    gw_hashtab_node_t *n;

    gw_hashtab_init(&t);
    insert(&t, &a1, "dup");
    insert(&t, &other, "other");
    insert(&t, &a2, "dup");
    n = gw_hashtab_find(&t, "dup", 3);
    ck_assert_ptr_eq(item_of(n), &a2); /* newest first */
    n = gw_hashtab_find_next(&t, n);
    ck_assert_ptr_eq(item_of(n), &a1);
    ck_assert_ptr_null(gw_hashtab_find_next(&t, n));
    ck_assert_ptr_null(gw_hashtab_find_next(&t, &other.node));
    gw_hashtab_remove(&t, &a2.node);
    ck_assert_ptr_eq(find(&t, "dup"), &a1);
    gw_hashtab_remove(&t, &a1.node);
    ck_assert_ptr_null(find(&t, "dup"));
    ck_assert_ptr_eq(find(&t, "other"), &other);
    gw_hashtab_dispose(&t);
}
END_TEST

#define MANY 5000

START_TEST(test_growth_keeps_every_node)
{
    static item_t items[MANY];
    gw_hashtab_t t;
    gw_hashtab_node_t *n;
    size_t i, walked = 0;
    char id[16];

    gw_hashtab_init(&t);
    for (i = 0; i != MANY; ++i) {
        snprintf(id, sizeof(id), "sbx-%zu", i);
        insert(&t, &items[i], id);
    }
    ck_assert_uint_eq(gw_hashtab_size(&t), MANY);
    /* the table grew: nodes never outnumber buckets after an insert's growth */
    ck_assert_uint_ge(t.num_buckets, MANY);
    for (i = 0; i != MANY; ++i) {
        snprintf(id, sizeof(id), "sbx-%zu", i);
        ck_assert_ptr_eq(find(&t, id), &items[i]);
    }
    /* the walk visits each node once */
    for (n = gw_hashtab_first(&t); n != NULL; n = gw_hashtab_next(&t, n)) {
        ++item_of(n)->seen;
        ++walked;
    }
    ck_assert_uint_eq(walked, MANY);
    for (i = 0; i != MANY; ++i)
        ck_assert_int_eq(items[i].seen, 1);
    gw_hashtab_dispose(&t);
}
END_TEST

START_TEST(test_removing_during_a_walk)
{
    static item_t items[MANY];
    gw_hashtab_t t;
    gw_hashtab_node_t *n, *next;
    size_t i;
    char id[16];

    gw_hashtab_init(&t);
    for (i = 0; i != MANY; ++i) {
        snprintf(id, sizeof(id), "%zu", i);
        insert(&t, &items[i], id);
    }
    /* the odd ones go, each read successor first */
    for (n = gw_hashtab_first(&t); n != NULL; n = next) {
        next = gw_hashtab_next(&t, n);
        ++item_of(n)->seen;
        if ((item_of(n) - items) % 2 == 1)
            gw_hashtab_remove(&t, n);
    }
    ck_assert_uint_eq(gw_hashtab_size(&t), MANY / 2);
    for (i = 0; i != MANY; ++i) {
        snprintf(id, sizeof(id), "%zu", i);
        ck_assert_int_eq(items[i].seen, 1);
        ck_assert_ptr_eq(find(&t, id), i % 2 == 0 ? &items[i] : NULL);
    }
    /* and the rest, down to empty */
    while ((n = gw_hashtab_first(&t)) != NULL)
        gw_hashtab_remove(&t, n);
    ck_assert_uint_eq(gw_hashtab_size(&t), 0);
    gw_hashtab_dispose(&t);
    /* a disposed table is empty and usable after init */
    gw_hashtab_init(&t);
    insert(&t, &items[0], "again");
    ck_assert_ptr_eq(find(&t, "again"), &items[0]);
    gw_hashtab_dispose(&t);
}
END_TEST

/* gw_hashtab_free_all frees every entry (the ASan tree's leak check sees one
 * left) and leaves the table empty and usable. */
START_TEST(test_free_all)
{
    gw_hashtab_t t;
    char id[16];
    size_t i;

    gw_hashtab_init(&t);
    gw_hashtab_free_all(&t, offsetof(item_t, node)); /* empty, no buckets yet */
    for (i = 0; i != MANY; ++i) {
        item_t *it = calloc(1, sizeof(*it));
        snprintf(id, sizeof(id), "%zu", i);
        insert(&t, it, id);
    }
    gw_hashtab_free_all(&t, offsetof(item_t, node));
    ck_assert_uint_eq(gw_hashtab_size(&t), 0);
    ck_assert_ptr_null(gw_hashtab_first(&t));
    ck_assert_ptr_null(find(&t, "7"));
    item_t *again = calloc(1, sizeof(*again));
    insert(&t, again, "7");
    ck_assert_ptr_eq(find(&t, "7"), again);
    ck_assert_uint_eq(gw_hashtab_size(&t), 1);
    gw_hashtab_free_all(&t, offsetof(item_t, node));
    gw_hashtab_dispose(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hashtab");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_siphash_2_4_paper_vector);
    tcase_add_test(tc, test_siphash_1_3_matches_openssl_at_every_length);
    tcase_add_test(tc, test_tables_are_seeded_apart);
    tcase_add_test(tc, test_insert_find_remove);
    tcase_add_test(tc, test_a_key_linked_twice);
    tcase_add_test(tc, test_growth_keeps_every_node);
    tcase_add_test(tc, test_removing_during_a_walk);
    tcase_add_test(tc, test_free_all);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
