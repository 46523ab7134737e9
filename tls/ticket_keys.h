/*
 * Session ticket keys: one list per process, shared by every SSL_CTX of the
 * listeners. The first key encrypts, all of them decrypt. Either a file
 * (fleet-wide: every gateway resumes every other's tickets) or random keys,
 * private to the process and rotated on time.
 */
#ifndef GW_TLS_TICKET_KEYS_H
#define GW_TLS_TICKET_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>

#define GW_TICKET_KEY_NAME_LEN 16

typedef struct st_gw_ticket_keys_t gw_ticket_keys_t;

/* Random keys, rotated every `rotation_ms`. NULL with *err (malloc'd) when
 * RAND_bytes fails or memory runs out. */
gw_ticket_keys_t *gw_ticket_keys_new(uint64_t rotation_ms, char **err);

/* Frees; NULL is a no-op. The keys are wiped. */
void gw_ticket_keys_free(gw_ticket_keys_t *k);

/* Checks a ticket keys file without keeping it: 0, or -1 with *err
 * (malloc'd, "<path>: <problem>", never key bytes). The format is
 * gw_tls_ticket_keys_check's (tls.h). */
int gw_ticket_keys_check(const char *path, char **err);

/* Makes the file's keys the list, for good: no more rotation. Before the
 * listeners start. -1 with *err, keeping the current list, when the file is
 * bad. The path is copied. */
int gw_ticket_keys_use_file(gw_ticket_keys_t *k, const char *path, char **err);

/* Re-reads the file; 0 and nothing done without one. On error keeps the
 * current keys and returns -1 with *err. Safe while others handshake. */
int gw_ticket_keys_reload(gw_ticket_keys_t *k, char **err);

/* The file, or NULL for random keys; owned by k. */
const char *gw_ticket_keys_file(gw_ticket_keys_t *k);

/* How many keys decrypt right now (a due rotation runs first). */
size_t gw_ticket_keys_count(gw_ticket_keys_t *k);

/* The rotation interval of random keys; no effect with a file. */
void gw_ticket_keys_set_rotation(gw_ticket_keys_t *k, uint64_t interval_ms);

/* OpenSSL's ticket callback body (SSL_CTX_set_tlsext_ticket_key_evp_cb),
 * from any thread. enc: 1 with the first key. Decryption: 0 for an unknown
 * key name (a full handshake follows), 1 for the first key, 2 for an older
 * one (the client gets a fresh ticket), -1 on error. */
int gw_ticket_keys_cb(gw_ticket_keys_t *k, unsigned char key_name[GW_TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                      EVP_MAC_CTX *hctx, int enc);

#endif
