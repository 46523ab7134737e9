/*
 * The WebSocket frame codec (RFC 6455 section 5): frame headers parsed
 * incrementally (any split of the input, one byte at a time included),
 * encoded for either side, payload masking and close payloads. Pure: no I/O,
 * no allocation; the TCP tunnel, the frame tracker of HTTP WebSocket tunnels
 * and the tcp-forward client share it.
 */
#ifndef GW_COMMON_WS_FRAME_H
#define GW_COMMON_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
    GW_WS_OP_CONTINUATION = 0,
    GW_WS_OP_TEXT = 1,
    GW_WS_OP_BINARY = 2,
    GW_WS_OP_CLOSE = 8,
    GW_WS_OP_PING = 9,
    GW_WS_OP_PONG = 10
};

/* Close codes (RFC 6455 7.4.1; 4403 is the gateway's revocation code). */
enum {
    GW_WS_CLOSE_NORMAL = 1000,
    GW_WS_CLOSE_GOING_AWAY = 1001,
    GW_WS_CLOSE_PROTOCOL_ERROR = 1002,
    GW_WS_CLOSE_UNSUPPORTED = 1003,
    GW_WS_CLOSE_NO_STATUS = 1005, /* never on the wire: a close without a payload */
    GW_WS_CLOSE_ABNORMAL = 1006,  /* never on the wire */
    GW_WS_CLOSE_INVALID_PAYLOAD = 1007,
    GW_WS_CLOSE_POLICY = 1008,
    GW_WS_CLOSE_TOO_BIG = 1009,
    GW_WS_CLOSE_INTERNAL_ERROR = 1011,
    GW_WS_CLOSE_REVOKED = 4403
};

/* The longest frame header: 2 bytes, a 64-bit length, a 4-byte mask key. */
#define GW_WS_MAX_HEADER 14
/* The longest payload of a control frame (Close, Ping, Pong). */
#define GW_WS_MAX_CONTROL_PAYLOAD 125
/* The longest reason of a close payload (125 minus the 2-byte code). */
#define GW_WS_MAX_CLOSE_REASON 123

typedef struct st_gw_ws_header_t {
    uint8_t fin;    /* 1 on the last frame of a message (always on control frames) */
    uint8_t opcode; /* GW_WS_OP_* */
    uint8_t masked; /* 1 when mask[] applies to the payload */
    uint8_t mask[4];
    uint64_t payload_len; /* below 2^63 (any 64-bit value for a boundaries_only parser) */
} gw_ws_header_t;

/* Which side the frames being parsed come from: a client's frames must be
 * masked, a server's must not (RFC 6455 5.1). */
typedef enum en_gw_ws_from_t { GW_WS_FROM_SERVER = 0, GW_WS_FROM_CLIENT, GW_WS_FROM_EITHER } gw_ws_from_t;

typedef enum en_gw_ws_parse_t {
    GW_WS_PARSE_NEED_MORE = 0, /* every byte given was taken; call again with more */
    GW_WS_PARSE_DONE,          /* a header is in parser->header */
    GW_WS_PARSE_ERROR          /* parser->error and parser->close_code say why */
} gw_ws_parse_t;

/* An incremental header parser; embed it and gw_ws_parser_init it. */
typedef struct st_gw_ws_parser_t {
    gw_ws_from_t from;
    /* 1: only the frame's length matters (a relay that walks another
     * endpoint's frames): reserved bits (an extension negotiated end to end,
     * permessage-deflate's RSV1), any opcode, either masking, a control
     * frame's length and a length not in its shortest form pass; set after
     * gw_ws_parser_init */
    int boundaries_only;
    /* 1: the reserved bits pass (an extension the two ends negotiated, such
     * as permessage-deflate's RSV1, which a relay does not see); the rest
     * is checked; set after gw_ws_parser_init */
    int rsv_ok;
    uint8_t buf[GW_WS_MAX_HEADER];
    size_t have;           /* bytes of a header begun in an earlier call, in buf */
    gw_ws_header_t header; /* valid after GW_WS_PARSE_DONE */
    const char *error;     /* static text, after GW_WS_PARSE_ERROR */
    uint16_t close_code;   /* what to close with after GW_WS_PARSE_ERROR (1002 or 1009) */
} gw_ws_parser_t;

