/*
 * The ClientHello's server name (tls/client_hello.h): the handshake message
 * is put together from its records (RFC 8446 5.1), then its fields are walked
 * (RFC 8446 4.1.2, RFC 5246 7.4.1.2) as far as the server_name extension
 * (RFC 6066 3). Every length is checked against what is left before use.
 */
#include <string.h>
#include "tls/client_hello.h"

#define RECORD_HANDSHAKE 22
#define HANDSHAKE_CLIENT_HELLO 1
#define RECORD_MAX 16384 /* 2^14, a plaintext record's largest */
#define EXT_SERVER_NAME 0
#define NAME_TYPE_HOST 0

typedef struct st_reader_t {
    const uint8_t *p, *end;
} reader_t;

/* n bytes of r as a big-endian number into *v; -1 when fewer are left */
static int take(reader_t *r, size_t n, size_t *v)
{
    size_t x = 0;

    if ((size_t)(r->end - r->p) < n)
        return -1;
    while (n-- != 0)
        x = x << 8 | *r->p++;
    *v = x;
    return 0;
}

/* skips a field of n length bytes then that many bytes; its contents as *field */
static int field(reader_t *r, size_t n, reader_t *out)
{
    size_t len;

    if (take(r, n, &len) != 0 || (size_t)(r->end - r->p) < len)
        return -1;
    *out = (reader_t){r->p, r->p + len};
    r->p += len;
    return 0;
}

/* The first host_name of a server_name extension's data, as OpenSSL's callback reads it (tls/tls.c client_hello_sni). */
static void server_name(reader_t ext, char *name, size_t *name_len)
{
    reader_t list;
    size_t type, len;

    if (field(&ext, 2, &list) != 0 || ext.p != ext.end)
        return;
    while (take(&list, 1, &type) == 0 && take(&list, 2, &len) == 0 && len <= (size_t)(list.end - list.p)) {
        if (type == NAME_TYPE_HOST) {
            if (len != 0 && len <= GW_CLIENT_HELLO_MAX_NAME && memchr(list.p, '\0', len) == NULL) {
                memcpy(name, list.p, len);
                name[len] = '\0';
                *name_len = len;
            }
            return;
        }
        list.p += len;
    }
}

/* The body of a whole ClientHello message. */
static gw_client_hello_result_t parse_body(reader_t r, char *name, size_t *name_len)
{
    reader_t skip, exts, ext;
    size_t version, type;

    if (take(&r, 2, &version) != 0 || (size_t)(r.end - r.p) < 32)
        return GW_CLIENT_HELLO_MALFORMED;
    r.p += 32; /* random */
    if (field(&r, 1, &skip) != 0 || skip.end - skip.p > 32 || field(&r, 2, &skip) != 0 || skip.end == skip.p ||
        (skip.end - skip.p) % 2 != 0 || field(&r, 1, &skip) != 0 || skip.end == skip.p)
        return GW_CLIENT_HELLO_MALFORMED; /* session id, cipher suites, compression methods */
    if (r.p == r.end)
        return GW_CLIENT_HELLO_OK; /* no extensions at all (RFC 5246 7.4.1.2) */
    if (field(&r, 2, &exts) != 0 || r.p != r.end)
        return GW_CLIENT_HELLO_MALFORMED;
    while (exts.p != exts.end) {
        if (take(&exts, 2, &type) != 0 || field(&exts, 2, &ext) != 0)
            return GW_CLIENT_HELLO_MALFORMED;
        if (type == EXT_SERVER_NAME && *name_len == 0)
            server_name(ext, name, name_len);
    }
    return GW_CLIENT_HELLO_OK;
}

gw_client_hello_result_t gw_client_hello_parse(const void *buf, size_t len, uint8_t *scratch, char *name, size_t *name_len)
{
    reader_t in = {buf, (const uint8_t *)buf + (len < GW_CLIENT_HELLO_MAX_INPUT ? len : GW_CLIENT_HELLO_MAX_INPUT)};
    size_t have = 0, want = 4, type, version, rlen;

    *name_len = 0;
    /* the records' contents into scratch until the message's header, then the message, is whole */
    while (have < want) {
        /* each byte of the record header is judged as soon as it is there: no waiting on other protocols' bytes */
        if (in.p != in.end && in.p[0] != RECORD_HANDSHAKE)
            return have == 0 ? GW_CLIENT_HELLO_NOT_HELLO : GW_CLIENT_HELLO_MALFORMED;
        if (in.end - in.p >= 2 && in.p[1] != 3)
            return have == 0 ? GW_CLIENT_HELLO_NOT_HELLO : GW_CLIENT_HELLO_MALFORMED;
        if (take(&in, 1, &type) != 0 || take(&in, 2, &version) != 0 || take(&in, 2, &rlen) != 0)
            break;
        if (rlen == 0 || rlen > RECORD_MAX)
            return GW_CLIENT_HELLO_MALFORMED;
        while (rlen != 0 && in.p != in.end && have < want) {
            size_t n = rlen;
            if (n > (size_t)(in.end - in.p))
                n = (size_t)(in.end - in.p);
            if (n > want - have)
                n = want - have;
            memcpy(scratch + have, in.p, n);
            in.p += n, have += n, rlen -= n;
            if (have == 4 && want == 4) {
                if (scratch[0] != HANDSHAKE_CLIENT_HELLO)
                    return GW_CLIENT_HELLO_NOT_HELLO;
                want = 4 + ((size_t)scratch[1] << 16 | (size_t)scratch[2] << 8 | scratch[3]);
                if (want > GW_CLIENT_HELLO_MAX)
                    return GW_CLIENT_HELLO_TOO_LARGE;
            }
        }
        if (rlen != 0 && have == want && want != 4)
            return GW_CLIENT_HELLO_MALFORMED; /* more in the record than the message: a second message (RFC 8446 5.1 lets
                                               * none follow a ClientHello in its flight) */
        if (rlen != 0)
            break; /* the record is not whole yet */
    }
    if (have < want)
        return len >= GW_CLIENT_HELLO_MAX_INPUT ? GW_CLIENT_HELLO_TOO_LARGE : GW_CLIENT_HELLO_MORE;
    return parse_body((reader_t){scratch + 4, scratch + want}, name, name_len);
}
