/*
 * tcp-forward's process: options, the listener, a detached thread per
 * accepted connection (dial, upgrade, relay: blocking with deadlines, which
 * a client tool can afford), and SIGINT/SIGTERM, which stop listening and
 * exit 0. Every tunnel that fails or ends says so in one line on stderr;
 * the token is never printed.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include "common/errfmt.h"
#include "forward/stdio_pump.h"
#include "forward/tcp_forward.h"
#include "forward/tunnel.h"
#include "forward/wss_dial.h"
#include "forward/wss_handshake.h"

#define PREFIX "lizard-gateway tcp-forward: "
/* Tunnels open at once; a connection beyond them is closed at once (each holds about 200 KiB of buffers). */
#define MAX_TUNNELS 256
/* Bound of dial + TLS + upgrade: above the gateway's own connect timeout to the sandbox, so its 504 arrives first. */
#define OPEN_TIMEOUT_MS 30000
/* Longest token accepted from the environment (the request head must stay small). */
#define MAX_TOKEN_LEN 4096

typedef struct st_job_t {
    const gw_forward_conf_t *conf;
    int fd;
    unsigned long id;
    char peer[64];
} job_t;

static atomic_int open_tunnels;

static void usage(FILE *out)
{
    fprintf(out, "Usage: lizard-gateway tcp-forward --listen ADDR:PORT --url wss://HOST/.lizard/tcp [--token-env VAR]\n"
                 "                                  [--ca FILE] [--connect ADDR:PORT]\n"
                 "       lizard-gateway tcp-forward --stdio --url wss://HOST/.lizard/tcp [...]\n"
                 "\n"
                 "Listens on ADDR:PORT and carries each accepted connection through its own tunnel to the\n"
                 "sandbox's tcp port named by the URL (wss://<port>-<sandbox>.<domain>/.lizard/tcp), so that\n"
                 "psql, redis-cli or ssh connect to ADDR:PORT unchanged.\n"
                 "\n"
                 "  --listen ADDR:PORT   local address to listen on (an IP literal: 127.0.0.1:5432, [::1]:5432)\n"
                 "  --stdio              one tunnel over stdin and stdout instead of a listener (ssh's ProxyCommand)\n"
                 "  --url URL            the tunnel endpoint on the port's preview host (wss:// only)\n"
                 "  --token-env VAR      send the token held in environment variable VAR (never on the command line)\n"
                 "  --ca FILE            trust only the CA certificates in FILE (PEM) instead of the system's\n"
                 "  --connect ADDR:PORT  dial this address instead of resolving the URL's host (the certificate\n"
                 "                       is still verified for the URL's host)\n"
                 "\n"
                 "SIGINT or SIGTERM stops listening and exits 0.\n");
}

/* One line, with any control character of a gateway-supplied text made a space. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (char *p = line; *p != '\0'; ++p)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    fprintf(stderr, PREFIX "%s\n", line);
}

/* The line for a tunnel that was open and ended. */
static void say_end(const job_t *job, const gw_tunnel_end_t *end)
{
    const char *what;

    switch (end->close_code) {
    case 0:
        what = end->why[0] != '\0' ? end->why : "closed";
        say("connection %lu from %s: %s", job->id, job->peer, what);
        return;
    case 1000:
        what = end->local_closed ? "closed by the local application" : "closed: the sandbox's server ended the connection";
        break;
    case 1011:
        what = "closed: the connection to the sandbox's port was reset or failed (close 1011)";
        break;
    case 4403:
        what = "closed by the gateway: access to the sandbox was revoked (close 4403); a new token or link is needed";
        break;
    default:
        say("connection %lu from %s: closed by the gateway (close %u)%s%s", job->id, job->peer, end->close_code,
            end->why[0] != '\0' ? ": " : "", end->why);
        return;
    }
    say("connection %lu from %s: %s%s%s", job->id, job->peer, what, end->why[0] != '\0' ? "; " : "", end->why);
}

