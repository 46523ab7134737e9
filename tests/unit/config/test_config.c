/*
 * config/config.c: every key read through the key table, the defaults, and
 * the messages an operator sees for unknown keys, wrong types, bad values
 * and bad JSON. JSON in this file is written with ' for " (see q()).
 * Secrets and files: test_config_secrets.c; docs/gen/configuration.md and the example
 * against the table: test_config_documented.c.
 */
#include <sys/un.h>
#include "config_test.h"

/* The values test_full and test_defaults both check, one row each. */
typedef struct {
    struct {
        uint16_t port;
        int tls, trusted;
    } listen[2];
    const char *redis_prefix;
    uint64_t redis_timeouts_ms[3]; /* connect, lookup, reconnect_max */
    const char *cookie_name;
    uint64_t cookie_ttl_s;
    int same_site;
    uint64_t routing_ttls_ms[3]; /* cache, negative, stale */
    int host_header;
    uint64_t upstream_timeouts_ms[4]; /* connect, first byte, idle, websocket idle */
    size_t max_idle_per_pool, num_allowed_networks;
} expected_t;

static void assert_values(const gw_config_t *c, const expected_t *e)
{
    ck_assert_uint_eq(c->num_listen, 2);
    for (size_t i = 0; i != 2; ++i) {
        ck_assert_uint_eq(port_of(&c->listen[i].addr), e->listen[i].port);
        ck_assert_int_eq(c->listen[i].tls, e->listen[i].tls);
        ck_assert_int_eq(c->listen[i].trusted, e->listen[i].trusted);
    }
    ck_assert_str_eq(c->redis.prefix, e->redis_prefix);
    ck_assert_uint_eq(c->redis.connect_timeout_ms, e->redis_timeouts_ms[0]);
    ck_assert_uint_eq(c->redis.lookup_timeout_ms, e->redis_timeouts_ms[1]);
    ck_assert_uint_eq(c->redis.reconnect_max_ms, e->redis_timeouts_ms[2]);
    ck_assert_str_eq(c->auth.cookie_name, e->cookie_name);
    ck_assert_uint_eq(c->auth.cookie_ttl_s, e->cookie_ttl_s);
    ck_assert_int_eq(c->auth.cookie_same_site, e->same_site);
    ck_assert_uint_eq(c->routing.cache_ttl_ms, e->routing_ttls_ms[0]);
    ck_assert_uint_eq(c->routing.negative_ttl_ms, e->routing_ttls_ms[1]);
    ck_assert_uint_eq(c->routing.stale_ttl_ms, e->routing_ttls_ms[2]);
    ck_assert_int_eq(c->upstream.host_header, e->host_header);
    ck_assert_uint_eq(c->upstream.connect_timeout_ms, e->upstream_timeouts_ms[0]);
    ck_assert_uint_eq(c->upstream.first_byte_timeout_ms, e->upstream_timeouts_ms[1]);
    ck_assert_uint_eq(c->upstream.idle_timeout_ms, e->upstream_timeouts_ms[2]);
    ck_assert_uint_eq(c->upstream.websocket_idle_timeout_ms, e->upstream_timeouts_ms[3]);
    ck_assert_uint_eq(c->upstream.max_idle_per_pool, e->max_idle_per_pool);
    ck_assert_uint_eq(c->upstream.num_allowed_networks, e->num_allowed_networks);
}

START_TEST(test_full)
{
    gw_config_t *c;

    setenv("GW_TEST_REDIS_PW", "hunter2-redis", 1);
    setenv("GW_TEST_COOKIES", SECRET_A, 1);
    c = load_ok("{"
                "'listen':[{'address':'127.0.0.1:8443','tls':true,'proxy_protocol':true},{'address':'[::1]:8080','tls':false,'"
                "trusted':true}],"
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

    assert_values(c, &(expected_t){.listen = {{8443, 1, 0}, {8080, 0, 1}},
                                   .redis_prefix = "lz:",
                                   .redis_timeouts_ms = {250, 300, 7000},
                                   .cookie_name = "lz_access",
                                   .cookie_ttl_s = 3600,
                                   .same_site = GW_COOKIE_SAME_SITE_NONE,
                                   .routing_ttls_ms = {0, 500, 120000},
                                   .host_header = GW_HOST_HEADER_LOCALHOST,
                                   .upstream_timeouts_ms = {2000, 30000, 45000, 600000},
                                   .max_idle_per_pool = 4,
                                   .num_allowed_networks = 3});
    ck_assert_str_eq(c->listen[0].address, "127.0.0.1:8443");
    ck_assert_int_eq(c->listen[0].addr.ss.ss_family, AF_INET);
    ck_assert_int_eq(c->listen[1].addr.ss.ss_family, AF_INET6);
    ck_assert_int_eq(c->listen[0].proxy_protocol, 1);
    ck_assert_int_eq(c->listen[1].proxy_protocol, 0);

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

    ck_assert_str_eq(c->auth.cookie_secrets_env, "GW_TEST_COOKIES");
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 1);
    ck_assert_uint_eq(c->auth.cookie_secrets[0].len, strlen(SECRET_A));
    ck_assert(memcmp(c->auth.cookie_secrets[0].bytes, SECRET_A, strlen(SECRET_A)) == 0);
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
    assert_values(c, &(expected_t){.listen = {{443, 1, 0}, {80, 0, 0}},
                                   .redis_prefix = "lizard:",
                                   .redis_timeouts_ms = {1000, 1000, 5000},
                                   .cookie_name = "__Host-lizard_access",
                                   .cookie_ttl_s = 86400,
                                   .same_site = GW_COOKIE_SAME_SITE_LAX,
                                   .routing_ttls_ms = {10000, 1000, 60000},
                                   .host_header = GW_HOST_HEADER_PRESERVE,
                                   .upstream_timeouts_ms = {5000, 610000, 610000, 300000},
                                   .max_idle_per_pool = 64,
                                   .num_allowed_networks = 2});
    ck_assert_str_eq(c->listen[0].address, "0.0.0.0:443");
    ck_assert_str_eq(c->listen[1].address, "0.0.0.0:80");
    /* docs/long-calls.md: a 600 s call is never cut; pooled connections keep their own lifetime */
    ck_assert_uint_eq(c->upstream.max_port_timeout_ms, 3600000);
    ck_assert_uint_eq(c->upstream.pool_idle_timeout_ms, 60000);

    ck_assert_str_eq(c->redis.address, "127.0.0.1:6379");
    ck_assert_uint_eq(port_of(&c->redis.addr), 6379);
    ck_assert_ptr_null(c->redis.password_env);
    ck_assert_ptr_null(c->redis.password);

    ck_assert_ptr_null(c->auth.cookie_secrets_env);
    ck_assert_ptr_null(c->auth.cookie_secrets_file);
    ck_assert_uint_eq(c->auth.num_cookie_secrets, 0);
    ck_assert_uint_eq(c->upstream.websocket_ping_interval_ms, 25000);
    ck_assert_uint_eq(c->upstream.max_idle_per_worker, 1024);
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
    ck_assert_uint_eq(c->limits.proxy_header_timeout_ms, 10000);
    ck_assert_int_eq(c->listen[0].proxy_protocol, 0);
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
    ck_assert_err_prefix("{" BASE ",'listen':[{'address':'0.0.0.0:443','proxy_protocol':'yes'}]}",
                         "config: listen[0].proxy_protocol: expected");
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
    tcase_add_test(tc, test_redis_sentinels);
    tcase_add_test(tc, test_cookie_options);
    tcase_add_test(tc, test_workers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(config_suite());
}
