/*
 * sign-link: loads the configuration exactly as the server does (same file,
 * same environment, same key reader), signs with the first key of the list
 * (or --kid), and refuses what the gateway would refuse (a lifetime beyond
 * auth.link_max_ttl_s), so that a printed link works.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <h2o/string_.h>
#include "auth/share_link.h"
#include "config/config.h"
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
    fprintf(out, "Usage: lizard-gateway sign-link -c FILE --sandbox ID --port N --ttl SECONDS [--epoch N] [--kid KID]\n"
                 "\n"
                 "Prints a share link for one port of one sandbox: the preview URL, then the token.\n"
                 "Keys come from auth.link_keys_env or auth.link_keys_file of FILE; the first signs\n"
                 "unless --kid names another. --epoch is the sandbox's link_epoch; without it the\n"
                 "sandbox's current link_epoch is read from the configured Redis (absent = 0).\n");
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

int gw_sign_link_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'}, {"sandbox", required_argument, NULL, 's'},
                                             {"port", required_argument, NULL, 'p'},   {"ttl", required_argument, NULL, 't'},
                                             {"epoch", required_argument, NULL, 'e'},  {"kid", required_argument, NULL, 'k'},
                                             {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *config_path = NULL, *sandbox = NULL, *kid = NULL;
    uint64_t port = 0, ttl = 0, epoch = 0;
    int epoch_given = 0;
    gw_config_t *config = NULL;
    gw_link_key_t *keys = NULL;
    size_t num_keys = 0, i;
    char *err = NULL;
    int opt, ret = 1;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case 's':
            sandbox = optarg;
            break;
        case 'p':
            if (parse_number(optarg, UINT16_MAX, &port) != 0 || port == 0)
                return usage_error("--port: expected a port from 1 to 65535");
            break;
        case 't':
            if (parse_number(optarg, UINT32_MAX, &ttl) != 0 || ttl == 0)
                return usage_error("--ttl: expected a number of seconds, at least 1");
            break;
        case 'e':
            if (parse_number(optarg, SIZE_MAX - 1, &epoch) != 0)
                return usage_error("--epoch: expected the sandbox's link_epoch, a decimal integer");
            epoch_given = 1;
            break;
        case 'k':
            kid = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc)
        return usage_error("unexpected argument");
    if (config_path == NULL || sandbox == NULL || port == 0 || ttl == 0)
        return usage_error("-c, --sandbox, --port and --ttl are required");
    for (i = 0; sandbox[i] != '\0'; ++i)
        if (!(('a' <= sandbox[i] && sandbox[i] <= 'z') || ('0' <= sandbox[i] && sandbox[i] <= '9')))
            break;
    if (i == 0 || i > 56 || sandbox[i] != '\0')
        return usage_error("--sandbox: expected a sandbox id, 1 to 56 lowercase letters and digits");

    if (gw_config_load(config_path, &config, &err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto Exit;
    }
    if (config->auth.link_keys_env == NULL && config->auth.link_keys_file == NULL) {
        fprintf(stderr, "lizard-gateway sign-link: %s sets neither auth.link_keys_env nor auth.link_keys_file\n", config_path);
        goto Exit;
    }
    if (ttl > config->auth.link_max_ttl_s) {
        fprintf(stderr,
                "lizard-gateway sign-link: --ttl %" PRIu64 " is longer than auth.link_max_ttl_s (%" PRIu64
                "): the gateway would refuse the link\n",
                ttl, config->auth.link_max_ttl_s);
        goto Exit;
    }
    if (gw_share_link_keys_load(config->auth.link_keys_env, config->auth.link_keys_file, &keys, &num_keys, &err) != 0) {
        fprintf(stderr, "lizard-gateway sign-link: %s\n", err);
        goto Exit;
    }
    const gw_link_key_t *key = kid != NULL ? gw_share_link_keys_find(keys, num_keys, kid, strlen(kid)) : &keys[0];
    if (key == NULL) {
        fprintf(stderr, "lizard-gateway sign-link: --kid %s: no such key in the configured list\n", kid);
        goto Exit;
    }

    if (!epoch_given && read_link_epoch(config, sandbox, &epoch) != 0)
        goto Exit;

    h2o_mem_pool_t pool;
    h2o_mem_init_pool(&pool);
    uint64_t expires_at = (uint64_t)time(NULL) + ttl;
    h2o_iovec_t token = gw_share_link_sign(&pool, key, sandbox, (uint16_t)port, expires_at, epoch);
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
    printf("https://%u-%s.%s%s/?lizard_token=%s\n%s\n", (unsigned)port, sandbox, config->domains[0], port_suffix, token.base,
           token.base);
    fprintf(stderr, "lizard-gateway sign-link: key %s, expires at %" PRIu64 " (in %" PRIu64 " s), link_epoch %" PRIu64 " (%s)\n",
            key->kid, expires_at, ttl, epoch, epoch_given ? "from --epoch" : "read from Redis");
    h2o_mem_clear_pool(&pool);
    ret = 0;

Exit:
    free(err);
    gw_share_link_keys_free(keys, num_keys);
    gw_config_free(config);
    return ret;
}