static void *tunnel_thread(void *arg)
{
    job_t *job = arg;
    char why[1024], *first = malloc(GW_TUNNEL_FIRST_BYTES_MAX);
    size_t first_len = 0;
    int gw_fd = -1;
    uint64_t deadline = gw_wss_now_ms() + OPEN_TIMEOUT_MS;
    SSL *ssl = NULL;

    if (first == NULL) {
        say("connection %lu from %s: out of memory", job->id, job->peer);
    } else if ((ssl = gw_wss_dial(job->conf, deadline, &gw_fd, why, sizeof(why))) == NULL) {
        say("connection %lu from %s: %s", job->id, job->peer, why);
    } else if (gw_wss_handshake(ssl, gw_fd, job->conf, deadline, first, GW_TUNNEL_FIRST_BYTES_MAX, &first_len, why, sizeof(why)) !=
               0) {
        say("connection %lu from %s: %s", job->id, job->peer, why);
    } else {
        gw_tunnel_end_t end;
        gw_tunnel_run(job->fd, ssl, gw_fd, first, first_len, &end);
        say_end(job, &end);
        SSL_shutdown(ssl); /* best effort: the socket is non-blocking, the close_notify is sent or not */
    }
    SSL_free(ssl);
    if (gw_fd >= 0)
        close(gw_fd);
    close(job->fd);
    free(first);
    free(job);
    atomic_fetch_sub(&open_tunnels, 1);
    return NULL;
}

/* The token from the environment: present, not empty, and safe in a header line. 0 or -1 (said why). */
static int read_token(const char *var, const char **token)
{
    const char *v = getenv(var);
    size_t len;

    if (v == NULL || v[0] == '\0') {
        say("--token-env %s: the environment variable %s is %s; export it with the sandbox's access token", var, var,
            v == NULL ? "not set" : "empty");
        return -1;
    }
    if ((len = strlen(v)) > MAX_TOKEN_LEN) {
        say("--token-env %s: the token is longer than %d characters", var, MAX_TOKEN_LEN);
        return -1;
    }
    for (size_t i = 0; i != len; ++i) {
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
            say("--token-env %s: the token has a space, a control or a non-ASCII character (a stray newline?)", var);
            return -1;
        }
    }
    *token = v;
    return 0;
}

typedef struct st_options_t {
    const char *listen, *url, *token_env, *ca, *connect;
    int stdio;
} options_t;

/* Options into *o; 0, or 2 (usage error, said), or -1 for --help. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
                                             {"url", required_argument, NULL, 'u'},
                                             {"token-env", required_argument, NULL, 't'},
                                             {"ca", required_argument, NULL, 'a'},
                                             {"connect", required_argument, NULL, 'c'},
                                             {"stdio", no_argument, NULL, 's'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'l':
            o->listen = optarg;
            break;
        case 'u':
            o->url = optarg;
            break;
        case 't':
            o->token_env = optarg;
            break;
        case 'a':
            o->ca = optarg;
            break;
        case 'c':
            o->connect = optarg;
            break;
        case 's':
            o->stdio = 1;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || (o->listen == NULL) == !o->stdio || o->url == NULL) {
        say("%s", optind != argc   ? "unexpected argument (the token goes in an environment variable: --token-env VAR)"
                  : o->url == NULL ? "--url is required"
                                   : "exactly one of --listen and --stdio is required");
        return 2;
    }
    return 0;
}

/* Options into *conf and the listening address (*stdio set instead for --stdio); -1, or the exit code. */
static int configure(int argc, char **argv, gw_forward_conf_t *conf, gw_netaddr_t *listen_addr, int *stdio)
{
    options_t o = {NULL};
    const char *err;
    char *msg = NULL;
    int rc;

    if ((rc = parse_options(argc, argv, &o)) != 0)
        return rc < 0 ? 0 : rc;
    *stdio = o.stdio;
    if (!o.stdio && gw_netaddr_parse(o.listen, 0, listen_addr, &err) != 0)
        return say("--listen %s: %s", o.listen, err), 2;
    if (gw_wss_url_parse(o.url, &conf->url, &err) != 0)
        return say("--url: %s", err), 2; /* not echoed: it may hold a secret */
    if (o.connect != NULL) {
        if (gw_netaddr_parse(o.connect, 0, &conf->connect, &err) != 0)
            return say("--connect %s: %s", o.connect, err), 2;
        conf->has_connect = 1;
    }
    if (o.token_env != NULL && read_token(o.token_env, &conf->token) != 0)
        return 2;
    conf->token_env = o.token_env;
    if ((conf->ssl_ctx = gw_wss_ssl_ctx_new(o.ca, &msg)) == NULL) {
        say("%s", msg);
        free(msg);
        return 1;
    }
    return -1;
}

