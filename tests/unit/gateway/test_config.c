/*
 * gateway/config.c: every key read, defaults, and the messages an operator
 * sees for unknown keys, wrong types, bad values, bad JSON and secrets.
 * JSON in this file is written with ' for " (see q()). Also: the README's
 * configuration table and deploy/gateway.example.json hold every key of the
 * key table, with its default (test_documented_keys).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <check.h>
#include "gateway/config.h"
#include "gateway/config_internal.h"

#define BASE "'domains':['lizard.app'],'tls':{'certificates':[{'cert':'/etc/c.pem','key':'/etc/k.pem'}]}"
#define SECRET_A "0123456789abcdef0123456789abcdef-A"
#define SECRET_B "fedcba9876543210fedcba9876543210-B"

/* The JSON text with every ' turned into ". Static; one at a time. */
static const char *q(const char *s)
{
    static char buf[8192];
    size_t i;

    for (i = 0; s[i] != '\0' && i + 1 < sizeof(buf); ++i)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
}

static gw_config_t *load_ok(const char *json)
{
    gw_config_t *c = NULL;
    char *err = NULL;

    ck_assert_msg(gw_config_load_string(q(json), "test.json", &c, &err) == 0, "unexpected error: %s", err);
    ck_assert_ptr_null(err);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* The message for `json`, which must be rejected; the caller frees it. */
static char *load_err(const char *json)
{
    gw_config_t *c = NULL;
    char *err = NULL;

    ck_assert_msg(gw_config_load_string(q(json), "test.json", &c, &err) == -1, "accepted: %s", json);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(err);
    return err;
}

#define ck_assert_err_eq(json, expected)                                                                                           \
    do {                                                                                                                           \
        char *err_ = load_err(json);                                                                                               \
        ck_assert_str_eq(err_, expected);                                                                                          \
        free(err_);                                                                                                                \
    } while (0)

#define ck_assert_err_prefix(json, prefix)                                                                                         \
    do {                                                                                                                           \
        char *err_ = load_err(json);                                                                                               \
        ck_assert_msg(strncmp(err_, prefix, strlen(prefix)) == 0, "message \"%s\" does not start with \"%s\"", err_, prefix);      \
        free(err_);                                                                                                                \
    } while (0)

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/gw-config-test-XXXXXX");
    int fd = mkstemp(path);
    size_t len = strlen(text);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

static uint16_t port_of(const gw_netaddr_t *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    if (a->ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    return 0;
}

START_TEST(test_full)
{
    gw_config_t *c;

    setenv("GW_TEST_REDIS_PW", "hunter2-redis", 1);
    setenv("GW_TEST_COOKIES", SECRET_A, 1);
    c = load_ok("{"
                "'listen':[{'address':'127.0.0.1:8443','tls':true},{'address':'[::1]:8080','tls':false,'trusted':true}],"
                "'domains':['Lizard.App','preview.example.com'],"
                "'tls':{'certificates':[{'cert':'/a.pem','key':'/a.key'},{'cert':'/b.pem','key':'/b.key'}]},"
                "'redis':{'address':'unix:/run/redis.sock','password_env':'GW_TEST_REDIS_PW','prefix':'lz:',"
                "'connect_timeout_ms':250,'lookup_timeout_ms':300,'reconnect_max_ms':7000},"
                "'auth':{'cookie_secrets_env':'GW_TEST_COOKIES','cookie_name':'lz_access','cookie_ttl_s':3600,"
                "'cookie_same_site':'none'},"
                "'routing':{'cache_ttl_ms':0,'negative_ttl_ms':500,'stale_ttl_ms':120000},"
                "'upstream':{'host_header':'localhost','connect_timeout_ms':2000,'first_byte_timeout_ms':30000,"
                "'idle_timeout_ms':45000,'websocket_idle_timeout_ms':600000,'max_idle_per_pool':4,"
                "'allowed_networks':['192.168.0.0/16','fd12::/16','10.1.2.3']},"
                "'limits':{'max_request_body_bytes':1048576,'response_buffer_bytes':65536,'max_connections_per_sandbox':50,"
                "'client_stall_timeout_ms':0},"
                "'metering':{'flush_interval_ms':1000,'spill_file':'/tmp/spill'},"
                "'admin':{'address':'127.0.0.1:9999'},"
                "'log':{'access':'-'},"
                "'instance_id':'gw-test-1',"
                "'workers':3"
                "}");

    ck_assert_uint_eq(c->num_listen, 2);
    ck_assert_str_eq(c->listen[0].address, "127.0.0.1:8443");
    ck_assert_int_eq(c->listen[0].addr.ss.ss_family, AF_INET);
    ck_assert_uint_eq(port_of(&c->listen[0].addr), 8443);
    ck_assert_int_eq(c->listen[0].tls, 1);
    ck_assert_int_eq(c->listen[0].trusted, 0);
    ck_assert_int_eq(c->listen[1].addr.ss.ss_family, AF_INET6);
    ck_assert_uint_eq(port_of(&c->listen[1].addr), 8080);
    ck_assert_int_eq(c->listen[1].tls, 0);
    ck_assert_int_eq(c->listen[1].trusted, 1);

    ck_assert_uint_eq(c->num_domains, 2);
    ck_assert_str_eq(c->domains[0], "lizard.app");
    ck_assert_str_eq(c->domains[1], "preview.example.com");

    ck_assert_uint_eq(c->tls.num_certificates, 2);
    ck_assert_str_eq(c->tls.certificates[0].cert, "/a.pem");
    ck_assert_str_eq(c->tls.certificates[0].key, "/a.key");
    ck_assert_str_eq(c->tls.certificates[1].cert, "/b.pem");
    ck_assert_str_eq(c->tls.certificates[1].key, "/b.key");

    ck_assert_str_eq(c->redis.address, "unix:/run/redis.sock");
    ck_assert_int_eq(c->redis.addr.ss.ss_family, AF_UNIX);
    ck_assert_str_eq(((struct sockaddr_un *)&c->redis.addr.ss)->sun_path, "/run/redis.sock");
    ck_assert_str_eq(c->redis.password_env, "GW_TEST_REDIS_PW");
    ck_assert_str_eq(c->redis.password, "hunter2-redis");
    ck_assert_str_eq(c->redis.prefix, "lz:");
    ck_assert_uint_eq(c->redis.connect_timeout_ms, 250);
    ck_assert_uint_eq(c->redis.lookup_timeout_ms, 300);
    ck_assert_uint_eq(c->redis.reconnect_max_ms, 7000);

    ck_assert_str_eq(c->auth.cookie_secrets_env, "GW_TEST_COOKIES");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 1);
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_A));
    ck_assert(memcmp(c->auth.cookie_secrets[0].bytes, SECRET_A, strlen(SECRET_A)) == 0);
    ck_assert_str_eq(c->auth.cookie_name, "lz_access");
    ck_assert_uint_eq(c->auth.cookie_ttl_s, 3600);
    ck_assert_int_eq(c->auth.cookie_same_site, GW_COOKIE_SAME_SITE_NONE);

    ck_assert_uint_eq(c->routing.cache_ttl_ms, 0);
    ck_assert_uint_eq(c->routing.negative_ttl_ms, 500);
    ck_assert_uint_eq(c->routing.stale_ttl_ms, 120000);

    ck_assert_int_eq(c->upstream.host_header, GW_HOST_HEADER_LOCALHOST);
    ck_assert_uint_eq(c->upstream.connect_timeout_ms, 2000);
    ck_assert_uint_eq(c->upstream.first_byte_timeout_ms, 30000);
    ck_assert_uint_eq(c->upstream.idle_timeout_ms, 45000);
    ck_assert_uint_eq(c->upstream.websocket_idle_timeout_ms, 600000);
    ck_assert_uint_eq(c->upstream.max_idle_per_pool, 4);
    ck_assert_uint_eq(c->upstream.num_allowed_networks, 3);
    ck_assert_int_eq(c->upstream.allowed_networks[0].family, AF_INET);
    ck_assert_uint_eq(c->upstream.allowed_networks[0].prefix, 16);
    ck_assert_int_eq(c->upstream.allowed_networks[1].family, AF_INET6);
    ck_assert_uint_eq(c->upstream.allowed_networks[1].prefix, 16);
    ck_assert_uint_eq(c->upstream.allowed_networks[2].prefix, 32);

    ck_assert_uint_eq(c->limits.max_request_body_bytes, 1048576);
    ck_assert_uint_eq(c->limits.response_buffer_bytes, 65536);
    ck_assert_uint_eq(c->limits.max_connections_per_sandbox, 50);
    ck_assert_uint_eq(c->limits.client_stall_timeout_ms, 0);

    ck_assert_uint_eq(c->metering.flush_interval_ms, 1000);
    ck_assert_str_eq(c->metering.spill_file, "/tmp/spill");

    ck_assert_str_eq(c->admin.address, "127.0.0.1:9999");
    ck_assert_uint_eq(port_of(&c->admin.addr), 9999);
    ck_assert_str_eq(c->log.access, "-");
    ck_assert_str_eq(c->instance_id, "gw-test-1");
    ck_assert_uint_eq(c->workers, 3);
    gw_config_free(c);
}
END_TEST

