/*
 * Share links (CONTRACT.md, "Share links"): "lzs1." tokens that open one port
 * of one sandbox until they expire, signed by the control plane with a key
 * from a list of "<kid>:<secret>" lines it shares with the gateways. This
 * module is the format, signing, verification and the key list; it keeps no
 * state (the live, reloadable list is the gateway's).
 */
#ifndef GW_AUTH_SHARE_LINK_H
#define GW_AUTH_SHARE_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>

#define GW_SHARE_LINK_PREFIX "lzs1."
/* a view-only link (CONTRACT.md, Desktops): the same P and S, signed over "lzv1." P; opens only an rfb port, whose
 * tunnel then drops the viewer's input (upstream/rfb_walk.h) */
#define GW_VIEW_LINK_PREFIX "lzv1."
/* key ids: 1-64 of [A-Za-z0-9._-] (docs/share-links.md, Share links) */
#define GW_LINK_KID_MAX 64
/* the contract's minimum; shorter secrets are refused at load */
#define GW_LINK_SECRET_MIN 32
#define GW_LINK_MAX_KEYS 16
/* bound of a key file or variable: 16 keys of a few hundred bytes, and comments */
#define GW_LINK_KEYS_MAX_SIZE 65536

typedef struct st_gw_link_key_t {
    char kid[GW_LINK_KID_MAX + 1];
    unsigned char *secret;
    size_t secret_len;
} gw_link_key_t;

/* What a link says (the fields of its payload). */
typedef struct st_gw_share_link_t {
    char sandbox_id[57]; /* 1-56 of [a-z0-9] */
    uint16_t port;
    uint64_t expires_at; /* unix seconds */
    uint64_t epoch;
    char kid[GW_LINK_KID_MAX + 1];
    int view_only; /* an "lzv1." link */
} gw_share_link_t;

typedef enum {
    GW_LINK_OK = 0,
    GW_LINK_MALFORMED,     /* not an lzs1 token, or its payload is not the contract's */
    GW_LINK_UNKNOWN_KEY,   /* signed with a kid this gateway does not have (retired, or never shared) */
    GW_LINK_BAD_SIGNATURE, /* altered, or signed with another secret */
    GW_LINK_WRONG_SANDBOX, /* a link of another sandbox */
    GW_LINK_WRONG_PORT,    /* a link of another port of this sandbox */
    GW_LINK_EXPIRED,
    GW_LINK_TOO_LONG, /* expires further away than auth.link_max_ttl_s */
    GW_LINK_REVOKED,  /* signed with another link_epoch than the sandbox's */
} gw_link_result_t;

/* 1 when `token` has a share-link prefix, "lzs1." or "lzv1." (whether or
 * not it is valid): such a credential is checked as a link, never as an
 * access token. */
int gw_share_link_is(h2o_iovec_t token);

/* Parses key lines "<kid>:<secret>" (blank lines, lines starting with '#'
 * and the blanks around each line are ignored; the secret is everything
 * after the first ':'). `origin` names the source in messages (a path, or
 * "environment variable X"). Returns 0 with *keys (free with
 * gw_share_link_keys_free) and *num_keys >= 1, or -1 with *err (malloc'd; names
 * the line, never a secret's byte). Duplicate kids, short secrets, more than
 * GW_LINK_MAX_KEYS keys and an empty list are errors. */
int gw_share_link_keys_parse(const char *text, size_t len, const char *origin, gw_link_key_t **keys, size_t *num_keys, char **err);

/* The keys as the gateway reads them: from the environment variable
 * `env_name` or the file `path` (gw_secret_file_read's rules), exactly one
 * of them non-NULL. Same results as gw_share_link_keys_parse. */
int gw_share_link_keys_load(const char *env_name, const char *path, gw_link_key_t **keys, size_t *num_keys, char **err);

/* Wipes and frees a list; NULL is a no-op. */
void gw_share_link_keys_free(gw_link_key_t *keys, size_t num_keys);

/* The key with `kid`, or NULL. */
const gw_link_key_t *gw_share_link_keys_find(const gw_link_key_t *keys, size_t num_keys, const char *kid, size_t kid_len);

/* Mints "lzs1.<P>.<S>" for (sandbox, port, expires_at, epoch) with `key`
 * (from pool, NUL-terminated). {NULL, 0} when an argument is outside the
 * format (sandbox id, port 0). */
h2o_iovec_t gw_share_link_sign(h2o_mem_pool_t *pool, const gw_link_key_t *key, const char *sandbox_id, uint16_t port,
                               uint64_t expires_at, uint64_t epoch);
/* The same as a view-only link: "lzv1.<P>.<S>", S over "lzv1." P. */
h2o_iovec_t gw_share_link_sign_view(h2o_mem_pool_t *pool, const gw_link_key_t *key, const char *sandbox_id, uint16_t port,
                                    uint64_t expires_at, uint64_t epoch);

/* Verifies `token` for a request to (sandbox_id, port) at `now`: the
 * signature against the key its kid names (compared in constant time), then
 * sandbox, port, expiry, expiry within max_ttl_s of now, and the epoch
 * against *current_epoch (NULL: the sandbox's link_epoch is unreadable, so
 * every link is revoked). `out` (may be NULL) gets the fields once the
 * signature holds, view_only for an "lzv1." link (whose MAC covers its own
 * prefix: a full link's S never verifies as a view-only one's, nor the
 * reverse). */
gw_link_result_t gw_share_link_verify(h2o_iovec_t token, const gw_link_key_t *keys, size_t num_keys, const char *sandbox_id,
                                      uint16_t port, const uint64_t *current_epoch, uint64_t now, uint64_t max_ttl_s,
                                      gw_share_link_t *out);

/* "signature", "expired", ...: the word a message or a log uses for a result. */
const char *gw_link_result_name(gw_link_result_t result);

#endif
