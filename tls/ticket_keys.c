/*
 * Session ticket keys (ticket_keys.h). One list behind one lock; OpenSSL's
 * ticket callback runs on every worker's handshakes, a reload or a rotation
 * replaces the list.
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "common/errfmt.h"
#include "common/secret_file.h"
#include "tls/ticket_keys.h"

#define MAX_TICKET_KEYS 16
#define MAX_TICKET_KEYS_FILE_SIZE (64 * 1024)
#define TICKET_KEY_SMALL 48    /* name, AES-128 key, HMAC key of 16 bytes */
#define TICKET_KEY_LARGE 80    /* name, AES-256 key, HMAC key of 32 bytes */
#define RETRY_ROTATION_MS 1000 /* after a failed RAND_bytes */

typedef struct st_gw_tls_ticket_key_t {
    unsigned char name[GW_TICKET_KEY_NAME_LEN];
    unsigned char aes_key[32];
    unsigned char hmac_key[32];
    size_t key_len; /* 16 (from a 48-byte key) or 32 (from an 80-byte key), for both keys */
} gw_tls_ticket_key_t;

struct st_gw_ticket_keys_t {
    /* The ticket callback (any thread) holds `lock` for reading while it
     * hands a key to OpenSSL, which copies it; a reload or a rotation
     * replaces the list under the write lock. Writers are preferred: every
     * handshake reads, and a reload must not starve. */
    pthread_rwlock_t lock;
    gw_tls_ticket_key_t keys[MAX_TICKET_KEYS]; /* [0] encrypts, all decrypt */
    size_t num;
    char *file;                   /* NULL: random keys, rotated; set once before any handshake */
    uint64_t rotation_ms;         /* random keys only */
    uint64_t rotate_at_ms;        /* CLOCK_MONOTONIC; random keys only */
    pthread_mutex_t reload_mutex; /* one file reload at a time */
};

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One key from its 48 or 80 bytes. `hmac_first`: nginx's 80-byte layout
 * (name, HMAC key, AES key); otherwise HAProxy's (name, AES key, HMAC key),
 * which is also nginx's 48-byte one. */
static void key_from_bytes(gw_tls_ticket_key_t *key, const unsigned char *b, size_t len, int hmac_first)
{
    size_t k = len == TICKET_KEY_LARGE ? 32 : 16;

    memset(key, 0, sizeof(*key));
    key->key_len = k;
    memcpy(key->name, b, GW_TICKET_KEY_NAME_LEN);
    if (hmac_first && len == TICKET_KEY_LARGE) {
        memcpy(key->hmac_key, b + GW_TICKET_KEY_NAME_LEN, k);
        memcpy(key->aes_key, b + GW_TICKET_KEY_NAME_LEN + k, k);
    } else {
        memcpy(key->aes_key, b + GW_TICKET_KEY_NAME_LEN, k);
        memcpy(key->hmac_key, b + GW_TICKET_KEY_NAME_LEN + k, k);
    }
}

/* Standard base64 by OpenSSL's EVP_DecodeBlock, "=" padding optional (it is
 * added back for EVP_DecodeBlock, which wants whole 4-character groups).
 * Returns the decoded length, or -1 when `s` is not base64 or decodes to
 * more than `max` bytes. */
static ssize_t base64_decode(const char *s, size_t len, unsigned char *out, size_t max)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char in[((TICKET_KEY_LARGE + 2) / 3) * 4 + 5];
    unsigned char tmp[sizeof(in) / 4 * 3];
    size_t pad, n;
    int got;

    while (len != 0 && s[len - 1] == '=')
        --len;
    pad = (4 - len % 4) % 4;
    if (len == 0 || pad == 3 || len + pad >= sizeof(in))
        return -1;
    memcpy(in, s, len);
    memset(in + len, '=', pad);
    in[len + pad] = '\0';
    /* EVP_DecodeBlock lets blanks and a '=' inside through: only the alphabet before the padding */
    if (strspn(in, alphabet) != len || (got = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)(len + pad))) < 0 ||
        (size_t)got < pad || (n = (size_t)got - pad) > max) {
        OPENSSL_cleanse(tmp, sizeof(tmp));
        OPENSSL_cleanse(in, sizeof(in));
        return -1;
    }
    memcpy(out, tmp, n);
    OPENSSL_cleanse(tmp, sizeof(tmp));
    OPENSSL_cleanse(in, sizeof(in));
    return (ssize_t)n;
}

