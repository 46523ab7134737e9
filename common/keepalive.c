/*
 * SO_KEEPALIVE with Linux's per-socket TCP_KEEPIDLE, TCP_KEEPINTVL and
 * TCP_KEEPCNT (common/keepalive.h).
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "common/keepalive.h"

int gw_tcp_keepalive_set(int fd)
{
    int on = 1, idle = GW_TCP_KEEPALIVE_IDLE_S, interval = GW_TCP_KEEPALIVE_INTERVAL_S, count = GW_TCP_KEEPALIVE_COUNT;

    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count)) != 0)
        return -1;
    return 0;
}
