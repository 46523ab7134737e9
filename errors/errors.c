/*
 * Responses the gateway itself produces (CONTRACT.md, Errors): one code per
 * failure, a small self-contained HTML page for browser navigations and JSON
 * for everything else, never cached, readable by cross-origin browser code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "errors/errors.h"
#include "common/engine.h"
#include "common/utf8.h"

/* Reflected values longer than this are cut (sandbox ids are at most 56
 * characters and details are written by the gateway itself). */
#define MAX_REFLECTED_LEN 512
/* Bound of any rendered body; the longest real one is about 2 KiB. */
#define MAX_BODY_LEN 16384

typedef struct st_error_def_t {
    int status;
    const char *reason;
    /* a short heading */
    const char *title;
    /* what happened, then what to do. "$S" is "sandbox <id>" (or "this
     * sandbox"), "$s" the same at the start of a sentence, "$P" "port <n>" ("$p" at the start of a sentence)
     * (or "the requested port"). */
    const char *cause;
    const char *hint;
    /* seconds for Retry-After, 0 for none */
    int retry_after;
    /* for whoever looks further (a developer): shown below the rest; NULL for none */
    const char *tech;
} error_def_t;

/* The codes' names, at a fixed stride: a request carries its code as a
 * pointer into this table (gw_error_note), so the code is found again by
 * arithmetic, never by comparing strings. */
#define CODE_NAME_SIZE 24
static const char code_names[GW_ERR_NUM_CODES][CODE_NAME_SIZE] = {
    [GW_ERR_BAD_HOST] = "bad_host",
    [GW_ERR_UNKNOWN_HOST] = "unknown_host",
    [GW_ERR_SANDBOX_NOT_FOUND] = "sandbox_not_found",
    [GW_ERR_PORT_NOT_EXPOSED] = "port_not_exposed",
    [GW_ERR_MISSING_TOKEN] = "missing_token",
    [GW_ERR_INVALID_TOKEN] = "invalid_token",
    [GW_ERR_SANDBOX_NOT_RUNNING] = "sandbox_not_running",
    [GW_ERR_PORT_NOT_OPEN] = "port_not_open",
    [GW_ERR_UPSTREAM_FORBIDDEN] = "upstream_forbidden",
    [GW_ERR_UPSTREAM_TIMEOUT] = "upstream_timeout",
    [GW_ERR_TOO_MANY_CONNECTIONS] = "too_many_connections",
    [GW_ERR_ROUTING_UNAVAILABLE] = "routing_unavailable",
    [GW_ERR_BODY_TOO_LARGE] = "body_too_large",
    [GW_ERR_BAD_UPSTREAM_RESPONSE] = "bad_upstream_response",
    [GW_ERR_HEADERS_TOO_LARGE] = "headers_too_large",
    [GW_ERR_NOT_HTTP_PORT] = "not_http_port",
    [GW_ERR_IP_NOT_ALLOWED] = "ip_not_allowed",
    [GW_ERR_RATE_LIMITED] = "rate_limited",
    [GW_ERR_EGRESS_QUOTA_EXCEEDED] = "egress_quota_exceeded",
    [GW_ERR_ORIGIN_NOT_ALLOWED] = "origin_not_allowed",
};

/* The module of the request tag (common/engine.h) that carries a request's code. */
static const char CODE_LOG_MODULE[] = "lizard:code";

