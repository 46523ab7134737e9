"""Zero-copy bodies (upstream/splice.c): a Content-Length body of at least
256 KiB to an HTTP/1.1 client on the plain listener moves from the sandbox
socket to the client socket with splice(2). What a user (and billing) would
notice: the bytes are exact, the connection serves the next request, a slow
or paused client gets the body with back-pressure (the sandbox is not read
ahead), a client that goes away is billed what it received and leaves no
descriptor behind. lizard_spliced_bytes_total shows the path was taken, so
each test fails on the buffered path (upstream.splice false)."""

import fcntl
import hashlib
import os
import socket
import struct
import subprocess
import termios
import time

import pytest

import gwtest

MiB = 1024 * 1024
HEAD_BOUND = 512  # per response head (the gateway counts a head as its HTTP/1.1 text)
FLUSH_MS = 200
BLOCK = gwtest.PATTERN_BLOCK
pattern_sha256 = gwtest.pattern_sha256


@pytest.fixture
def mredis(workdir):
    r = gwtest.Redis(os.path.join(workdir, "splice-redis"))
    r.start()
    yield r
    r.stop()


def start_gw(gw_factory, mredis, **extra):
    over = {"redis": {"address": "127.0.0.1:%d" % mredis.port}, "metering": {"flush_interval_ms": FLUSH_MS},
            "instance_id": "splice-gw"}
    over = gwtest.deep_merge(over, extra)
    g = gw_factory(over, name=gwtest.new_sandbox_id("gws"), start=False)
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True  # the plain listener serves instead of redirecting
    g.overrides["listen"] = cfg["listen"]
    g.start()
    return g


def sandbox(mredis, upstream):
    sid = gwtest.new_sandbox_id("sp")
    gwtest.register_sandbox(mredis, sid, ports={upstream.port: "public"}, project="p-" + sid)
    return sid


def metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200, body[-200:]
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no metric %s" % name)


def billed(redis, sid):
    total = 0
    for _id, fields in redis.cmd("XRANGE", "lizard:egress", "-", "+"):
        d = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
        if d["sandbox"] == sid:
            total += int(d["egress"])
    return total


def settled_bill(redis, sid, at_least=0):
    """The sandbox's billed egress once it stops moving (flushes every FLUSH_MS)."""
    gwtest.wait_for(lambda: billed(redis, sid) >= at_least, 20, what="egress >= %d billed" % at_least)
    last = -1
    while True:
        time.sleep(3 * FLUSH_MS / 1000)
        now = billed(redis, sid)
        if now == last:
            return now
        last = now


def open_fds(g):
    return len(os.listdir("/proc/%d/fd" % g.proc.pid))


def connect(g, rcvbuf=None):
    s = socket.socket()
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", g.plain_port))
    s.settimeout(60)
    return s


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            raise ConnectionError("closed in the head: %r" % head)
        head += chunk
    return head


def read_body(s, n, pace=None, h=None):
    """Reads exactly n bytes into the sha256 h (a new one: None); returns
    its digest. pace(i) runs between reads."""
    h, left, i = h or hashlib.sha256(), n, 0
    while left > 0:
        chunk = s.recv(min(left, 256 * 1024))
        if not chunk:
            raise ConnectionError("closed with %d of %d bytes left" % (left, n))
        h.update(chunk)
        left -= len(chunk)
        i += 1
        if pace is not None:
            pace(i)
    return h.hexdigest()


