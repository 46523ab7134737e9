/*
 * `lizard-gateway tcp-forward`: a local listener whose every accepted
 * connection becomes one TCP tunnel through the gateway (CONTRACT.md, Raw
 * TCP ports), so that psql, redis-cli or ssh reach a sandbox's tcp port.
 */
#ifndef GW_FORWARD_TCP_FORWARD_H
#define GW_FORWARD_TCP_FORWARD_H

/* Runs the subcommand; argv[0] is "tcp-forward". Returns the process's exit
 * code: 0 after SIGINT/SIGTERM, 1 when it cannot listen or set up TLS, 2 for
 * a usage error (a bad URL, address or token variable). */
int gw_tcp_forward_main(int argc, char **argv);

#endif
