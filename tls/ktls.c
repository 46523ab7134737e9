/*
 * The kTLS transmit probe (ktls.h): one record through the kernel's TLS
 * layer between two loopback sockets. The key is a fixed test key: the
 * record is never read as data, only its framing is checked.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include "tls/ktls.h"

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

/* a TLS 1.3 record of 5 bytes: header, the bytes, their content type, the AES-GCM tag */
#define PROBE_PAYLOAD "probe"
#define PROBE_RECORD_LEN (5 + sizeof(PROBE_PAYLOAD) - 1 + 1 + 16)

static int fail(char *why, size_t size, const char *step, int rc)
{
    snprintf(why, size, "%s: %s", step, strerror(errno));
    return rc;
}

/* Reads exactly len bytes (the receive timeout bounds each read). */
static int read_full(int fd, unsigned char *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;

    while (got != len) {
        if ((n = recv(fd, buf + got, len - got, 0)) <= 0) {
            if (n == -1 && errno == EINTR)
                continue;
            if (n == 0)
                errno = ECONNRESET;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

static int probe(int listener, int *client, int *server, char *why, size_t size)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t slen = sizeof(sin);
    struct timeval timeout = {.tv_sec = 1};
    struct tls12_crypto_info_aes_gcm_128 info = {.info = {.version = TLS_1_3_VERSION, .cipher_type = TLS_CIPHER_AES_GCM_128}};
    unsigned char record[PROBE_RECORD_LEN];

    if (bind(listener, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&sin, &slen) != 0)
        return fail(why, size, "loopback listener", -1);
    if ((*client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
        connect(*client, (struct sockaddr *)&sin, sizeof(sin)) != 0)
        return fail(why, size, "loopback connect", -1);
    if ((*server = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) == -1 ||
        setsockopt(*client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0)
        return fail(why, size, "loopback accept", -1);
    /* the sending end is the accepted one, as for a client connection */
    if (setsockopt(*server, SOL_TCP, TCP_ULP, "tls", sizeof("tls") - 1) != 0)
        return fail(why, size, "TCP_ULP tls", 0);
    memset(info.key, 0x4b, sizeof(info.key));
    if (setsockopt(*server, SOL_TLS, TLS_TX, &info, sizeof(info)) != 0)
        return fail(why, size, "TLS_TX TLS 1.3 AES-128-GCM", 0);
    if (send(*server, PROBE_PAYLOAD, sizeof(PROBE_PAYLOAD) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(PROBE_PAYLOAD) - 1))
        return fail(why, size, "send through kTLS", 0);
    if (read_full(*client, record, sizeof(record)) != 0)
        return fail(why, size, "read the record", 0);
    if (!(record[0] == 23 && record[1] == 3 && record[2] == 3 && ((size_t)record[3] << 8 | record[4]) == PROBE_RECORD_LEN - 5)) {
        snprintf(why, size, "the kernel's record is not a TLS 1.3 application-data record of %zu bytes", PROBE_RECORD_LEN);
        return 0;
    }
    snprintf(why, size, "a TLS 1.3 AES-128-GCM record sent by the kernel");
    return 1;
}

static pthread_once_t checked_once = PTHREAD_ONCE_INIT;
static int checked; /* written once under checked_once */

static void check(void)
{
    char why[160];

    checked = gw_ktls_probe(why, sizeof(why)) == 1;
    fprintf(stderr, "lizard-gateway: kTLS transmit %s (%s)\n", checked ? "available" : "not available", why);
}

int gw_ktls_checked(void)
{
    pthread_once(&checked_once, check);
    return checked;
}

int gw_ktls_probe(char *why, size_t size)
{
    int listener, client = -1, server = -1, rc;

    if ((listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
        return fail(why, size, "loopback socket", -1);
    rc = probe(listener, &client, &server, why, size);
    if (server != -1)
        close(server);
    if (client != -1)
        close(client);
    close(listener);
    return rc;
}
