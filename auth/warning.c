/*
 * The public-port warning page: the language table, the decision of which
 * requests see it, the HTML (works without JavaScript and scripts none), and
 * the bindings of its CSRF token and consent cookie.
 */
#include <string.h>
#include <openssl/rand.h>
#include <h2o/string_.h>
#include "auth/token.h"
#include "auth/warning.h"

/* Every sentence of the page, one entry per language; the first is the
 * default. A translation is one more entry here and nothing else. */
static const gw_warning_strings_t languages[] = {
    {"en", "Sandbox preview: check before you continue", "You are about to open a sandbox preview",
     "$H is served by code running in a sandbox, not by the platform. Anyone can run code in a sandbox, and this page may not "
     "be what it claims to be.",
     "Do not enter passwords, payment details or other personal information here unless you know who runs this sandbox.",
     "Continue only if you expected this preview, or if you trust whoever sent you the link.", "Continue to the preview",
     "If you did not expect this page, close this tab."},
    {"de", "Sandbox-Vorschau: bitte prüfen, bevor Sie fortfahren", "Sie öffnen gleich eine Sandbox-Vorschau",
     "$H wird von Code ausgeliefert, der in einer Sandbox läuft, nicht von der Plattform. Jeder kann Code in einer Sandbox "
     "ausführen; diese Seite ist vielleicht nicht das, was sie zu sein vorgibt.",
     "Geben Sie hier keine Passwörter, Zahlungsdaten oder andere persönliche Daten ein, wenn Sie nicht wissen, wer diese "
     "Sandbox betreibt.",
     "Fahren Sie nur fort, wenn Sie diese Vorschau erwartet haben oder der Person vertrauen, die Ihnen den Link geschickt hat.",
     "Weiter zur Vorschau", "Wenn Sie diese Seite nicht erwartet haben, schließen Sie diesen Tab."},
};

#define NUM_LANGUAGES (sizeof(languages) / sizeof(languages[0]))

static int is_ows(int c)
{
    return c == ' ' || c == '\t';
}

/* 1 when the parameters of a language range say q=0 (not acceptable). */
static int is_q_zero(const char *params, const char *end)
{
    const char *p;

    while ((p = memchr(params, ';', end - params)) != NULL) {
        for (++p; p < end && is_ows((unsigned char)*p); ++p)
            ;
        if (end - p >= 3 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            for (p += 2; p < end && (*p == '0' || *p == '.'); ++p)
                ;
            return p == end || is_ows((unsigned char)*p) || *p == ';';
        }
        params = p;
    }
    return 0;
}

const gw_warning_strings_t *gw_warning_strings(h2o_iovec_t accept_language)
{
    const char *p = accept_language.base, *end = p + accept_language.len;
    size_t i;

    /* browsers list languages in the user's order with falling q values: the
     * first one the page has (and not refused with q=0) wins */
    while (p != NULL && p < end) {
        const char *comma = memchr(p, ',', end - p), *range_end = comma != NULL ? comma : end, *tag, *tag_end;
        for (tag = p; tag < range_end && is_ows((unsigned char)*tag); ++tag)
            ;
        for (tag_end = tag; tag_end < range_end && *tag_end != '-' && *tag_end != ';' && !is_ows((unsigned char)*tag_end);
             ++tag_end)
            ;
        if (!is_q_zero(tag_end, range_end))
            for (i = 0; i != NUM_LANGUAGES; ++i)
                if (h2o_lcstris(tag, tag_end - tag, languages[i].lang, strlen(languages[i].lang)))
                    return &languages[i];
        p = comma != NULL ? comma + 1 : NULL;
    }
    return &languages[0];
}

static int value_is(h2o_iovec_t v, const char *lit)
{
    return h2o_lcstris(v.base, v.len, lit, strlen(lit));
}

int gw_warning_applies(const gw_warning_request_t *r)
{
    int get_or_head =
        h2o_memis(r->method.base, r->method.len, H2O_STRLIT("GET")) || h2o_memis(r->method.base, r->method.len, H2O_STRLIT("HEAD"));

    if (r->is_upgrade)
        return 0;
    /* any method: the page cannot be skipped by choosing one; frames, fetch() and the rest name another destination */
    if (r->sec_fetch_dest.base != NULL)
        return value_is(r->sec_fetch_dest, "document");
    /* a browser without Fetch Metadata: a form of another site still says so in Origin */
    return r->prefers_html && (get_or_head || r->other_origin);
}

static int is_base64url(int c)
{
    return ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '_';
}

int gw_warning_nonce_ok(h2o_iovec_t value)
{
    size_t i;

    if (value.base == NULL || value.len != GW_WARNING_NONCE_LEN)
        return 0;
    for (i = 0; i != value.len; ++i)
        if (!is_base64url((unsigned char)value.base[i]))
            return 0;
    return 1;
}

int gw_warning_nonce_new(char out[GW_WARNING_NONCE_LEN + 1])
{
    unsigned char bytes[16];

    if (RAND_bytes(bytes, sizeof(bytes)) != 1)
        return -1;
    h2o_base64_encode(out, bytes, sizeof(bytes), 1);
    return 0;
}