static const error_def_t defs[GW_ERR_NUM_CODES] = {
    [GW_ERR_BAD_HOST] = {400, "Bad Request", "Malformed preview address",
                         "This host name is under a preview domain but is not a valid preview address.",
                         "Preview addresses have the form <port>-<sandbox id>.<preview domain>, with a port from 1 to 65535 and a "
                         "sandbox id of lowercase letters and digits.",
                         0, NULL},
    [GW_ERR_UNKNOWN_HOST] = {404, "Not Found", "Unknown host", "This gateway does not serve this host name.",
                             "Check the address; preview links come from the platform's expose call.", 0, NULL},
    [GW_ERR_SANDBOX_NOT_FOUND] = {404, "Not Found", "Sandbox not found", "$s does not exist.",
                                  "It may have been deleted. Check the sandbox id in the address, or create a sandbox and "
                                  "expose the port again.",
                                  0, NULL},
    [GW_ERR_PORT_NOT_EXPOSED] = {404, "Not Found", "Port not exposed", "$p of $S is not exposed.",
                                 "Expose the port with the platform's expose call, then open the preview link it returns.", 0,
                                 NULL},
    [GW_ERR_MISSING_TOKEN] = {401, "Unauthorized", "This preview is private",
                              "$p of $S is private: only its preview link opens it, and this request came without one.",
                              "Open the full preview link, the address that ends in ?lizard_token=...: the platform shows it "
                              "where the port was exposed. If someone sent you this address, ask them for the full link.",
                              0,
                              "Technical detail: the request carried no credential. A private port takes the sandbox's access "
                              "token in the X-Lizard-Access-Token header or the lizard_token query parameter, or the cookie the "
                              "gateway sets when a preview link is opened in a browser."},
    [GW_ERR_INVALID_TOKEN] = {403, "Forbidden", "Access not valid", "The access presented for $S is not valid.",
                              "Get the current preview link from the platform (or from whoever shared it) and open it again.", 0,
                              "Technical detail: the credential did not match the sandbox's access token."},
    [GW_ERR_SANDBOX_NOT_RUNNING] = {503, "Service Unavailable", "Sandbox not running", "$s is not running.",
                                    "Start or resume the sandbox, then reload this page in a few seconds.", 5, NULL},
    [GW_ERR_PORT_NOT_OPEN] = {502, "Bad Gateway", "Nothing is listening on this port", "Nothing is listening on $P in $S.",
                              "Start your server and make it listen on 0.0.0.0 (not 127.0.0.1).", 0, NULL},
    [GW_ERR_UPSTREAM_FORBIDDEN] = {502, "Bad Gateway", "Sandbox address refused",
                                   "The gateway refused to connect to $S: its address is outside the allowed networks.",
                                   "This is a problem of the platform, not of your code. Try again later or contact support.", 0,
                                   NULL},
    [GW_ERR_UPSTREAM_TIMEOUT] = {504, "Gateway Timeout", "Sandbox did not answer in time", "$s did not answer on $P in time.",
                                 "Check that your server is running and responsive, then try again.", 0, NULL},
    [GW_ERR_TOO_MANY_CONNECTIONS] = {429, "Too Many Requests", "Too many connections", "$s has too many open connections.",
                                     "Close some connections or wait a moment, then try again.", 0, NULL},
    [GW_ERR_ROUTING_UNAVAILABLE] = {503, "Service Unavailable", "Routing temporarily unavailable",
                                    "The gateway cannot look up where $S runs right now.",
                                    "This is temporary; try again in a few seconds.", 2, NULL},
    [GW_ERR_BODY_TOO_LARGE] = {413, "Payload Too Large", "Request body too large",
                               "The request body is larger than this gateway accepts.",
                               "Send a smaller body, or split the upload into several requests.", 0, NULL},
    [GW_ERR_BAD_UPSTREAM_RESPONSE] = {502, "Bad Gateway", "The app's answer is not valid HTTP",
                                      "The app on $P of $S answered something that is not valid HTTP/1.1.",
                                      "Check the server's logs and that it speaks HTTP/1.1 on this port: a status line, "
                                      "headers, then the body as the headers frame it (Content-Length or chunked).",
                                      0, NULL},
    [GW_ERR_HEADERS_TOO_LARGE] = {431, "Request Header Fields Too Large", "Request headers too large",
                                  "The request's headers are larger than this gateway accepts.",
                                  "Send fewer or shorter headers. In a browser, clearing this site's cookies usually helps.", 0,
                                  NULL},
    [GW_ERR_NOT_HTTP_PORT] = {400, "Bad Request", "Not an HTTP port",
                              "$p of $S is a raw TCP service (proto tcp): it does not speak HTTP.",
                              "Reach it through the TCP tunnel: lizard-gateway tcp-forward --listen 127.0.0.1:<local port> --url "
                              "wss://<this host>/.lizard/tcp, then point your client (psql, redis-cli, ssh) at the local port.",
                              0, "Technical detail: the tunnel is a WebSocket at /.lizard/tcp with the subprotocol lizard.tcp.v1."},
    /* the message never names the lists (they are the platform's, not the client's) */
    [GW_ERR_IP_NOT_ALLOWED] = {403, "Forbidden", "Your address may not reach this sandbox",
                               "The owner of $S does not let your network address reach it.",
                               "Ask the sandbox's owner to allow your address, or connect from an allowed network.", 0, NULL},
    /* Retry-After: the rate limiter adds it (the seconds until a token is there) */
    [GW_ERR_RATE_LIMITED] = {429, "Too Many Requests", "Too many requests",
                             "$s gets more requests than its rate limit lets through this gateway.",
                             "Slow down, and retry after the number of seconds the Retry-After header says.", 0, NULL},
    [GW_ERR_EGRESS_QUOTA_EXCEEDED] = {429, "Too Many Requests", "Traffic quota used up",
                                      "$s has used up its egress quota: it sent as many bytes as its plan allows.",
                                      "Ask the sandbox's owner to raise the quota.", 0, NULL},
    /* a CORS preflight on a cors:<n> = edge port (http/cors.h): the page's code cannot read this, its developer can */
    [GW_ERR_ORIGIN_NOT_ALLOWED] = {403, "Forbidden", "This site may not call this preview",
                                   "A page of another site asked to call $p of $S, and the sandbox does not let that site's "
                                   "origin in.",
                                   "If you own the sandbox, add the page's origin (such as https://app.example.com) to the "
                                   "port's allowed origins; otherwise call the preview from an allowed site.",
                                   0,
                                   "Technical detail: the CORS preflight's Origin is not in the sandbox record's "
                                   "cors_origins:<port> (cors:<port> is edge: the gateway answers the port's CORS itself). "
                                   "Origin null is never allowed."},
};

