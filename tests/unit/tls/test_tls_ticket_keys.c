/*
 * tls/ticket_keys.c: session ticket keys: shared through a file (HAProxy and nginx
 * layouts), reloaded, refused when the file is wrong, or random and rotating.
 */
#include <sys/stat.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "tls_test.h"

/* A random key of `len` (48 or 80) bytes: raw in `raw` and base64 in `b64`. */
static void random_key(size_t len, unsigned char *raw, char *b64)
{
    ck_assert_int_eq(RAND_bytes(raw, (int)len), 1);
    EVP_EncodeBlock((unsigned char *)b64, raw, (int)len);
}

static void write_file_mode(const char *file, const void *data, size_t len, mode_t mode)
{
    char tmp[600];
    FILE *fp;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path_of(file));
    fp = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(data, 1, len, fp), len);
    ck_assert_int_eq(fclose(fp), 0);
    ck_assert_int_eq(chmod(tmp, mode), 0);
    ck_assert_int_eq(rename(tmp, path_of(file)), 0);
}

static void write_keys(const char *file, const char *text)
{
    write_file_mode(file, text, strlen(text), 0600);
}

static gw_tls_t *new_with_keys(const char *file)
{
    gw_tls_t *t = new_default();
    char *err = NULL;

    ck_assert_msg(gw_tls_use_ticket_keys_file(t, path_of(file), &err) == 0, "%s", err);
    ck_assert_str_eq(gw_tls_ticket_keys_file(t), path_of(file));
    return t;
}

/* The key name a ticket was made with: its first 16 bytes. */
static int ticket_named(SSL_SESSION *sess, const unsigned char *name)
{
    const unsigned char *tick;
    size_t len;

    SSL_SESSION_get0_ticket(sess, &tick, &len);
    return len > 16 && memcmp(tick, name, 16) == 0;
}

START_TEST(test_tickets_shared_through_a_file)
{
    unsigned char k80[80], k48[48], other[80];
    char b80[120], b48[80], bother[120], text[400];
    gw_tls_t *a, *b, *c, *d;
    mode_t_ modes[] = {MODE_TLS12_TICKET, MODE_TLS13_TICKET};
    size_t i;

    random_key(80, k80, b80);
    random_key(48, k48, b48);
    random_key(80, other, bother);
    snprintf(text, sizeof(text), "# fleet ticket keys\n%s\n\n%s\n", b80, b48);
    write_keys("fleet.keys", text);
    snprintf(text, sizeof(text), "%s\n", bother);
    write_keys("other.keys", text);
    /* the 48-byte key first: AES-128 tickets */
    snprintf(text, sizeof(text), "  %s\r\n%s\n", b48, b80);
    write_keys("fleet48.keys", text);

    a = new_with_keys("fleet.keys");
    b = new_with_keys("fleet.keys");
    c = new_with_keys("other.keys");
    d = new_default(); /* random keys */
    ck_assert_uint_eq(gw_tls_ticket_keys_count(a), 2);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(d), 1);
    ck_assert_ptr_null(gw_tls_ticket_keys_file(d));

    for (i = 0; i != 2; ++i) {
        SSL_SESSION *sess = new_session(gw_tls_listener_ctx(a), "a.lizard.test", modes[i]);
        ck_assert(ticket_named(sess, k80));
        ck_assert_msg(resumed(gw_tls_listener_ctx(b), "a.lizard.test", modes[i], sess), "%s: not resumed on b",
                      mode_name(modes[i]));
        ck_assert_msg(!resumed(gw_tls_listener_ctx(c), "a.lizard.test", modes[i], sess), "%s: resumed with another file",
                      mode_name(modes[i]));
        ck_assert_msg(!resumed(gw_tls_listener_ctx(d), "a.lizard.test", modes[i], sess), "%s: resumed with random keys",
                      mode_name(modes[i]));
        /* a file ticket still does not cross certificates */
        ck_assert_msg(!resumed(gw_tls_listener_ctx(b), "exact.other.test", modes[i], sess), "%s: crossed certificates",
                      mode_name(modes[i]));
        SSL_SESSION_free(sess);

        /* random keys are the process's own */
        sess = new_session(gw_tls_listener_ctx(d), "a.lizard.test", modes[i]);
        ck_assert(resumed(gw_tls_listener_ctx(d), "a.lizard.test", modes[i], sess));
        ck_assert(!resumed(gw_tls_listener_ctx(a), "a.lizard.test", modes[i], sess));
        SSL_SESSION_free(sess);
    }
    gw_tls_free(a);
    gw_tls_free(b);
    gw_tls_free(c);
    gw_tls_free(d);

    a = new_with_keys("fleet48.keys");
    b = new_with_keys("fleet.keys");
    for (i = 0; i != 2; ++i) {
        SSL_SESSION *sess = new_session(gw_tls_listener_ctx(a), "a.lizard.test", modes[i]);
        ck_assert(ticket_named(sess, k48));
        ck_assert(resumed(gw_tls_listener_ctx(a), "a.lizard.test", modes[i], sess));
        /* b decrypts with its second key, and renews the ticket */
        ck_assert_msg(resumed(gw_tls_listener_ctx(b), "a.lizard.test", modes[i], sess), "%s: 48-byte key", mode_name(modes[i]));
        SSL_SESSION_free(sess);
    }
    gw_tls_free(a);
    gw_tls_free(b);
}
END_TEST

