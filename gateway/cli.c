/*
 * The command line's one getopt loop (see cli.h).
 */
#include "gateway/cli.h"

int gw_cli_parse(int argc, char **argv, const char *shortopts, const struct option *longopts, const char **config_path,
                 gw_cli_option_cb on_option, void (*usage)(FILE *out), void *data)
{
    int opt, ret;

    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            *config_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case '?':
        case ':':
            usage(stderr);
            return 2;
        default:
            if ((ret = on_option(data, opt, optarg)) != -1)
                return ret;
            break;
        }
    }
    return -1;
}