/* The finer causes (gw_error_why_t): the code each belongs to, and its text. */
static const struct {
    gw_error_code_t code;
    error_def_t def;
} whys[GW_WHY_NUM] = {
    [GW_WHY_ADDR_MISSING] = {GW_ERR_UPSTREAM_FORBIDDEN,
                             {502, "Bad Gateway", "Sandbox address missing",
                              "The gateway cannot connect to $S: its record has no address.",
                              "This is a problem of the platform, not of your code. Try again later or contact support.", 0,
                              "Technical detail: the sandbox's Redis record has no addr field."}},
    [GW_WHY_ADDR_NOT_IP] = {GW_ERR_UPSTREAM_FORBIDDEN,
                            {502, "Bad Gateway", "Sandbox address refused",
                             "The gateway refused to connect to $S: its address is not an IP address.",
                             "This is a problem of the platform, not of your code. Try again later or contact support.", 0,
                             "Technical detail: the addr field of the sandbox's Redis record must be an IPv4 or IPv6 literal; "
                             "host names are never resolved."}},
    [GW_WHY_LOOPBACK_UPSTREAM] = {GW_ERR_PORT_NOT_OPEN,
                                  {502, "Bad Gateway", "Nothing is listening on this port", "Nothing is listening on $P in $S.",
                                   "Start your server on this port, listening on 0.0.0.0 or 127.0.0.1, then reload.", 0,
                                   "Technical detail: this gateway connects to the sandbox over the loopback interface, so a "
                                   "server listening on either address is reachable; the connection was refused."}},
    [GW_WHY_SILENCE_LIMIT] = {GW_ERR_UPSTREAM_TIMEOUT,
                              {504, "Gateway Timeout", "The gateway's time limit was reached",
                               "$s sent nothing on $P for longer than the gateway's limit, and the gateway ended the call.",
                               "If the app is working on a long call, raise the limit for this port: the platform sets it "
                               "with the sandbox record's field timeout:<port> (milliseconds, up to the gateway's "
                               "upstream.max_port_timeout_ms), or answer with a streamed type (text/event-stream, "
                               "application/x-ndjson), which is never cut for silence.",
                               0, NULL}},
    [GW_WHY_NOT_H2C] = {GW_ERR_NOT_HTTP_PORT,
                        {400, "Bad Request", "This port does not speak gRPC",
                         "This is a gRPC request, and $p of $S is not an HTTP/2 (h2c) port: the gateway forwards it as "
                         "HTTP/1.1, which gRPC cannot use.",
                         "Serve gRPC on a port whose sandbox record says proto:<port> = h2c.", 0, NULL}},
    [GW_WHY_H2C_HTTP1] =
        {GW_ERR_BAD_UPSTREAM_RESPONSE,
         {502, "Bad Gateway", "The app does not speak HTTP/2",
          "$p of $S is an HTTP/2 (h2c) port, and the app on it answered HTTP/1.1, not HTTP/2.",
          "Serve HTTP/2 without TLS (prior knowledge, as gRPC servers do) on this port, or have the "
          "platform drop proto:<port> = h2c from the sandbox record to serve HTTP/1.1.",
          0, "Technical detail: where the server preface (a SETTINGS frame) was expected, the app sent \"HTTP/1.\"."}},
    [GW_WHY_H2C_NOT_HTTP2] = {GW_ERR_BAD_UPSTREAM_RESPONSE,
                              {502, "Bad Gateway", "The app's answer is not valid HTTP/2",
                               "$p of $S is an HTTP/2 (h2c) port, and the app on it answered something that is not valid "
                               "HTTP/2.",
                               "Check the server's logs and that it serves HTTP/2 without TLS (prior knowledge, as gRPC "
                               "servers do) on this port.",
                               0, NULL}},
    [GW_WHY_STREAM_ERRORS] = {GW_ERR_TOO_MANY_CONNECTIONS,
                              {429, "Too Many Requests", "Too many broken requests",
                               "Your network address sent this gateway too many HTTP/2 requests that broke the protocol, so it "
                               "takes no new requests from it for a moment.",
                               "Wait a few seconds and try again. Browsers and maintained HTTP/2 clients never do this: check the "
                               "client you use.",
                               1,
                               "Technical detail: streams the gateway had to reset for the client's own protocol errors "
                               "(limits.max_stream_errors_per_client)."}},
    [GW_WHY_WRONG_TOKEN_HEADER] = {GW_ERR_INVALID_TOKEN,
                                   {403, "Forbidden", "Access token not valid",
                                    "The X-Lizard-Access-Token header sent for $S does not match its access token.",
                                    "Send the sandbox's current access token: it changes when the platform rotates it.", 0, NULL}},
    [GW_WHY_WRONG_BEARER] = {GW_ERR_INVALID_TOKEN,
                             {403, "Forbidden", "Access token not valid",
                              "The Authorization: Bearer token sent for $S is no longer its access token.",
                              "Send the sandbox's current access token or a share link for this port: the token changes "
                              "when the platform rotates it.",
                              0, NULL}},
    [GW_WHY_LINK_VIEW_ONLY] = {GW_ERR_INVALID_TOKEN,
                               {403, "Forbidden", "This view-only link opens a desktop only",
                                "The link you used is view-only, and $P of $S is not a desktop (proto rfb).", "Use a full link.", 0,
                                NULL}},
    [GW_WHY_NOT_DESKTOP_PATH] = {GW_ERR_NOT_HTTP_PORT,
                                 {400, "Bad Request", "This is a desktop",
                                  "$p of $S is a VNC desktop (proto rfb): it takes only the viewer at / and its WebSocket.",
                                  "Open the preview's address itself, / on this host.", 0, NULL}},
    [GW_WHY_DESKTOP_VIEWERS] = {GW_ERR_TOO_MANY_CONNECTIONS,
                                {429, "Too Many Requests", "Too many viewers", "$S's desktop has as many viewers as it may have.",
                                 "Close a viewer, or try again later.", 0, NULL}},
    [GW_WHY_WRONG_LINK] = {GW_ERR_INVALID_TOKEN,
                           {403, "Forbidden", "This preview link is not valid",
                            "The preview link you opened for $S is not valid, or no longer is.",
                            "A link stops working when the sandbox's access token is changed. Get the current preview link "
                            "from the platform, or ask whoever shared it for a new one.",
                            0, "Technical detail: the lizard_token query parameter does not match the sandbox's access token."}},
    [GW_WHY_COOKIE_EXPIRED] = {GW_ERR_INVALID_TOKEN,
                               {403, "Forbidden", "Your access to this preview has expired",
                                "The access this browser had to $P of $S has expired.",
                                "Open the preview link again (from the platform, or from whoever shared it) to get access.", 0,
                                "Technical detail: the gateway's access cookie had expired; the gateway has cleared it."}},
    [GW_WHY_COOKIE_REVOKED] = {GW_ERR_INVALID_TOKEN,
                               {403, "Forbidden", "Your access to this preview is no longer valid",
                                "The access this browser had to $P of $S is no longer valid: the sandbox's access token was "
                                "changed after the preview was opened, or the cookie was altered.",
                                "Get the new preview link from the platform, or ask whoever shared the preview for a new one.", 0,
                                "Technical detail: the gateway's access cookie for this preview failed its signature check: it "
                                "was signed for the sandbox's previous token (or altered). The gateway has cleared it."}},
    [GW_WHY_COOKIE_NOT_VALID] = {GW_ERR_INVALID_TOKEN,
                                 {403, "Forbidden", "Access cookie not valid",
                                  "This browser sent an access cookie that is not valid for $P of $S: it was altered, or it "
                                  "belongs to another preview.",
                                  "The gateway has cleared it. Open this preview's own link (from the platform, or from whoever "
                                  "shared it) to get access.",
                                  0,
                                  "Technical detail: the gateway's access cookie failed verification (its signature, sandbox or "
                                  "port)."}},
    [GW_WHY_EMBEDDED_SAME_SITE] = {GW_ERR_MISSING_TOKEN,
                                   {401, "Unauthorized", "This preview cannot be shown inside another site",
                                    "$p of $S is private, and this page is in a frame of another site, where the browser "
                                    "blocked the preview's access cookie: the gateway issues that cookie for its own site "
                                    "only (SameSite=Lax).",
                                    "Open the preview in its own tab. Embedding previews in another site needs the gateway's "
                                    "setting auth.cookie_same_site: \"none\" (the cookie then becomes SameSite=None; "
                                    "Partitioned); ask the operator of the gateway.",
                                    0,
                                    "Technical detail: a cross-site frame (Sec-Fetch-Dest: iframe, Sec-Fetch-Site: cross-site) "
                                    "came without the gateway's cookie, which auth.cookie_same_site \"lax\" or \"strict\" "
                                    "keeps out of other sites' frames."}},
    [GW_WHY_LINK_SIGNATURE] = {GW_ERR_INVALID_TOKEN,
                               {403, "Forbidden", "This share link is not valid",
                                "The share link opened for $S is not genuine: its signature does not verify (it was altered or "
                                "cut short).",
                                "Open the link exactly as it was shared, or ask whoever shared it for a new one.", 0,
                                "Technical detail: the lzs1 token's HMAC-SHA256 does not match its payload under the key it "
                                "names."}},
    [GW_WHY_LINK_UNKNOWN_KEY] = {GW_ERR_INVALID_TOKEN,
                                 {403, "Forbidden", "This share link is no longer valid",
                                  "The share link opened for $S was signed with a key this gateway does not have: the key was "
                                  "retired, or never shared with this gateway.",
                                  "Ask whoever shared the link for a new one.", 0,
                                  "Technical detail: the key id of the lzs1 token is not in auth.link_keys_env / "
                                  "auth.link_keys_file."}},
    [GW_WHY_LINK_EXPIRED] = {GW_ERR_INVALID_TOKEN,
                             {403, "Forbidden", "This share link has expired", "The share link for $P of $S has expired.",
                              "Ask whoever shared it for a new link.", 0, NULL}},
    [GW_WHY_LINK_TOO_LONG] = {GW_ERR_INVALID_TOKEN,
                              {403, "Forbidden", "This share link is not accepted",
                               "The share link for $P of $S would stay valid longer than this gateway allows.",
                               "Ask whoever shared it for a link with a shorter lifetime.", 0,
                               "Technical detail: its expiry is further away than auth.link_max_ttl_s."}},
    [GW_WHY_LINK_REVOKED] = {GW_ERR_INVALID_TOKEN,
                             {403, "Forbidden", "This share link was revoked",
                              "The share links of $S were revoked: this one no longer opens $P.",
                              "Ask whoever shared it for a new link.", 0,
                              "Technical detail: the link was signed for another link_epoch than the sandbox's current one."}},
    [GW_WHY_LINK_OTHER_PORT] = {GW_ERR_INVALID_TOKEN,
                                {403, "Forbidden", "This share link is for another port",
                                 "The share link you used opens another port of $S, not $P: a share link opens one port only.",
                                 "Use the link shared for this port, or open the address the link itself points to.", 0, NULL}},
    [GW_WHY_LINK_OTHER_SANDBOX] = {GW_ERR_INVALID_TOKEN,
                                   {403, "Forbidden", "This share link is for another sandbox",
                                    "The share link you used belongs to another sandbox, not to $S.",
                                    "Open the address the link itself points to.", 0, NULL}},
    [GW_WHY_CONSENT_NOT_VALID] = {GW_ERR_INVALID_TOKEN,
                                  {403, "Forbidden", "Please confirm again",
                                   "The confirmation sent for $P of $S did not come from its warning page, or that page is "
                                   "too old.",
                                   "Go back, reload the preview and press Continue again.", 0,
                                   "Technical detail: the consent form's CSRF token is missing, expired, for another host, or "
                                   "the form was sent from another site."}},
};

