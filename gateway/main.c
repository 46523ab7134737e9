/*
 * lizard-gateway: the process. Reads and freezes the configuration, loads
 * certificates, binds listeners, starts the workers, then waits for signals:
 * SIGHUP, or a change of one of their files, reloads certificates, session
 * ticket keys, cookie secrets and share-link keys,
 * SIGUSR1 reopens the access log, SIGTERM/SIGINT drain and exit 0.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include "observe/access_log.h"
#include "config/config.h"
#include "gateway/cli.h"
#include "forward/tcp_forward.h"
#include "gateway/secret_watch.h"
#include "gateway/sign_link.h"
#include "gateway/worker.h"
#include "gw_h2o_version.h" /* GW_H2O_VERSION: h2o's version, the pinned commit, the number of our patches */
#include "tls/dyncert.h"
#include "tls/tls.h"

/* Bound of the drain of in-flight requests at SIGTERM. With METERING_EXEC_WAIT_MS
 * (worker.c) and METERING_FINAL_FLUSH_MS the whole stop takes at most 9 s: within
 * the 10 s that `docker stop`, `podman stop` and compose give before SIGKILL, so
 * the last interval's metering is never killed with the process (docs/deploying.md, Deploying). */
#define DRAIN_MS 6000
/* a change of a secret file is reloaded once this long after the last event of the
 * change (kubelet's swap, an editor's write and rename are several events) */
#define SECRET_QUIET_MS 200
/* bound of the blocking metering flush after the workers stopped */
#define METERING_FINAL_FLUSH_MS 2000

/* Every client connection and every connection to a sandbox is a
 * descriptor: the soft limit goes up to the hard one (what the unit file's
 * LimitNOFILE= or the container runtime grants), as HAProxy does for
 * itself, and a limit below what limits.max_client_connections_per_worker
 * lets the workers hold is said at start. Returns the limit in force. */
static rlim_t raise_open_files_limit(const gw_config_t *config)
{
    struct rlimit rl;
    uint64_t want = 2 * (uint64_t)config->workers * config->limits.max_client_connections_per_worker + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        fprintf(stderr,
                "lizard-gateway: open files limit %llu is below the %llu that %u workers x "
                "limits.max_client_connections_per_worker %llu (x2: client and sandbox side) can use; raise LimitNOFILE= "
                "(systemd), or the hard limit of the shell that starts it (ulimit -Hn %llu, as root, then ulimit -n %llu), "
                "or lower limits.max_client_connections_per_worker\n",
                (unsigned long long)rl.rlim_cur, (unsigned long long)want, config->workers,
                (unsigned long long)config->limits.max_client_connections_per_worker, (unsigned long long)want,
                (unsigned long long)want);
    return rl.rlim_cur;
}

static void usage(FILE *out)
{
    fprintf(out, "Usage: lizard-gateway -c FILE [--check]\n"
                 "       lizard-gateway sign-link -c FILE --sandbox ID --port N --ttl SECONDS [--epoch N] [--kid KID] [--view]\n"
                 "       lizard-gateway tcp-forward --listen ADDR:PORT --url wss://HOST/.lizard/tcp [--token-env VAR]\n"
                 "\n"
                 "The lizard preview gateway: terminates TLS for <port>-<sandbox>.<domain>,\n"
                 "authenticates, routes by Redis and proxies to the sandbox.\n"
                 "\n"
                 "  -c, --config FILE  configuration file (JSON; see deploy/gateway.example.json)\n"
                 "  -t, --check        validate the configuration and certificates, then exit\n"
                 "  -v, --version      print the version and exit\n"
                 "  -h, --help         print this help and exit\n"
                 "  sign-link          print a share link (URL, then token) signed with the configured keys\n"
                 "  tcp-forward        carry local TCP connections to a sandbox's tcp port (psql, redis-cli, ssh)\n"
                 "\n"
                 "Signals: SIGHUP reloads certificates, tls.ticket_keys_file, auth.cookie_secrets_file and\n"
                 "auth.link_keys_file;\n"
                 "SIGUSR1 reopens the access log (rotation); SIGTERM drains in-flight requests, flushes\n"
                 "metering and exits.\n"
                 "\n"
                 "Documentation: README.md and docs/ in the source tree (docs/configuration.md: every\n"
                 "key; docs/errors.md: every error code; docs/metrics.md: every metric;\n"
                 "docs/operations.md: signals, logs, the admin listener).\n");
}

/* SIGHUP: one line each for certificates, ticket keys and cookie secrets, never a secret.
 * Listeners and connections are untouched; a failed part keeps what it had. */