void gw_ws_parser_init(gw_ws_parser_t *parser, gw_ws_from_t from);

/* Feeds the next `len` bytes of a frame header. Returns GW_WS_PARSE_DONE with
 * *used set to the bytes of `src` that belonged to the header (the payload
 * follows them), GW_WS_PARSE_NEED_MORE with *used = len, or
 * GW_WS_PARSE_ERROR (a bad header; the stream cannot be resynchronised).
 * After DONE the next call begins a new header. Refused: reserved bits (no
 * extension is negotiated), unknown opcodes, a fragmented or longer than
 * 125-byte control frame, a length with the top bit set or not in its
 * shortest form, the wrong masking for `from`. */
gw_ws_parse_t gw_ws_parse(gw_ws_parser_t *parser, const uint8_t *src, size_t len, size_t *used);

/* The stateless form: decodes a header from the first `len` bytes of `src`.
 * Returns its length (2 to 14) and fills *out, 0 when more bytes are needed
 * (len is less than the header's length), -1 on a bad header with *error
 * and *close_code set (either may be NULL). Errors are reported as early as
 * the bytes allow. */
int gw_ws_header_decode(const uint8_t *src, size_t len, gw_ws_from_t from, gw_ws_header_t *out, const char **error,
                        uint16_t *close_code);

/* Writes a header to dst (GW_WS_MAX_HEADER bytes) and returns its length.
 * mask NULL: a server's frame (unmasked); else a client's frame with that
 * key (the caller masks the payload with gw_ws_mask). payload_len must be
 * below 2^63, and at most 125 for a control frame. */
size_t gw_ws_header_encode(uint8_t *dst, int fin, int opcode, uint64_t payload_len, const uint8_t *mask);

/* XORs `len` payload bytes in place with the key; `offset` is the position
 * of buf[0] in the frame's payload, so a payload can be (un)masked in pieces.
 * Masking twice restores the bytes. */
void gw_ws_mask(uint8_t *buf, size_t len, const uint8_t mask[4], uint64_t offset);

/* 1 for a code a peer may send in a Close frame (1000-1003, 1007-1014,
 * 3000-4999), else 0. */
int gw_ws_close_code_is_valid(unsigned code);

/* Reads an (unmasked) close payload: *code is GW_WS_CLOSE_NO_STATUS for an
 * empty one, and *reason / *reason_len point into `payload`. Returns 0, or -1
 * (one byte, an invalid code, a reason that is not UTF-8, over 125 bytes). */
int gw_ws_close_parse(const uint8_t *payload, size_t len, uint16_t *code, const uint8_t **reason, size_t *reason_len);

/* Writes a close payload (code, then the reason cut to
 * GW_WS_MAX_CLOSE_REASON bytes) to dst (GW_WS_MAX_CONTROL_PAYLOAD bytes) and
 * returns its length. */
size_t gw_ws_close_encode(uint8_t *dst, uint16_t code, const char *reason, size_t reason_len);

/* Writes a whole unmasked Close frame (header and payload; at most
 * 2 + GW_WS_MAX_CONTROL_PAYLOAD bytes) for a server and returns its length. */
size_t gw_ws_close_frame_encode(uint8_t *dst, uint16_t code, const char *reason, size_t reason_len);

/* Fragmentation (RFC 6455 5.4): tracks whether a fragmented data message is
 * open. Returns 0 when `header` may come next, -1 when not (a continuation
 * outside a message, a new data frame inside one). Control frames may come
 * anywhere. *in_message starts at 0. */
int gw_ws_sequence_check(int *in_message, const gw_ws_header_t *header);

/* The opening handshake's Sec-WebSocket-Accept for a Sec-WebSocket-Key of
 * at most GW_WS_MAX_KEY bytes (RFC 6455 4.2.2: base64 of the SHA-1 of the
 * key and the protocol's GUID): written to dst (GW_WS_ACCEPT_SIZE bytes, NUL
 * included), returns its length (28). */
#define GW_WS_MAX_KEY 64
#define GW_WS_ACCEPT_SIZE 29
size_t gw_ws_accept_encode(char *dst, const char *key, size_t key_len);

#endif