/* An out-of-range code is a bug; it is answered as the most generic gateway failure. */
static gw_error_code_t valid_code(gw_error_code_t code)
{
    return (unsigned)code < GW_ERR_NUM_CODES ? code : GW_ERR_ROUTING_UNAVAILABLE;
}

static const error_def_t *def_of(gw_error_code_t code)
{
    return &defs[valid_code(code)];
}

const char *gw_error_code_name(gw_error_code_t code)
{
    return code_names[valid_code(code)];
}

void gw_error_note(h2o_req_t *req, gw_error_code_t code)
{
    const char *name = gw_error_code_name(code);

    gw_req_tag_add(req, CODE_LOG_MODULE, name);
    /* refused before reaching a sandbox: such a request does not refill HTTP/2's reset budget (h2o patch 0170); the two codes
     * of a sandbox that was tried do */
    if (code != GW_ERR_PORT_NOT_OPEN && code != GW_ERR_UPSTREAM_TIMEOUT && code != GW_ERR_BAD_UPSTREAM_RESPONSE)
        req->refused_early = 1;
}

int gw_error_code_of(h2o_req_t *req)
{
    const char *first = (const char *)code_names, *at = gw_req_tag_find(req, CODE_LOG_MODULE, first, first + sizeof(code_names));

    return at != NULL ? (int)((size_t)(at - first) / CODE_NAME_SIZE) : -1;
}