START_TEST(test_ticket_keys_reload)
{
    unsigned char k1[80], k2[80];
    char b1[120], b2[120], text[400], *err = NULL;
    SSL_SESSION *t1, *t2;
    gw_tls_t *t;
    SSL_CTX *front;

    random_key(80, k1, b1);
    random_key(80, k2, b2);
    snprintf(text, sizeof(text), "%s\n", b1);
    write_keys("rot.keys", text);
    t = new_with_keys("rot.keys");
    front = gw_tls_listener_ctx(t);
    t1 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert(ticket_named(t1, k1));

    /* step 1: k2 encrypts, k1 still decrypts */
    snprintf(text, sizeof(text), "%s\n%s\n", b2, b1);
    write_keys("rot.keys", text);
    ck_assert_msg(gw_tls_reload_ticket_keys(t, &err) == 0, "%s", err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    t2 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert(ticket_named(t2, k2));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t2));

    /* a bad file: the keys stay */
    write_keys("rot.keys", "not a key\n");
    ck_assert_int_eq(gw_tls_reload_ticket_keys(t, &err), -1);
    ck_assert_msg(strstr(err, path_of("rot.keys")) != NULL && strstr(err, "line 1") != NULL, "%s", err);
    ck_assert_msg(strncmp(err, "tls: ticket keys: ", 18) == 0, "%s", err);
    free(err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));

    /* step 2: k1 is gone */
    snprintf(text, sizeof(text), "%s\n", b2);
    write_keys("rot.keys", text);
    ck_assert_msg(gw_tls_reload_ticket_keys(t, &err) == 0, "%s", err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t2));
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS13_TICKET, t1));

    SSL_SESSION_free(t1);
    SSL_SESSION_free(t2);
    gw_tls_free(t);
}
END_TEST

/* Checks that `sess`'s ticket was made with AES key `aes` and HMAC key `hmac`
 * (name | IV | AES-CBC ciphertext | HMAC-SHA256 of what precedes), i.e. that
 * the file layout was read as HAProxy and nginx read it. */
static void assert_ticket_made_with(SSL_SESSION *sess, const unsigned char *name, const unsigned char *aes,
                                    const unsigned char *hmac, size_t key_len)
{
    const unsigned char *tick;
    unsigned char mac[32], plain[4096];
    size_t len, mac_len = 0;
    int outl = 0, finl = 0;
    EVP_CIPHER_CTX *cctx;

    SSL_SESSION_get0_ticket(sess, &tick, &len);
    ck_assert_uint_gt(len, 16 + 16 + 32);
    ck_assert_uint_lt(len, sizeof(plain));
    ck_assert(memcmp(tick, name, 16) == 0);
    ck_assert_ptr_nonnull(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, hmac, key_len, tick, len - 32, mac, sizeof(mac), &mac_len));
    ck_assert_uint_eq(mac_len, 32);
    ck_assert_msg(memcmp(mac, tick + len - 32, 32) == 0, "the ticket's HMAC is not made with the expected key");
    cctx = EVP_CIPHER_CTX_new();
    ck_assert_int_eq(EVP_DecryptInit_ex(cctx, key_len == 32 ? EVP_aes_256_cbc() : EVP_aes_128_cbc(), NULL, aes, tick + 16), 1);
    ck_assert_int_eq(EVP_DecryptUpdate(cctx, plain, &outl, tick + 32, (int)(len - 64)), 1);
    ck_assert_msg(EVP_DecryptFinal_ex(cctx, plain + outl, &finl) == 1, "the ticket is not encrypted with the expected key");
    EVP_CIPHER_CTX_free(cctx);
}

