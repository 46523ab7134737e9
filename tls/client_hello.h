/*
 * The TLS ClientHello's server name, read off the first bytes a client sends
 * before any TLS library sees them (gateway/sni_peek.c): a pure, bounded
 * parser fed whatever bytes have arrived so far. The handshake message may be
 * split over several records (RFC 8446 5.1); it is put together in the
 * caller's scratch buffer, never beyond GW_CLIENT_HELLO_MAX bytes.
 */
#ifndef GW_TLS_CLIENT_HELLO_H
#define GW_TLS_CLIENT_HELLO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The largest ClientHello message (its 4-byte header included) read: 16 KiB,
 * one record's largest plaintext (RFC 8446 5.1). Browsers send 0.5-2 KiB
 * (post-quantum key shares included); a larger one is not a client's. */
#define GW_CLIENT_HELLO_MAX 16384
/* The record bytes read for it: the message in records of 1 KiB or more, or
 * anything that needs more is refused (a client splitting its ClientHello in
 * 1-byte records would make a 5-byte header per byte). */
#define GW_CLIENT_HELLO_MAX_INPUT (GW_CLIENT_HELLO_MAX + 16 * 5 + 5)
/* A host_name of the server_name extension: at most 255 bytes (RFC 6066 3). */
#define GW_CLIENT_HELLO_MAX_NAME 255

typedef enum {
    GW_CLIENT_HELLO_MORE = 0,  /* a valid beginning: more bytes are needed */
    GW_CLIENT_HELLO_OK,        /* a whole ClientHello: *name_len is its server name's length (0: none) */
    GW_CLIENT_HELLO_NOT_HELLO, /* the first bytes are no TLS handshake record carrying a ClientHello */
    GW_CLIENT_HELLO_MALFORMED, /* a ClientHello whose fields do not fit (TLS answers it with its own alert) */
    GW_CLIENT_HELLO_TOO_LARGE, /* over GW_CLIENT_HELLO_MAX, or its records over GW_CLIENT_HELLO_MAX_INPUT */
} gw_client_hello_result_t;

/* Parses buf[0..len), the bytes received so far, with scratch
 * (GW_CLIENT_HELLO_MAX bytes) to put the message together in. With
 * GW_CLIENT_HELLO_OK, name[0..*name_len) (GW_CLIENT_HELLO_MAX_NAME + 1 bytes,
 * NUL-terminated) is the first host_name of its server_name extension as sent
 * (not lowercased), or *name_len is 0 when there is none, or it is empty,
 * over 255 bytes or holds a NUL (what OpenSSL's client-hello callback then
 * sees too). Once GW_CLIENT_HELLO_MAX_INPUT bytes are there the answer is
 * never GW_CLIENT_HELLO_MORE; an answer other than MORE stays the same as
 * more bytes arrive. */
gw_client_hello_result_t gw_client_hello_parse(const void *buf, size_t len, uint8_t *scratch, char *name, size_t *name_len);

/* What became of the ClientHellos peeked on TLS listeners (gateway/sni_peek.h; one block per worker, written by its
 * thread only: common/counter.h). */
typedef struct st_gw_client_hello_counters_t {
    atomic_uint_fast64_t read;      /* a whole ClientHello: handed to the handshake (after its certificate's fetch) */
    atomic_uint_fast64_t other;     /* other bytes or a malformed ClientHello: handed over as is, TLS refuses them */
    atomic_uint_fast64_t too_large; /* closed: over GW_CLIENT_HELLO_MAX (or its records over GW_CLIENT_HELLO_MAX_INPUT) */
    atomic_uint_fast64_t timeout;   /* closed: no whole ClientHello (or no certificate) within the handshake timeout */
    atomic_uint_fast64_t closed;    /* the peer closed or reset before a whole ClientHello */
} gw_client_hello_counters_t;

#endif
