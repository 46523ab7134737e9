/*
 * The gateway's configuration: one JSON file read with jansson, validated
 * completely, then frozen and shared read-only by every thread.
 * Every key, with its range and default, is one row of the key table in
 * config.c (gw_config_keys); defaults are written there and nowhere else.
 * To add a key: a field here, a row in that table, a row in docs/gen/configuration.md's
 * configuration table and a line in deploy/gateway.example.json (config.c's
 * opening comment says how; test_config_documented.c checks the last two).
 */
#ifndef GW_CONFIG_CONFIG_H
#define GW_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "auth/cookie.h"
#include "common/cpus.h"
#include "common/netaddr.h"

typedef enum {
    GW_HOST_HEADER_PRESERVE = 0,
    GW_HOST_HEADER_LOCALHOST, /* "localhost:<port>" */
} gw_host_header_mode_t;

/* The most of one response the gateway may hold (limits.response_buffer_bytes):
 * h2o moves a socket buffer whose capacity would reach 32 MiB into a
 * temp-file mapping, and capacities grow by doubling; 12 MiB held (plus one
 * read) keeps every buffer of a response at 16 MiB or less, in memory. */
#define GW_MAX_RESPONSE_BUFFER_BYTES (12 * 1024 * 1024)

typedef struct st_gw_config_listen_t {
    char *address; /* as written, for messages */
    gw_netaddr_t addr;
    int tls;     /* default true */
    int trusted; /* plain listener that serves instead of redirecting; default false */
    /* connections open with a PROXY protocol header naming the client; default false */
    int proxy_protocol;
} gw_config_listen_t;

typedef struct st_gw_config_cert_t {
    char *cert; /* PEM chain path */
    char *key;  /* PEM key path */
} gw_config_cert_t;