START_TEST(test_ticket_key_layouts)
{
    unsigned char k80[80], k48[48];
    char b80[120], b48[80], text[300];
    SSL_SESSION *sess;
    gw_tls_t *t;

    random_key(80, k80, b80);
    random_key(48, k48, b48);

    /* HAProxy's lines: name, AES key, HMAC key */
    snprintf(text, sizeof(text), "%s\n", b80);
    write_keys("haproxy80.keys", text);
    t = new_with_keys("haproxy80.keys");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k80, k80 + 16, k80 + 48, 32);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    snprintf(text, sizeof(text), "%s\n", b48);
    write_keys("haproxy48.keys", text);
    t = new_with_keys("haproxy48.keys");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k48, k48 + 16, k48 + 32, 16);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    /* nginx's raw files: 80 bytes are name, HMAC key, AES key; 48 bytes as HAProxy.
     * A random key is text by chance with a negligible probability: make sure. */
    k80[16] = 0;
    k48[16] = 0;
    write_file_mode("nginx80.key", k80, 80, 0600);
    t = new_with_keys("nginx80.key");
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k80, k80 + 48, k80 + 16, 32);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    write_file_mode("nginx48.key", k48, 48, 0640);
    t = new_with_keys("nginx48.key");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS13_TICKET);
    assert_ticket_made_with(sess, k48, k48 + 16, k48 + 32, 16);
    SSL_SESSION_free(sess);
    gw_tls_free(t);
}
END_TEST

/* The base64 reader (OpenSSL's EVP_DecodeBlock behind an alphabet check):
 * padding optional, nothing but the alphabet before it. */
START_TEST(test_ticket_key_base64_forms)
{
    unsigned char k80[80];
    char b64[120], text[200], *err = NULL;
    size_t n;
    gw_tls_t *t;
    SSL_SESSION *sess;
    static const char *const bad[] = {"=", " ", "\t", "*", "-"};
    size_t i;

    random_key(80, k80, b64);
    n = strlen(b64);
    ck_assert_uint_eq(n, 108);
    ck_assert_int_eq(b64[n - 1], '=');
    b64[n - 1] = '\0'; /* without its padding: the same key */
    snprintf(text, sizeof(text), "%s\n", b64);
    write_keys("unpadded.keys", text);
    t = new_with_keys("unpadded.keys");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS13_TICKET);
    assert_ticket_made_with(sess, k80, k80 + 16, k80 + 48, 32);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    /* one byte inside the key replaced by what is not base64 (EVP_DecodeBlock alone takes the first three) */
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        snprintf(text, sizeof(text), "%.50s%s%s\n", b64, bad[i], b64 + 51);
        write_keys("inside.keys", text);
        ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("inside.keys"), &err), -1);
        ck_assert_msg(strstr(err, "line 1: not a base64 key") != NULL, "%s: %s", bad[i], err);
        free(err);
    }
    /* a key one character short of a whole byte */
    snprintf(text, sizeof(text), "%.105s\n", b64);
    write_keys("ragged.keys", text);
    ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("ragged.keys"), &err), -1);
    ck_assert_msg(strstr(err, "line 1:") != NULL, "%s", err);
    free(err);
}
END_TEST

