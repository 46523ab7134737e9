"""Downloads over TLS whose client reads slower than the gateway writes, so
the kernel takes part of a TLS record and the rest waits in libh2o's output
queue until the socket is writable again (the write path a change to how
libh2o hands records to the kernel must keep; docs/performance.md Performance, "h2o's
TLS record copy"). What a user would notice: the body arrives exact (a byte
of a record out of place fails TLS's record MAC, a record lost or written
twice breaks the stream), complete (the write is not reported done before
its last byte), and the connection then serves the next request."""

import hashlib
import socket
import ssl
import time

import gwtest

MiB = 1024 * 1024
BLOCK = gwtest.PATTERN_BLOCK
pattern_sha256 = gwtest.pattern_sha256


def tls_connect(g, certs, host, rcvbuf):
    """A TLS 1.3 client with a small receive buffer (set before connect, so
    the window stays small): the gateway's writes fill it and stop short."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", g.tls_port))
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx.wrap_socket(raw, server_hostname=host)


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        assert chunk, "closed before the head ended: %r" % buf
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def read_body(s, n, rest, pace):
    """Reads n body bytes (rest: those that came with the head), calling
    pace(i) before read i; returns (sha256, bytes read)."""
    h = hashlib.sha256(rest)
    got = len(rest)
    i = 0
    while got < n:
        pace(i)
        i += 1
        chunk = s.recv(min(65536, n - got))
        if not chunk:
            break
        h.update(chunk)
        got += len(chunk)
    return h.hexdigest(), got


def test_slow_tls_client_gets_exact_bodies_on_one_connection(gateway, certs, register_sandbox, upstream):
    """HTTP/1.1 over TLS: a 24 MiB body read in short bursts with naps and
    one 1 s pause (the kernel's send buffer fills, writes stop mid-record),
    then a second body on the same connection. Both exact."""
    sid = gwtest.new_sandbox_id("tlsdl")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = gateway.host(upstream.port, sid)
    s = tls_connect(gateway, certs, host, rcvbuf=32 * 1024)
    try:
        size = 24 * MiB
        s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (size, host.encode()))
        head, rest = read_head(s)
        assert head.startswith(b"HTTP/1.1 200 ") and b"content-length: %d" % size in head.lower(), head

        def pace(i):
            if i == 200:
                time.sleep(1)  # a pause: the gateway's write meets a full socket (EAGAIN) and waits
            elif i % 16 == 0:
                time.sleep(0.005)

        digest, got = read_body(s, size, rest, pace)
        assert got == size, "the body stopped at %d of %d bytes" % (got, size)
        assert digest == pattern_sha256(size)
        # the response's write completed: the connection takes the next request
        s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (MiB + 7, host.encode()))
        head, rest = read_head(s)
        assert head.startswith(b"HTTP/1.1 200 "), head
        digest, got = read_body(s, MiB + 7, rest, lambda i: None)
        assert (digest, got) == (pattern_sha256(MiB + 7), MiB + 7)
    finally:
        s.close()


def h2_download(conn, s, authority, path, pace):
    """One GET on the HTTP/2 connection, reading in bursts (pace(i) before
    read i); returns (status, sha256 of the body, body bytes)."""
    import h2.events

    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", authority), (":path", path)],
                      end_stream=True)
    s.sendall(conn.data_to_send())
    status, h, got, i = None, hashlib.sha256(), 0, 0
    while True:
        pace(i)
        i += 1
        data = s.recv(65536)
        assert data, "the connection closed after %d body bytes" % got
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                status = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                h.update(ev.data)
                got += len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, sid)
            elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                raise AssertionError("stream reset after %d body bytes" % got)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                s.sendall(conn.data_to_send())
                return status, h.hexdigest(), got
        s.sendall(conn.data_to_send())


def test_slow_tls_http2_client_gets_exact_bodies(gateway, certs, register_sandbox, upstream):
    """HTTP/2 over TLS with a window that never stops the gateway (16 MiB)
    and a small receive buffer read in bursts and a pause: the kernel's
    send buffer fills mid-record; two bodies on the connection, both exact."""
    import h2.config
    import h2.connection
    import h2.settings

    sid = gwtest.new_sandbox_id("tlsdl2")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = gateway.host(upstream.port, sid)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", gateway.tls_port))
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(raw, server_hostname=host)
    try:
        assert s.selected_alpn_protocol() == "h2"
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16 * MiB})
        conn.increment_flow_control_window(16 * MiB)
        s.sendall(conn.data_to_send())
        authority = "%s:%d" % (host, gateway.tls_port)

        def pace(i):
            if i == 200:
                time.sleep(1)
            elif i % 16 == 0:
                time.sleep(0.005)

        for size in (20 * MiB + 3, MiB):
            status, digest, got = h2_download(conn, s, authority, "/bytes/%d" % size, pace)
            assert (status, got) == ("200", size), (status, got)
            assert digest == pattern_sha256(size)
    finally:
        s.close()
