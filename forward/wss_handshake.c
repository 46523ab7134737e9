/*
 * The client side of the WebSocket opening handshake (RFC 6455, 4.1) for
 * tcp-forward. The response head is parsed by picohttpparser (libh2o's),
 * the gateway's error body by jansson; both bounded.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <picohttpparser.h>
#include "forward/wss_handshake.h"

/* Bound of the response head, and of an error body the gateway sends (its longest is about 2 KiB). */
#define MAX_HEAD 16384
#define MAX_ERROR_BODY 16384
#define MAX_HEADERS 64
#define REQUEST_MAX 8192

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* The request; the token is in it, so the caller wipes buf after use. -1 when it does not fit. */
static int build_request(const gw_forward_conf_t *conf, const char *key, char *buf, size_t size)
{
    char authority[GW_WSS_HOST_MAX + 16];
    int n;

    if (gw_wss_url_authority(&conf->url, authority, sizeof(authority)) < 0)
        return -1;
    n = snprintf(buf, size,
                 "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " GW_WSS_SUBPROTOCOL
                 "\r\nUser-Agent: lizard-gateway-tcp-forward/" GW_VERSION "\r\n%s%s%s\r\n",
                 conf->url.path, authority, key, conf->token != NULL ? "X-Lizard-Access-Token: " : "",
                 conf->token != NULL ? conf->token : "", conf->token != NULL ? "\r\n" : "");
    return n < 0 || (size_t)n >= size ? -1 : n;
}

static int write_all(SSL *ssl, int fd, const char *buf, size_t len, uint64_t deadline, char *why, size_t whylen)
{
    size_t done = 0;

    while (done != len) {
        int ret = SSL_write(ssl, buf + done, (int)(len - done));
        if (ret > 0)
            done += ret;
        else if (gw_wss_ssl_wait(ssl, fd, ret, deadline, why, whylen) != 0)
            return -1;
    }
    return 0;
}

/* Reads more into buf[*len..cap). 0, or -1 at the end of the stream, an error or the deadline. */
static int read_more(SSL *ssl, int fd, char *buf, size_t *len, size_t cap, uint64_t deadline, char *why, size_t whylen)
{
    for (;;) {
        int ret = SSL_read(ssl, buf + *len, (int)(cap - *len));
        if (ret > 0) {
            *len += ret;
            return 0;
        }
        if (gw_wss_ssl_wait(ssl, fd, ret, deadline, why, whylen) != 0)
            return -1;
    }
}

static const struct phr_header *find_header(const struct phr_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i != n; ++i)
        if (h[i].name_len == strlen(name) && strncasecmp(h[i].name, name, h[i].name_len) == 0)
            return h + i;
    return NULL;
}

static int header_is(const struct phr_header *h, const char *value)
{
    return h != NULL && h->value_len == strlen(value) && strncasecmp(h->value, value, h->value_len) == 0;
}

/* The 101 is ours: the accept value proves a WebSocket server read our key, the protocol a lizard tunnel. */
static int check_upgrade(const char *key, const struct phr_header *h, size_t n, char *why, size_t whylen)
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    char joined[96], expect[32];
    const struct phr_header *accept = find_header(h, n, "sec-websocket-accept");

    snprintf(joined, sizeof(joined), "%s%s", key, WS_GUID);
    SHA1((const unsigned char *)joined, strlen(joined), digest);
    EVP_EncodeBlock((unsigned char *)expect, digest, sizeof(digest));
    if (!header_is(find_header(h, n, "upgrade"), "websocket") || !header_is(accept, expect)) {
        snprintf(why, whylen, "the gateway answered 101 without a valid WebSocket upgrade (a proxy in the way?)");
        return -1;
    }
    if (!header_is(find_header(h, n, "sec-websocket-protocol"), GW_WSS_SUBPROTOCOL)) {
        snprintf(why, whylen,
                 "the server accepted a WebSocket but not the " GW_WSS_SUBPROTOCOL
                 " tunnel: is this port exposed as a tcp port (proto:<port> = tcp)?");
        return -1;
    }
    return 0;
}

/* A refusal's body: Content-Length bytes of it (bounded), or what came before the end of the stream. */
static size_t read_body(SSL *ssl, int fd, char *buf, size_t len, size_t head_len, const struct phr_header *h, size_t n,
                        uint64_t deadline)
{
    const struct phr_header *cl = find_header(h, n, "content-length");
    size_t want = MAX_ERROR_BODY;
    char junk[64];

    if (cl != NULL) {
        want = 0;
        for (size_t i = 0; i != cl->value_len && cl->value[i] >= '0' && cl->value[i] <= '9' && want <= MAX_ERROR_BODY; ++i)
            want = want * 10 + (cl->value[i] - '0');
    }
    if (want > MAX_ERROR_BODY)
        want = MAX_ERROR_BODY;
    while (len - head_len < want && len < MAX_HEAD + MAX_ERROR_BODY &&
           read_more(ssl, fd, buf, &len, MAX_HEAD + MAX_ERROR_BODY, deadline, junk, sizeof(junk)) == 0)
        ;
    return len - head_len < want ? len - head_len : want;
}

int gw_wss_handshake(SSL *ssl, int fd, const gw_forward_conf_t *conf, uint64_t deadline, char *rest, size_t rest_cap,
                     size_t *rest_len, char *why, size_t whylen)
{
    unsigned char raw_key[16];
    char key[32], request[REQUEST_MAX], buf[MAX_HEAD + MAX_ERROR_BODY], detail[200];
    struct phr_header headers[MAX_HEADERS];
    size_t len = 0, nheaders, msg_len;
    const char *msg;
    int n, minor, status, head_len;

    if (RAND_bytes(raw_key, sizeof(raw_key)) != 1)
        return snprintf(why, whylen, "no random bytes for the WebSocket key"), -1;
    EVP_EncodeBlock((unsigned char *)key, raw_key, sizeof(raw_key));
    if ((n = build_request(conf, key, request, sizeof(request))) < 0)
        return snprintf(why, whylen, "the upgrade request is larger than %d bytes (URL or token too long)", REQUEST_MAX), -1;
    int wrote = write_all(ssl, fd, request, n, deadline, detail, sizeof(detail));
    OPENSSL_cleanse(request, sizeof(request));
    if (wrote != 0)
        return snprintf(why, whylen, "sending the upgrade to %s failed: %s", conf->url.host, detail), -1;
    for (;;) {
        nheaders = MAX_HEADERS;
        head_len = phr_parse_response(buf, len, &minor, &status, &msg, &msg_len, headers, &nheaders, 0);
        if (head_len > 0)
            break;
        if (head_len == -1 || len == MAX_HEAD)
            return snprintf(why, whylen, "the gateway's answer to the upgrade is not a valid HTTP/1.1 response head"), -1;
        if (read_more(ssl, fd, buf, &len, MAX_HEAD, deadline, detail, sizeof(detail)) != 0)
            return snprintf(why, whylen, "no answer from %s to the upgrade: %s", conf->url.host, detail), -1;
    }
    if (status == 101) {
        if (check_upgrade(key, headers, nheaders, why, whylen) != 0)
            return -1;
        if (len - head_len > rest_cap)
            return snprintf(why, whylen, "the gateway sent more than %zu bytes right after the upgrade", rest_cap), -1;
        memcpy(rest, buf + head_len, len - head_len);
        *rest_len = len - head_len;
        return 0;
    }
    size_t body_len = read_body(ssl, fd, buf, len, head_len, headers, nheaders, deadline);
    gw_wss_explain_refusal(conf, status, buf + head_len, body_len, why, whylen);
    return status;
}
