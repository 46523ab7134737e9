/*
 * wss:// URLs for tcp-forward: strict, because a URL that is half
 * understood would dial one host and present credentials for another.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include "common/netaddr.h"
#include "forward/wss_url.h"

/* Letters, digits, '-' and '.', as host names are spelled in preview URLs. */
static int is_dns_name(const char *s, size_t len)
{
    if (len == 0 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i != len; ++i) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* The authority "host[:port]" of s[0..len) into *out. */
static int parse_authority(const char *s, size_t len, gw_wss_url_t *out, const char **err)
{
    const char *host = s, *port = NULL, *end = s + len;
    size_t host_len;

    if (memchr(s, '@', len) != NULL)
        return *err = "a user name or password in the URL is not supported: pass the token with --token-env", -1;
    if (len != 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return *err = "an IPv6 address in the URL lacks its closing ']'", -1;
        host = s + 1;
        host_len = close - host;
        if (close + 1 != end) {
            if (close[1] != ':')
                return *err = "unexpected characters after the IPv6 address in the URL", -1;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        host_len = (colon != NULL ? colon : end) - s;
        if (colon != NULL)
            port = colon + 1;
    }
    if (host_len == 0)
        return *err = "the URL has no host", -1;
    if (host_len > GW_WSS_HOST_MAX)
        return *err = "the URL's host is longer than 253 characters", -1;
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = 443;
    if (port != NULL && gw_port_parse(port, end - port, &out->port) != 0)
        return *err = "the URL's port is not a number from 1 to 65535", -1;
    unsigned char ip[16];
    out->host_is_ip = inet_pton(AF_INET, out->host, ip) == 1 || inet_pton(AF_INET6, out->host, ip) == 1;
    if (s[0] == '[' && !out->host_is_ip)
        return *err = "the URL's bracketed host is not an IPv6 address", -1;
    if (!out->host_is_ip && !is_dns_name(out->host, host_len))
        return *err = "the URL's host is not a valid host name", -1;
    return 0;
}

int gw_wss_url_parse(const char *s, gw_wss_url_t *out, const char **err)
{
    static const char scheme[] = "wss://";
    const char *auth, *path;
    size_t path_len;

    memset(out, 0, sizeof(*out));
    if (strncmp(s, "ws://", 5) == 0)
        return *err = "ws:// is refused: the token would cross the network in clear; use wss://", -1;
    if (strncmp(s, scheme, sizeof(scheme) - 1) != 0)
        return *err = "the URL must start with wss:// (wss://<port>-<sandbox>.<domain>/.lizard/tcp)", -1;
    auth = s + sizeof(scheme) - 1;
    path = auth + strcspn(auth, "/?#");
    if (parse_authority(auth, path - auth, out, err) != 0)
        return -1;
    if (strchr(path, '#') != NULL)
        return *err = "a #fragment in the URL is not supported", -1;
    for (const char *p = path; *p != '\0'; ++p)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return *err = "the URL's path has a space or a character outside printable ASCII", -1;
    const char *query = strchr(path, '?');
    if (query != NULL && (strstr(query, "?lizard_token=") != NULL || strstr(query, "&lizard_token=") != NULL))
        return *err = "the token does not go in the URL (others can read a command line): put it in an environment variable "
                      "and pass --token-env VARIABLE",
               -1;
    path_len = strlen(path);
    if (path_len + 1 > GW_WSS_PATH_MAX)
        return *err = "the URL's path is longer than 2047 characters", -1;
    if (path[0] != '/')
        out->path[0] = '/';
    memcpy(out->path + (path[0] != '/'), path, path_len + 1);
    return 0;
}

int gw_wss_url_authority(const gw_wss_url_t *url, char *buf, size_t bufsize)
{
    int v6 = strchr(url->host, ':') != NULL, n;

    if (url->port == 443)
        n = snprintf(buf, bufsize, v6 ? "[%s]" : "%s", url->host);
    else
        n = snprintf(buf, bufsize, v6 ? "[%s]:%u" : "%s:%u", url->host, (unsigned)url->port);
    return n < 0 || (size_t)n >= bufsize ? -1 : n;
}