START_TEST(test_ticket_keys_file_errors)
{
    static const struct {
        const char *file;
        const char *text; /* NULL: see below */
        mode_t mode;
        const char *why;
    } cases[] = {
        {"none.keys", NULL, 0, "No such file"},
        {"empty.keys", "", 0600, "holds no key"},
        {"comments.keys", "# nothing yet\n\n   \n", 0600, "holds no key"},
        {"short.keys", "VGhpcyBpcyBub3QgYSBrZXkgb2YgNDggYnl0ZXMsIGJ1dCA0NyBieXRlcyBsb24=\n", 0600,
         "line 1: the key is 47 bytes long, expected 48 or 80"},
        {"garbage.keys", "# first\nthis is not base64!\n", 0600, "line 2: not a base64 key"},
        {"open.keys", "x\n", 0644, "readable or writable by others (mode 0644)"},
        {"binary.keys", "\x01\x02\x03\x04\x05\xff", 0600, "not text"},
    };
    unsigned char raw[80];
    char b64[120], text[4096], *err = NULL;
    size_t i, off;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        if (cases[i].text != NULL)
            write_file_mode(cases[i].file, cases[i].text, strlen(cases[i].text), cases[i].mode);
        ck_assert_int_eq(gw_tls_ticket_keys_check(path_of(cases[i].file), &err), -1);
        ck_assert_msg(strstr(err, path_of(cases[i].file)) != NULL && strstr(err, cases[i].why) != NULL, "%s: %s", cases[i].file,
                      err);
        free(err);
    }

    /* too many keys; the same name twice; a directory */
    for (i = 0, off = 0; i != 17; ++i) {
        random_key(80, raw, b64);
        off += (size_t)snprintf(text + off, sizeof(text) - off, "%s\n", b64);
    }
    write_keys("many.keys", text);
    ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("many.keys"), &err), -1);
    ck_assert_msg(strstr(err, "line 17: more than 16 keys") != NULL, "%s", err);
    free(err);

    random_key(80, raw, b64);
    snprintf(text, sizeof(text), "%s\n# again\n%s\n", b64, b64);
    write_keys("twice.keys", text);
    ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("twice.keys"), &err), -1);
    ck_assert_msg(strstr(err, "line 3: the same key name") != NULL && strstr(err, "line 1") != NULL, "%s", err);
    /* never a key byte in a message */
    ck_assert_msg(strstr(err, b64) == NULL && strstr(err, "==") == NULL, "%s", err);
    free(err);

    ck_assert_int_eq(gw_tls_ticket_keys_check(dir, &err), -1);
    ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
    free(err);

    /* the good ones pass */
    snprintf(text, sizeof(text), "%s\n", b64);
    write_keys("good.keys", text);
    ck_assert_msg(gw_tls_ticket_keys_check(path_of("good.keys"), &err) == 0, "%s", err);

    /* gw_tls_use_ticket_keys_file refuses a bad file and keeps random keys */
    {
        gw_tls_t *t = new_default();
        ck_assert_int_eq(gw_tls_use_ticket_keys_file(t, path_of("open.keys"), &err), -1);
        ck_assert_msg(strstr(err, "tls: ticket keys: ") == err && strstr(err, path_of("open.keys")) != NULL, "%s", err);
        free(err);
        ck_assert_ptr_null(gw_tls_ticket_keys_file(t));
        ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
        ck_assert_int_eq(gw_tls_reload_ticket_keys(t, &err), 0); /* no file: nothing to do */
        gw_tls_free(t);
    }
}
END_TEST

START_TEST(test_random_keys_rotate)
{
    /* 2 s between rotations: the assertions need the steps below to take
     * well under one interval each, on a shared 2-core machine (x10 margin
     * over what they take idle). */
    const unsigned interval_ms = 2000;
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    SSL_SESSION *s0, *s1;
    const unsigned char *tick0, *tick1;
    size_t len0, len1;

    gw_tls_set_ticket_rotation(t, interval_ms);
    s0 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));

    /* one interval later: a new key encrypts, the previous one decrypts */
    usleep((interval_ms + 200) * 1000);
    s1 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    SSL_SESSION_get0_ticket(s0, &tick0, &len0);
    SSL_SESSION_get0_ticket(s1, &tick1, &len1);
    ck_assert_msg(memcmp(tick0, tick1, 16) != 0, "no new key after the rotation interval");
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));

    /* two more intervals: the first key is gone, also without a handshake in between */
    usleep((2 * interval_ms + 200) * 1000);
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);

    SSL_SESSION_free(s0);
    SSL_SESSION_free(s1);
    gw_tls_free(t);
}
END_TEST

static Suite *tls_ticket_keys_suite(void)
{
    Suite *s = suite_create("tls_ticket_keys");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tickets_shared_through_a_file);
    tcase_add_test(tc, test_ticket_keys_reload);
    tcase_add_test(tc, test_ticket_key_layouts);
    tcase_add_test(tc, test_ticket_key_base64_forms);
    tcase_add_test(tc, test_ticket_keys_file_errors);
    tcase_add_test(tc, test_random_keys_rotate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(tls_ticket_keys_suite());
}
