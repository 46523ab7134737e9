/*
 * AES-256-GCM opening of sealed keys with OpenSSL's EVP interface; base64url
 * by libh2o's decoder (which takes no padding: trailing '=' are dropped first).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <h2o/string_.h>
#include "tls/seal.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int gw_seal_parse_key(const char *hex, unsigned char key[GW_SEAL_KEY_LEN])
{
    size_t i;

    if (hex == NULL || strlen(hex) != GW_SEAL_KEY_LEN * 2)
        return -1;
    for (i = 0; i != GW_SEAL_KEY_LEN; ++i) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            OPENSSL_cleanse(key, GW_SEAL_KEY_LEN);
            return -1;
        }
        key[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* Decrypts ct (the tag is its last GW_SEAL_TAG_LEN bytes) into out (room for ct_len - tag). */
static int gcm_open(const unsigned char *key, const unsigned char *nonce, const char *aad, size_t aad_len, const unsigned char *ct,
                    size_t ct_len, unsigned char *out)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    size_t body = ct_len - GW_SEAL_TAG_LEN;
    int n = 0, ok;

    ok = c != NULL && EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, GW_SEAL_NONCE_LEN, NULL) == 1 &&
         EVP_DecryptInit_ex(c, NULL, NULL, key, nonce) == 1 &&
         EVP_DecryptUpdate(c, NULL, &n, (const unsigned char *)aad, (int)aad_len) == 1 &&
         EVP_DecryptUpdate(c, out, &n, ct, (int)body) == 1 &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, GW_SEAL_TAG_LEN, (void *)(ct + body)) == 1 &&
         EVP_DecryptFinal_ex(c, out + n, &n) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -1;
}

int gw_seal_open(const unsigned char key[GW_SEAL_KEY_LEN], const char *aad, size_t aad_len, const char *sealed, size_t len,
                 char **out, size_t *out_len)
{
    const char *dot1, *dot2, *end = sealed + len;
    h2o_iovec_t nonce = {NULL, 0}, ct = {NULL, 0};
    unsigned char *plain = NULL;
    int rc = -1;

    *out = NULL;
    if (len > GW_SEAL_MAX_LEN || aad_len > INT32_MAX || len < 3 || memcmp(sealed, "v1.", 3) != 0)
        return -1;
    dot1 = sealed + 2;
    if ((dot2 = memchr(dot1 + 1, '.', end - (dot1 + 1))) == NULL)
        return -1;
    while (end > dot2 + 1 && end[-1] == '=')
        --end;
    nonce = h2o_decode_base64url(NULL, dot1 + 1, dot2 - (dot1 + 1));
    ct = h2o_decode_base64url(NULL, dot2 + 1, end - (dot2 + 1));
    if (nonce.base == NULL || nonce.len != GW_SEAL_NONCE_LEN || ct.base == NULL || ct.len <= GW_SEAL_TAG_LEN)
        goto Exit;
    plain = malloc(ct.len - GW_SEAL_TAG_LEN + 1);
    if (plain == NULL || gcm_open(key, (unsigned char *)nonce.base, aad, aad_len, (unsigned char *)ct.base, ct.len, plain) != 0)
        goto Exit;
    *out_len = ct.len - GW_SEAL_TAG_LEN;
    plain[*out_len] = '\0';
    *out = (char *)plain;
    plain = NULL;
    rc = 0;

Exit:
    if (plain != NULL) {
        OPENSSL_cleanse(plain, ct.len - GW_SEAL_TAG_LEN + 1);
        free(plain);
    }
    if (ct.base != NULL) {
        OPENSSL_cleanse(ct.base, ct.len);
        free(ct.base);
    }
    free(nonce.base);
    return rc;
}
