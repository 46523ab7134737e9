/*
 * The command line of the process and of its subcommands: one getopt_long
 * loop, handing each option to the caller as it comes (so an invalid value
 * ends the parse there, as before the options after it).
 */
#ifndef GW_GATEWAY_CLI_H
#define GW_GATEWAY_CLI_H

#include <getopt.h>
#include <stdio.h>

/* Takes option `opt` (its getopt_long value) with its argument (NULL: none).
 * Returns -1 to go on, or the exit code to end the parse with. */
typedef int (*gw_cli_option_cb)(void *data, int opt, const char *arg);

/* Parses argv (argv[0] the program or the subcommand) from its start.
 * -c/--config FILE, the option of every command, sets *config_path;
 * -h/--help prints usage to stdout and ends with 0; an unknown option or a
 * missing argument prints usage to stderr and ends with 2; every other
 * option goes to on_option. Returns -1 when every option was taken (the
 * operands start at optind), else the exit code. */
int gw_cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts, const char **config_path,
                 gw_cli_option_cb on_option, void (*usage)(FILE *out), void *data);

#endif
