/*
 * config/config_secrets.c: what a config names outside itself, checked at
 * load: the Redis password and cookie secrets from the environment, the
 * cookie secrets file, the share-link keys, the TLS ticket keys file (never
 * a secret in a message), the spill file's directory, and what the warning
 * page needs (cookie secrets).
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include "config_test.h"

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

START_TEST(test_share_links_and_warning)
{
    gw_config_t *c = load_ok("{" BASE "}");

    ck_assert_ptr_null(c->auth.link_keys_env);
    ck_assert_ptr_null(c->auth.link_keys_file);
    ck_assert_uint_eq(c->auth.link_max_ttl_s, 604800);
    ck_assert_int_eq(c->auth.public_warning, 0);
    ck_assert_uint_eq(c->auth.public_warning_ttl_s, 86400);
    gw_config_free(c);

    setenv("TEST_LINK_KEYS", "k1:" SECRET_A, 1);
    setenv("TEST_COOKIES", SECRET_B, 1);
    c = load_ok("{" BASE ",'auth':{'link_keys_env':'TEST_LINK_KEYS','link_max_ttl_s':3600,'public_warning':true,"
                "'public_warning_ttl_s':600,'cookie_secrets_env':'TEST_COOKIES'}}");
    ck_assert_str_eq(c->auth.link_keys_env, "TEST_LINK_KEYS");
    ck_assert_uint_eq(c->auth.link_max_ttl_s, 3600);
    ck_assert_int_eq(c->auth.public_warning, 1);
    ck_assert_uint_eq(c->auth.public_warning_ttl_s, 600);
    gw_config_free(c);

    /* the keys are read at load: --check fails on a bad list, naming the line, never a secret */
    setenv("TEST_LINK_KEYS", "k1 " SECRET_A, 1);
    ck_assert_err_eq("{" BASE ",'auth':{'link_keys_env':'TEST_LINK_KEYS'}}",
                     "config: auth.link_keys_env: environment variable TEST_LINK_KEYS: line 1: expected <kid>:<secret>");
    ck_assert_err_eq("{" BASE ",'auth':{'link_keys_env':'TEST_LINK_KEYS_UNSET'}}",
                     "config: auth.link_keys_env: environment variable TEST_LINK_KEYS_UNSET is not set or is empty");
    ck_assert_err_prefix("{" BASE ",'auth':{'link_keys_env':'TEST_LINK_KEYS','link_keys_file':'/x'}}",
                         "config: auth: link_keys_env and link_keys_file are both set");
    ck_assert_err_prefix("{" BASE ",'auth':{'link_max_ttl_s':10}}", "config: auth.link_max_ttl_s: expected an integer from 60");
    ck_assert_err_prefix("{" BASE ",'auth':{'public_warning':'yes'}}", "config: auth.public_warning: expected true or false");
    /* the page's CSRF token and consent cookie are signed with the cookie secrets */
    ck_assert_err_prefix("{" BASE ",'auth':{'public_warning':true}}",
                         "config: auth.public_warning: needs auth.cookie_secrets_env or auth.cookie_secrets_file");
    unsetenv("TEST_LINK_KEYS");
    unsetenv("TEST_COOKIES");
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config_secrets");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_redis_password);
    tcase_add_test(tc, test_cookie_secrets);
    tcase_add_test(tc, test_cookie_secrets_file);
    tcase_add_test(tc, test_share_links_and_warning);
    tcase_add_test(tc, test_cookie_secrets_file_nul);
    tcase_add_test(tc, test_ticket_keys_file);
    tcase_add_test(tc, test_spill_file_directory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(config_suite());
}
