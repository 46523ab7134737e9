/*
 * Two blocking copy threads between stdin/stdout and a socketpair: EOF on
 * stdin becomes a half-close toward the tunnel (shutdown SHUT_WR), EOF from
 * the tunnel closes stdout. Buffers are one fixed chunk per direction.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include "forward/stdio_pump.h"

#define CHUNK 65536

/* Writes all of buf to fd; 0, or -1. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len != 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n, len -= (size_t)n;
    }
    return 0;
}

/* Copies from -> to until EOF or an error. */
static void copy(int from, int to)
{
    char buf[CHUNK];
    ssize_t n;

    for (;;) {
        n = read(from, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || write_all(to, buf, (size_t)n) != 0)
            return;
    }
}

static void *stdin_to_tunnel(void *arg)
{
    gw_stdio_pump_t *p = arg;

    copy(0, p->fd);
    shutdown(p->fd, SHUT_WR);
    return NULL;
}

static void *tunnel_to_stdout(void *arg)
{
    gw_stdio_pump_t *p = arg;

    copy(p->fd, 1);
    close(1);
    return NULL;
}

int gw_stdio_pump_start(gw_stdio_pump_t *p, int *tunnel_fd)
{
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    p->fd = sv[1];
    *tunnel_fd = sv[0];
    if (pthread_create(&p->out, NULL, tunnel_to_stdout, p) != 0)
        goto Fail;
    if (pthread_create(&p->in, NULL, stdin_to_tunnel, p) != 0) {
        shutdown(p->fd, SHUT_RDWR);
        pthread_join(p->out, NULL);
        goto Fail;
    }
    pthread_detach(p->in); /* it may wait on stdin forever; the process ends without it */
    return 0;
Fail:
    close(sv[0]);
    close(sv[1]);
    errno = EAGAIN;
    return -1;
}

void gw_stdio_pump_finish(gw_stdio_pump_t *p)
{
    pthread_join(p->out, NULL);
}