def test_spliced_downloads_are_exact_metered_and_keep_alive(gw_factory, mredis, upstream, workdir):
    """Two 64 MiB downloads on one curl keep-alive connection: both bodies
    exact, the second on the same connection, billed their bytes, and
    spliced (not copied)."""
    g = start_gw(gw_factory, mredis)
    sid = sandbox(mredis, upstream)
    size = 64 * MiB
    host = g.host(upstream.port, sid).split(":")[0]
    url = "http://%s:%d/bytes/%d" % (host, g.plain_port, size)
    outs = [os.path.join(workdir, "splice-%d.bin" % i) for i in (1, 2)]
    r = subprocess.run(["curl", "-sS", "--fail", "--resolve", "%s:%d:127.0.0.1" % (host, g.plain_port),
                        "-w", "%{num_connects} %{size_download}\\n", url, "-o", outs[0], url, "-o", outs[1]],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().split()
    # one connection for both: the second request went on the connection the spliced body left
    assert lines == ["1", str(size), "0", str(size)], lines
    want = pattern_sha256(size)
    for out in outs:
        with open(out, "rb") as f:
            assert hashlib.file_digest(f, "sha256").hexdigest() == want
        os.unlink(out)
    # the path was taken: all but what came with each head was spliced
    assert metric(g, "lizard_spliced_responses_total") == 2
    assert metric(g, "lizard_spliced_bytes_total") >= 2 * (size - 2 * MiB), metric(g, "lizard_spliced_bytes_total")
    egress = settled_bill(mredis, sid, 2 * size)
    assert 2 * size <= egress < 2 * size + 2 * HEAD_BOUND, egress


def test_slow_and_paused_client_back_pressure(gw_factory, mredis, upstream):
    """A client that pauses mid-body: the sandbox is not read ahead (the
    upstream's writes stop at what the kernel buffers and the pipe hold),
    then a paced read gets the exact body, and the connection answers a
    second request."""
    g = start_gw(gw_factory, mredis)
    sid = sandbox(mredis, upstream)
    size = 96 * MiB
    host = g.host(upstream.port, sid)
    upstream.get_json("/_reset")
    s = connect(g, rcvbuf=64 * 1024)
    s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (size, host.encode()))
    head = read_head(s)
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-length: %d" % size in head.lower(), head
    first = s.recv(MiB)
    # paused: what the upstream has written stays bounded by the buffers between (loopback
    # sockets autotune to a few MiB each); without back-pressure it would be the whole body
    time.sleep(2)
    written = upstream.stats()["bytes_written"]
    assert written < size // 2, "a paused client let the gateway read %d bytes of a %d-byte body" % (written, size)
    assert metric(g, "lizard_spliced_responses_total") == 1
    # then slow: short naps between reads
    digest = read_body(s, size - len(first), pace=lambda i: time.sleep(0.01) if i % 8 == 0 else None,
                       h=hashlib.sha256(first))
    assert digest == pattern_sha256(size)
    s.close()

    # the same download paced from the start, digest over the whole body, then keep-alive
    s = connect(g, rcvbuf=64 * 1024)
    s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (16 * MiB, host.encode()))
    read_head(s)
    assert read_body(s, 16 * MiB, pace=lambda i: time.sleep(0.005)) == pattern_sha256(16 * MiB)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
    head = read_head(s)
    assert head.startswith(b"HTTP/1.1 200 "), head
    s.close()
    assert metric(g, "lizard_spliced_responses_total") == 2
    assert metric(g, "lizard_spliced_bytes_total") >= size + 16 * MiB - 4 * MiB


def test_client_gone_mid_body_billed_what_it_received_no_fd_leak(gw_factory, mredis, upstream):
    """A client that reads part of a spliced body, stops, then resets the
    connection: billed what its TCP received (nothing it never got), and the
    gateway's descriptors are back to what they were (pipe, duplicate and
    upstream connection closed)."""
    g = start_gw(gw_factory, mredis)
    sid = sandbox(mredis, upstream)
    host = g.host(upstream.port, sid)
    # warm-up: a small response leaves the pooled upstream connection a later request reuses
    s = connect(g)
    s.sendall(b"GET /bytes/1000 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host.encode())
    while s.recv(65536):
        pass
    s.close()
    gwtest.wait_for(lambda: metric(g, "lizard_in_flight_requests") == 0, 20, what="the warm-up to end")
    baseline = open_fds(g)
    warm = settled_bill(mredis, sid, 1000)

    size = 256 * MiB
    for rst in (True, False):
        s = connect(g, rcvbuf=64 * 1024)
        s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (size, host.encode()))
        head = read_head(s)
        got = 0
        while got < 8 * MiB:
            chunk = s.recv(256 * 1024)
            assert chunk
            got += len(chunk)
        gwtest.wait_for(lambda: metric(g, "lizard_spliced_bytes_total") > 0, 20, what="the body to be spliced")
        time.sleep(0.5)  # the client's kernel has acknowledged what it holds
        queued = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        if rst:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        gwtest.wait_for(lambda: metric(g, "lizard_in_flight_requests") == 0, 30, what="the cut response to end")
        received = got + queued
        bill = settled_bill(mredis, sid) - warm
        # a FIN close lets the gateway write a little more before its write fails: bounded by
        # what the client's receive buffer could still take
        slack = HEAD_BOUND + (0 if rst else 4 * MiB)
        assert received <= bill <= received + len(head) + slack, (rst, bill, received)
        mredis.cmd("DEL", "lizard:egress")
        warm = 0
        # every descriptor of the response is closed (no pipe, duplicate or upstream connection left)
        gwtest.wait_for(lambda: open_fds(g) <= baseline, 15, what="descriptors back to %d (now %d)" % (baseline, open_fds(g)))
    assert metric(g, "lizard_spliced_responses_total") == 2


def test_splice_off_copies(gw_factory, mredis, upstream, workdir):
    """upstream.splice false: the same download is exact and nothing is spliced."""
    g = start_gw(gw_factory, mredis, upstream={"splice": False})
    sid = sandbox(mredis, upstream)
    host = g.host(upstream.port, sid)
    s = connect(g)
    s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (8 * MiB, host.encode()))
    read_head(s)
    assert read_body(s, 8 * MiB) == pattern_sha256(8 * MiB)
    s.close()
    assert metric(g, "lizard_spliced_responses_total") == 0