START_TEST(test_defaults)
{
    gw_config_t *c;
    char host[256] = "";

    unsetenv("GW_TEST_COOKIES");
    c = load_ok("{" BASE "}");
    ck_assert_uint_eq(c->num_listen, 2);
    ck_assert_str_eq(c->listen[0].address, "0.0.0.0:443");
    ck_assert_uint_eq(port_of(&c->listen[0].addr), 443);
    ck_assert_int_eq(c->listen[0].tls, 1);
    ck_assert_int_eq(c->listen[0].trusted, 0);
    ck_assert_str_eq(c->listen[1].address, "0.0.0.0:80");
    ck_assert_uint_eq(port_of(&c->listen[1].addr), 80);
    ck_assert_int_eq(c->listen[1].tls, 0);
    ck_assert_int_eq(c->listen[1].trusted, 0);

    ck_assert_str_eq(c->redis.address, "127.0.0.1:6379");
    ck_assert_uint_eq(port_of(&c->redis.addr), 6379);
    ck_assert_ptr_null(c->redis.password_env);
    ck_assert_ptr_null(c->redis.password);
    ck_assert_str_eq(c->redis.prefix, "lizard:");
    ck_assert_uint_eq(c->redis.connect_timeout_ms, 1000);
    ck_assert_uint_eq(c->redis.lookup_timeout_ms, 1000);
    ck_assert_uint_eq(c->redis.reconnect_max_ms, 5000);

    ck_assert_ptr_null(c->auth.cookie_secrets_env);
    ck_assert_ptr_null(c->auth.cookie_secrets_file);
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 0);
    ck_assert_str_eq(c->auth.cookie_name, "__Host-lizard_access");
    ck_assert_uint_eq(c->auth.cookie_ttl_s, 86400);
    ck_assert_int_eq(c->auth.cookie_same_site, GW_COOKIE_SAME_SITE_LAX);

    ck_assert_uint_eq(c->routing.cache_ttl_ms, 10000);
    ck_assert_uint_eq(c->routing.negative_ttl_ms, 1000);
    ck_assert_uint_eq(c->routing.stale_ttl_ms, 60000);

    ck_assert_int_eq(c->upstream.host_header, GW_HOST_HEADER_PRESERVE);
    ck_assert_uint_eq(c->upstream.connect_timeout_ms, 5000);
    ck_assert_uint_eq(c->upstream.first_byte_timeout_ms, 60000);
    ck_assert_uint_eq(c->upstream.idle_timeout_ms, 60000);
    ck_assert_uint_eq(c->upstream.websocket_idle_timeout_ms, 300000);
    ck_assert_uint_eq(c->upstream.max_idle_per_pool, 64);
    ck_assert_uint_eq(c->upstream.num_allowed_networks, 2);
    ck_assert_int_eq(c->upstream.allowed_networks[0].family, AF_INET);
    ck_assert_uint_eq(c->upstream.allowed_networks[0].addr[0], 10);
    ck_assert_uint_eq(c->upstream.allowed_networks[0].prefix, 8);
    ck_assert_int_eq(c->upstream.allowed_networks[1].family, AF_INET6);
    ck_assert_uint_eq(c->upstream.allowed_networks[1].addr[0], 0xfd);
    ck_assert_uint_eq(c->upstream.allowed_networks[1].prefix, 8);

    ck_assert_uint_eq(c->limits.max_request_body_bytes, 67108864);
    ck_assert_uint_eq(c->limits.response_buffer_bytes, 1048576);
    ck_assert_uint_eq(c->limits.max_connections_per_sandbox, 1000);
    ck_assert_uint_eq(c->limits.client_stall_timeout_ms, 60000);
    ck_assert_uint_eq(c->limits.max_connection_buffer_bytes, 8 * 1024 * 1024);
    ck_assert_uint_eq(c->limits.max_worker_buffer_bytes, 32 * 1024 * 1024);
    ck_assert_uint_eq(c->limits.max_connections_per_client, 256);
    ck_assert_uint_eq(c->limits.max_client_connections_per_worker, 10000);

    ck_assert_uint_eq(c->metering.flush_interval_ms, 5000);
    ck_assert_str_eq(c->metering.spill_file, "/var/lib/lizard-gateway/egress.spill");

    ck_assert_str_eq(c->admin.address, "127.0.0.1:9901");
    ck_assert_uint_eq(port_of(&c->admin.addr), 9901);
    ck_assert_ptr_null(c->log.access);

    gethostname(host, sizeof(host) - 1);
    ck_assert_str_eq(c->instance_id, host);
    ck_assert_uint_ge(c->workers, 1);
    ck_assert_uint_eq(c->workers, (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    gw_config_free(c);
}
END_TEST

START_TEST(test_unknown_keys)
{
    ck_assert_err_eq("{" BASE ",'domain':['x.app']}", "config: domain: unknown key");
    ck_assert_err_eq("{" BASE ",'upstream':{'alowed_networks':['10.0.0.0/8']}}", "config: upstream.alowed_networks: unknown key");
    ck_assert_err_eq("{" BASE ",'listen':[{'address':'0.0.0.0:443'},{'adress':'0.0.0.0:80','tls':false}]}",
                     "config: listen[1].adress: unknown key");
    ck_assert_err_eq("{'domains':['a.app'],'tls':{'certificates':[{'cert':'/c','key':'/k','chain':'/x'}]}}",
                     "config: tls.certificates[0].chain: unknown key");
    ck_assert_err_eq("{" BASE ",'tls2':{}}", "config: tls2: unknown key");
    ck_assert_err_eq("{" BASE ",'redis':{'pasword_env':'X'}}", "config: redis.pasword_env: unknown key");
    ck_assert_err_eq("{" BASE ",'auth':{'cookie_secret':'X'}}", "config: auth.cookie_secret: unknown key");
    ck_assert_err_eq("{" BASE ",'routing':{'ttl':1}}", "config: routing.ttl: unknown key");
    ck_assert_err_eq("{" BASE ",'limits':{'max_body':1}}", "config: limits.max_body: unknown key");
    ck_assert_err_eq("{" BASE ",'metering':{'spill':'/x'}}", "config: metering.spill: unknown key");
    ck_assert_err_eq("{" BASE ",'admin':{'listen':'127.0.0.1:1'}}", "config: admin.listen: unknown key");
    ck_assert_err_eq("{" BASE ",'log':{'error':'-'}}", "config: log.error: unknown key");
}
END_TEST

START_TEST(test_wrong_types)
{
    ck_assert_err_eq("{" BASE ",'routing':{'cache_ttl_ms':'ten'}}",
                     "config: routing.cache_ttl_ms: expected an integer from 0 to 3600000, got \"ten\"");
    ck_assert_err_eq("{" BASE ",'listen':[{'address':'0.0.0.0:443','tls':'yes'}]}",
                     "config: listen[0].tls: expected true or false, got \"yes\"");
    ck_assert_err_eq("{'domains':'lizard.app'}", "config: domains: expected a non-empty array of hostnames, got \"lizard.app\"");
    ck_assert_err_eq("{" BASE ",'redis':[]}", "config: redis: expected an object, got an array");
    ck_assert_err_eq("{" BASE ",'upstream':{'host_header':1}}",
                     "config: upstream.host_header: expected one of \"preserve\", \"localhost\", got 1");
    ck_assert_err_eq("{" BASE ",'auth':{'cookie_ttl_s':1.5}}",
                     "config: auth.cookie_ttl_s: expected an integer from 60 to 31536000, got 1.5");
    ck_assert_err_eq("{" BASE ",'workers':true}", "config: workers: expected an integer from 0 to 256, got true");
    ck_assert_err_eq("{" BASE ",'metering':{'spill_file':null}}",
                     "config: metering.spill_file: expected a non-empty string of at most 4096 bytes, got null");
    ck_assert_err_eq("{" BASE ",'admin':{'address':9901}}",
                     "config: admin.address: expected an address string such as \"127.0.0.1:9901\", or null to disable, got 9901");
    ck_assert_err_eq("{" BASE ",'log':{'access':false}}",
                     "config: log.access: expected a file path, \"-\" for stdout, or null to disable, got false");
    ck_assert_err_eq("{" BASE ",'listen':{}}", "config: listen: expected a non-empty array of listeners, got an object");
    ck_assert_err_eq("{" BASE ",'listen':[]}", "config: listen: expected a non-empty array of listeners, got an array");
    ck_assert_err_eq("[1]", "config: test.json: expected a JSON object at the top level, got an array");
    ck_assert_err_eq("{'domains':['a.app'],'tls':{'certificates':[{'cert':7,'key':'/k'}]}}",
                     "config: tls.certificates[0].cert: expected a non-empty string of at most 4096 bytes, got 7");
    ck_assert_err_eq("{" BASE ",'upstream':{'allowed_networks':[8]}}",
                     "config: upstream.allowed_networks[0]: expected a network string such as \"10.0.0.0/8\", got 8");
    /* long values are cut in messages */
    ck_assert_err_eq(
        "{" BASE ",'upstream':{'host_header':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}}",
        "config: upstream.host_header: expected one of \"preserve\", \"localhost\", got "
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
}
END_TEST

START_TEST(test_out_of_range)
{
    ck_assert_err_eq("{" BASE ",'auth':{'cookie_ttl_s':10}}",
                     "config: auth.cookie_ttl_s: expected an integer from 60 to 31536000, got 10");
    ck_assert_err_eq("{" BASE ",'workers':1000}", "config: workers: expected an integer from 0 to 256, got 1000");
    ck_assert_err_eq("{" BASE ",'upstream':{'connect_timeout_ms':0}}",
                     "config: upstream.connect_timeout_ms: expected an integer from 1 to 3600000, got 0");
    ck_assert_err_eq("{" BASE ",'redis':{'lookup_timeout_ms':3600001}}",
                     "config: redis.lookup_timeout_ms: expected an integer from 1 to 3600000, got 3600001");
    ck_assert_err_eq("{" BASE ",'routing':{'stale_ttl_ms':-1}}",
                     "config: routing.stale_ttl_ms: expected an integer from 0 to 3600000, got -1");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_request_body_bytes':10}}",
                         "config: limits.max_request_body_bytes: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'response_buffer_bytes':0}}",
                         "config: limits.response_buffer_bytes: expected an integer");
    /* above 12 MiB h2o would move the buffers to temp files: refused, not silently capped */
    ck_assert_err_eq("{" BASE ",'limits':{'response_buffer_bytes':12582913}}",
                     "config: limits.response_buffer_bytes: expected an integer from 4096 to 12582912, got 12582913");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_connections_per_sandbox':0}}",
                         "config: limits.max_connections_per_sandbox: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'client_stall_timeout_ms':3600001}}",
                         "config: limits.client_stall_timeout_ms: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_connection_buffer_bytes':1024}}",
                         "config: limits.max_connection_buffer_bytes: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_worker_buffer_bytes':-1}}",
                         "config: limits.max_worker_buffer_bytes: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_connections_per_client':0}}",
                         "config: limits.max_connections_per_client: expected an integer");
    ck_assert_err_prefix("{" BASE ",'limits':{'max_client_connections_per_worker':0}}",
                         "config: limits.max_client_connections_per_worker: expected an integer");
    ck_assert_err_prefix("{" BASE ",'upstream':{'max_idle_per_pool':100000}}",
                         "config: upstream.max_idle_per_pool: expected an integer");
    ck_assert_err_prefix("{" BASE ",'metering':{'flush_interval_ms':0}}",
                         "config: metering.flush_interval_ms: expected an integer");
    ck_assert_err_prefix("{" BASE ",'instance_id':''}", "config: instance_id: expected a non-empty string");
    ck_assert_err_prefix("{" BASE ",'instance_id':'two words'}", "config: instance_id: expected a name without spaces");
    ck_assert_err_prefix("{" BASE ",'redis':{'prefix':'a{b}:'}}", "config: redis.prefix: expected a key prefix");
}
END_TEST

