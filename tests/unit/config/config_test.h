/*
 * What the config tests share: a base config, two cookie secrets, JSON
 * written with ' for " (q()), loaders that assert success or return the
 * message, and the suite runner. Included by test_config*.c only.
 */
#ifndef GW_TESTS_UNIT_GATEWAY_CONFIG_TEST_H
#define GW_TESTS_UNIT_GATEWAY_CONFIG_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <check.h>
#include "config/config.h"

#define BASE "'domains':['lizard.app'],'tls':{'certificates':[{'cert':'/etc/c.pem','key':'/etc/k.pem'}]}"
#define SECRET_A "0123456789abcdef0123456789abcdef-A"
#define SECRET_B "fedcba9876543210fedcba9876543210-B"

/* The JSON text with every ' turned into ". Static; one at a time. */
static inline const char *q(const char *s)
{
    static char buf[8192];
    size_t i;

    for (i = 0; s[i] != '\0' && i + 1 < sizeof(buf); ++i)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
}

static inline gw_config_t *load_ok(const char *json)
{
    gw_config_t *c = NULL;
    char *err = NULL;

    ck_assert_msg(gw_config_load_string(q(json), "test.json", &c, &err) == 0, "unexpected error: %s", err);
    ck_assert_ptr_null(err);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* The message for `json`, which must be rejected; the caller frees it. */
static inline char *load_err(const char *json)
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

static inline char *write_temp(const char *text)
{
    char *path = strdup("/tmp/gw-config-test-XXXXXX");
    int fd = mkstemp(path);
    size_t len = strlen(text);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

static inline uint16_t port_of(const gw_netaddr_t *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    if (a->ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    return 0;
}

/* Runs `s`; the exit status of a test program. */
static inline int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif
