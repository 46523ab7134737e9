/* libFuzzer target: a sandbox record from any HGETALL reply
 * (routing/sandbox.c). The reply is built here from the input (fields split
 * on '\n', the first byte choosing the reply type) rather than through
 * hiredis's RESP reader: hiredis 0.14 allocates whatever multi-bulk count a
 * reply declares, so feeding it arbitrary RESP fuzzes hiredis, not us. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o/string_.h>
#include "routing/cors_origins.h"
#include "routing/sandbox.h"

#define MAX_ELEMENTS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReply reply, elements[MAX_ELEMENTS], *ptrs[MAX_ELEMENTS];
    char *copy;
    size_t n = 0, i, start;
    gw_sandbox_t *s = NULL;
    const char *err = NULL;

    if (size == 0)
        return 0;
    copy = malloc(size); /* each element NUL-terminated in place, as hiredis does */
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    for (i = 0, start = 0; i <= size - 1 && n != MAX_ELEMENTS; ++i) {
        if (i == size - 1 || copy[i] == '\n') {
            copy[i] = '\0';
            memset(&elements[n], 0, sizeof(elements[n]));
            /* now and then an element of another type: a malformed hash */
            elements[n].type = (data[0] & 0x80) != 0 && n == (size_t)(data[0] & 7) ? REDIS_REPLY_INTEGER : REDIS_REPLY_STRING;
            elements[n].str = copy + start;
            elements[n].len = i - start;
            ptrs[n] = &elements[n];
            ++n;
            start = i + 1;
        }
    }
    memset(&reply, 0, sizeof(reply));
    reply.type = (data[0] & 0x40) != 0 ? REDIS_REPLY_NIL : REDIS_REPLY_ARRAY;
    reply.elements = n;
    reply.element = ptrs;

    if (gw_sandbox_parse("sbx1", &reply, &s, &err) == 0 && s != NULL) {
        const gw_sandbox_port_t *p = gw_sandbox_port(s, 3000);
        gw_sandbox_port_access(s, 3000);
        if (p != NULL) /* the normalized cors_origins:3000, walked as requests walk it */
            gw_cors_origins_contain(p->cors_origins, h2o_iovec_init(H2O_STRLIT("https://app.example.com")));
        gw_sandbox_state_name(s->state);
        gw_sandbox_release(s);
    }
    free(copy);
    return 0;
}
