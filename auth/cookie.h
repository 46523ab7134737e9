/*
 * The gateway's access cookie (default name __Host-lizard_access): a value
 * signed with HMAC-SHA256 that binds sandbox, port, expiry and the hash of
 * the sandbox token, so that rotating the token revokes every cookie.
 * Also: building Set-Cookie values and rebuilding a request's Cookie header
 * without the gateway's cookie.
 */
#ifndef GW_AUTH_COOKIE_H
#define GW_AUTH_COOKIE_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>

typedef struct st_gw_cookie_secret_t {
    const unsigned char *bytes;
    size_t len;
} gw_cookie_secret_t;

typedef enum {
    GW_COOKIE_OK = 0,
    GW_COOKIE_MALFORMED,
    GW_COOKIE_BAD_SIGNATURE, /* tampered, or signed with an unknown secret */
    GW_COOKIE_EXPIRED,
    GW_COOKIE_WRONG_SANDBOX, /* issued for another host */
    GW_COOKIE_WRONG_PORT,
    GW_COOKIE_TOKEN_CHANGED, /* token_sha256 rotated since issue */
} gw_cookie_result_t;

typedef enum {
    GW_COOKIE_SAME_SITE_LAX = 0,
    GW_COOKIE_SAME_SITE_STRICT,
    GW_COOKIE_SAME_SITE_NONE, /* SameSite=None; Partitioned */
} gw_cookie_same_site_t;

/* Signs a cookie value for (sandbox, port, expires_at unix seconds, token
 * hash hex) with secrets[0]. Returns the value allocated from `pool`. */
h2o_iovec_t gw_cookie_sign(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                           uint64_t expires_at, const char *token_sha256_hex);

/* Verifies `value` against every secret (rotation), then the binding. */
gw_cookie_result_t gw_cookie_verify(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                    const char *sandbox_id, uint16_t port, uint64_t now, const char *token_sha256_hex);

/* The cookie a share link becomes (CONTRACT.md: the cookie is not the
 * token): the gateway's own value "l1.<sandbox>.<port>.<expires>.<sig>",
 * signed like an access cookie but binding the link's epoch in place of the
 * token hash, so that a new link_epoch fails it. It never verifies as an
 * access cookie, nor an access cookie as one of these. */
h2o_iovec_t gw_cookie_sign_link(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                                uint64_t expires_at, uint64_t link_epoch);
gw_cookie_result_t gw_cookie_verify_link(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                         const char *sandbox_id, uint16_t port, uint64_t now, uint64_t link_epoch);
/* The cookie a view-only link becomes: "w1.<sandbox>.<port>.<expires>.<sig>",
 * the same binding; it never verifies as a full link's cookie, nor one of
 * those as it. */
h2o_iovec_t gw_cookie_sign_view_link(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                                     uint64_t expires_at, uint64_t link_epoch);
gw_cookie_result_t gw_cookie_verify_view_link(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                              const char *sandbox_id, uint16_t port, uint64_t now, uint64_t link_epoch);
/* 1 when `value` has either link cookie's form, "l1." or "w1." (whether or
 * not it verifies). */
int gw_cookie_is_link(h2o_iovec_t value);
/* 1 when `value` has the view-only link cookie's form ("w1."). */
int gw_cookie_is_view_link(h2o_iovec_t value);

/* The fields of a well-formed value (either kind), not verified: the
 * sandbox (pointing into value), port and expiry. Returns 0, or -1 when
 * value is not "v1.<sandbox>.<port>.<expires>.<sig>" (or "l1...", "w1..."). */
int gw_cookie_read_fields(h2o_iovec_t value, h2o_iovec_t *sandbox_id, uint16_t *port, uint64_t *expires_at);

/* "<name>=<value>; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=<ttl>"
 * (None adds "; Partitioned"). From pool. */
h2o_iovec_t gw_cookie_set_header(h2o_mem_pool_t *pool, h2o_iovec_t name, h2o_iovec_t value, uint64_t max_age,
                                 gw_cookie_same_site_t same_site);

/* A Set-Cookie value that clears the cookie (Max-Age=0), same attributes. */
h2o_iovec_t gw_cookie_clear_header(h2o_mem_pool_t *pool, h2o_iovec_t name, gw_cookie_same_site_t same_site);

/* Given every Cookie header field of a request (HTTP/2 sends one field per
 * cookie), finds the gateway's cookie `name` and returns in *found its value
 * (the first occurrence; {NULL,0} if absent) and in *rest the remaining
 * cookies joined with "; " in their original order, byte for byte ({NULL,0}
 * when none remain). Returns the number of gateway cookies removed. */
size_t gw_cookie_extract(h2o_mem_pool_t *pool, const h2o_iovec_t *fields, size_t num_fields, h2o_iovec_t name, h2o_iovec_t *found,
                         h2o_iovec_t *rest);

#endif