static int listen_on(const gw_netaddr_t *addr)
{
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    char text[64];

    gw_netaddr_format(addr, text, sizeof(text));
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, 128) != 0) {
        say("cannot listen on %s: %s", text, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* A new connection: its own detached thread, or closed when MAX_TUNNELS are open. */
static void start_tunnel(const gw_forward_conf_t *conf, int fd, const struct sockaddr_storage *peer, socklen_t peer_len,
                         unsigned long id)
{
    gw_netaddr_t p = {.len = peer_len};
    pthread_attr_t attr;
    pthread_t th;
    job_t *job;

    memcpy(&p.ss, peer, peer_len);
    if (atomic_load(&open_tunnels) >= MAX_TUNNELS || (job = calloc(1, sizeof(*job))) == NULL) {
        say("connection %lu refused: %d tunnels are open already", id, MAX_TUNNELS);
        close(fd);
        return;
    }
    *job = (job_t){.conf = conf, .fd = fd, .id = id};
    if (gw_netaddr_format(&p, job->peer, sizeof(job->peer)) < 0)
        snprintf(job->peer, sizeof(job->peer), "?");
    atomic_fetch_add(&open_tunnels, 1);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, tunnel_thread, job) != 0) {
        say("connection %lu refused: cannot start a thread", id);
        atomic_fetch_sub(&open_tunnels, 1);
        close(fd);
        free(job);
    }
    pthread_attr_destroy(&attr);
}

/* Accepts until SIGINT/SIGTERM arrive on sigfd. */
static void serve(const gw_forward_conf_t *conf, int lfd, int sigfd)
{
    struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sigfd, .events = POLLIN}};
    unsigned long next_id = 1;

    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sigfd, &si, sizeof(si)) == sizeof(si))
                say("%s: stopped listening", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
            return;
        }
        if (p[0].revents & POLLIN) {
            struct sockaddr_storage peer;
            socklen_t peer_len = sizeof(peer);
            int fd = accept4(lfd, (struct sockaddr *)&peer, &peer_len, SOCK_CLOEXEC);
            if (fd >= 0)
                start_tunnel(conf, fd, &peer, peer_len, next_id++);
            else if (errno == EMFILE || errno == ENFILE)
                say("cannot accept a connection: %s", strerror(errno)), usleep(100000);
        }
    }
}

/* --stdio: one tunnel, stdin/stdout its local side; exits 0 once it ended, 1 when it could not open. */
static void run_stdio(const gw_forward_conf_t *conf)
{
    gw_stdio_pump_t pump;
    job_t *job = calloc(1, sizeof(*job));
    int fd;

    if (job == NULL || gw_stdio_pump_start(&pump, &fd) != 0) {
        say("cannot set up stdin/stdout: %s", strerror(errno));
        _exit(1);
    }
    *job = (job_t){.conf = conf, .fd = fd, .id = 1};
    snprintf(job->peer, sizeof(job->peer), "stdin");
    atomic_fetch_add(&open_tunnels, 1);
    tunnel_thread(job); /* closes fd: the pump then ends stdout */
    gw_stdio_pump_finish(&pump);
    fflush(stderr);
    _exit(0);
}

int gw_tcp_forward_main(int argc, char **argv)
{
    static gw_forward_conf_t conf; /* read by the tunnels' threads until the process ends */
    gw_netaddr_t listen_addr;
    sigset_t sigs;
    char where[64];
    int rc, lfd, sigfd, stdio = 0;

    if ((rc = configure(argc, argv, &conf, &listen_addr, &stdio)) >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    if (stdio)
        run_stdio(&conf);
    /* blocked before any thread starts, so that only the signalfd sees them */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if ((sigfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0 || (lfd = listen_on(&listen_addr)) < 0)
        return 1;
    gw_netaddr_format(&listen_addr, where, sizeof(where));
    say("listening on %s, one tunnel per connection to wss://%s:%u%.*s", where, conf.url.host, (unsigned)conf.url.port,
        (int)strcspn(conf.url.path, "?"), conf.url.path);
    serve(&conf, lfd, sigfd);
    close(lfd);
    /* Open tunnels end with the process: exit's handlers (OpenSSL's cleanup
     * among them) would run under the tunnels' threads, so _exit. */
    fflush(stderr);
    fflush(stdout);
    _exit(0);
}