int gw_error_status(gw_error_code_t code)
{
    return def_of(code)->status;
}

/* A bounded string builder; once over its maximum it stays failed. */
typedef struct st_sb_t {
    char *buf;
    size_t len, cap;
    int failed;
} sb_t;

static void sb_append(sb_t *sb, const char *s, size_t len)
{
    if (sb->failed)
        return;
    if (sb->len + len > MAX_BODY_LEN) {
        sb->failed = 1;
        return;
    }
    if (sb->len + len > sb->cap) {
        size_t cap = sb->cap != 0 ? sb->cap : 1024;
        while (cap < sb->len + len)
            cap *= 2;
        sb->buf = h2o_mem_realloc(sb->buf, cap);
        sb->cap = cap;
    }
    memcpy(sb->buf + sb->len, s, len);
    sb->len += len;
}

static void sb_puts(sb_t *sb, const char *s)
{
    sb_append(sb, s, strlen(s));
}

/* Appends s escaped for HTML text and attribute values: h2o_htmlescape's
 * entities, and &#xFFFD; for what is not well-formed UTF-8 and for control
 * characters other than tab and newline (so the page always is). */
static void sb_escape_html(sb_t *sb, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len, *run = p;
    h2o_mem_pool_t pool;

    h2o_mem_init_pool(&pool);
    for (;; ++p) {
        size_t n = p < end ? gw_utf8_char_len(p, end - p) : 0;
        if (n > 1) {
            p += n - 1;
            continue;
        }
        if (n == 1 && (*p >= 0x20 || *p == '\t' || *p == '\n'))
            continue;
        /* *p ends a run of text: p == end, or a byte replaced by U+FFFD */
        h2o_iovec_t escaped = h2o_htmlescape(&pool, (const char *)run, p - run);
        sb_append(sb, escaped.base, escaped.len);
        if (p == end)
            break;
        sb_puts(sb, "&#xFFFD;");
        run = p + 1;
    }
    h2o_mem_clear_pool(&pool);
}

