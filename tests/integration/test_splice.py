"""Zero-copy bodies (upstream/splice.c): a Content-Length body of at least
256 KiB to an HTTP/1.1 client on the plain listener moves from the sandbox
socket to the client socket with splice(2). What a user (and billing) would
notice: the bytes are exact, the connection serves the next request, a slow
or paused client gets the body with back-pressure (the sandbox is not read
ahead), a client that goes away is billed what it received and leaves no
descriptor behind. lizard_spliced_bytes_total shows the path was taken, so
each test fails on the buffered path (upstream.splice false). WebSocket
tunnels without Pings splice the app's way (upstream/tunnel.c; both ways
with the client's frame bounds off): exact frames and billing, the stall
timeout, revocation, counted in lizard_spliced_tunnel_bytes_total."""

import fcntl
import hashlib
import os
import socket
import struct
import subprocess
import termios
import threading
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


def spliced_until_still(g):
    """lizard_spliced_bytes_total once it stops moving: clients that read
    nothing have let the gateway fill their sockets."""
    last = -1
    while True:
        time.sleep(0.2)
        now = metric(g, "lizard_spliced_bytes_total")
        if now == last:
            return now
        last = now


def test_clients_that_read_only_once_their_socket_is_full_get_every_byte(gw_factory, mredis, upstream):
    """Clients that read nothing until the gateway has filled their socket
    (curl starting late on a loaded machine): the gateway waits for each and
    every body arrives whole, not cut, billed once. Where a socket fills
    depends on the kernel's buffer sizes: mid-pipe, or just as a pipe has
    emptied into it. Then, when the app is ahead, the pipe is filled again
    whole before the client socket says EAGAIN, and a splice of the 0 bytes
    the full pipe had room for returned 0, which the gateway took for the
    app's end: the body cut as upstream_reset (the first of the two
    downloads of test_spliced_downloads_are_exact_metered_and_keep_alive, at
    4 MiB, under load). Each socket is a chance, about 1 in 15 here (2 to 4
    cuts in 48 per run without the fix): 80 fresh connections (a sandbox
    each, so the upstream connection is new too), 8 at a time, each left
    unread until the splicing stops."""
    g = start_gw(gw_factory, mredis)
    size, rounds, at_once = 8 * MiB, 10, 8
    sids = []
    for _ in range(rounds):
        socks = []
        for _ in range(at_once):
            sid = sandbox(mredis, upstream)
            sids.append(sid)
            s = connect(g)  # the kernel's default buffers, as curl's
            s.sendall(b"GET /bytes/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (size, g.host(upstream.port, sid).encode()))
            socks.append(s)
        spliced_until_still(g)
        for s in socks:
            read_head(s)
            assert read_body(s, size) == pattern_sha256(size)
            s.close()
    n = rounds * at_once
    assert metric(g, "lizard_spliced_responses_total") == n
    assert metric(g, 'lizard_responses_cut_total{reason="upstream_reset"}') == 0

    def bill():
        return sum(billed(mredis, sid) for sid in sids)

    gwtest.wait_for(lambda: bill() >= n * size, 20, what="%d bodies billed" % n)
    time.sleep(3 * FLUSH_MS / 1000)
    assert n * size <= bill() < n * (size + HEAD_BOUND)


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



# --- WebSocket tunnels ---------------------------------------------------------
# A ws:// tunnel on the plain listener without Pings (upstream.websocket_ping_interval_ms
# 0: Pings need the frames tracked) moves the app's bytes with splice(2), and the
# client's too when limits.websocket_* are off (their frames are walked otherwise)
# (upstream/tunnel.c). /ws of upstream.py echoes each frame.

WS_UPGRADE = ("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def ws_open(g, host, rcvbuf=None):
    s = connect(g, rcvbuf)
    s.sendall((WS_UPGRADE % host).encode())
    head = read_head(s)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s, head


def ws_read_frame(s):
    """(opcode, payload, bytes on the wire) of the next unmasked frame."""
    import test_metering
    hdr = test_metering.recv_exact(s, 2)
    n = hdr[1] & 0x7F
    ext = test_metering.recv_exact(s, 2 if n == 126 else 8 if n == 127 else 0)
    n = struct.unpack("!H", ext)[0] if n == 126 else struct.unpack("!Q", ext)[0] if n == 127 else n
    return hdr[0] & 0x0F, test_metering.recv_exact(s, n), 2 + len(ext) + n


@pytest.mark.parametrize("splice,bounded", [(True, True), (True, False), (False, True)],
                         ids=["spliced", "spliced-unbounded", "copied"])
def test_websocket_tunnel_spliced_exact_and_billed(gw_factory, mredis, upstream, splice, bounded):
    """Frames both ways arrive exact; every byte is billed once (egress:
    what the client received plus the 101, ingress: what it sent plus the
    upgrade request); lizard_spliced_tunnel_bytes_total counts exactly the
    frames spliced: the app's (the client's are walked for the frame and
    message bounds, limits.websocket_*, so they are copied), both ways with
    both bounds off, none with upstream.splice false."""
    import test_metering
    limits = {} if bounded else {"websocket_frames_per_second": 0, "websocket_max_message_bytes": 0}
    g = start_gw(gw_factory, mredis, upstream={"websocket_ping_interval_ms": 0, "splice": splice}, limits=limits)
    sid = sandbox(mredis, upstream)
    host = g.host(upstream.port, sid)
    s, head = ws_open(g, host)
    sent = recvd = 0
    for size in (10, 70000, 1000000, 2000000):
        payload = os.urandom(size)
        frame = test_metering.ws_frame(payload)
        s.sendall(frame)
        sent += len(frame)
        opcode, echo, wire = ws_read_frame(s)
        assert opcode == 0x2 and echo == payload, (size, opcode, len(echo))
        recvd += wire
    close = test_metering.ws_frame(struct.pack("!H", 1000), opcode=0x8)
    s.sendall(close)
    sent += len(close)
    opcode, _, wire = ws_read_frame(s)
    assert opcode == 0x8
    recvd += wire
    assert s.recv(1) == b""  # the app closed after its close frame: so does the tunnel
    s.close()
    gwtest.wait_for(lambda: metric(g, "lizard_websockets_open") == 0, 20, what="the tunnel to close")

    assert metric(g, "lizard_spliced_tunnels_total") == (1 if splice else 0)
    assert metric(g, "lizard_spliced_tunnel_bytes_total") == (0 if not splice else recvd if bounded else sent + recvd)
    egress = settled_bill(mredis, sid, recvd)
    assert recvd + len(head) - HEAD_BOUND <= egress <= recvd + HEAD_BOUND, (egress, recvd, len(head))
    ingress = 0
    for _id, fields in mredis.cmd("XRANGE", "lizard:egress", "-", "+"):
        d = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
        if d["sandbox"] == sid:
            ingress += int(d["ingress"])
    assert sent <= ingress <= sent + HEAD_BOUND, (ingress, sent)


def test_spliced_websocket_client_that_stops_reading_is_closed(gw_factory, mredis, upstream):
    """The app echoes 8 MB to a spliced tunnel's client that never reads:
    once the write toward it makes no progress for client_stall_timeout_ms
    (1 s), the tunnel closes, and the gateway's descriptors (the pipe
    included) are back to what they were."""
    import test_metering
    g = start_gw(gw_factory, mredis, upstream={"websocket_ping_interval_ms": 0}, limits={"client_stall_timeout_ms": 1000})
    sid = sandbox(mredis, upstream)
    host = g.host(upstream.port, sid)
    s, _ = ws_open(g, host)
    s.sendall(test_metering.ws_frame(b"x"))
    assert ws_read_frame(s)[1] == b"x"
    s.close()
    gwtest.wait_for(lambda: metric(g, "lizard_websockets_open") == 0, 20, what="the first tunnel to close")
    baseline = open_fds(g)

    s, _ = ws_open(g, host, rcvbuf=4096)
    try:
        frame = test_metering.ws_frame(b"y" * (8 * 1000 * 1000))
        sender = threading.Thread(target=_send_quietly, args=(s, frame), daemon=True)
        sender.start()
        # the client's frame is copied (walked for the bounds); the app's echo is spliced toward the client
        gwtest.wait_for(lambda: metric(g, "lizard_spliced_tunnel_bytes_total") > 0, 30,
                        what="the app's echo to be spliced toward the client")
        gwtest.wait_for(lambda: metric(g, "lizard_websockets_open") == 0, 30, what="the stalled tunnel to close")
        gwtest.wait_for(lambda: open_fds(g) <= baseline, 15, what="descriptors back to %d (now %d)" % (baseline, open_fds(g)))
    finally:
        s.close()
    assert metric(g, "lizard_spliced_tunnels_total") == 2


def test_spliced_websocket_tunnel_is_revoked(gw_factory, mredis, upstream):
    """Unexposing the port (a publish) closes a spliced tunnel, as a copied one."""
    import test_metering
    g = start_gw(gw_factory, mredis, upstream={"websocket_ping_interval_ms": 0})
    sid = sandbox(mredis, upstream)
    s, _ = ws_open(g, g.host(upstream.port, sid))
    try:
        s.sendall(test_metering.ws_frame(b"z" * 300000))
        assert ws_read_frame(s)[1] == b"z" * 300000
        assert metric(g, "lizard_spliced_tunnels_total") == 1
        gwtest.register_sandbox(mredis, sid, ports={}, project="p-" + sid)
        s.settimeout(20)
        assert s.recv(65536) == b"", "the revoked tunnel stayed open"
    finally:
        s.close()
    gwtest.wait_for(lambda: metric(g, "lizard_websockets_open") == 0, 20, what="the tunnel to close")


def _send_quietly(sock, data):
    try:
        sock.sendall(data)
    except OSError:
        pass  # the gateway closed the connection: the point of the test


def test_websockets_library_through_a_spliced_tunnel(gw_factory, mredis, workdir):
    """Debian's python3-websockets on both ends (ws_upstream.py as the app, its
    client as the user) through a spliced ws:// tunnel: echoes from 5 B to
    3 MB come back exact, text stays text, an 8 MiB flood arrives whole, the
    close handshake ends cleanly on both sides, and the frames went by splice
    (most of both ways) rather than through the buffers."""
    import asyncio

    import websockets
    from test_proxy import WsUpstream

    app = WsUpstream(os.path.join(workdir, "ws-lib"))
    try:
        g = start_gw(gw_factory, mredis, upstream={"websocket_ping_interval_ms": 0})
        sid = gwtest.new_sandbox_id("spw")
        gwtest.register_sandbox(mredis, sid, ports={app.port: "public"}, project="p-" + sid)
        host = g.host(app.port, sid)

        def connect_ws(path):
            return websockets.connect("ws://%s:%d%s" % (host, g.plain_port, path), host="127.0.0.1",
                                      port=g.plain_port, max_size=None, compression=None, ping_interval=None,
                                      open_timeout=30, close_timeout=30)

        async def session():
            payloads = [os.urandom(5), "text \u00e9", os.urandom(100000), os.urandom(3000000)]
            async with connect_ws("/echo?id=spw-echo") as ws:
                for p in payloads:
                    await ws.send(p)
                    echo = await asyncio.wait_for(ws.recv(), 60)
                    assert type(echo) is type(p) and echo == p, (type(p), len(p))
            flood = 0
            async with connect_ws("/flood?mib=8&id=spw-flood") as ws:
                while True:
                    msg = await asyncio.wait_for(ws.recv(), 60)
                    if msg == "done":
                        break
                    assert msg == b"\x5a" * 65536
                    flood += len(msg)
            return sum(len(p) if isinstance(p, bytes) else len(p.encode()) for p in payloads), flood

        echoed, flood = asyncio.run(session())
        assert flood == 8 * MiB
        for conn_id in ("spw-echo", "spw-flood"):
            info = app.wait_closed(conn_id, timeout=20)
            assert info["close_code"] == 1000, info  # the client's close reached the app through the tunnel
        gwtest.wait_for(lambda: metric(g, "lizard_websockets_open") == 0, 20, what="the tunnels to close")
        assert metric(g, "lizard_spliced_tunnels_total") == 2
        # most of it by splice: what reached the gateway with the 101 (the flood starts at once, up to a socket
        # buffer of it on a loaded machine) goes the buffered way, as does what the client sent with the upgrade;
        # frame headers and the app's own Pings make the wire a little more than the payloads
        payloads = 2 * echoed + flood
        spliced = metric(g, "lizard_spliced_tunnel_bytes_total")
        assert payloads // 2 <= spliced <= payloads + payloads // 50, (spliced, payloads)
    finally:
        app.stop()