typedef struct st_gw_config_t {
    gw_config_listen_t *listen;
    size_t num_listen;
    char **domains; /* lowercase, no leading/trailing dot */
    size_t num_domains;

    struct {
        gw_config_cert_t *certificates;
        size_t num_certificates;
        char *ticket_keys_file;       /* NULL: random per-process ticket keys; checked at load, re-read on SIGHUP (tls/tls.h) */
        char *sealed_key_env;         /* NULL: no custom-domain certificates (tls/dyncert.h) */
        unsigned char sealed_key[32]; /* from sealed_key_env (64 hex digits), at load */
        uint64_t cert_fetch_timeout_ms;
        uint64_t max_dynamic_certs;
    } tls;

    struct {
        char *address; /* as written */
        gw_netaddr_t addr;
        char *password_env; /* NULL: no AUTH */
        char *password;     /* resolved from the environment at load; NULL if none */
        char *prefix;       /* default "lizard:" */
        uint64_t connect_timeout_ms;
        uint64_t lookup_timeout_ms; /* deadline of one route lookup */
        uint64_t reconnect_max_ms;  /* backoff cap */
        /* Sentinel mode (num_sentinels != 0): the primary of master_name is
         * asked from the sentinels, and `address` is unused */
        char **sentinels; /* as written */
        gw_netaddr_t *sentinel_addrs;
        size_t num_sentinels;
        char *master_name;
        char *sentinel_password_env; /* NULL: no AUTH to the sentinels */
        char *sentinel_password;     /* resolved at load */
    } redis;

    struct {
        char *cookie_secrets_env;           /* at most one of _env and _file; neither: cookies disabled */
        char *cookie_secrets_file;          /* one secret per line; re-read on SIGHUP (auth/cookie_keys.h) */
        gw_cookie_secret_t *cookie_secrets; /* resolved at load; first signs, all verify */
        size_t num_cookie_secrets;
        char *cookie_name; /* default "__Host-lizard_access" */
        uint64_t cookie_ttl_s;
        gw_cookie_same_site_t cookie_same_site;
        char *link_keys_env;           /* share-link keys (auth/link_keys.h): at most one of _env and _file; neither: links off */
        char *link_keys_file;          /* lines <kid>:<secret>; re-read on SIGHUP */
        uint64_t link_max_ttl_s;       /* a link expiring further away than this is refused */
        int public_warning;            /* the warning page on public ports (needs cookie secrets) */
        uint64_t public_warning_ttl_s; /* lifetime of the warning page's consent cookie */
        /* OAuth discovery (RFC 9728, http/oauth_resource.h): the issuer URLs named in the protected resource
         * document and the 401s' Bearer challenge; none: discovery off */
        char **oauth_authorization_servers;
        size_t num_oauth_authorization_servers;
    } auth;

    struct {
        uint64_t cache_ttl_ms;
        uint64_t negative_ttl_ms;
        uint64_t stale_ttl_ms;      /* how long cached routes serve while Redis is down */
        uint64_t resume_timeout_ms; /* how long a request waits for its sandbox to wake; 0: not at all */
        /* custom-domain look-ups in Redis (common/addr_budget.h): per client address and per gateway; 0: no bound */
        uint64_t domain_lookups_per_second_per_client;
        uint64_t domain_lookup_burst_per_client;
        uint64_t domain_lookups_per_second;
    } routing;

    struct {
        gw_host_header_mode_t host_header;
        uint64_t connect_timeout_ms;
        uint64_t first_byte_timeout_ms;
        uint64_t idle_timeout_ms;
        uint64_t websocket_idle_timeout_ms;
        uint64_t websocket_ping_interval_ms; /* 0: no keep-alive Pings */
        size_t max_idle_per_pool;
        size_t max_idle_per_worker; /* idle upstream connections of one worker, all pools */
        gw_cidr_t *allowed_networks;
        size_t num_allowed_networks;
        uint64_t event_stream_idle_timeout_ms; /* text/event-stream silence that ends the stream cleanly; 0: never */
        int splice;                            /* large Content-Length bodies to plain HTTP/1.1 clients by splice(2) */
        uint64_t max_port_timeout_ms;          /* a record's timeout:<n> above it is ignored */
        uint64_t pool_idle_timeout_ms;         /* lifetime of an idle pooled upstream connection */
    } upstream;

    struct {
        uint64_t max_request_body_bytes;
        uint64_t max_request_head_bytes; /* request line and headers (HTTP/2: decoded), trailers included */
        uint64_t response_buffer_bytes;  /* at most GW_MAX_RESPONSE_BUFFER_BYTES */
        uint64_t max_connections_per_sandbox;
        uint64_t client_stall_timeout_ms;           /* 0: responses may wait for the client forever */
        uint64_t max_connection_buffer_bytes;       /* response bytes held for one client connection, all its streams */
        uint64_t max_worker_buffer_bytes;           /* response bytes held by one worker, all its responses */
        uint64_t max_connections_per_client;        /* client connections, and requests in flight, per client address */
        uint64_t proxy_header_timeout_ms;           /* closes a proxy_protocol connection still without its header */
        uint64_t max_client_connections_per_worker; /* beyond it new connections are closed at accept */
        uint64_t max_held_requests_per_sandbox;     /* requests the gateway (all workers) holds while one sandbox wakes */
        uint64_t max_held_requests_per_worker;      /* requests one worker holds for all waking sandboxes */
        uint64_t max_held_request_bytes;            /* body bytes of the requests one worker holds, all sandboxes */
        uint64_t max_stream_errors_per_client;      /* HTTP/2 streams reset for a client's error, per address: the bucket; 0: off */
        uint64_t stream_errors_per_client_per_s;    /* what that bucket earns back a second */
        uint64_t max_requests_per_connection;       /* HTTP/1.1 requests one connection serves; 0: no limit */
        uint64_t max_pipelined_unsent_bytes;        /* HTTP/1.1: response bytes a client may leave unread before the next request */
        uint64_t websocket_frames_per_second;       /* a tunnel client's frame budget earns this back a second; 0: off */
        uint64_t websocket_max_message_bytes;       /* a tunnel client's message (its fragments together); 0: off */
        uint64_t tunnel_socket_buffer_bytes;        /* SO_SNDBUF of a tunnel's two sockets; 0: the kernel autotunes */
        uint64_t max_desktop_viewers;               /* desktop (proto rfb) WebSockets open at once per sandbox, all workers */
    } limits;

    struct {
        char *viewer_dir; /* the noVNC viewer served on desktop (proto rfb) ports, read at start (http/viewer.h) */
    } desktop;

    struct {
        uint64_t flush_interval_ms;
        char *spill_file;
        uint64_t journal_interval_ms; /* how often counts are appended to the journal (spill_file) and fsynced */
    } metering;

    struct {
        char *address; /* NULL: no admin listener */
        gw_netaddr_t addr;
    } admin;

    struct {
        char *access;                         /* path of the JSON access log; "-" is stdout; NULL: off */
        uint64_t access_max_lines_per_second; /* per worker; 0: no limit */
    } log;

    char *instance_id;                     /* default: hostname */
    unsigned workers;                      /* 0 = the CPUs this process may use (common/cpus.h), resolved at load */
    char workers_from[GW_CPUS_SOURCE_MAX]; /* where `workers: 0` took its number from; "" when set */
} gw_config_t;

/* Loads and validates `path`. On success returns 0 and a config owned by
 * the caller (gw_config_free). On failure returns -1 and *err (malloc'd,
 * caller frees) names the key and says what was expected, e.g.
 * `config: routing.cache_ttl_ms: expected an integer from 0 to 3600000, got "ten"`. */
int gw_config_load(const char *path, gw_config_t **out, char **err);

/* Same, from a JSON text already in memory; `name` is used in messages. */
int gw_config_load_string(const char *json, const char *name, gw_config_t **out, char **err);

/* Frees everything; NULL is a no-op. */
void gw_config_free(gw_config_t *c);

#endif
