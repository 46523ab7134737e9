/*
 * A sandbox record for unit tests, parsed as the route store parses what
 * HGETALL returns (gw_sandbox_parse): `kv` is NULL-terminated field/value
 * pairs. Included (a static function) by the tests that need one.
 */
#ifndef GW_TESTS_UNIT_SANDBOX_RECORD_H
#define GW_TESTS_UNIT_SANDBOX_RECORD_H

#include <check.h>
#include <stdio.h>
#include <hiredis/hiredis.h>
#include "routing/sandbox.h"

static gw_sandbox_t *record(const char *id, const char *const *kv)
{
    char buf[4096];
    size_t n = 0, off;
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    gw_sandbox_t *s = NULL;
    const char *err = NULL;

    while (kv[n] != NULL)
        ++n;
    off = (size_t)snprintf(buf, sizeof(buf), "*%zu\r\n", n);
    for (size_t i = 0; i != n; ++i)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "$%zu\r\n%s\r\n", strlen(kv[i]), kv[i]);
    ck_assert_uint_lt(off, sizeof(buf));
    ck_assert_int_eq(redisReaderFeed(rd, buf, off), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    redisReaderFree(rd);
    ck_assert_int_eq(gw_sandbox_parse(id, reply, &s, &err), 0);
    freeReplyObject(reply);
    ck_assert_ptr_nonnull(s);
    return s;
}

#endif