START_TEST(test_addresses)
{
    gw_config_t *c;

    ck_assert_err_prefix("{" BASE ",'listen':[{'address':'0.0.0.0:443'},{'address':'localhost:80','tls':false}]}",
                         "config: listen[1].address: expected");
    ck_assert_err_prefix("{" BASE ",'listen':[{'address':'0.0.0.0:443'},{'address':'localhost:80','tls':false}]}",
                         "config: listen[1].address: expected");
    {
        char *err = load_err("{" BASE ",'listen':[{'address':'0.0.0.0:99999'}]}");
        ck_assert_msg(strstr(err, "got \"0.0.0.0:99999\"") != NULL, "%s", err);
        free(err);
    }
    ck_assert_err_eq("{" BASE ",'listen':[{'tls':false}]}",
                     "config: listen[0].address: missing, expected an address such as \"0.0.0.0:443\"");
    ck_assert_err_prefix("{" BASE ",'listen':[{'address':'unix:/run/gw.sock'}]}", "config: listen[0].address: ");
    ck_assert_err_eq("{" BASE ",'listen':[{'address':'0.0.0.0:443'},{'address':'0.0.0.0:443'}]}",
                     "config: listen[1].address: \"0.0.0.0:443\" is already used by listen[0]");
    ck_assert_err_eq("{" BASE ",'listen':[{'address':'0.0.0.0:443','trusted':true}]}",
                     "config: listen[0].trusted: only a plain (\"tls\": false) listener can be trusted");
    ck_assert_err_prefix("{" BASE ",'redis':{'address':'redis.local:6379'}}", "config: redis.address: expected");
    ck_assert_err_prefix("{" BASE ",'admin':{'address':'unix:/x.sock'}}", "config: admin.address: ");

    c = load_ok("{" BASE ",'admin':{'address':null},'redis':{'address':'[::1]:6380'},'log':{'access':null}}");
    ck_assert_ptr_null(c->admin.address);
    ck_assert_int_eq(c->redis.addr.ss.ss_family, AF_INET6);
    ck_assert_uint_eq(port_of(&c->redis.addr), 6380);
    ck_assert_ptr_null(c->log.access);
    gw_config_free(c);
}
END_TEST

