/*
 * RFC 6455 frames: the header is decoded from whatever prefix is available
 * (the incremental parser keeps at most 14 bytes of a header split across
 * reads), so a tunnel never buffers a payload to find the next boundary.
 */
#include <string.h>
#include <openssl/sha.h>
#include <h2o/string_.h>
#include "common/utf8.h"
#include "common/ws_frame.h"

void gw_ws_parser_init(gw_ws_parser_t *parser, gw_ws_from_t from)
{
    memset(parser, 0, sizeof(*parser));
    parser->from = from;
}

static int fail(const char **error, uint16_t *close_code, const char *why, uint16_t code)
{
    if (error != NULL)
        *error = why;
    if (close_code != NULL)
        *close_code = code;
    return -1;
}

static int check_first_two(const uint8_t *src, gw_ws_from_t from, int rsv_ok, const char **error, uint16_t *close_code)
{
    unsigned opcode = src[0] & 0x0f, len7 = src[1] & 0x7f, masked = src[1] >> 7;

    if (!rsv_ok && (src[0] & 0x70) != 0)
        return fail(error, close_code, "reserved bits set", GW_WS_CLOSE_PROTOCOL_ERROR);
    if ((opcode > GW_WS_OP_BINARY && opcode < GW_WS_OP_CLOSE) || opcode > GW_WS_OP_PONG)
        return fail(error, close_code, "unknown opcode", GW_WS_CLOSE_PROTOCOL_ERROR);
    if (opcode >= GW_WS_OP_CLOSE) {
        if ((src[0] & 0x80) == 0)
            return fail(error, close_code, "fragmented control frame", GW_WS_CLOSE_PROTOCOL_ERROR);
        if (len7 > GW_WS_MAX_CONTROL_PAYLOAD)
            return fail(error, close_code, "control frame over 125 bytes", GW_WS_CLOSE_PROTOCOL_ERROR);
    }
    if (from == GW_WS_FROM_CLIENT && !masked)
        return fail(error, close_code, "unmasked client frame", GW_WS_CLOSE_PROTOCOL_ERROR);
    if (from == GW_WS_FROM_SERVER && masked)
        return fail(error, close_code, "masked server frame", GW_WS_CLOSE_PROTOCOL_ERROR);
    return 0;
}

/* gw_ws_header_decode; boundaries_only and rsv_ok: see gw_ws_parser_t */
static int decode(const uint8_t *src, size_t len, gw_ws_from_t from, int boundaries_only, int rsv_ok, gw_ws_header_t *out,
                  const char **error, uint16_t *close_code)
{
    size_t ext, need, i;
    uint64_t plen;

    if (len < 2)
        return 0;
    if (!boundaries_only && check_first_two(src, from, rsv_ok, error, close_code) != 0)
        return -1;
    plen = src[1] & 0x7f;
    ext = plen == 126 ? 2 : plen == 127 ? 8 : 0;
    need = 2 + ext + ((src[1] & 0x80) ? 4 : 0);
    if (!boundaries_only && ext == 8 && len >= 3 && (src[2] & 0x80) != 0)
        return fail(error, close_code, "payload length over 2^63", GW_WS_CLOSE_TOO_BIG);
    if (len < need)
        return 0;
    if (ext != 0) {
        for (plen = 0, i = 0; i != ext; ++i)
            plen = (plen << 8) | src[2 + i];
        if (!boundaries_only && ((ext == 2 && plen < 126) || (ext == 8 && plen <= 0xffff)))
            return fail(error, close_code, "payload length not in its shortest form", GW_WS_CLOSE_PROTOCOL_ERROR);
    }
    out->fin = src[0] >> 7;
    out->opcode = src[0] & 0x0f;
    out->masked = src[1] >> 7;
    out->payload_len = plen;
    if (out->masked)
        memcpy(out->mask, src + 2 + ext, 4);
    else
        memset(out->mask, 0, 4);
    return (int)need;
}

int gw_ws_header_decode(const uint8_t *src, size_t len, gw_ws_from_t from, gw_ws_header_t *out, const char **error,
                        uint16_t *close_code)
{
    return decode(src, len, from, 0, 0, out, error, close_code);
}

gw_ws_parse_t gw_ws_parse(gw_ws_parser_t *parser, const uint8_t *src, size_t len, size_t *used)
{
    size_t old = parser->have, take;
    int n;

    if (old == 0) {
        /* the common case: the whole header is in this read */
        n = decode(src, len, parser->from, parser->boundaries_only, parser->rsv_ok, &parser->header, &parser->error,
                   &parser->close_code);
        if (n > 0) {
            *used = (size_t)n;
            return GW_WS_PARSE_DONE;
        }
        if (n < 0)
            return GW_WS_PARSE_ERROR;
        /* n == 0: len < GW_WS_MAX_HEADER, it all fits in buf */
    }
    take = len < sizeof(parser->buf) - old ? len : sizeof(parser->buf) - old;
    memcpy(parser->buf + old, src, take);
    parser->have = old + take;
    n = decode(parser->buf, parser->have, parser->from, parser->boundaries_only, parser->rsv_ok, &parser->header, &parser->error,
               &parser->close_code);
    if (n < 0)
        return GW_WS_PARSE_ERROR;
    if (n == 0) {
        *used = take;
        return GW_WS_PARSE_NEED_MORE;
    }
    /* n > old: the header ends inside this call's bytes */
    parser->have = 0;
    *used = (size_t)n - old;
    return GW_WS_PARSE_DONE;
}

