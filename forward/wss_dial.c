/*
 * Dialing the gateway: the system resolver and trust store by default, as
 * curl does; --connect and --ca for tests and private CAs. Every step has a
 * deadline, every failure one line that names the host and what to do.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include "common/errfmt.h"
#include "forward/wss_dial.h"

/* How long one address may take to accept the TCP connection before the next is tried. */
#define CONNECT_ONE_MS 10000

uint64_t gw_wss_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ms_left(uint64_t deadline)
{
    uint64_t now = gw_wss_now_ms();

    return now >= deadline ? 0 : deadline - now > 600000 ? 600000 : (int)(deadline - now);
}

SSL_CTX *gw_wss_ssl_ctx_new(const char *ca_file, char **err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (ctx == NULL) {
        gw_errorf(err, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1 : SSL_CTX_set_default_verify_paths(ctx) != 1) {
        char ossl[256];
        ERR_error_string_n(ERR_get_error(), ossl, sizeof(ossl));
        if (ca_file != NULL)
            gw_errorf(err, "--ca %s: cannot read PEM certificates from it (%s)", ca_file, ossl);
        else
            gw_errorf(err, "cannot load the system's trusted certificates (%s)", ossl);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* A non-blocking TCP connection to addr by the deadline; -1 with errno. */
static int connect_one(const struct sockaddr *addr, socklen_t len, uint64_t deadline)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, soerr = 0;
    socklen_t soerr_len = sizeof(soerr);
    struct pollfd p;

    if (fd < 0)
        return -1;
    if (connect(fd, addr, len) != 0) {
        if (errno != EINPROGRESS)
            goto Error;
        p = (struct pollfd){.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, ms_left(deadline)) <= 0) {
            errno = ETIMEDOUT;
            goto Error;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &soerr_len) != 0 || soerr != 0) {
            errno = soerr != 0 ? soerr : errno;
            goto Error;
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
Error : {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
    gw_netaddr_t a = {.len = len};

    memcpy(&a.ss, sa, len);
    if (gw_netaddr_format(&a, buf, size) < 0)
        snprintf(buf, size, "?");
}

/* The TCP connection: --connect's address, or each address the resolver
 * gives for the URL's host in turn. */
static int connect_gateway(const gw_forward_conf_t *conf, uint64_t deadline, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV}, *res, *ai;
    char port[8], addr[64] = "";
    int fd = -1, rc, saved = 0;

    if (conf->has_connect) {
        if ((fd = connect_one((const struct sockaddr *)&conf->connect.ss, conf->connect.len, deadline)) < 0) {
            gw_netaddr_format(&conf->connect, addr, sizeof(addr));
            snprintf(why, whylen, "cannot connect to the gateway at %s (--connect): %s", addr, strerror(errno));
        }
        return fd;
    }
    snprintf(port, sizeof(port), "%u", (unsigned)conf->url.port);
    if ((rc = getaddrinfo(conf->url.host, port, &hints, &res)) != 0) {
        snprintf(why, whylen, "cannot resolve %s: %s", conf->url.host, rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai != NULL && fd < 0 && ms_left(deadline) > 0; ai = ai->ai_next) {
        uint64_t one_deadline = gw_wss_now_ms() + CONNECT_ONE_MS;
        if ((fd = connect_one(ai->ai_addr, ai->ai_addrlen, one_deadline < deadline ? one_deadline : deadline)) < 0) {
            saved = errno;
            format_addr(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr));
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "cannot connect to the gateway %s (%s): %s", conf->url.host, addr,
                 strerror(saved != 0 ? saved : ETIMEDOUT));
    return fd;
}

int gw_wss_ssl_wait(SSL *ssl, int fd, int ret, uint64_t deadline, char *why, size_t whylen)
{
    struct pollfd p = {.fd = fd};
    int e = SSL_get_error(ssl, ret);

    if (e == SSL_ERROR_WANT_READ)
        p.events = POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE)
        p.events = POLLOUT;
    else {
        if (why != NULL) {
            unsigned long oe = ERR_peek_last_error();
            char ossl[200] = "";
            if (oe != 0)
                ERR_error_string_n(oe, ossl, sizeof(ossl));
            snprintf(why, whylen, "%s",
                     e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && oe == 0 && errno == 0)
                         ? "the gateway closed the connection"
                     : oe != 0 ? ossl
                               : strerror(errno));
        }
        return -1;
    }
    if (poll(&p, 1, ms_left(deadline)) <= 0) {
        if (why != NULL)
            snprintf(why, whylen, "timed out");
        return -1;
    }
    return 0;
}

/* The handshake failed: a verification failure says what was wrong with the certificate. */
static void explain_tls_failure(SSL *ssl, const gw_forward_conf_t *conf, const char *detail, char *why, size_t whylen)
{
    long v = SSL_get_verify_result(ssl);

    if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
        snprintf(why, whylen, "TLS: the gateway's certificate is not valid for %s", conf->url.host);
    else if (v != X509_V_OK)
        snprintf(why, whylen, "TLS: the certificate of %s is not trusted: %s%s", conf->url.host, X509_verify_cert_error_string(v),
                 v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY || v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                         v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
                     ? " (a private CA? pass --ca FILE)"
                     : "");
    else
        snprintf(why, whylen, "TLS handshake with %s failed: %s", conf->url.host, detail);
}

SSL *gw_wss_dial(const gw_forward_conf_t *conf, uint64_t deadline, int *fd, char *why, size_t whylen)
{
    char detail[256];
    SSL *ssl;
    int ret;

    if ((*fd = connect_gateway(conf, deadline, why, whylen)) < 0)
        return NULL;
    if ((ssl = SSL_new(conf->ssl_ctx)) == NULL || SSL_set_fd(ssl, *fd) != 1) {
        snprintf(why, whylen, "cannot set up TLS");
        goto Error;
    }
    /* verify the name the URL gives, also when --connect dials elsewhere */
    if (conf->url.host_is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), conf->url.host);
    } else {
        SSL_set_tlsext_host_name(ssl, conf->url.host);
        SSL_set1_host(ssl, conf->url.host);
    }
    ERR_clear_error();
    while ((ret = SSL_connect(ssl)) != 1) {
        if (gw_wss_ssl_wait(ssl, *fd, ret, deadline, detail, sizeof(detail)) != 0) {
            explain_tls_failure(ssl, conf, detail, why, whylen);
            goto Error;
        }
    }
    return ssl;
Error:
    SSL_free(ssl);
    close(*fd);
    *fd = -1;
    return NULL;
}
