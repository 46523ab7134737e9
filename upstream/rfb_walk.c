/*
 * The walk of a view-only viewer's RFB bytes (rfb_walk.h). The stream is a
 * sequence of units, each a head (collected byte by byte, at most 12) that
 * sizes it, then a body (`left`, any length) walked in bulk: passed or
 * dropped without being kept. A unit's stage says what the head is; sizing
 * a head sets the stage of the next unit.
 */
#include <string.h>
#include "upstream/rfb_walk.h"

enum {
    STAGE_VERSION = 0, /* "RFB 003.00x\n" */
    STAGE_SECURITY,    /* 3.7, 3.8: the type the client picks; 3.3: the server picked it */
    STAGE_INIT,        /* ClientInit: the shared flag */
    STAGE_MESSAGES,    /* client messages (RFC 6143 7.5 and the registered extensions) */
    STAGE_FAILED,
};

#define SEC_NONE 1
#define SEC_VNC_AUTH 2
#define VNC_AUTH_RESPONSE 16

void gw_rfb_walk_init(gw_rfb_walk_t *w)
{
    memset(w, 0, sizeof(*w));
}

int gw_rfb_walk_server(gw_rfb_walk_t *w, const uint8_t *buf, size_t len)
{
    size_t k = GW_RFB_SERVER_HEAD - w->server_seen, n;

    if (k > len)
        k = len;
    memcpy(w->server + w->server_seen, buf, k);
    w->server_seen += (uint8_t)k;
    n = w->server_seen < 4 ? w->server_seen : 4;
    return memcmp(w->server, "RFB ", n) == 0 ? 0 : -1;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int fail(gw_rfb_walk_t *w, const char **why, const char *sentence)
{
    w->stage = STAGE_FAILED;
    *why = sentence;
    return -1;
}

/* A client message's head: how many bytes size it (head_need) and whether it passes. */
static int start_message(gw_rfb_walk_t *w, uint8_t type, const char **why)
{
    static const struct {
        uint8_t need, drop;
    } types[256] = {
        [0] = {1, 0},   /* SetPixelFormat: 20 */
        [2] = {4, 0},   /* SetEncodings: 4 + 4 x u16 at 2 */
        [3] = {1, 0},   /* FramebufferUpdateRequest: 10 */
        [4] = {1, 1},   /* KeyEvent: 8 */
        [5] = {1, 1},   /* PointerEvent: 6 */
        [6] = {8, 1},   /* ClientCutText: 8 + u32 at 4 */
        [150] = {1, 0}, /* EnableContinuousUpdates: 10 */
        [248] = {9, 0}, /* ClientFence: 9 + u8 at 8 */
        [250] = {1, 1}, /* xvp (shutdown, reboot, reset): 4 */
        [251] = {8, 1}, /* SetDesktopSize: 8 + 16 x u8 at 6 */
        [255] = {2, 1}, /* QEMU: subtype 0, the extended key event, 12 */
    };

    if (types[type].need == 0)
        return fail(w, why, "an RFB client message the gateway cannot size");
    w->head_need = types[type].need;
    w->drop = types[type].drop;
    return 0;
}

/* The size of the whole message whose head is complete; 0: it cannot be sized. */
static uint64_t message_size(const gw_rfb_walk_t *w)
{
    const uint8_t *h = w->head;
    uint32_t n;

    switch (h[0]) {
    case 0:
        return 20;
    case 2:
        return 4 + 4 * (uint64_t)((uint32_t)h[2] << 8 | h[3]);
    case 3:
    case 150:
        return 10;
    case 4:
        return 8;
    case 5:
        return 6;
    case 6:
        /* a negative length is the extended clipboard's (its payload is -length bytes) */
        n = be32(h + 4);
        return 8 + (uint64_t)((n & 0x80000000u) != 0 ? 0x100000000ull - n : n);
    case 248:
        return 9 + (uint64_t)h[8];
    case 250:
        return 4;
    case 251:
        return 8 + 16 * (uint64_t)h[6];
    default: /* 255 */
        return h[1] == 0 ? 12 : 0;
    }
}

/* The first byte of a unit: what its head is. */
static int start_unit(gw_rfb_walk_t *w, uint8_t c, const char **why)
{
    uint32_t sec;

    w->drop = 0;
    switch (w->stage) {
    case STAGE_VERSION:
        w->head_need = 12;
        return 0;
    case STAGE_SECURITY:
        if (w->version != 3) {
            w->head_need = 1;
            return 0;
        }
        /* 3.3: the server chose, in the four bytes after its version; a client never speaks before it has them */
        if (w->server_seen < GW_RFB_SERVER_HEAD)
            return fail(w, why, "the RFB client spoke before the server chose the security type");
        sec = be32(w->server + 12);
        if (sec == SEC_VNC_AUTH) {
            w->head_need = 1;
            return 0;
        }
        if (sec != SEC_NONE)
            return fail(w, why, "an RFB security type the gateway cannot walk");
        w->stage = STAGE_INIT; /* this byte is the ClientInit */
        w->head_need = 1;
        return 0;
    case STAGE_INIT:
        w->head_need = 1;
        return 0;
    case STAGE_MESSAGES:
        return start_message(w, c, why);
    default:
        return fail(w, why, "the RFB walk failed before");
    }
}

static int version_ok(gw_rfb_walk_t *w)
{
    if (memcmp(w->head, "RFB 003.00", 10) != 0 || w->head[11] != '\n')
        return 0;
    w->version = (uint8_t)(w->head[10] - '0');
    return w->version == 3 || w->version == 7 || w->version == 8;
}

/* The unit's head is complete: the rest of it, and the next unit's stage. */
static int size_unit(gw_rfb_walk_t *w, const char **why)
{
    uint64_t size;

    switch (w->stage) {
    case STAGE_VERSION:
        if (!version_ok(w))
            return fail(w, why, "an RFB protocol version other than 3.3, 3.7 or 3.8");
        w->stage = STAGE_SECURITY;
        break;
    case STAGE_SECURITY:
        if (w->version == 3) {
            w->left = VNC_AUTH_RESPONSE - 1; /* start_unit let only VNC authentication through */
        } else if (w->head[0] == SEC_VNC_AUTH) {
            w->left = VNC_AUTH_RESPONSE;
        } else if (w->head[0] != SEC_NONE) {
            return fail(w, why, "an RFB security type the gateway cannot walk");
        }
        w->stage = STAGE_INIT;
        break;
    case STAGE_INIT:
        w->stage = STAGE_MESSAGES;
        break;
    default:
        if ((size = message_size(w)) == 0)
            return fail(w, why, "an RFB client message the gateway cannot size");
        w->left = size - w->head_len;
        w->drops += w->drop;
        break;
    }
    w->head_len = 0;
    return 0;
}

ssize_t gw_rfb_walk_client(gw_rfb_walk_t *w, uint8_t *buf, size_t len, const char **why)
{
    size_t in = 0, out = 0;

    if (w->stage == STAGE_FAILED) {
        *why = "the RFB walk failed before";
        return -1;
    }
    while (in != len) {
        if (w->left != 0) {
            size_t k = w->left < len - in ? (size_t)w->left : len - in;
            if (!w->drop) {
                memmove(buf + out, buf + in, k);
                out += k;
            }
            in += k;
            w->left -= k;
            continue;
        }
        if (w->head_len == 0 && start_unit(w, buf[in], why) != 0)
            return -1;
        if (w->stage == STAGE_INIT)
            buf[in] = 1; /* ClientInit's shared flag: 0 would ask the server to disconnect every other viewer */
        w->head[w->head_len++] = buf[in];
        if (!w->drop)
            buf[out++] = buf[in];
        ++in;
        if (w->head_len == w->head_need && size_unit(w, why) != 0)
            return -1;
    }
    return (ssize_t)out;
}
