/*
 * Sandbox access tokens: SHA-256 of the presented token compared in constant
 * time with the lowercase hex digest the control plane stored.
 */
#ifndef GW_AUTH_TOKEN_H
#define GW_AUTH_TOKEN_H

#include <stddef.h>
#include <h2o/memory.h>

/* Writes the lowercase hex SHA-256 of `data` into out (65 bytes, NUL-terminated). */
void gw_token_sha256_hex(const void *data, size_t len, char out[65]);

/* Raw SHA-256 (32 bytes). */
void gw_token_sha256(const void *data, size_t len, unsigned char out[32]);

/* 1 when SHA-256(token) equals the 64-hex-digit `expected_hex` (either case).
 * Time does not depend on where the digests differ. An empty token or a
 * malformed expected digest never matches. */
int gw_token_matches(h2o_iovec_t token, const char *expected_hex);

/* The same with the expected digest already decoded (32 bytes): what a
 * request checks against, its record having decoded the hex once. */
int gw_token_matches_digest(h2o_iovec_t token, const unsigned char expected[32]);

/* Constant-time equality of two buffers of the same length. */
int gw_token_equal(const void *a, const void *b, size_t len);

#endif