/* 1 when `b` looks like text (printable ASCII and line breaks), the test that
 * tells a base64 file from nginx's raw 48 or 80 bytes. */
static int is_text(const unsigned char *b, size_t len)
{
    size_t i;

    for (i = 0; i != len; ++i)
        if (!((b[i] >= 0x20 && b[i] < 0x7f) || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
            return 0;
    return 1;
}

/* Parses the text format: one base64 key per line. Messages name the line,
 * never its bytes. */
static int parse_key_lines(const char *path, const char *buf, size_t len, gw_tls_ticket_key_t *keys, size_t *num, char **err)
{
    size_t line = 0, line_of[MAX_TICKET_KEYS], i, pos = 0, slen;
    const char *s;
    unsigned char bytes[TICKET_KEY_LARGE + 3];
    ssize_t n;
    int rc = -1;

    *num = 0;
    while (gw_secret_file_next_line(buf, len, &pos, &line, &s, &slen)) {
        if (*num == MAX_TICKET_KEYS) {
            gw_errorf(err, "%s: line %zu: more than %d keys", path, line, MAX_TICKET_KEYS);
            goto Exit;
        }
        if ((n = base64_decode(s, slen, bytes, sizeof(bytes))) < 0) {
            gw_errorf(err, "%s: line %zu: not a base64 key of 48 or 80 bytes (make one with: openssl rand 80 | base64 -w0)", path,
                      line);
            goto Exit;
        }
        if (n != TICKET_KEY_SMALL && n != TICKET_KEY_LARGE) {
            gw_errorf(err, "%s: line %zu: the key is %zd bytes long, expected 48 or 80", path, line, n);
            goto Exit;
        }
        key_from_bytes(&keys[*num], bytes, (size_t)n, 0);
        for (i = 0; i != *num; ++i) {
            if (memcmp(keys[i].name, keys[*num].name, GW_TICKET_KEY_NAME_LEN) == 0) {
                gw_errorf(err, "%s: line %zu: the same key name (first 16 bytes) as the key on line %zu", path, line, line_of[i]);
                goto Exit;
            }
        }
        line_of[*num] = line;
        ++*num;
    }
    if (*num == 0) {
        gw_errorf(err, "%s: holds no key (only blank lines and comments)", path);
        goto Exit;
    }
    rc = 0;

Exit:
    OPENSSL_cleanse(bytes, sizeof(bytes));
    return rc;
}

/* Reads a ticket keys file into `keys` (MAX_TICKET_KEYS of them). Returns 0,
 * or -1 with *err ("<path>: <problem>"). */
static int read_ticket_keys(const char *path, gw_tls_ticket_key_t *keys, size_t *num, char **err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = -1;

    *num = 0;
    if (gw_secret_file_read(path, MAX_TICKET_KEYS_FILE_SIZE, (char **)&buf, &len, err) != 0)
        return -1;
    if ((len == TICKET_KEY_SMALL || len == TICKET_KEY_LARGE) && !is_text(buf, len)) {
        /* nginx's ssl_session_ticket_key file: one key, raw */
        key_from_bytes(&keys[0], buf, len, 1);
        *num = 1;
        rc = 0;
        goto Exit;
    }
    if (memchr(buf, '\0', len) != NULL || !is_text(buf, len)) {
        gw_errorf(
            err, "%s: not text, and not a raw key of exactly 48 or 80 bytes either (%zu bytes); expected base64 keys, one per line",
            path, len);
        goto Exit;
    }
    rc = parse_key_lines(path, (const char *)buf, len, keys, num, err);

Exit:
    OPENSSL_cleanse(buf, len);
    free(buf);
    return rc;
}

int gw_ticket_keys_check(const char *path, char **err)
{
    gw_tls_ticket_key_t keys[MAX_TICKET_KEYS];
    size_t num;
    int rc = read_ticket_keys(path, keys, &num, err);

    OPENSSL_cleanse(keys, sizeof(keys));
    return rc;
}

static int random_key(gw_tls_ticket_key_t *key)
{
    unsigned char bytes[TICKET_KEY_LARGE];
    int rc = -1;

    if (RAND_bytes(bytes, sizeof(bytes)) == 1) {
        key_from_bytes(key, bytes, sizeof(bytes), 0);
        rc = 0;
    }
    OPENSSL_cleanse(bytes, sizeof(bytes));
    return rc;
}

/* Under the write lock, random keys only: a new first key; the previous one
 * stays for decryption unless a second interval has passed as well (the
 * rotation runs when a handshake needs a key, so it may come late: it acts as
 * if it had run on time). */
static void rotate_locked(gw_ticket_keys_t *k, uint64_t now)
{
    gw_tls_ticket_key_t fresh;

    if (random_key(&fresh) != 0) {
        ERR_clear_error();
        k->rotate_at_ms = now + RETRY_ROTATION_MS;
        return;
    }
    if (k->num != 0 && now < k->rotate_at_ms + k->rotation_ms) {
        k->keys[1] = k->keys[0];
        k->num = 2;
    } else {
        k->num = 1;
    }
    k->keys[0] = fresh;
    OPENSSL_cleanse(&fresh, sizeof(fresh));
    k->rotate_at_ms = now + k->rotation_ms;
}

static void maybe_rotate(gw_ticket_keys_t *k)
{
    uint64_t now;
    int due;

    if (k->file != NULL)
        return;
    now = now_ms();
    pthread_rwlock_rdlock(&k->lock);
    due = now >= k->rotate_at_ms;
    pthread_rwlock_unlock(&k->lock);
    if (!due)
        return;
    pthread_rwlock_wrlock(&k->lock);
    if (now >= k->rotate_at_ms) /* not done by another thread meanwhile */
        rotate_locked(k, now);
    pthread_rwlock_unlock(&k->lock);
}

static int init_hmac(EVP_MAC_CTX *hctx, const gw_tls_ticket_key_t *key)
{
    OSSL_PARAM params[3];

    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)key->hmac_key, key->key_len);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, params) == 1 ? 0 : -1;
}