/* SIGHUP, share-link keys: like the cookie secrets, a file is read again, the environment is not. */
static void reload_link_keys(gw_link_keys_t *keys)
{
    char *err = NULL;

    if (gw_link_keys_file(keys) == NULL) {
        if (gw_link_keys_count(keys) != 0)
            fprintf(stderr, "lizard-gateway: share link keys come from the environment: restart to change them\n");
    } else if (gw_link_keys_reload(keys, &err) != 0) {
        fprintf(stderr, "lizard-gateway: share link keys reload failed, keeping the current %zu: %s\n", gw_link_keys_count(keys),
                err);
        free(err);
    } else {
        fprintf(stderr, "lizard-gateway: share link keys reloaded from %s: %zu key%s\n", gw_link_keys_file(keys),
                gw_link_keys_count(keys), gw_link_keys_count(keys) == 1 ? "" : "s");
    }
}

static void reload(gw_tls_t *tls, gw_cookie_keys_t *keys)
{
    char *err = NULL;

    if (tls == NULL) {
        fprintf(stderr, "lizard-gateway: certificates: none loaded (no TLS listener)\n");
    } else if (gw_tls_reload(tls, &err) != 0) {
        fprintf(stderr, "lizard-gateway: reload failed, keeping the current certificates: %s\n", err);
        free(err);
        err = NULL;
    } else {
        fprintf(stderr, "lizard-gateway: certificates reloaded\n");
    }

    if (tls != NULL && gw_tls_ticket_keys_file(tls) != NULL) {
        if (gw_tls_reload_ticket_keys(tls, &err) != 0) {
            fprintf(stderr, "lizard-gateway: ticket keys reload failed, keeping the current %zu: %s\n",
                    gw_tls_ticket_keys_count(tls), err);
            free(err);
            err = NULL;
        } else {
            fprintf(stderr, "lizard-gateway: ticket keys reloaded from %s: %zu key%s\n", gw_tls_ticket_keys_file(tls),
                    gw_tls_ticket_keys_count(tls), gw_tls_ticket_keys_count(tls) == 1 ? "" : "s");
        }
    }

    if (gw_cookie_keys_file(keys) == NULL) {
        if (gw_cookie_keys_count(keys) != 0)
            fprintf(stderr, "lizard-gateway: cookie secrets come from the environment: restart to change them\n");
        else
            fprintf(stderr, "lizard-gateway: cookie secrets: none configured, cookies stay disabled\n");
    } else if (gw_cookie_keys_reload(keys, &err) != 0) {
        fprintf(stderr, "lizard-gateway: cookie secrets reload failed, keeping the current %zu: %s\n", gw_cookie_keys_count(keys),
                err != NULL ? err : "out of memory");
        free(err);
    } else {
        fprintf(stderr, "lizard-gateway: cookie secrets reloaded from %s: %zu secret%s\n", gw_cookie_keys_file(keys),
                gw_cookie_keys_count(keys), gw_cookie_keys_count(keys) == 1 ? "" : "s");
    }
}

/* SIGUSR1: log rotation. The rotator has moved the file away; new lines go
 * to a new file at the configured path. */
