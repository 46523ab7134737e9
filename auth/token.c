/*
 * Sandbox access tokens: the presented token is hashed with SHA-256 and the
 * digest compared in constant time with the lowercase hex digest the control
 * plane stored in Redis (token_sha256). The token itself is never stored.
 */
/* SHA256_Init/Update/Final are deprecated in OpenSSL 3.0 in favour of EVP;
 * see gw_token_sha256 for why this file uses them. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <h2o/string_.h>
#include "auth/token.h"

/* SHA-256 with OpenSSL's SHA256_CTX on the stack: the same block function
 * EVP's default provider runs (SHA-NI where the CPU has it), without its
 * dispatch. Measured on OpenSSL 3.0 (tests/bench/token_check.c, README
 * Performance): EVP_DigestInit_ex2 frees and allocates its provider context
 * on every call, even on a reused EVP_MD_CTX (EVP_MD_CTX_copy_ex dups it,
 * EVP_Digest allocates the EVP_MD_CTX too, SHA256() fetches the digest
 * under the provider store's lock), so each of those costs one allocation
 * or more per request, which this does not. The FIPS provider is bypassed:
 * this digest only tells a token from another, as a hash table would. */
void gw_token_sha256(const void *data, size_t len, unsigned char out[32])
{
    SHA256_CTX c;

    /* SHA-256 cannot fail; zero the output if it ever did, so that a
     * failure never looks like a valid digest. SHA256_Final wipes the block
     * it buffered (the token's last bytes): what is left in c is the digest. */
    if (SHA256_Init(&c) != 1 || SHA256_Update(&c, data, len) != 1 || SHA256_Final(out, &c) != 1)
        memset(out, 0, 32);
}

void gw_token_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char digest[32];

    gw_token_sha256(data, len, digest);
    h2o_hex_encode(out, digest, sizeof(digest)); /* lowercase, NUL-terminated */
}

int gw_token_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}

/* Decodes exactly 64 hex digits followed by NUL; -1 on anything else. The
 * expected digest is not secret (it is a hash), so its parsing need not be
 * constant time. */
static int decode_digest(const char *hex, unsigned char out[32])
{
    if (strnlen(hex, 65) != 64)
        return -1;
    return h2o_hex_decode(out, hex, 64);
}

int gw_token_matches(h2o_iovec_t token, const char *expected_hex)
{
    unsigned char expected[32];

    if (token.len == 0 || expected_hex == NULL)
        return 0;
    if (decode_digest(expected_hex, expected) != 0)
        return 0;
    return gw_token_matches_digest(token, expected);
}

int gw_token_matches_digest(h2o_iovec_t token, const unsigned char expected[32])
{
    unsigned char actual[32];

    if (token.len == 0)
        return 0;
    gw_token_sha256(token.base, token.len, actual);
    return gw_token_equal(actual, expected, sizeof(actual));
}
