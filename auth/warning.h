/*
 * The warning page of public ports (CONTRACT.md, "Public ports and the
 * warning page"): which requests get it, its HTML (no JavaScript; every
 * sentence in one table per language), and what its CSRF token and the
 * consent cookie bind. Signing itself is the gateway cookie's (auth/cookie.h)
 * with a binding of its own, so both rotate with the cookie secrets.
 */
#ifndef GW_AUTH_WARNING_H
#define GW_AUTH_WARNING_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>

#define GW_WARNING_CONSENT_PATH "/.lizard/consent"
/* The page's two cookies. "__Host-Http-": host-only, Secure, Path=/ (the
 * __Host- rules, which every browser applies), and settable only by a
 * Set-Cookie header with HttpOnly, never by a script (Chromium from 140): the
 * sandbox's own scripts run on the same origin, and could otherwise plant a
 * nonce or a consent obtained elsewhere. Neither ever reaches the sandbox. */
#define GW_WARNING_CONSENT_COOKIE "__Host-Http-lizard_consent"
/* the nonce the page's CSRF token and the consent cookie are bound to: the browser that was shown the page */
#define GW_WARNING_NONCE_COOKIE "__Host-Http-lizard_warning"
/* how long the page's Continue button works (the CSRF token's and the nonce cookie's lifetime) */
#define GW_WARNING_CSRF_TTL_S 3600
/* 16 random bytes, base64url without padding */
#define GW_WARNING_NONCE_LEN 22
/* bound of a consent form body ("csrf=...&return=..."), and of its return path */
#define GW_WARNING_MAX_FORM_BYTES 8192
#define GW_WARNING_MAX_RETURN_PATH 4096
/* "csrf:" or "consent:" and a hex SHA-256 */
#define GW_WARNING_BINDING_SIZE 80

typedef enum {
    GW_WARNING_CSRF = 0,
    GW_WARNING_CONSENT,
} gw_warning_binding_kind_t;

/* Every sentence of the page, in one language. "$H" stands for the host. */
typedef struct st_gw_warning_strings_t {
    const char *lang; /* BCP 47 primary tag: "en" */
    const char *title;
    const char *heading;
    const char *served_by;
    const char *passwords;
    const char *trust;
    const char *continue_label;
    const char *leave;
} gw_warning_strings_t;

/* The strings for an Accept-Language value ({NULL, 0}: none): the language
 * with the highest q that the page has, else English. Never NULL. */
const gw_warning_strings_t *gw_warning_strings(h2o_iovec_t accept_language);

/* What of a request decides whether it gets the page ({NULL, 0}: a header
 * that is absent). */
typedef struct st_gw_warning_request_t {
    h2o_iovec_t method;
    h2o_iovec_t sec_fetch_dest;
    int is_upgrade;   /* a WebSocket (or other) upgrade */
    int prefers_html; /* its Accept prefers text/html (used only without Sec-Fetch-Dest) */
    int other_origin; /* it has an Origin that is not this host's own https origin ("null" included) */
} gw_warning_request_t;

/* 1 when a request gets the page rather than the sandbox: a top-level
 * document navigation (Sec-Fetch-Dest: document) of any method, since an
 * auto-submitted form from another site must not skip it (and a same-site one
 * is the sandbox's own content breaking out of a frame). A frame never gets
 * it: the page is only for the top level, where the address bar names the
 * host. Without Fetch Metadata: a GET or HEAD whose Accept prefers HTML, or
 * another method that also comes with another site's Origin. Upgrades never.
 * Credentials and consent are the caller's to check. Pure. */
int gw_warning_applies(const gw_warning_request_t *r);

/* 1 when `value` can be a nonce the gateway made (GW_WARNING_NONCE_LEN
 * base64url characters). */
int gw_warning_nonce_ok(h2o_iovec_t value);

/* Fills out with a new nonce from OpenSSL's CSPRNG (NUL-terminated).
 * Returns 0, or -1 when the generator fails. */
int gw_warning_nonce_new(char out[GW_WARNING_NONCE_LEN + 1]);

/* Renders the page (from pool): names `host`, and holds the form that POSTs
 * `csrf` and `return_path` to GW_WARNING_CONSENT_PATH. Every reflected value
 * is escaped. */
h2o_iovec_t gw_warning_render(h2o_mem_pool_t *pool, const gw_warning_strings_t *strings, h2o_iovec_t host, h2o_iovec_t csrf,
                              h2o_iovec_t return_path);

/* What a CSRF token or a consent cookie binds besides (sandbox, port,
 * expiry): the kind and the host (lowercased here; without a ":port"), so
 * that neither serves for another host nor as the other, and the nonce of
 * the browser (GW_WARNING_NONCE_COOKIE), so that a token fetched, or a
 * consent given, in another browser is worthless in this one.
 * NUL-terminated; passed as the token hash of gw_cookie_sign /
 * gw_cookie_verify. */
void gw_warning_binding(gw_warning_binding_kind_t kind, h2o_iovec_t host, h2o_iovec_t nonce, char out[GW_WARNING_BINDING_SIZE]);

/* 1 when `path` may be redirected to after consent: a path on this host
 * ("/..."), not "//" or "/\" (another host), without control characters,
 * spaces or non-ASCII, at most GW_WARNING_MAX_RETURN_PATH bytes. */
int gw_warning_return_path_ok(h2o_iovec_t path);

#endif
