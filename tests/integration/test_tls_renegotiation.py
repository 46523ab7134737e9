"""What OpenSSL writes while the gateway reads (libh2o patch 0273), seen by
real clients: a TLS 1.2 renegotiation gets a no_renegotiation warning the
client can read (it got one record it could not decrypt, bad_record_mac,
issue 36), a tampered record a bad_record_mac alert (it got a bare close),
a TLS 1.3 key update request the gateway's KeyUpdate (a bare close); each
connection is then closed (libh2o does not renegotiate), and a well-behaved
client on another connection is served throughout.

Clients: `openssl s_client` (its R and K commands), pyOpenSSL's
renegotiate() and Python's ssl over memory BIOs (to tamper with a record)."""

import re
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest
from OpenSSL import SSL

import gwtest
from test_dynamic_certs import http_on, request_on


class Bystander:
    """Requests to the sandbox on one keep-alive TLS connection, in a thread,
    timed, while the test misbehaves on other connections."""

    def __init__(self, g, host, ca):
        self.g, self.host, self.ca = g, host, ca
        self.latencies, self.errors = [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        try:
            ctx = ssl.create_default_context(cafile=self.ca)
            while not self.stop.is_set():
                # a new connection only when the gateway said Connection: close (after
                # limits.max_requests_per_connection, 1000: a slow machine gets there)
                with ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.g.tls_port), timeout=20),
                                     server_hostname=self.host) as s:
                    self.serve(s)
        except Exception as e:  # reported by check()
            self.errors.append(repr(e))

    def serve(self, s):
        while not self.stop.is_set():
            t0 = time.monotonic()
            status, closing = request_on(s, self.host)
            self.latencies.append(time.monotonic() - t0)
            if status != "HTTP/1.1 200 OK":
                self.errors.append(status)
            if closing:
                return

    def __enter__(self):
        self.thread.start()
        gwtest.wait_for(lambda: self.latencies or self.errors, 20, what="the bystander's first answer")
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)

    def check(self):
        assert not self.errors, self.errors[:3]
        lat = sorted(self.latencies)
        print("bystander: %d requests, all 200, p50 %.1f ms, p99 %.1f ms" %
              (len(lat), 1000 * lat[len(lat) // 2], 1000 * lat[int(len(lat) * .99)]))
        assert len(lat) >= 5


@pytest.fixture
def site(gateway, register_sandbox, upstream):
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    return gateway.host(upstream.port, sid)


def s_client_session(g, host, ca, flags, steps):
    """`openssl s_client` connected with flags (-msg: it prints the records
    and alerts it reads). For each (mark, line) of steps: once it has printed
    mark, `line` is typed (R: renegotiate, K: a key update asking for one
    back, or bytes to send). Returns everything it printed, once the gateway
    ended the connection (stdin stays open: its end would make s_client close
    first)."""
    args = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % g.tls_port, "-servername", host, "-CAfile", ca,
            "-msg", "-state"] + flags
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    try:
        for mark, line in steps:
            while mark not in out:  # one command per read of its stdin: it must have taken the previous one
                chunk = p.stdout.readline()
                assert chunk, "s_client ended early:\n" + out.decode("utf-8", "replace")
                out += chunk
            p.stdin.write(line)
            p.stdin.flush()
        p.wait(timeout=30)
        out += p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdin.close()
        p.stdout.close()
    return out.decode("utf-8", "replace")


# the session summary ends with the verify result; then s_client reads commands from stdin
HANDSHAKE_DONE = b"Verify return code"


@pytest.mark.parametrize("alpn", ["http/1.1", "h2"])
def test_renegotiation_is_refused_with_a_readable_alert(gateway, certs, site, alpn):
    with Bystander(gateway, site, certs["ca"]) as b:
        for _ in range(5):
            out = s_client_session(gateway, site, certs["ca"], ["-tls1_2", "-alpn", alpn], [(HANDSHAKE_DONE, b"R\n")])
            assert "RENEGOTIATING" in out, out
            # the gateway's one record after the ClientHello decrypts: a warning, as nginx and HAProxy send
            assert "<<< TLS 1.2, Alert [length 0002], warning no_renegotiation" in out, out
            assert "bad_record_mac" not in out and "bad record mac" not in out, out
    b.check()


def test_pyopenssl_renegotiate_reads_no_renegotiation(gateway, certs, site):
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_max_proto_version(SSL.TLS1_2_VERSION)
    ctx.load_verify_locations(certs["ca"])
    ctx.set_verify(SSL.VERIFY_PEER, lambda *a: a[-1])
    with Bystander(gateway, site, certs["ca"]) as b:
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", gateway.tls_port))
            # pyOpenSSL wants a blocking socket; a receive timeout keeps a silent gateway from hanging the test
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 20, 0))
            conn = SSL.Connection(ctx, sock)
            conn.set_tlsext_host_name(site.encode())
            conn.set_connect_state()
            conn.do_handshake()
            # all of the response: a record still on its way would be unexpected in the handshake
            assert http_on(conn, site) == "HTTP/1.1 200 OK"
            assert conn.renegotiate()
            with pytest.raises(SSL.Error) as e:
                conn.do_handshake()
            # OpenSSL's client fails on the warning itself ("no renegotiation"), not on a record it cannot read
            assert "no renegotiation" in str(e.value), e.value
            assert "bad record mac" not in str(e.value)
            sock.close()
    b.check()


