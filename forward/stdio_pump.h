/*
 * tcp-forward --stdio: stdin and stdout as the local side of one tunnel
 * (ssh's ProxyCommand), through a socketpair whose other end the tunnel
 * relays as it does an accepted connection.
 */
#ifndef GW_FORWARD_STDIO_PUMP_H
#define GW_FORWARD_STDIO_PUMP_H

#include <pthread.h>

typedef struct st_gw_stdio_pump_t {
    int fd; /* the pump's end of the socketpair */
    pthread_t in, out;
} gw_stdio_pump_t;

/* Makes the socketpair and starts copying stdin into it and its output to
 * stdout; *tunnel_fd is the end for the tunnel. 0, or -1 (errno set). */
int gw_stdio_pump_start(gw_stdio_pump_t *p, int *tunnel_fd);

/* After the tunnel closed its end: waits until what it sent is on stdout. */
void gw_stdio_pump_finish(gw_stdio_pump_t *p);

#endif
