/*
 * sign-link: loads the configuration exactly as the server does (same file,
 * same environment, same key reader), signs with the first key of the list
 * (or --kid), makes a view-only link with --view (CONTRACT.md, Desktops), and refuses what the gateway would refuse (a lifetime
 * beyond auth.link_max_ttl_s), so that a printed link works.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <h2o/string_.h>
#include "auth/share_link.h"
#include "config/config.h"
#include "gateway/cli.h"
#include "gateway/sign_link.h"
#include "gateway/worker.h"
#include "metering/final_flush.h"

/* How long sign-link waits for Redis when it reads link_epoch. */
#define EPOCH_READ_TIMEOUT_MS 3000

/* The sandbox's link_epoch as the gateway will check it: HGET
 * <prefix>sbx:{<id>} link_epoch, absent = 0. Returns 0 with *epoch, or -1
 * having said why on stderr (a link with a guessed epoch would be refused). */
static int read_link_epoch(const gw_config_t *config, const char *sandbox, uint64_t *epoch)
{
    gw_redis_conf_t rconf;
    char why[256], key[512];
    redisContext *c;
    redisReply *reply;
    int ret = -1;

    gw_server_redis_conf(config, &rconf);
    if ((c = gw_metering_connect_blocking(&rconf, EPOCH_READ_TIMEOUT_MS, why, sizeof(why))) == NULL) {
        fprintf(stderr,
                "lizard-gateway sign-link: cannot read the sandbox's link_epoch from Redis (%s); pass --epoch N to sign "
                "without Redis\n",
                why);
        return -1;
    }
    snprintf(key, sizeof(key), "%ssbx:{%s}", config->redis.prefix, sandbox);
    const char *argv[] = {"HGET", key, "link_epoch"};
    size_t argvlen[] = {4, strlen(key), 10};
    reply = redisCommandArgv(c, 3, argv, argvlen);
    if (reply == NULL) {
        fprintf(stderr, "lizard-gateway sign-link: no answer from Redis to HGET %s link_epoch\n", key);
    } else if (reply->type == REDIS_REPLY_NIL) {
        *epoch = 0;
        ret = 0;
    } else if (reply->type == REDIS_REPLY_STRING && (*epoch = h2o_strtosize(reply->str, reply->len)) != SIZE_MAX) {
        ret = 0;
    } else {
        fprintf(stderr, "lizard-gateway sign-link: %s link_epoch is not a decimal: the gateway refuses every link of it\n", key);
    }
    freeReplyObject(reply);
    redisFree(c);
    return ret;
}

static void usage(FILE *out)
{
    fprintf(out, "Usage: lizard-gateway sign-link -c FILE --sandbox ID --port N --ttl SECONDS [--epoch N] [--kid KID] [--view]\n"
                 "\n"
                 "Prints a share link for one port of one sandbox: the preview URL, then the token.\n"
                 "Keys come from auth.link_keys_env or auth.link_keys_file of FILE; the first signs\n"
                 "unless --kid names another. --epoch is the sandbox's link_epoch; without it the\n"
                 "sandbox's current link_epoch is read from the configured Redis (absent = 0).\n"
                 "--view signs a view-only link (lzv1.) for a desktop port (proto rfb): the gateway\n"
                 "drops its viewer's keys, pointer and clipboard.\n");
}

/* A decimal from 0 to max (at most 19 digits), nothing else: -1 otherwise. */
static int parse_number(const char *s, uint64_t max, uint64_t *out)
{
    size_t v = h2o_strtosize(s, strlen(s));

    if (v == SIZE_MAX || v > max)
        return -1;
    *out = v;
    return 0;
}

static int usage_error(const char *what)
{
    fprintf(stderr, "lizard-gateway sign-link: %s\n", what);
    usage(stderr);
    return 2;
}

/* The command line of sign-link. */
typedef struct st_args_t {
    const char *config_path, *sandbox, *kid;
    uint64_t port, ttl, epoch;
    int epoch_given, view;
} args_t;

static int on_option(void *data, int opt, const char *arg)
{
    args_t *args = data;

    switch (opt) {
    case 's':
        args->sandbox = arg;
        break;
    case 'p':
        if (parse_number(arg, UINT16_MAX, &args->port) != 0 || args->port == 0)
            return usage_error("--port: expected a port from 1 to 65535");
        break;
    case 't':
        if (parse_number(arg, UINT32_MAX, &args->ttl) != 0 || args->ttl == 0)
            return usage_error("--ttl: expected a number of seconds, at least 1");
        break;
    case 'e':
        if (parse_number(arg, SIZE_MAX - 1, &args->epoch) != 0)
            return usage_error("--epoch: expected the sandbox's link_epoch, a decimal integer");
        args->epoch_given = 1;
        break;
    case 'k':
        args->kid = arg;
        break;
    case 'v':
        args->view = 1;
        break;
    }
    return -1;
}

