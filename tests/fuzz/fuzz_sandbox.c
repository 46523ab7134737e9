/* libFuzzer target: a sandbox record from any Redis reply (routing/sandbox.c),
 * fed through hiredis's own reply parser as RESP bytes. */
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "routing/sandbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReader *reader = redisReaderCreate();
    void *reply = NULL;

    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK && redisReaderGetReply(reader, &reply) == REDIS_OK &&
        reply != NULL) {
        gw_sandbox_t *s = NULL;
        const char *err = NULL;
        if (gw_sandbox_parse("sbx1", reply, &s, &err) == 0 && s != NULL) {
            gw_sandbox_port_access(s, 3000);
            gw_sandbox_release(s);
        }
        freeReplyObject(reply);
    }
    redisReaderFree(reader);
    return 0;
}