START_TEST(test_networks)
{
    ck_assert_err_prefix("{" BASE ",'upstream':{'allowed_networks':['10.0.0.0/8','10.0.0.1/8']}}",
                         "config: upstream.allowed_networks[1]: ");
    {
        char *err = load_err("{" BASE ",'upstream':{'allowed_networks':['300.0.0.0/8']}}");
        ck_assert_msg(strncmp(err, "config: upstream.allowed_networks[0]: ", 38) == 0 && strstr(err, "got \"300.0.0.0/8\"") != NULL,
                      "%s", err);
        free(err);
    }
    ck_assert_err_prefix("{" BASE ",'upstream':{'allowed_networks':['10.0.0.0/33']}}", "config: upstream.allowed_networks[0]: ");
    ck_assert_err_eq(
        "{" BASE ",'upstream':{'allowed_networks':[]}}",
        "config: upstream.allowed_networks: expected a non-empty array of networks such as \"10.0.0.0/8\", got an array");
}
END_TEST

START_TEST(test_domains)
{
    gw_config_t *c;

    c = load_ok("{'domains':['Lizard.APP','a-b.example','localhost'],'listen':[{'address':'127.0.0.1:80','tls':false}]}");
    ck_assert_uint_eq(c->num_domains, 3);
    ck_assert_str_eq(c->domains[0], "lizard.app");
    ck_assert_str_eq(c->domains[1], "a-b.example");
    ck_assert_str_eq(c->domains[2], "localhost");
    /* no TLS listener: no certificate needed */
    ck_assert_uint_eq(c->tls.num_certificates, 0);
    gw_config_free(c);

    ck_assert_err_prefix("{'domains':['.lizard.app']}", "config: domains[0]: expected a hostname");
    ck_assert_err_prefix("{'domains':['ok.app','lizard.app.']}", "config: domains[1]: expected a hostname");
    ck_assert_err_prefix("{'domains':['lizard..app']}", "config: domains[0]: expected a hostname");
    ck_assert_err_prefix("{'domains':['*.lizard.app']}", "config: domains[0]: expected a hostname");
    ck_assert_err_prefix("{'domains':['liz_ard.app']}", "config: domains[0]: expected a hostname");
    ck_assert_err_prefix("{'domains':['-x.app']}", "config: domains[0]: expected a hostname");
    ck_assert_err_prefix("{'domains':['']}", "config: domains[0]: expected a hostname");
    ck_assert_err_eq("{'domains':['10.0.0.1']}", "config: domains[0]: expected a hostname, got an IP address \"10.0.0.1\"");
    ck_assert_err_prefix("{'domains':['::1']}", "config: domains[0]: expected a hostname");
    ck_assert_err_eq("{'domains':['a.app','A.app']}", "config: domains[1]: \"A.app\" is listed twice");
    ck_assert_err_eq("{'domains':[]}", "config: domains: expected a non-empty array of hostnames, got an array");
    ck_assert_err_eq("{'domains':[1]}", "config: domains[0]: expected a hostname string, got 1");
    ck_assert_err_prefix("{'tls':{'certificates':[{'cert':'/c','key':'/k'}]}}", "config: domains: missing");
}
END_TEST

START_TEST(test_tls_required)
{
    ck_assert_err_eq("{'domains':['a.app']}",
                     "config: tls.certificates: missing, expected at least one {\"cert\": PATH, \"key\": PATH}: "
                     "listen[0] (\"0.0.0.0:443\") uses TLS");
    ck_assert_err_prefix("{'domains':['a.app'],'tls':{'certificates':[]}}", "config: tls.certificates: missing");
    ck_assert_err_eq("{'domains':['a.app'],'tls':{'certificates':[{'cert':'/c'}]}}",
                     "config: tls.certificates[0].key: missing, expected the path of a PEM file");
    ck_assert_err_eq("{'domains':['a.app'],'tls':{'certificates':{'cert':'/c','key':'/k'}}}",
                     "config: tls.certificates: expected an array of {\"cert\": PATH, \"key\": PATH}, got an object");
}
END_TEST

START_TEST(test_invalid_json)
{
    char *path = write_temp("{\n  \"domains\": [\"a\",]\n}\n"), *err = NULL, expected[512];
    gw_config_t *c = NULL;

    ck_assert_int_eq(gw_config_load(path, &c, &err), -1);
    ck_assert_ptr_null(c);
    snprintf(expected, sizeof(expected), "config: %s:2:19: unexpected token near ']'", path);
    ck_assert_str_eq(err, expected);
    free(err);
    unlink(path);
    free(path);

    ck_assert_err_eq("{'a':1,'a':2}", "config: test.json:1:10: duplicate object key near '\"a\"'");
    ck_assert_err_prefix("{'domains':['a.app']} x", "config: test.json:1:");
}
END_TEST

START_TEST(test_file)
{
    char *path = write_temp("{\"domains\": [\"lizard.app\"], \"listen\": [{\"address\": \"127.0.0.1:8080\", \"tls\": false}], "
                            "\"metering\": {\"spill_file\": \"/tmp/gw-config-test.spill\"}}"),
         *err = NULL;
    gw_config_t *c = NULL;

    ck_assert_msg(gw_config_load(path, &c, &err) == 0, "%s", err);
    ck_assert_str_eq(c->domains[0], "lizard.app");
    gw_config_free(c);
    unlink(path);
    free(path);

    ck_assert_int_eq(gw_config_load("/nonexistent/gateway.json", &c, &err), -1);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err, "config: /nonexistent/gateway.json: No such file or directory");
    free(err);
}
END_TEST