/* s with every "$H" replaced by the escaped host in <strong>. */
static h2o_iovec_t expand(h2o_mem_pool_t *pool, const char *s, h2o_iovec_t host_html)
{
    const char *at = strstr(s, "$H");

    if (at == NULL)
        return h2o_iovec_init(s, strlen(s));
    return h2o_concat(pool, h2o_iovec_init(s, at - s), h2o_iovec_init(H2O_STRLIT("<strong class=\"host\">")), host_html,
                      h2o_iovec_init(H2O_STRLIT("</strong>")), expand(pool, at + 2, host_html));
}

#define LIT(s) h2o_iovec_init(H2O_STRLIT(s))
#define STR(s) h2o_iovec_init((s), strlen(s))

h2o_iovec_t gw_warning_render(h2o_mem_pool_t *pool, const gw_warning_strings_t *s, h2o_iovec_t host, h2o_iovec_t csrf,
                              h2o_iovec_t return_path)
{
    h2o_iovec_t host_html = h2o_htmlescape(pool, host.base, host.len);

    /* no script, no external resource: the page works in any browser and
     * under the strict Content-Security-Policy it is sent with */
    h2o_iovec_t parts[] = {
        LIT("<!DOCTYPE html>\n<html lang=\""),
        STR(s->lang),
        LIT("\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta name=\"robots\" content=\"noindex\">\n<title>"),
        STR(s->title),
        LIT("</title>\n<style>\n"
            "body{margin:0;font:1rem/1.5 system-ui,sans-serif;color:#1b1b1b;background:#f3f3f3}\n"
            "main{max-width:38rem;margin:3rem auto;padding:2rem;background:#fff;border:1px solid #bbb;border-radius:8px}\n"
            "h1{font-size:1.5rem;margin-top:0}\n"
            ".host{font-family:ui-monospace,monospace;word-break:break-all}\n"
            "button{font:inherit;padding:.6rem 1.2rem;color:#fff;background:#0b57d0;border:2px solid #0b57d0;"
            "border-radius:6px;cursor:pointer}\n"
            "button:focus-visible{outline:3px solid #1b1b1b;outline-offset:2px}\n"
            "@media (prefers-color-scheme:dark){body{color:#eee;background:#121212}main{background:#1e1e1e;border-color:#555}"
            "button:focus-visible{outline-color:#eee}}\n"
            "</style>\n</head>\n<body>\n<main>\n<h1>"),
        STR(s->heading),
        LIT("</h1>\n<p>"),
        expand(pool, s->served_by, host_html),
        LIT("</p>\n<p><strong>"),
        STR(s->passwords),
        LIT("</strong></p>\n<p>"),
        STR(s->trust),
        LIT("</p>\n<form method=\"post\" action=\"" GW_WARNING_CONSENT_PATH "\">\n<input type=\"hidden\" name=\"csrf\" value=\""),
        h2o_htmlescape(pool, csrf.base, csrf.len),
        LIT("\">\n<input type=\"hidden\" name=\"return\" value=\""),
        h2o_htmlescape(pool, return_path.base, return_path.len),
        LIT("\">\n<button type=\"submit\">"),
        STR(s->continue_label),
        LIT("</button>\n</form>\n<p>"),
        STR(s->leave),
        LIT("</p>\n</main>\n</body>\n</html>\n")};

    return h2o_concat_list(pool, parts, sizeof(parts) / sizeof(parts[0]));
}

#undef LIT
#undef STR

void gw_warning_binding(gw_warning_binding_kind_t kind, h2o_iovec_t host, h2o_iovec_t nonce, char out[GW_WARNING_BINDING_SIZE])
{
    /* host names are at most 253 bytes: nothing real is cut; then "\n" and the nonce */
    char input[256 + 1 + GW_WARNING_NONCE_LEN], digest[65];
    const char *prefix = kind == GW_WARNING_CSRF ? "csrf:" : "consent:";
    size_t len = host.len < 256 ? host.len : 256, i;

    for (i = 0; i != len; ++i)
        input[i] = h2o_tolower(host.base[i]);
    /* both bind the browser's nonce: a consent cookie, like a token, is worth nothing in another browser. A nonce is
     * checked with gw_warning_nonce_ok before it gets here; a longer one is cut, never overflows */
    size_t n = nonce.len < GW_WARNING_NONCE_LEN ? nonce.len : GW_WARNING_NONCE_LEN;
    input[len++] = '\n';
    h2o_memcpy(input + len, nonce.base, n);
    len += n;
    gw_token_sha256_hex(input, len, digest);
    memcpy(out, prefix, strlen(prefix));
    memcpy(out + strlen(prefix), digest, sizeof(digest));
}

int gw_warning_return_path_ok(h2o_iovec_t path)
{
    size_t i;

    if (path.len == 0 || path.len > GW_WARNING_MAX_RETURN_PATH || path.base[0] != '/')
        return 0;
    /* "//host" and "/\host" are read as another host by browsers */
    if (path.len > 1 && (path.base[1] == '/' || path.base[1] == '\\'))
        return 0;
    for (i = 0; i != path.len; ++i) {
        unsigned char c = (unsigned char)path.base[i];
        if (c <= 0x20 || c >= 0x7f)
            return 0;
    }
    return 1;
}