/* The two ciphers, fetched from the provider once: EVP_aes_256_cbc() makes
 * EVP_EncryptInit_ex fetch it again on every ticket (2,600 instructions each,
 * two tickets per handshake); the built-in ones are the fallback. */
static pthread_once_t ciphers_once = PTHREAD_ONCE_INIT;
static EVP_CIPHER *aes_256_cbc, *aes_128_cbc;

static void fetch_ciphers(void)
{
    aes_256_cbc = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    aes_128_cbc = EVP_CIPHER_fetch(NULL, "AES-128-CBC", NULL);
}

static const EVP_CIPHER *key_cipher(const gw_tls_ticket_key_t *key)
{
    pthread_once(&ciphers_once, fetch_ciphers);
    if (key->key_len == 32)
        return aes_256_cbc != NULL ? aes_256_cbc : EVP_aes_256_cbc();
    return aes_128_cbc != NULL ? aes_128_cbc : EVP_aes_128_cbc();
}

int gw_ticket_keys_cb(gw_ticket_keys_t *k, unsigned char key_name[GW_TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                      EVP_MAC_CTX *hctx, int enc)
{
    const gw_tls_ticket_key_t *key = NULL;
    size_t i;
    int rc = -1;

    maybe_rotate(k);
    pthread_rwlock_rdlock(&k->lock);
    if (enc) {
        key = &k->keys[0];
        if (k->num != 0 && RAND_bytes(iv, EVP_CIPHER_get_iv_length(key_cipher(key))) == 1 &&
            EVP_EncryptInit_ex(cctx, key_cipher(key), NULL, key->aes_key, iv) == 1 && init_hmac(hctx, key) == 0) {
            memcpy(key_name, key->name, GW_TICKET_KEY_NAME_LEN);
            rc = 1;
        }
    } else {
        rc = 0;
        for (i = 0; i != k->num; ++i) {
            if (memcmp(key_name, k->keys[i].name, GW_TICKET_KEY_NAME_LEN) == 0) {
                key = &k->keys[i];
                rc = init_hmac(hctx, key) == 0 && EVP_DecryptInit_ex(cctx, key_cipher(key), NULL, key->aes_key, iv) == 1
                         ? (i == 0 ? 1 : 2)
                         : -1;
                break;
            }
        }
    }
    pthread_rwlock_unlock(&k->lock);
    return rc;
}

int gw_ticket_keys_use_file(gw_ticket_keys_t *k, const char *path, char **err)
{
    char *copy;

    *err = NULL;
    if ((copy = strdup(path)) == NULL)
        return gw_errorf(err, "tls: out of memory");
    free(k->file);
    k->file = copy;
    if (gw_ticket_keys_reload(k, err) != 0) {
        free(k->file);
        k->file = NULL;
        return -1;
    }
    return 0;
}

int gw_ticket_keys_reload(gw_ticket_keys_t *k, char **err)
{
    gw_tls_ticket_key_t fresh[MAX_TICKET_KEYS];
    size_t num;
    char *why = NULL;
    int rc = 0;

    *err = NULL;
    if (k->file == NULL)
        return 0;
    pthread_mutex_lock(&k->reload_mutex);
    /* read and checked before the lock: a bad file never replaces good keys */
    if (read_ticket_keys(k->file, fresh, &num, &why) != 0) {
        rc = gw_errorf(err, "tls: ticket keys: %s", why != NULL ? why : "out of memory");
        free(why);
    } else {
        pthread_rwlock_wrlock(&k->lock);
        memcpy(k->keys, fresh, num * sizeof(fresh[0]));
        OPENSSL_cleanse(k->keys + num, (MAX_TICKET_KEYS - num) * sizeof(fresh[0]));
        k->num = num;
        pthread_rwlock_unlock(&k->lock);
    }
    pthread_mutex_unlock(&k->reload_mutex);
    OPENSSL_cleanse(fresh, sizeof(fresh));
    return rc;
}

const char *gw_ticket_keys_file(gw_ticket_keys_t *k)
{
    return k->file;
}

size_t gw_ticket_keys_count(gw_ticket_keys_t *k)
{
    size_t n;

    maybe_rotate(k);
    pthread_rwlock_rdlock(&k->lock);
    n = k->num;
    pthread_rwlock_unlock(&k->lock);
    return n;
}

void gw_ticket_keys_set_rotation(gw_ticket_keys_t *k, uint64_t interval_ms)
{
    pthread_rwlock_wrlock(&k->lock);
    k->rotation_ms = interval_ms;
    k->rotate_at_ms = now_ms() + interval_ms;
    pthread_rwlock_unlock(&k->lock);
}

gw_ticket_keys_t *gw_ticket_keys_new(uint64_t rotation_ms, char **err)
{
    pthread_rwlockattr_t attr;
    gw_ticket_keys_t *k;

    *err = NULL;
    if ((k = calloc(1, sizeof(*k))) == NULL) {
        gw_errorf(err, "tls: out of memory");
        return NULL;
    }
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&k->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&k->reload_mutex, NULL);
    k->rotation_ms = rotation_ms;
    if (random_key(&k->keys[0]) != 0) {
        ERR_clear_error();
        gw_errorf(err, "tls: cannot make a session ticket key (RAND_bytes failed)");
        gw_ticket_keys_free(k);
        return NULL;
    }
    k->num = 1;
    k->rotate_at_ms = now_ms() + k->rotation_ms;
    return k;
}

void gw_ticket_keys_free(gw_ticket_keys_t *k)
{
    if (k == NULL)
        return;
    free(k->file);
    OPENSSL_cleanse(k->keys, sizeof(k->keys));
    pthread_mutex_destroy(&k->reload_mutex);
    pthread_rwlock_destroy(&k->lock);
    free(k);
}