class MemoryClient:
    """Python's ssl over memory BIOs: the records it sends can be changed on
    the way."""

    def __init__(self, port, host, ca, version):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ctx.maximum_version = version
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                assert data, "closed during the handshake"
                self.incoming.write(data)
        self.sock.sendall(self.outgoing.read())

    def read_all(self):
        """Everything the gateway sends until it closes, handed to the TLS
        client; returns what reading it says."""
        while True:
            data = self.sock.recv(65536)
            if not data:
                break
            self.incoming.write(data)
        self.incoming.write_eof()
        try:
            while self.tls.read(65536):
                pass
            return "closed"
        except ssl.SSLError as e:
            return "%s" % e


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"])
def test_tampered_record_gets_a_readable_bad_record_mac_alert(gateway, certs, site, version):
    with Bystander(gateway, site, certs["ca"]) as b:
        c = MemoryClient(gateway.tls_port, site, certs["ca"], version)
        c.tls.write(("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % site).encode())
        record = bytearray(c.outgoing.read())
        record[-1] ^= 1  # the tag's last byte
        c.sock.sendall(bytes(record))
        said = c.read_all()
        c.sock.close()
        # the gateway's fatal alert arrives and decrypts (before: a bare close, "EOF occurred in violation of protocol")
        assert "ALERT_BAD_RECORD_MAC" in said.upper(), said
    b.check()


def test_key_update_request_is_answered_in_the_next_response(gateway, certs, site):
    """A guard more than a fix: OpenSSL 3 answers a TLS 1.3 key update request
    with its own KeyUpdate at its next SSL_write, not inside SSL_read, so the
    records the gateway writes stay in step with the client's keys (it passes
    with 2.2.5's write path as well)."""
    request = ("GET /status/200 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % site).encode()
    # Connection: close: the gateway ends it after the response
    text = s_client_session(gateway, site, certs["ca"], ["-tls1_3"], [(HANDSHAKE_DONE, b"K\n"), (b"KEYUPDATE", request)])
    after = text[text.index("KEYUPDATE"):]
    # the gateway's KeyUpdate, then the response under its new key
    assert re.search(r"<<< TLS 1.3, Handshake \[length [0-9a-f]+\], KeyUpdate", after), after
    assert "HTTP/1.1 200 OK" in after.split("KeyUpdate", 2)[-1], after
    assert "bad_record_mac" not in text and "bad record mac" not in text, text