START_TEST(test_redis_password)
{
    gw_config_t *c;
    char *err;

    setenv("GW_TEST_REDIS_PW", "pa55word", 1);
    c = load_ok("{" BASE ",'redis':{'password_env':'GW_TEST_REDIS_PW'}}");
    ck_assert_str_eq(c->redis.password, "pa55word");
    gw_config_free(c);

    setenv("GW_TEST_REDIS_PW", "", 1);
    ck_assert_err_eq("{" BASE ",'redis':{'password_env':'GW_TEST_REDIS_PW'}}",
                     "config: redis.password_env: the environment variable GW_TEST_REDIS_PW is not set or is empty");
    unsetenv("GW_TEST_REDIS_PW");
    err = load_err("{" BASE ",'redis':{'password_env':'GW_TEST_REDIS_PW'}}");
    ck_assert_msg(strstr(err, "GW_TEST_REDIS_PW") != NULL, "%s", err);
    free(err);
    ck_assert_err_prefix("{" BASE ",'redis':{'password_env':'1BAD'}}",
                         "config: redis.password_env: expected the name of an environment variable");
    ck_assert_err_prefix("{" BASE ",'redis':{'password_env':''}}",
                         "config: redis.password_env: expected the name of an environment variable");
}
END_TEST

START_TEST(test_redis_sentinels)
{
    gw_config_t *c;

    setenv("GW_TEST_SENTINEL_PW", "s3ntinel", 1);
    c = load_ok("{" BASE ",'redis':{'sentinels':['10.0.0.5:26379','[fd00::6]:26379'],'master_name':'lizard',"
                "'sentinel_password_env':'GW_TEST_SENTINEL_PW'}}");
    ck_assert_uint_eq(c->redis.num_sentinels, 2);
    ck_assert_str_eq(c->redis.sentinels[1], "[fd00::6]:26379");
    ck_assert_uint_eq(port_of(&c->redis.sentinel_addrs[0]), 26379);
    ck_assert_int_eq(c->redis.sentinel_addrs[1].ss.ss_family, AF_INET6);
    ck_assert_str_eq(c->redis.master_name, "lizard");
    ck_assert_str_eq(c->redis.sentinel_password, "s3ntinel");
    gw_config_free(c);
    unsetenv("GW_TEST_SENTINEL_PW");

    ck_assert_err_eq(
        "{" BASE ",'redis':{'sentinels':['10.0.0.5:26379'],'master_name':'lizard','sentinel_password_env':'GW_TEST_SENTINEL_PW'}}",
        "config: redis.sentinel_password_env: the environment variable GW_TEST_SENTINEL_PW is not set or is empty");
    ck_assert_err_eq("{" BASE ",'redis':{'sentinels':['10.0.0.5:26379']}}",
                     "config: redis.master_name: missing, required with redis.sentinels (the name the sentinels monitor)");
    ck_assert_err_eq("{" BASE ",'redis':{'address':'10.0.0.1:6379','sentinels':['10.0.0.5:26379'],'master_name':'m'}}",
                     "config: redis.address: set redis.address or redis.sentinels, not both");
    ck_assert_err_eq("{" BASE ",'redis':{'master_name':'m'}}", "config: redis.master_name: only meaningful with redis.sentinels");
    ck_assert_err_eq("{" BASE ",'redis':{'sentinel_password_env':'X'}}",
                     "config: redis.sentinel_password_env: only meaningful with redis.sentinels");
    ck_assert_err_prefix("{" BASE ",'redis':{'sentinels':[],'master_name':'m'}}",
                         "config: redis.sentinels: expected a non-empty array of at most 16 sentinel addresses");
    ck_assert_err_prefix("{" BASE ",'redis':{'sentinels':'10.0.0.5:26379','master_name':'m'}}",
                         "config: redis.sentinels: expected a non-empty array");
    ck_assert_err_prefix("{" BASE ",'redis':{'sentinels':['sentinel.local:26379'],'master_name':'m'}}",
                         "config: redis.sentinels[0]: expected");
    ck_assert_err_eq("{" BASE ",'redis':{'sentinels':['10.0.0.5:26379','10.0.0.5:26379'],'master_name':'m'}}",
                     "config: redis.sentinels[1]: \"10.0.0.5:26379\" is already redis.sentinels[0]");
    ck_assert_err_prefix("{" BASE ",'redis':{'sentinels':['10.0.0.5:26379'],'master_name':'a b'}}",
                         "config: redis.master_name: expected a Sentinel master name without spaces");
    ck_assert_err_prefix("{" BASE ",'redis':{'sentinels':['10.0.0.5:26379'],'master_name':''}}",
                         "config: redis.master_name: expected a non-empty string");
}
END_TEST

START_TEST(test_cookie_secrets)
{
    gw_config_t *c;
    char *err;

    setenv("GW_TEST_COOKIES", SECRET_A "," SECRET_B, 1);
    c = load_ok("{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES'}}");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 2);
    /* the first signs, so order matters */
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_A));
    ck_assert(memcmp(c->auth.cookie_secrets[0].bytes, SECRET_A, strlen(SECRET_A)) == 0);
    ck_assert_uint_eq(c->auth.cookie_secrets[1].len, strlen(SECRET_B));
    ck_assert(memcmp(c->auth.cookie_secrets[1].bytes, SECRET_B, strlen(SECRET_B)) == 0);
    gw_config_free(c);

    /* spaces around commas are not part of a secret */
    setenv("GW_TEST_COOKIES", SECRET_B " , " SECRET_A, 1);
    c = load_ok("{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES'}}");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 2);
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_B));
    ck_assert(memcmp(c->auth.cookie_secrets[1].bytes, SECRET_A, strlen(SECRET_A)) == 0);
    gw_config_free(c);

    setenv("GW_TEST_COOKIES", SECRET_A ",tooshort-secret", 1);
    err = load_err("{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES'}}");
    ck_assert_str_eq(err, "config: auth.cookie_secrets_env: secret 2 of 2 in GW_TEST_COOKIES is shorter than 32 bytes");
    ck_assert_ptr_null(strstr(err, "tooshort"));
    free(err);

    setenv("GW_TEST_COOKIES", SECRET_A ",", 1);
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES'}}",
                         "config: auth.cookie_secrets_env: secret 2 of 2");

    unsetenv("GW_TEST_COOKIES");
    ck_assert_err_eq("{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES'}}",
                     "config: auth.cookie_secrets_env: the environment variable GW_TEST_COOKIES is not set or is empty");
}
END_TEST

/* {BASE, auth.cookie_secrets_file: path}, as JSON with ' for ". Static. */
static const char *file_conf(const char *path)
{
    static char buf[1024];

    snprintf(buf, sizeof(buf), "{" BASE ",'auth':{'cookie_secrets_file':'%s'}}", path);
    return buf;
}

/* A secrets file holding `text` with `mode` is refused with
 * "config: auth.cookie_secrets_file: <path>: <what>". */
static void check_file_err(const char *text, mode_t mode, const char *what)
{
    char *path = write_temp(text), *err, expected[512];

    ck_assert_int_eq(chmod(path, mode), 0);
    err = load_err(file_conf(path));
    snprintf(expected, sizeof(expected), "config: auth.cookie_secrets_file: %s: %s", path, what);
    ck_assert_str_eq(err, expected);
    free(err);
    unlink(path);
    free(path);
}

