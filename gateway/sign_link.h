/*
 * `lizard-gateway sign-link`: mints a share link from the configured keys,
 * for operators and tests (CONTRACT.md, "Share links").
 */
#ifndef GW_GATEWAY_SIGN_LINK_H
#define GW_GATEWAY_SIGN_LINK_H

/* Runs the subcommand; argv[0] is "sign-link". Prints the preview URL and
 * the token on two lines of stdout; returns the process's exit code (0, 1
 * for a configuration or key problem, 2 for a usage error). */
int gw_sign_link_main(int argc, char **argv);

#endif