/* what JSON escapes with a letter, and the letter */
static const char JSON_SHORTHANDS[] = "\"\\\n\r\t", JSON_SHORTHAND_LETTERS[] = "\"\\nrt";

/* Appends s escaped for the inside of a JSON string; invalid UTF-8 becomes
 * \ufffd. Written here: h2o has no public JSON escaper (its access
 * log's is static in logconf.c), and jansson's writes \b and \f and leaves
 * <, > and & as they are, which would change the bodies of the contract. */
static void sb_escape_json(sb_t *sb, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    char tmp[8];

    for (; p < end; ++p) {
        size_t n = gw_utf8_char_len(p, end - p); /* 0: not well-formed, so escaped output always is */
        if (n == 0) {
            sb_puts(sb, "\\ufffd");
            continue;
        }
        if (n > 1) {
            sb_append(sb, (const char *)p, n);
            p += n - 1;
            continue;
        }
        const char *shorthand = *p != '\0' ? strchr(JSON_SHORTHANDS, *p) : NULL;
        if (shorthand != NULL) {
            sb_append(sb, (char[2]){'\\', JSON_SHORTHAND_LETTERS[shorthand - JSON_SHORTHANDS]}, 2);
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&' || *p == 0x7f) {
            /* <, > and & too: a JSON body must never look like markup to a sniffing client */
            snprintf(tmp, sizeof(tmp), "\\u%04x", *p);
            sb_puts(sb, tmp);
        } else {
            sb_append(sb, (const char *)p, 1);
        }
    }
}

static size_t bounded_len(const char *s)
{
    const char *nul = memchr(s, '\0', MAX_REFLECTED_LEN);
    return nul != NULL ? (size_t)(nul - s) : MAX_REFLECTED_LEN;
}

/* Expands a cause or hint template into plain (unescaped) text. */
static void expand(sb_t *sb, const char *tmpl, const char *sandbox_id, uint16_t port)
{
    const char *p;

    for (p = tmpl; *p != '\0'; ++p) {
        if (p[0] != '$' || p[1] == '\0') {
            sb_append(sb, p, 1);
            continue;
        }
        switch (*++p) {
        case 'S':
        case 's':
            if (sandbox_id != NULL && sandbox_id[0] != '\0') {
                sb_puts(sb, *p == 'S' ? "sandbox " : "Sandbox ");
                sb_append(sb, sandbox_id, bounded_len(sandbox_id));
            } else {
                sb_puts(sb, *p == 'S' ? "this sandbox" : "This sandbox");
            }
            break;
        case 'P':
        case 'p':
            if (port != 0) {
                char num[16];
                snprintf(num, sizeof(num), *p == 'P' ? "port %u" : "Port %u", (unsigned)port);
                sb_puts(sb, num);
            } else {
                sb_puts(sb, *p == 'P' ? "the requested port" : "The requested port");
            }
            break;
        default:
            sb_append(sb, p - 1, 2);
            break;
        }
    }
}

