/*
 * Sealed private keys of custom-domain certificate records (CONTRACT.md
 * "Custom domains"): "v1.<base64url nonce>.<base64url ciphertext and tag>",
 * AES-256-GCM, a 12-byte nonce, the 16-byte tag appended to the ciphertext,
 * the record's name as associated data, under a 32-byte key given as 64 hex
 * digits. deploy/lizard_seal.py seals the same way.
 */
#ifndef GW_TLS_SEAL_H
#define GW_TLS_SEAL_H

#include <stddef.h>

#define GW_SEAL_KEY_LEN 32
#define GW_SEAL_NONCE_LEN 12
#define GW_SEAL_TAG_LEN 16
#define GW_SEAL_MAX_LEN (64 * 1024) /* a sealed value longer than this is refused unread */

/* 64 hex digits (either case) into key. Returns 0, or -1 for anything else. */
int gw_seal_parse_key(const char *hex, unsigned char key[GW_SEAL_KEY_LEN]);

/* Opens `sealed` (len bytes) with `aad` as associated data. Returns 0 and
 * *out (malloc'd, NUL-terminated, *out_len bytes before the NUL; the caller
 * cleanses and frees it), or -1: malformed, too long, or the tag does not
 * verify (wrong key, wrong name, tampered). */
int gw_seal_open(const unsigned char key[GW_SEAL_KEY_LEN], const char *aad, size_t aad_len, const char *sealed, size_t len,
                 char **out, size_t *out_len);

#endif