START_TEST(test_cookie_secrets_file)
{
    char *path, *err, big[70000];
    gw_config_t *c;
    size_t i;

    /* comments, blank lines, CRLF and spaces around a secret are layout */
    path = write_temp("# rotated 2026-11-29\n\n  " SECRET_B "  \r\n\t# the previous one\n" SECRET_A "\n\n");
    c = load_ok(file_conf(path));
    ck_assert_str_eq(c->auth.cookie_secrets_file, path);
    ck_assert_ptr_null(c->auth.cookie_secrets_env);
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 2);
    /* the first signs */
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_B));
    ck_assert(memcmp(c->auth.cookie_secrets[0].bytes, SECRET_B, strlen(SECRET_B)) == 0);
    ck_assert_uint_eq(c->auth.cookie_secrets[1].len, strlen(SECRET_A));
    ck_assert(memcmp(c->auth.cookie_secrets[1].bytes, SECRET_A, strlen(SECRET_A)) == 0);
    gw_config_free(c);

    /* no newline at the end; group-readable is allowed (root:lizard 0640) */
    unlink(path);
    free(path);
    path = write_temp(SECRET_A);
    ck_assert_int_eq(chmod(path, 0640), 0);
    c = load_ok(file_conf(path));
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 1);
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_A));
    gw_config_free(c);

    /* exactly one source */
    setenv("GW_TEST_COOKIES", SECRET_A, 1);
    {
        char json[1024];
        snprintf(json, sizeof(json), "{" BASE ",'auth':{'cookie_secrets_env':'GW_TEST_COOKIES','cookie_secrets_file':'%s'}}", path);
        ck_assert_err_eq(json, "config: auth: cookie_secrets_env and cookie_secrets_file are both set; set only one "
                               "(cookie_secrets_file is re-read on SIGHUP, the environment only at start)");
    }
    unsetenv("GW_TEST_COOKIES");
    unlink(path);
    free(path);

    /* the same rules as the environment, and never a secret in a message */
    path = write_temp(SECRET_A "\n# fine\nshort-but-secret-value\n");
    err = load_err(file_conf(path));
    ck_assert_ptr_null(strstr(err, "short-but-secret-value"));
    ck_assert_ptr_null(strstr(err, SECRET_A));
    free(err);
    unlink(path);
    free(path);
    check_file_err(SECRET_A "\n# fine\nshort-but-secret-value\n", 0600, "line 3: the secret is shorter than 32 bytes");
    check_file_err("", 0600, "holds no secret (only blank lines and comments)");
    check_file_err("# only a comment\n \n", 0600, "holds no secret (only blank lines and comments)");
    check_file_err(SECRET_A "\n", 0644, "readable or writable by others (mode 0644); make it 0600 or 0640 (chmod o-rw)");
    check_file_err(SECRET_A "\n", 0602, "readable or writable by others (mode 0602); make it 0600 or 0640 (chmod o-rw)");

    /* at most 16 */
    for (i = 0; i != 17; ++i)
        memcpy(big + i * (sizeof(SECRET_A "\n") - 1), SECRET_A "\n", sizeof(SECRET_A "\n") - 1);
    big[17 * (sizeof(SECRET_A "\n") - 1)] = '\0';
    check_file_err(big, 0600, "line 17: more than 16 secrets; at most 16 are allowed");
    /* bounded: a wrong path (a log, a binary) is not read whole */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    check_file_err(big, 0600, "larger than 65536 bytes");

    ck_assert_err_eq(file_conf("/nonexistent/cookie-secrets"),
                     "config: auth.cookie_secrets_file: /nonexistent/cookie-secrets: No such file or directory");
    ck_assert_err_eq(file_conf("/tmp"), "config: auth.cookie_secrets_file: /tmp: not a regular file");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_secrets_file':''}}",
                         "config: auth.cookie_secrets_file: expected a non-empty string");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_secrets_file':7}}",
                         "config: auth.cookie_secrets_file: expected a non-empty string");
}
END_TEST

START_TEST(test_cookie_secrets_file_nul)
{
    static const char text[] = SECRET_A "\n\0" SECRET_B "\n";
    char path[] = "/tmp/gw-config-test-XXXXXX", expected[256], *err;
    int fd = mkstemp(path);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    err = load_err(file_conf(path));
    snprintf(expected, sizeof(expected), "config: auth.cookie_secrets_file: %s: contains a NUL byte; expected one secret per line",
             path);
    ck_assert_str_eq(err, expected);
    free(err);
    unlink(path);
}
END_TEST

START_TEST(test_cookie_options)
{
    static const struct {
        const char *json;
        gw_cookie_same_site_t expected;
    } cases[] = {
        {"{" BASE ",'auth':{'cookie_same_site':'lax'}}", GW_COOKIE_SAME_SITE_LAX},
        {"{" BASE ",'auth':{'cookie_same_site':'strict'}}", GW_COOKIE_SAME_SITE_STRICT},
        {"{" BASE ",'auth':{'cookie_same_site':'none'}}", GW_COOKIE_SAME_SITE_NONE},
    };
    gw_config_t *c;
    size_t i;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        c = load_ok(cases[i].json);
        ck_assert_int_eq(c->auth.cookie_same_site, cases[i].expected);
        gw_config_free(c);
    }
    ck_assert_err_eq("{" BASE ",'auth':{'cookie_same_site':'Lax'}}",
                     "config: auth.cookie_same_site: expected one of \"lax\", \"strict\", \"none\", got \"Lax\"");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_name':'bad name'}}", "config: auth.cookie_name: expected a cookie name");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_name':'a;b'}}", "config: auth.cookie_name: expected a cookie name");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_name':'a=b'}}", "config: auth.cookie_name: expected a cookie name");
    ck_assert_err_prefix("{" BASE ",'auth':{'cookie_name':''}}", "config: auth.cookie_name: expected a non-empty string");
}
END_TEST

START_TEST(test_workers)
{
    gw_config_t *c;

    c = load_ok("{" BASE ",'workers':0}");
    ck_assert_uint_ge(c->workers, 1);
    ck_assert_uint_le(c->workers, 256);
    gw_config_free(c);
    c = load_ok("{" BASE ",'workers':256}");
    ck_assert_uint_eq(c->workers, 256);
    gw_config_free(c);
}
END_TEST

/* BASE with tls.ticket_keys_file = `file` (a JSON string body) */
#define TICKET_CONF(file)                                                                                                          \
    "{'domains':['lizard.app'],'tls':{'certificates':[{'cert':'/etc/c.pem','key':'/etc/k.pem'}],'ticket_keys_file':" file "}}"

START_TEST(test_ticket_keys_file)
{
    /* base64 of 80 and of 47 bytes */
    static const char key80[] =
        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    static const char key47[] = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGU=";
    char json[1024], text[256], expected[512], *path, *err;
    gw_config_t *c;

    c = load_ok("{" BASE "}");
    ck_assert_ptr_null(c->tls.ticket_keys_file);
    gw_config_free(c);

    snprintf(text, sizeof(text), "# fleet keys\n%s\n", key80);
    path = write_temp(text);
    snprintf(json, sizeof(json), TICKET_CONF("'%s'"), path);
    c = load_ok(json);
    ck_assert_str_eq(c->tls.ticket_keys_file, path);
    ck_assert_uint_eq(c->tls.num_certificates, 1);
    gw_config_free(c);
    unlink(path);
    free(path);

    /* read at load, so --check refuses a bad file; never a key in the message */
    snprintf(text, sizeof(text), "%s\n%s\n", key80, key47);
    path = write_temp(text);
    snprintf(json, sizeof(json), TICKET_CONF("'%s'"), path);
    err = load_err(json);
    snprintf(expected, sizeof(expected), "config: tls.ticket_keys_file: %s: line 2: the key is 47 bytes long, expected 48 or 80",
             path);
    ck_assert_str_eq(err, expected);
    ck_assert_ptr_null(strstr(err, key47));
    free(err);
    unlink(path);
    free(path);

    ck_assert_err_eq(TICKET_CONF("'/nonexistent/ticket.keys'"),
                     "config: tls.ticket_keys_file: /nonexistent/ticket.keys: No such file or directory");
    ck_assert_err_prefix(TICKET_CONF("7"), "config: tls.ticket_keys_file: expected a non-empty string");
    ck_assert_err_eq("{'domains':['lizard.app'],'tls':{'ticket_key_file':'x'}}", "config: tls.ticket_key_file: unknown key");
}
END_TEST

