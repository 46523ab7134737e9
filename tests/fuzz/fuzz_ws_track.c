/* libFuzzer target: a WebSocket tunnel client's stream as the gateway walks
 * it (upstream/ws_track.c with its budget, upstream/ws_budget.c, and the
 * codec's boundaries-only parser). The first byte picks a chunk size, the
 * frame rate (1 to 8 a second: an allowance of 10 to 80 frames, so floods
 * run it out) and a message bound (none, or 1 to 64 KiB); the rest is the
 * client's bytes, fed once whole and once in chunks (one byte at a time for
 * chunk 1), as a tunnel feeds its input, with the gateway's Pongs dropped.
 * Invariants: no crash, never more forwarded than received, both feeds
 * forward the same bytes, drop the same Pongs and refuse at the same byte
 * with the same code, and what is forwarded after a refusal is nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/ws_track.h"

typedef struct {
    uint8_t *out;
    size_t outlen, drops, dropped_bytes;
    uint16_t code;
} feed_t;

static void feed(const uint8_t *data, size_t size, size_t chunk, const gw_ws_budget_conf_t *conf, feed_t *f)
{
    uint8_t *input = malloc(size + 1);
    size_t have = 0, fed = 0, n;
    gw_ws_track_result_t r = GW_WS_TRACK_PASS;
    gw_ws_track_t t;

    memset(f, 0, sizeof(*f));
    f->out = malloc(size + 1);
    gw_ws_track_init(&t, GW_WS_FROM_CLIENT);
    t.drop_pongs = 1;
    gw_ws_budget_init(&t.budget, conf, 0);
    while (fed < size && r != GW_WS_TRACK_REFUSE) {
        size_t k = chunk < size - fed ? chunk : size - fed;
        memcpy(input + have, data + fed, k);
        have += k, fed += k;
        /* as the tunnel does: after each write or drop, the input left is walked again */
        do {
            r = gw_ws_track_from_client(&t, input, have, 0, &n);
            if (n > have || (r == GW_WS_TRACK_DROP && n == 0))
                __builtin_trap();
            if (r == GW_WS_TRACK_DROP) {
                f->drops++, f->dropped_bytes += n;
            } else {
                memcpy(f->out + f->outlen, input, n);
                f->outlen += n;
            }
            memmove(input, input + n, have - n);
            have -= n;
            gw_ws_track_consumed(&t, n);
        } while (r != GW_WS_TRACK_REFUSE && n != 0 && have != 0);
    }
    if (r == GW_WS_TRACK_REFUSE) {
        f->code = t.refused;
        if (gw_ws_track_from_client(&t, input, have, 0, &n) != GW_WS_TRACK_REFUSE || n != 0)
            __builtin_trap();
    }
    if (f->outlen + f->dropped_bytes > size)
        __builtin_trap();
    free(input);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_ws_budget_conf_t conf;
    feed_t whole, pieces;
    size_t chunk;

    if (size < 1)
        return 0;
    chunk = 1 + data[0] % 8;
    conf.frames_per_second = 1 + (data[0] >> 3) % 8;
    conf.max_message_bytes = (data[0] >> 6) == 0 ? 0 : (uint64_t)1024 << (4 * ((data[0] >> 6) - 1));
    ++data, --size;
    feed(data, size, size == 0 ? 1 : size, &conf, &whole);
    feed(data, size, chunk, &conf, &pieces);
    if (whole.code != pieces.code || whole.drops != pieces.drops || whole.outlen != pieces.outlen ||
        memcmp(whole.out, pieces.out, whole.outlen) != 0)
        __builtin_trap();
    if (whole.code != 0 && whole.code != GW_WS_CLOSE_POLICY && whole.code != GW_WS_CLOSE_TOO_BIG)
        __builtin_trap();
    free(whole.out);
    free(pieces.out);
    return 0;
}