/* The human message: the cause, then the detail sentence if any. */
static void build_message(sb_t *sb, const error_def_t *def, const char *sandbox_id, uint16_t port, const char *detail)
{
    expand(sb, def->cause, sandbox_id, port);
    if (detail != NULL && detail[0] != '\0') {
        sb_puts(sb, " ");
        sb_append(sb, detail, bounded_len(detail));
    }
}

static void render_json(sb_t *out, const char *name, const char *message, size_t message_len, const char *sandbox_id, uint16_t port)
{
    sb_puts(out, "{\"error\":{\"code\":\"");
    sb_puts(out, name);
    sb_puts(out, "\",\"message\":\"");
    sb_escape_json(out, message, message_len);
    sb_puts(out, "\"");
    if (sandbox_id != NULL && sandbox_id[0] != '\0') {
        sb_puts(out, ",\"sandboxId\":\"");
        sb_escape_json(out, sandbox_id, bounded_len(sandbox_id));
        sb_puts(out, "\"");
    }
    if (port != 0) {
        char num[16];
        snprintf(num, sizeof(num), ",\"port\":%u", (unsigned)port);
        sb_puts(out, num);
    }
    sb_puts(out, "}}\n");
}

static void render_html(sb_t *out, const error_def_t *def, const char *name, const char *message, size_t message_len,
                        const char *hint, size_t hint_len, const char *tech, size_t tech_len)
{
    char status[64];

    snprintf(status, sizeof(status), "%d %s", def->status, def->reason);
    sb_puts(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 "<meta name=\"robots\" content=\"noindex\">\n<title>");
    sb_puts(out, status);
    sb_puts(out, " \xe2\x80\x93 ");
    sb_puts(out, def->title);
    sb_puts(out, "</title>\n<style>\n"
                 "body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;margin:0;padding:3rem 1.5rem;"
                 "color:#1f2328;background:#f6f8fa}\n"
                 "main{max-width:40rem;margin:0 auto;background:#fff;border:1px solid #d0d7de;border-radius:8px;"
                 "padding:2rem}\n"
                 "h1{font-size:1.4rem;margin:0 0 1rem}\np{line-height:1.5}\n"
                 ".next{background:#f6f8fa;border-left:4px solid #0969da;padding:.75rem 1rem}\n"
                 ".tech,.code{color:#656d76;font-size:.85rem}\ncode{font-family:ui-monospace,monospace}\n"
                 "</style>\n</head>\n<body>\n<main>\n<h1>");
    sb_puts(out, def->title);
    sb_puts(out, "</h1>\n<p>");
    sb_escape_html(out, message, message_len);
    sb_puts(out, "</p>\n<p class=\"next\">");
    sb_escape_html(out, hint, hint_len);
    if (tech_len != 0) {
        sb_puts(out, "</p>\n<p class=\"tech\">");
        sb_escape_html(out, tech, tech_len);
    }
    sb_puts(out, "</p>\n<p class=\"code\">");
    sb_puts(out, status);
    sb_puts(out, " &middot; error code <code>");
    sb_puts(out, name);
    sb_puts(out, "</code></p>\n</main>\n</body>\n</html>\n");
}

/* port_not_open when something did accept the connection but closed it
 * without an answer (the proxy says so in `detail`): "nothing is listening"
 * would send the user looking in the wrong place. An answer that is not
 * valid HTTP is bad_upstream_response. */
static const error_def_t port_not_open_bad_answer = {
    502,
    "Bad Gateway",
    "No answer from this port",
    "The app on $P of $S did not answer.",
    "Make sure the server on this port speaks HTTP/1.1, listens on 0.0.0.0 (not 127.0.0.1), and check its logs.",
    0,
    NULL};

/* The same over loopback, where 0.0.0.0 is no fix. */
static const error_def_t port_not_open_bad_answer_loopback = {
    502,
    "Bad Gateway",
    "No valid answer from this port",
    "The app on $P of $S did not answer with HTTP.",
    "Make sure the server on this port speaks HTTP/1.1 (listening on 0.0.0.0 or 127.0.0.1: this gateway connects over "
    "loopback), and check its logs.",
    0,
    NULL};

/* A program reads only the message: it carries what to do next, and the technical detail, too. */
static void append_program_hint(sb_t *message, const error_def_t *def, const char *sandbox_id, uint16_t port)
{
    sb_puts(message, " ");
    expand(message, def->hint, sandbox_id, port);
    if (def->tech != NULL) {
        sb_puts(message, " ");
        expand(message, def->tech, sandbox_id, port);
    }
}

static const error_def_t *def_of_why(gw_error_code_t code, gw_error_why_t why)
{
    if ((unsigned)why < GW_WHY_NUM && why != GW_WHY_DEFAULT && whys[why].code == code)
        return &whys[why].def;
    return def_of(code);
}