#define EXAMPLE_SPILL_DIR "/var/lib/lizard-gateway"

/* deploy/gateway.example.json with its spill file moved from
 * EXAMPLE_SPILL_DIR (systemd's StateDirectory, absent on a build machine) to
 * /tmp; the caller unlinks and frees the path. */
static char *example_in_tmp(void)
{
    FILE *f = fopen(GW_TEST_SRCDIR "/../deploy/gateway.example.json", "r");
    char text[16384], out[16384 + 64], *at, *path;
    size_t len;

    ck_assert_ptr_nonnull(f);
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    ck_assert_ptr_nonnull(at = strstr(text, EXAMPLE_SPILL_DIR "/"));
    snprintf(out, sizeof(out), "%.*s/tmp/%s", (int)(at - text), text, at + sizeof(EXAMPLE_SPILL_DIR));
    path = write_temp(out);
    return path;
}

START_TEST(test_example_file)
{
    gw_config_t *c = NULL;
    char *err = NULL, *path = example_in_tmp();

    setenv("REDIS_PASSWORD", "example-redis-password", 1);
    setenv("LIZARD_COOKIE_SECRETS", SECRET_A "," SECRET_B, 1);
    ck_assert_msg(gw_config_load(path, &c, &err) == 0, "%s", err);
    ck_assert_str_eq(c->domains[0], "lizard.app");
    ck_assert_uint_ge(c->tls.num_certificates, 1);
    ck_assert_str_eq(c->redis.password, "example-redis-password");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 2);
    ck_assert_uint_ge(c->workers, 1);
    ck_assert_str_eq(c->metering.spill_file, "/tmp/egress.spill");
    gw_config_free(c);

    /* as shipped: fine where its spill directory is writable, else that is the error */
    if (gw_config_load(GW_TEST_SRCDIR "/../deploy/gateway.example.json", &c, &err) == 0) {
        ck_assert_int_eq(access(EXAMPLE_SPILL_DIR, W_OK), 0);
        gw_config_free(c);
    } else {
        ck_assert_msg(strstr(err, "metering.spill_file") != NULL && strstr(err, EXAMPLE_SPILL_DIR) != NULL, "%s", err);
        free(err);
    }

    /* the secrets it names are required */
    unsetenv("LIZARD_COOKIE_SECRETS");
    ck_assert_int_eq(gw_config_load(path, &c, &err), -1);
    ck_assert_msg(strstr(err, "LIZARD_COOKIE_SECRETS") != NULL, "%s", err);
    free(err);
    unlink(path);
    free(path);
}
END_TEST

/* Keys of the table that deploy/gateway.example.json cannot hold, and why;
 * every other key is in it, with the table's default when it has one. */
static const struct {
    const char *path, *why;
} not_in_example[] = {
    {"tls.ticket_keys_file", "the file must exist for the example to load"},
    {"redis.sentinels", "replaces redis.address (deploy/kubernetes/configmap.yaml shows Sentinel mode)"},
    {"redis.master_name", "only with redis.sentinels"},
    {"redis.sentinel_password_env", "only with redis.sentinels"},
    {"auth.cookie_secrets_file", "set instead of auth.cookie_secrets_env, never with it"},
};

static const gw_config_key_t *table_key(const char *path)
{
    size_t i;

    for (i = 0; i != gw_config_num_keys; ++i)
        if (strcmp(gw_config_keys[i].path, path) == 0)
            return &gw_config_keys[i];
    return NULL;
}

static char *read_source_file(const char *name)
{
    char path[512], *text = malloc(1 << 20);
    FILE *f;
    size_t len;

    snprintf(path, sizeof(path), GW_TEST_SRCDIR "/../%s", name);
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: cannot open", path);
    len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[len] = '\0';
    return text;
}

/* The README's configuration table: key (without a trailing "[]") and default cell of each row. */
typedef struct st_readme_row_t {
    char key[128], dflt[256];
} readme_row_t;

static size_t readme_rows(readme_row_t *rows, size_t max)
{
    char *text = read_source_file("README.md"), *p, *end;
    size_t n = 0;

    ck_assert_msg((p = strstr(text, "\n## Configuration\n")) != NULL, "README.md: no \"## Configuration\" section");
    if ((end = strstr(p + 1, "\n## ")) != NULL)
        *end = '\0';
    while ((p = strstr(p, "\n| `")) != NULL) {
        char *key = p + 4, *key_end = strchr(key, '`'), *cell, *cell_end;

        ck_assert_uint_lt(n, max);
        ck_assert_ptr_nonnull(key_end);
        snprintf(rows[n].key, sizeof(rows[n].key), "%.*s", (int)(key_end - key), key);
        if (strlen(rows[n].key) > 2 && strcmp(rows[n].key + strlen(rows[n].key) - 2, "[]") == 0)
            rows[n].key[strlen(rows[n].key) - 2] = '\0';
        ck_assert_msg((cell = strstr(key_end, " | ")) != NULL && (cell_end = strstr(cell + 3, " | ")) != NULL,
                      "README.md: the row of %s has no default column", rows[n].key);
        snprintf(rows[n].dflt, sizeof(rows[n].dflt), "%.*s", (int)(cell_end - cell - 3), cell + 3);
        ++n;
        p = key_end;
    }
    free(text);
    return n;
}

/* How the README writes the default `dflt` (JSON text) of a scalar key: 1000, `lax`. */
static void readme_default(const char *dflt, char *buf, size_t size)
{
    json_t *v = json_loads(dflt, JSON_DECODE_ANY, NULL);

    ck_assert_ptr_nonnull(v);
    if (json_is_string(v))
        snprintf(buf, size, "`%s`", json_string_value(v));
    else
        snprintf(buf, size, "%s", dflt);
    json_decref(v);
}

/* The example's value at `path` ("redis.prefix"), or NULL. */
static json_t *example_value(json_t *example, const char *path)
{
    const char *dot = strchr(path, '.');
    char section[64];
    json_t *obj;

    if (dot == NULL)
        return json_object_get(example, path);
    snprintf(section, sizeof(section), "%.*s", (int)(dot - path), path);
    return (obj = json_object_get(example, section)) != NULL ? json_object_get(obj, dot + 1) : NULL;
}