/* Returns -1 to go on with *args, or the exit code. */
static int parse_args(int argc, char **argv, args_t *args)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"sandbox", required_argument, NULL, 's'}, {"port", required_argument, NULL, 'p'},
        {"ttl", required_argument, NULL, 't'},    {"epoch", required_argument, NULL, 'e'},   {"kid", required_argument, NULL, 'k'},
        {"view", no_argument, NULL, 'v'},         {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *sandbox;
    size_t i;
    int ret;

    if ((ret = gw_cli_parse(argc, argv, "c:h", longopts, &args->config_path, on_option, usage, args)) != -1)
        return ret;
    if (optind != argc)
        return usage_error("unexpected argument");
    if (args->config_path == NULL || args->sandbox == NULL || args->port == 0 || args->ttl == 0)
        return usage_error("-c, --sandbox, --port and --ttl are required");
    for (sandbox = args->sandbox, i = 0; sandbox[i] != '\0'; ++i)
        if (!(('a' <= sandbox[i] && sandbox[i] <= 'z') || ('0' <= sandbox[i] && sandbox[i] <= '9')))
            break;
    if (i == 0 || i > 56 || sandbox[i] != '\0')
        return usage_error("--sandbox: expected a sandbox id, 1 to 56 lowercase letters and digits");
    return -1;
}

/* Prints the preview URL and the token of a link signed with `key`. */
static void print_link(const gw_config_t *config, const args_t *args, const gw_link_key_t *key)
{
    h2o_mem_pool_t pool;
    size_t i;

    h2o_mem_init_pool(&pool);
    uint64_t expires_at = (uint64_t)time(NULL) + args->ttl;
    h2o_iovec_t token = (args->view ? gw_share_link_sign_view : gw_share_link_sign)(&pool, key, args->sandbox, (uint16_t)args->port,
                                                                                    expires_at, args->epoch);
    /* the preview URL names the first TLS listener's port unless it is 443 */
    uint16_t https_port = 443;
    for (i = 0; i != config->num_listen; ++i) {
        if (config->listen[i].tls) {
            https_port = gw_netaddr_port(&config->listen[i].addr);
            break;
        }
    }
    char port_suffix[8] = "";
    if (https_port != 443)
        snprintf(port_suffix, sizeof(port_suffix), ":%u", (unsigned)https_port);
    printf("https://%u-%s.%s%s/?lizard_token=%s\n%s\n", (unsigned)args->port, args->sandbox, config->domains[0], port_suffix,
           token.base, token.base);
    fprintf(stderr, "lizard-gateway sign-link: %skey %s, expires at %" PRIu64 " (in %" PRIu64 " s), link_epoch %" PRIu64 " (%s)\n",
            args->view ? "view-only, " : "", key->kid, expires_at, args->ttl, args->epoch,
            args->epoch_given ? "from --epoch" : "read from Redis");
    h2o_mem_clear_pool(&pool);
}

int gw_sign_link_main(int argc, char **argv)
{
    args_t args = {NULL};
    gw_config_t *config = NULL;
    gw_link_key_t *keys = NULL;
    size_t num_keys = 0;
    char *err = NULL;
    int ret;

    if ((ret = parse_args(argc, argv, &args)) != -1)
        return ret;
    ret = 1;
    if (gw_config_load(args.config_path, &config, &err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto Exit;
    }
    if (config->auth.link_keys_env == NULL && config->auth.link_keys_file == NULL) {
        fprintf(stderr, "lizard-gateway sign-link: %s sets neither auth.link_keys_env nor auth.link_keys_file\n", args.config_path);
        goto Exit;
    }
    if (args.ttl > config->auth.link_max_ttl_s) {
        fprintf(stderr,
                "lizard-gateway sign-link: --ttl %" PRIu64 " is longer than auth.link_max_ttl_s (%" PRIu64
                "): the gateway would refuse the link\n",
                args.ttl, config->auth.link_max_ttl_s);
        goto Exit;
    }
    if (gw_share_link_keys_load(config->auth.link_keys_env, config->auth.link_keys_file, &keys, &num_keys, &err) != 0) {
        fprintf(stderr, "lizard-gateway sign-link: %s\n", err);
        goto Exit;
    }
    const gw_link_key_t *key = args.kid != NULL ? gw_share_link_keys_find(keys, num_keys, args.kid, strlen(args.kid)) : &keys[0];
    if (key == NULL) {
        fprintf(stderr, "lizard-gateway sign-link: --kid %s: no such key in the configured list\n", args.kid);
        goto Exit;
    }
    if (!args.epoch_given && read_link_epoch(config, args.sandbox, &args.epoch) != 0)
        goto Exit;
    print_link(config, &args, key);
    ret = 0;

Exit:
    free(err);
    gw_share_link_keys_free(keys, num_keys);
    gw_config_free(config);
    return ret;
}