static void reopen_access_log(const gw_config_t *config, gw_server_t *server)
{
    char *err = NULL;

    if (config->log.access == NULL || strcmp(config->log.access, "-") == 0 || server->access_log_fd == -1)
        return;
    if (gw_access_log_reopen(server->access_log_fd, config->log.access, &err) != 0) {
        fprintf(stderr, "lizard-gateway: reopening the access log failed, still writing to the old file: %s\n", err);
        free(err);
        return;
    }
    fprintf(stderr, "lizard-gateway: access log reopened: %s\n", config->log.access);
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The secret files, watched so that a replaced one reloads without a signal
 * (a Kubernetes Secret update). Without inotify: SIGHUP only, said once. */
static gw_secret_watch_t *watch_secrets(const gw_config_t *config, gw_tls_t *tls)
{
    const char *paths[GW_SECRET_WATCH_MAX];
    gw_secret_watch_t *w;
    size_t n = 0, i;
    char *err = NULL;

    for (i = 0; tls != NULL && i != config->tls.num_certificates && n + 2 <= GW_SECRET_WATCH_MAX - 3; ++i) {
        paths[n++] = config->tls.certificates[i].cert;
        paths[n++] = config->tls.certificates[i].key;
    }
    paths[n++] = tls != NULL ? config->tls.ticket_keys_file : NULL;
    paths[n++] = config->auth.cookie_secrets_file;
    paths[n++] = config->auth.link_keys_file;
    if ((w = gw_secret_watch_new(paths, n, &err)) == NULL) {
        fprintf(stderr, "lizard-gateway: %s; secret files reload on SIGHUP only\n", err);
        free(err);
    }
    return w;
}

/* Custom-domain certificates (tls/dyncert.h): on with tls.sealed_key_env. */
static void enable_custom_domains(const gw_config_t *config, gw_tls_t *tls)
{
    gw_dyncert_conf_t dconf = {.max_certs = config->tls.max_dynamic_certs,
                               .negative_ttl_ms = config->routing.negative_ttl_ms,
                               .fetch_timeout_ms = config->tls.cert_fetch_timeout_ms,
                               .prefix = config->redis.prefix,
                               .domains = config->domains,
                               .num_domains = config->num_domains};

    memcpy(dconf.key, config->tls.sealed_key, sizeof(dconf.key));
    gw_tls_enable_dynamic(tls, &dconf);
    OPENSSL_cleanse(dconf.key, sizeof(dconf.key));
}

static gw_tls_t *load_tls(const gw_config_t *config, char **err)
{
    gw_tls_cert_conf_t *certs;
    gw_tls_t *tls;
    size_t i;

    if (config->tls.num_certificates == 0)
        return NULL;
    certs = h2o_mem_alloc(config->tls.num_certificates * sizeof(*certs));
    for (i = 0; i != config->tls.num_certificates; ++i)
        certs[i] = (gw_tls_cert_conf_t){config->tls.certificates[i].cert, config->tls.certificates[i].key};
    tls = gw_tls_new(certs, config->tls.num_certificates, err);
    free(certs);
    if (tls != NULL && config->tls.ticket_keys_file != NULL &&
        gw_tls_use_ticket_keys_file(tls, config->tls.ticket_keys_file, err) != 0) {
        gw_tls_free(tls);
        return NULL;
    }
    if (tls != NULL && config->tls.sealed_key_env != NULL)
        enable_custom_domains(config, tls);
    return tls;
}

/* The command line of the server (not of sign-link). */
typedef struct st_args_t {
    const char *config_path;
    int check_only;
} args_t;

static int on_option(void *data, int opt, const char *arg)
{
    args_t *args = data;

    (void)arg; /* -t and -v take none */
    if (opt == 't') {
        args->check_only = 1;
        return -1;
    }
    /* 'v' */
    printf("lizard-gateway %s (libh2o %s, %s)\n", GW_VERSION, GW_H2O_VERSION, OpenSSL_version(OPENSSL_VERSION));
    return 0;
}

/* Returns -1 to go on with *args, or the exit code. */
static int parse_args(int argc, char **argv, args_t *args)
{
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"check", no_argument, NULL, 't'},
                                             {"version", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ret;

    if ((ret = gw_cli_parse(argc, argv, "c:tvh", longopts, &args->config_path, on_option, usage, args)) != -1)
        return ret;
    if (optind != argc || args->config_path == NULL) {
        fprintf(stderr, "lizard-gateway: %s\n", args->config_path == NULL ? "-c FILE is required" : "unexpected argument");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Loads the configuration and the certificates; with --check, checks the
 * spill file too and says ok. Returns -1 to go on with *config and *tls,
 * or the exit code (everything freed). */
static int load(const args_t *args, gw_config_t **config, gw_tls_t **tls)
{
    char *err = NULL;
    int needs_tls = 0;

    *tls = NULL;
    if (gw_config_load(args->config_path, config, &err) != 0) {
        fprintf(stderr, "%s\n", err);
        free(err);
        return 1;
    }
    for (size_t i = 0; i != (*config)->num_listen; ++i)
        needs_tls |= (*config)->listen[i].tls;
    if (needs_tls && (*tls = load_tls(*config, &err)) == NULL) {
        fprintf(stderr, "%s\n", err);
        goto Error;
    }
    if (!args->check_only)
        return -1;
    if (gw_metering_check_spill((*config)->metering.spill_file, (*config)->instance_id, &err) != 0) {
        fprintf(stderr, "config: %s\n", err);
        goto Error;
    }
    printf("config: %s: ok\n", args->config_path);
    gw_tls_free(*tls);
    gw_config_free(*config);
    return 0;

Error:
    free(err);
    gw_tls_free(*tls);
    gw_config_free(*config);
    return 1;
}

/* Blocks the signals main takes synchronously (workers inherit the mask) and returns them in *sigs. */
static void block_signals(sigset_t *sigs)
{
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(sigs);
    sigaddset(sigs, SIGHUP);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

/* Serves until SIGTERM or SIGINT: SIGHUP and a changed secret file reload,
 * SIGUSR1 reopens the access log. Returns 0, or 1 when signals cannot be read. */
static int wait_for_stop(const gw_config_t *config, gw_tls_t *tls, gw_server_t *server, const sigset_t *sigs)
{
    gw_secret_watch_t *secret_watch = watch_secrets(config, tls);
    uint64_t reload_at = 0; /* when a change of a secret file is reloaded (ms, CLOCK_MONOTONIC); 0: none pending */
    int sigfd;

    if ((sigfd = signalfd(-1, sigs, SFD_CLOEXEC)) == -1) {
        perror("lizard-gateway: signalfd");
        return 1;
    }
    for (;;) {
        struct pollfd pfd[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
        struct signalfd_siginfo si;
        int timeout = -1;
        if (secret_watch != NULL)
            pfd[1].fd = gw_secret_watch_fd(secret_watch);
        if (reload_at != 0) {
            uint64_t now = now_ms();
            timeout = reload_at > now ? (int)(reload_at - now) : 0;
        }
        if (poll(pfd, 2, timeout) == -1 && errno != EINTR) {
            perror("lizard-gateway: poll");
            continue;
        }
        if (pfd[1].revents & POLLIN && gw_secret_watch_read(secret_watch))
            reload_at = now_ms() + SECRET_QUIET_MS; /* each event of a change moves it on */
        if (reload_at != 0 && now_ms() >= reload_at) {
            /* as SIGHUP does: what fails to load keeps the current set and says why */
            fprintf(stderr, "lizard-gateway: a secret file changed, reloading\n");
            reload(tls, server->cookie_keys);
            reload_link_keys(server->link_keys);
            reload_at = 0;
        }
        if (!(pfd[0].revents & POLLIN) || read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
            continue;
        if (si.ssi_signo == SIGHUP) {
            reload(tls, server->cookie_keys);
            reload_link_keys(server->link_keys);
        } else if (si.ssi_signo == SIGUSR1) {
            reopen_access_log(config, server);
        } else {
            break; /* SIGTERM or SIGINT */
        }
    }
    gw_secret_watch_free(secret_watch);
    close(sigfd);
    return 0;
}

/* Drains, stops the workers and flushes metering: what Redis cannot take
 * now goes to metering.spill_file (reported on stderr). Returns the exit code. */
static int stop(const gw_config_t *config, gw_server_t *server)
{
    gw_redis_conf_t rconf;

    fprintf(stderr, "lizard-gateway: stopping (draining up to %d ms)\n", DRAIN_MS);
    gw_server_stop(server, DRAIN_MS);
    gw_server_redis_conf(config, &rconf);
    int lost = gw_metering_final_flush(server->metering, &rconf, METERING_FINAL_FLUSH_MS) != 0;
    if (lost) {
        gw_metering_stats_t ms;
        gw_metering_get_stats(server->metering, &ms);
        /* the process ends here, so no scrape sees the counter: the exit status says it */
        fprintf(stderr, "lizard-gateway: metering: %llu records lost at exit (neither in Redis nor in the spill file)\n",
                (unsigned long long)ms.records_lost);
    }
    gw_server_dispose(server);
    fprintf(stderr, "lizard-gateway: stopped%s\n", lost ? " (exit status 3: metering records lost)" : "");
    return lost ? 3 : 0;
}

int main(int argc, char **argv)
{
    args_t args = {NULL, 0};
    gw_config_t *config = NULL;
    gw_tls_t *tls = NULL;
    gw_server_t server;
    char *err = NULL;
    sigset_t sigs;
    rlim_t nofile;
    int ret;

    if (argc > 1 && strcmp(argv[1], "sign-link") == 0)
        return gw_sign_link_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "tcp-forward") == 0)
        return gw_tcp_forward_main(argc - 1, argv + 1);
    if ((ret = parse_args(argc, argv, &args)) != -1 || (ret = load(&args, &config, &tls)) != -1)
        return ret;

    block_signals(&sigs);
    nofile = raise_open_files_limit(config);
    if (gw_server_init(&server, config, tls, &err) != 0 || gw_server_start(&server, &err) != 0) {
        fprintf(stderr, "lizard-gateway: %s\n", err);
        free(err);
        return 1;
    }
    fprintf(stderr, "lizard-gateway %s: %zu workers (%s), %zu listeners, instance %s, open files limit %llu\n", GW_VERSION,
            server.num_workers, config->workers_from[0] != '\0' ? config->workers_from : "workers in the config",
            config->num_listen, config->instance_id, (unsigned long long)nofile);
    if (wait_for_stop(config, tls, &server, &sigs) != 0)
        return 1;
    return stop(config, &server);
}
