"""How a response is cut into TLS records, read off the wire by a client
that parses the record layer itself (libh2o patch 0270): a small HTTP/1.1
response, its head and body together, arrives in one TLS record, not one
record for the head and one for the body (each record costs the gateway
OpenSSL's per-record work and the client 22 bytes of header and tag)."""

import socket
import ssl

import gwtest

TLS_APPLICATION_DATA = 23


class RecordClient:
    """TLS 1.3 over a raw socket and memory BIOs, so that the records the
    gateway sends can be counted before they are decrypted."""

    def __init__(self, port, host, ca):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.set_alpn_protocols(["http/1.1"])
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.wire = b""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self._feed_record()
        self._flush()

    def _flush(self):
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _feed_record(self):
        """Hands the next whole record to OpenSSL; returns its type and length."""
        while True:
            if len(self.wire) >= 5:
                size = int.from_bytes(self.wire[3:5], "big")
                if len(self.wire) >= 5 + size:
                    record, self.wire = self.wire[:5 + size], self.wire[5 + size:]
                    self.incoming.write(record)
                    return record[0], size
            chunk = self.sock.recv(65536)
            assert chunk, "the gateway closed the connection"
            self.wire += chunk

    def exchange(self, request):
        """Sends request; returns (the response's bytes, the application-data
        records it took), reading record by record until head and body are in."""
        self.tls.write(request)
        self._flush()
        plain, records = b"", 0
        while True:
            kind, _ = self._feed_record()
            records += kind == TLS_APPLICATION_DATA
            try:
                while True:
                    plain += self.tls.read(65536)
            except ssl.SSLWantReadError:
                pass
            head, sep, body = plain.partition(b"\r\n\r\n")
            if sep:
                length = [int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                assert length, head
                if len(body) >= length[0]:
                    return plain, records

    def close(self):
        self.sock.close()


def test_small_response_is_one_record(gateway, certs):
    """The gateway's own answer (404 sandbox_not_found: head and body written
    together) is one TLS record on a keep-alive connection; the first answer
    is left out, since the session tickets OpenSSL sends after the handshake
    are application-data records too."""
    host = "3000-%s.%s" % (gwtest.new_sandbox_id("norec"), gwtest.DOMAIN)
    c = RecordClient(gateway.tls_port, host, certs["ca"])
    try:
        request = b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode()
        first, _ = c.exchange(request)
        assert first.startswith(b"HTTP/1.1 404 "), first[:200]
        for _ in range(3):
            plain, records = c.exchange(request)
            assert plain.startswith(b"HTTP/1.1 404 ") and b"sandbox_not_found" in plain, plain[:300]
            assert len(plain) < 1300, "the answer no longer fits one small record: %d bytes" % len(plain)
            assert records == 1, "a %d-byte answer came in %d TLS records" % (len(plain), records)
    finally:
        c.close()