size_t gw_ws_header_encode(uint8_t *dst, int fin, int opcode, uint64_t payload_len, const uint8_t *mask)
{
    size_t n = 2, i;

    dst[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    dst[1] = mask != NULL ? 0x80 : 0;
    if (payload_len < 126) {
        dst[1] |= (uint8_t)payload_len;
    } else if (payload_len <= 0xffff) {
        dst[1] |= 126;
        dst[2] = (uint8_t)(payload_len >> 8);
        dst[3] = (uint8_t)payload_len;
        n = 4;
    } else {
        dst[1] |= 127;
        for (i = 0; i != 8; ++i)
            dst[2 + i] = (uint8_t)(payload_len >> (56 - 8 * i));
        n = 10;
    }
    if (mask != NULL) {
        memcpy(dst + n, mask, 4);
        n += 4;
    }
    return n;
}

void gw_ws_mask(uint8_t *buf, size_t len, const uint8_t mask[4], uint64_t offset)
{
    uint8_t key[8];
    size_t i = 0, k;

    for (k = 0; k != 8; ++k)
        key[k] = mask[(offset + k) & 3];
    /* eight bytes at a time: the rotated key repeats every four */
    for (; i + 8 <= len; i += 8) {
        uint64_t w, m;
        memcpy(&w, buf + i, 8);
        memcpy(&m, key, 8);
        w ^= m;
        memcpy(buf + i, &w, 8);
    }
    for (; i != len; ++i)
        buf[i] ^= key[i & 7];
}

int gw_ws_close_code_is_valid(unsigned code)
{
    if (code >= 3000 && code <= 4999)
        return 1;
    if (code < 1000 || code > 1014)
        return 0;
    return code != 1004 && code != 1005 && code != 1006;
}

int gw_ws_close_parse(const uint8_t *payload, size_t len, uint16_t *code, const uint8_t **reason, size_t *reason_len)
{
    *reason = payload;
    *reason_len = 0;
    if (len == 0) {
        *code = GW_WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (len == 1 || len > GW_WS_MAX_CONTROL_PAYLOAD)
        return -1;
    *code = (uint16_t)((payload[0] << 8) | payload[1]);
    if (!gw_ws_close_code_is_valid(*code) || !gw_utf8_is_valid(payload + 2, len - 2))
        return -1;
    *reason = payload + 2;
    *reason_len = len - 2;
    return 0;
}

size_t gw_ws_close_encode(uint8_t *dst, uint16_t code, const char *reason, size_t reason_len)
{
    size_t n = 0, c;

    dst[0] = (uint8_t)(code >> 8);
    dst[1] = (uint8_t)code;
    /* cut at a character boundary so that the reason stays UTF-8 */
    while (n < reason_len && (c = gw_utf8_char_len(reason + n, reason_len - n)) != 0 && n + c <= GW_WS_MAX_CLOSE_REASON)
        n += c;
    memcpy(dst + 2, reason, n);
    return 2 + n;
}

size_t gw_ws_close_frame_encode(uint8_t *dst, uint16_t code, const char *reason, size_t reason_len)
{
    uint8_t payload[GW_WS_MAX_CONTROL_PAYLOAD];
    size_t n = gw_ws_close_encode(payload, code, reason, reason_len), h;

    h = gw_ws_header_encode(dst, 1, GW_WS_OP_CLOSE, n, NULL);
    memcpy(dst + h, payload, n);
    return h + n;
}

int gw_ws_sequence_check(int *in_message, const gw_ws_header_t *header)
{
    if (header->opcode >= GW_WS_OP_CLOSE)
        return 0;
    if (header->opcode == GW_WS_OP_CONTINUATION) {
        if (!*in_message)
            return -1;
    } else if (*in_message) {
        return -1;
    }
    *in_message = !header->fin;
    return 0;
}

size_t gw_ws_accept_encode(char *dst, const char *key, size_t key_len)
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char digest[SHA_DIGEST_LENGTH], in[GW_WS_MAX_KEY + sizeof(guid)];

    if (key_len > GW_WS_MAX_KEY)
        key_len = GW_WS_MAX_KEY;
    memcpy(in, key, key_len);
    memcpy(in + key_len, guid, sizeof(guid) - 1);
    SHA1(in, key_len + sizeof(guid) - 1, digest);
    return h2o_base64_encode(dst, digest, sizeof(digest), 0);
}