/* The definition whose texts render code with why (and detail). */
static const error_def_t *def_for(gw_error_code_t code, gw_error_why_t why, const char *detail)
{
    if (code == GW_ERR_PORT_NOT_OPEN && detail != NULL)
        return why == GW_WHY_LOOPBACK_UPSTREAM ? &port_not_open_bad_answer_loopback : &port_not_open_bad_answer;
    return def_of_why(code, why);
}

h2o_iovec_t gw_error_render(h2o_mem_pool_t *pool, gw_error_code_t code, int html, const char *sandbox_id, uint16_t port,
                            const char *detail)
{
    return gw_error_render_why(pool, code, GW_WHY_DEFAULT, html, sandbox_id, port, detail);
}

h2o_iovec_t gw_error_render_why(h2o_mem_pool_t *pool, gw_error_code_t code, gw_error_why_t why, int html, const char *sandbox_id,
                                uint16_t port, const char *detail)
{
    const error_def_t *def = def_for(code, why, detail);
    sb_t message = {0}, hint = {0}, tech = {0}, out = {0};
    h2o_iovec_t body = {NULL, 0};

    build_message(&message, def, sandbox_id, port, detail);
    if (html) {
        expand(&hint, def->hint, sandbox_id, port);
        if (def->tech != NULL)
            expand(&tech, def->tech, sandbox_id, port);
        render_html(&out, def, gw_error_code_name(code), message.buf, message.len, hint.buf, hint.len, tech.buf, tech.len);
    } else {
        append_program_hint(&message, def, sandbox_id, port);
        render_json(&out, gw_error_code_name(code), message.buf, message.len, sandbox_id, port);
    }
    if (message.failed || hint.failed || tech.failed || out.failed)
        goto Error;

    body = h2o_strdup(pool, out.buf, out.len);
Error:
    free(out.buf);
    free(tech.buf);
    free(hint.buf);
    free(message.buf);
    if (body.base == NULL) {
        /* a body over MAX_BODY_LEN (a template or bound gone wrong): answer with the bare code */
        char fallback[128];
        int len = snprintf(fallback, sizeof(fallback), "{\"error\":{\"code\":\"%s\"}}\n", gw_error_code_name(code));
        body = h2o_strdup(pool, fallback, (size_t)len);
    }
    return body;
}

/* The message of the JSON body, as plain text (for grpc-message). */
static void build_plain_message(sb_t *message, const error_def_t *def, const char *sandbox_id, uint16_t port, const char *detail)
{
    build_message(message, def, sandbox_id, port, detail);
    append_program_hint(message, def, sandbox_id, port);
}

void gw_error_send(h2o_req_t *req, gw_error_code_t code, const char *sandbox_id, uint16_t port, const char *detail)
{
    gw_error_send_why(req, code, GW_WHY_DEFAULT, sandbox_id, port, detail);
}

void gw_error_send_why(h2o_req_t *req, gw_error_code_t code, gw_error_why_t why, const char *sandbox_id, uint16_t port,
                       const char *detail)
{
    const error_def_t *def = def_of(code);
    h2o_iovec_t body, content_type;
    ssize_t i;
    int html;

    if (gw_error_is_grpc(req)) {
        sb_t message = {0};
        build_plain_message(&message, def_for(code, why, detail), sandbox_id, port, detail);
        gw_error_note(req, code);
        gw_error_send_grpc(req, def->status, message.buf != NULL ? message.buf : "", message.len);
        free(message.buf);
        return;
    }
    html = gw_error_is_navigation(req);
    body = gw_error_render_why(&req->pool, code, why, html, sandbox_id, port, detail);

    gw_error_note(req, code);
    req->res.status = def->status;
    req->res.reason = def->reason;
    req->res.content_length = body.len;
    /* headers already there (e.g. a Set-Cookie clearing a bad cookie) stay */
    content_type = html ? h2o_iovec_init(H2O_STRLIT("text/html; charset=utf-8")) : h2o_iovec_init(H2O_STRLIT("application/json"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type.base, content_type.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"), 0, NULL, H2O_STRLIT("nosniff"));
    /* RFC 9110 11.6.1: a 401 names the scheme it wants */
    if (def->status == 401)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL, H2O_STRLIT("Lizard-Token"));
    if (def->retry_after != 0) {
        char *v = gw_pool_alloc(&req->pool, 16);
        int len = snprintf(v, 16, "%d", def->retry_after);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, v, (size_t)len);
    }
    if ((i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1)) != -1) {
        h2o_iovec_t origin = req->headers.entries[i].value;
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, origin.base, origin.len);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Origin"));
    }
    h2o_send_inline(req, body.base, body.len);
}