START_TEST(test_documented_keys)
{
    readme_row_t rows[128];
    size_t num_rows = readme_rows(rows, 128), i, j;
    char *text = read_source_file("deploy/gateway.example.json"), path[256], expected[256];
    json_t *example = json_loads(text, 0, NULL), *section, *value, *dflt;
    const char *name, *key;

    ck_assert_msg(example != NULL, "deploy/gateway.example.json is not JSON");

    /* every key documented is a key of the table */
    for (i = 0; i != num_rows; ++i)
        ck_assert_msg(table_key(rows[i].key) != NULL, "README.md: %s is not a key of the table (gateway/config.c)", rows[i].key);
    json_object_foreach(example, name, section)
    {
        if (table_key(name) != NULL)
            continue;
        ck_assert_msg(json_is_object(section), "deploy/gateway.example.json: %s is not a key of the table (gateway/config.c)",
                      name);
        json_object_foreach(section, key, value)
        {
            snprintf(path, sizeof(path), "%s.%s", name, key);
            ck_assert_msg(table_key(path) != NULL, "deploy/gateway.example.json: %s is not a key of the table (gateway/config.c)",
                          path);
        }
    }
    for (j = 0; j != sizeof(not_in_example) / sizeof(not_in_example[0]); ++j)
        ck_assert_msg(table_key(not_in_example[j].path) != NULL, "not_in_example: %s is not a key of the table",
                      not_in_example[j].path);

    /* every key of the table is documented, with its default */
    for (i = 0; i != gw_config_num_keys; ++i) {
        const gw_config_key_t *k = &gw_config_keys[i];
        const readme_row_t *row = NULL;
        int exempt = 0;

        for (j = 0; j != num_rows; ++j)
            if (strcmp(rows[j].key, k->path) == 0)
                row = &rows[j];
        ck_assert_msg(row != NULL, "README.md: the configuration table has no row for %s", k->path);
        if (k->type != GW_CONFIG_LIST && k->dflt != NULL) {
            readme_default(k->dflt, expected, sizeof(expected));
            ck_assert_msg(strncmp(row->dflt, expected, strlen(expected)) == 0 &&
                              !(row->dflt[strlen(expected)] >= '0' && row->dflt[strlen(expected)] <= '9'),
                          "README.md: the default of %s is \"%s\"; the table (gateway/config.c) says %s", k->path, row->dflt,
                          expected);
        }

        for (j = 0; j != sizeof(not_in_example) / sizeof(not_in_example[0]); ++j)
            if (strcmp(not_in_example[j].path, k->path) == 0)
                exempt = 1;
        value = example_value(example, k->path);
        ck_assert_msg(value != NULL || exempt, "deploy/gateway.example.json: %s is missing (the table's default: %s)", k->path,
                      k->dflt != NULL ? k->dflt : "none");
        if (value != NULL && k->type != GW_CONFIG_LIST && k->dflt != NULL) {
            char *got = json_dumps(value, JSON_ENCODE_ANY);
            ck_assert_ptr_nonnull(dflt = json_loads(k->dflt, JSON_DECODE_ANY, NULL));
            ck_assert_msg(json_equal(value, dflt),
                          "deploy/gateway.example.json: %s is %s; the table's default (gateway/config.c) is %s", k->path, got,
                          k->dflt);
            json_decref(dflt);
            free(got);
        }
    }
    json_decref(example);
    free(text);
}
END_TEST

/* The message of gw_config_load for a config whose only special key is
 * metering.spill_file = spill; NULL when it loads. In a child that gave up
 * root when run as root (root may write anywhere). */
static char *spill_file_error(const char *spill)
{
    char json[512], *path, msg[1024] = "";
    int pipefd[2], status;
    ssize_t got, total = 0;
    pid_t pid;

    snprintf(json, sizeof(json),
             "{\"domains\": [\"lizard.app\"], \"listen\": [{\"address\": \"127.0.0.1:8080\", \"tls\": false}], "
             "\"metering\": {\"spill_file\": \"%s\"}}",
             spill);
    path = write_temp(json);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(pipe(pipefd), 0);
    ck_assert_int_ge(pid = fork(), 0);
    if (pid == 0) {
        gw_config_t *c = NULL;
        char *err = NULL;
        close(pipefd[0]);
        if (geteuid() == 0 && setuid(65534) != 0)
            _exit(2);
        if (gw_config_load(path, &c, &err) == 0)
            _exit(0);
        if (write(pipefd[1], err, strlen(err)) < 0)
            _exit(3);
        _exit(1);
    }
    close(pipefd[1]);
    while ((got = read(pipefd[0], msg + total, sizeof(msg) - 1 - total)) > 0)
        total += got;
    msg[total] = '\0';
    close(pipefd[0]);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_msg(WEXITSTATUS(status) <= 1, "the child failed: %d", WEXITSTATUS(status));
    unlink(path);
    free(path);
    return WEXITSTATUS(status) == 0 ? NULL : strdup(msg);
}

START_TEST(test_spill_file_directory)
{
    char dir[] = "/tmp/gw-config-spill-XXXXXX", spill[128], *err;

    ck_assert_ptr_nonnull(mkdtemp(dir));

    /* writable by everyone (the test's child may not be root) */
    ck_assert_int_eq(chmod(dir, 0777), 0);
    snprintf(spill, sizeof(spill), "%s/egress.spill", dir);
    ck_assert_ptr_null(err = spill_file_error(spill));

    /* a directory that does not exist */
    snprintf(spill, sizeof(spill), "%s/missing/egress.spill", dir);
    ck_assert_ptr_nonnull(err = spill_file_error(spill));
    ck_assert_msg(strstr(err, "config: metering.spill_file: the directory ") == err && strstr(err, "/missing does not exist"), "%s",
                  err);
    free(err);

    /* a directory this process cannot write to */
    ck_assert_int_eq(chmod(dir, 0555), 0);
    snprintf(spill, sizeof(spill), "%s/egress.spill", dir);
    ck_assert_ptr_nonnull(err = spill_file_error(spill));
    ck_assert_msg(strstr(err, "config: metering.spill_file: the directory ") == err && strstr(err, dir) != NULL &&
                      strstr(err, "is not writable by this process") != NULL,
                  "%s", err);
    free(err);

    /* the path of a directory */
    ck_assert_ptr_nonnull(err = spill_file_error(dir));
    ck_assert_msg(strstr(err, "config: metering.spill_file: ") == err && strstr(err, "is a directory") != NULL, "%s", err);
    free(err);

    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_unknown_keys);
    tcase_add_test(tc, test_wrong_types);
    tcase_add_test(tc, test_out_of_range);
    tcase_add_test(tc, test_addresses);
    tcase_add_test(tc, test_networks);
    tcase_add_test(tc, test_domains);
    tcase_add_test(tc, test_tls_required);
    tcase_add_test(tc, test_invalid_json);
    tcase_add_test(tc, test_file);
    tcase_add_test(tc, test_redis_password);
    tcase_add_test(tc, test_cookie_secrets);
    tcase_add_test(tc, test_cookie_secrets_file);
    tcase_add_test(tc, test_cookie_secrets_file_nul);
    tcase_add_test(tc, test_ticket_keys_file);
    tcase_add_test(tc, test_cookie_options);
    tcase_add_test(tc, test_workers);
    tcase_add_test(tc, test_example_file);
    tcase_add_test(tc, test_documented_keys);
    tcase_add_test(tc, test_spill_file_directory);
    tcase_add_test(tc, test_redis_sentinels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
