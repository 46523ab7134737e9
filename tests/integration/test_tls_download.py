"""Downloads over TLS whose client reads slower than the gateway writes, so
the kernel takes part of a TLS record and the rest waits in libh2o's output
queue (patch 0280 hands records straight to the socket while nothing is
queued before them, and queues only what the kernel did not take). What a
user would notice: the body arrives exact (a byte of a record out of place
fails TLS's record MAC, a record lost or written twice breaks the stream),
complete (the write is not reported done before its last byte), and the
connection then serves the next request."""

import hashlib
import os
import socket
import ssl
import subprocess
import time

import gwtest

MiB = 1024 * 1024
BLOCK = (b"0123456789abcdef" * 4096)[:65536]  # what upstream.py's /bytes/<n> repeats


def pattern_sha256(n):
    h = hashlib.sha256()
    while n > 0:
        piece = BLOCK[: min(n, len(BLOCK))]
        h.update(piece)
        n -= len(piece)
    return h.hexdigest()


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


def test_slow_tls_http2_client_gets_exact_bodies(gateway, curl_runner, register_sandbox, upstream, workdir):
    """HTTP/2 over TLS: curl reads two bodies at a limited rate on one
    connection; both exact, the second on the connection the first left."""
    sid = gwtest.new_sandbox_id("tlsdl2")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = gateway.host(upstream.port, sid)
    sizes = (32 * MiB + 3, 2 * MiB)
    outs = [os.path.join(workdir, "%s-%d.bin" % (sid, i)) for i in (1, 2)]
    args = ["curl", "-sS", "--fail", "--http2", "--limit-rate", "8M", "--max-time", "120", "--cacert", curl_runner.ca,
            "--noproxy", "*", "--resolve", "%s:%d:127.0.0.1" % (host, gateway.tls_port),
            "-w", "%{http_version} %{num_connects} %{size_download}\\n"]
    for size, out in zip(sizes, outs):
        args += ["https://%s:%d/bytes/%d" % (host, gateway.tls_port, size), "-o", out]
    r = subprocess.run(args, capture_output=True, timeout=150)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["2", "1", str(sizes[0]), "2", "0", str(sizes[1])], r.stdout
    for size, out in zip(sizes, outs):
        with open(out, "rb") as f:
            assert hashlib.file_digest(f, "sha256").hexdigest() == pattern_sha256(size)
        os.unlink(out)
