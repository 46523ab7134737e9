"""Metering, as billing sees it: the XADD records on <prefix>egress and the
INCRBY totals on <prefix>egress:{<sandboxId>} written by a real gateway for
real traffic (HTTP/1.1, HTTP/2, a WebSocket exchange); Redis killed or paused
during traffic; SIGTERM with Redis up (final flush) and down (the journal,
replayed on the next start); SIGKILL (the journal, replayed).

Each test runs its own redis-server, so that killing it touches no other
test. Byte bounds: bodies and WebSocket frames are counted exactly; each
request/response head adds less than HEAD_BOUND bytes (the gateway counts a
head as its HTTP/1.1 text, also for HTTP/2)."""

import glob
import json
import os
import socket
import shutil
import signal
import ssl
import struct
import subprocess
import threading
import time

import pytest

import gwtest
import journal_file
from test_h2_security import DATA, END_STREAM, SETTINGS, WINDOW_UPDATE, RawH2, frame

HEAD_BOUND = 512  # per request head and per response head
INSTANCE = "meter-gw-1"
FLUSH_MS = 200


@pytest.fixture
def mredis(workdir):
    r = gwtest.Redis(os.path.join(workdir, "meter-redis"))
    r.start()
    yield r
    r.stop()


@pytest.fixture
def msandbox(mredis, upstream):
    class Sbx:
        pass

    s = Sbx()
    s.id = gwtest.new_sandbox_id("m")
    s.project = "proj-" + gwtest.new_sandbox_id()
    gwtest.register_sandbox(mredis, s.id, ports={upstream.port: "public"}, project=s.project)
    return s


def start_gw(gw_factory, mredis, flush_ms=FLUSH_MS, start=True, **extra):
    over = {"redis": {"address": "127.0.0.1:%d" % mredis.port}, "metering": {"flush_interval_ms": flush_ms},
            "instance_id": INSTANCE}
    over.update(extra)
    # a name of its own: the spill file is named after it
    return gw_factory(over, name=gwtest.new_sandbox_id("gwm"), start=start)


def records(redis, sandbox_id=None):
    """XRANGE lizard:egress as a list of dicts (str values), stream order."""
    out = []
    for _id, fields in redis.cmd("XRANGE", "lizard:egress", "-", "+"):
        d = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
        if sandbox_id is None or d["sandbox"] == sandbox_id:
            out.append(d)
    return out


def total(recs, field):
    return sum(int(r[field]) for r in recs)


def incr_total(redis, sandbox_id):
    v = redis.cmd("GET", "lizard:egress:{%s}" % sandbox_id)
    return int(v) if v is not None else 0


def wait_egress(redis, sandbox_id, at_least, timeout=10):
    return gwtest.wait_for(lambda: total(records(redis, sandbox_id), "egress") >= at_least and records(redis, sandbox_id),
                           timeout, what="metering records with egress >= %d for %s" % (at_least, sandbox_id))


def check_stream(redis):
    """Every record is well formed; seq strictly increases per gateway in
    stream order (no duplicates). Returns the records."""
    recs = records(redis)
    last = {}
    for r in recs:
        assert set(r) == {"sandbox", "project", "egress", "ingress", "from_ms", "to_ms", "gateway", "seq"}, r
        assert int(r["from_ms"]) <= int(r["to_ms"]), r
        seq = int(r["seq"])
        assert seq > last.get(r["gateway"], 0), "seq %d after %d in the stream: %r" % (seq, last.get(r["gateway"]), recs)
        last[r["gateway"]] = seq
    return recs


def check_bounds(recs, body_out, body_in, n_exchanges):
    egress, ingress = total(recs, "egress"), total(recs, "ingress")
    assert body_out <= egress < body_out + n_exchanges * HEAD_BOUND, (egress, body_out, n_exchanges)
    assert body_in <= ingress < body_in + n_exchanges * HEAD_BOUND, (ingress, body_in, n_exchanges)


def metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200 and body.endswith(b"\n") and b"lizard_workers " in body, body[-200:]
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no metric %s" % name)


def traffic(curl, g, s, upstream, http2=False, n=3, size=100000, post=30000):
    """n GETs of `size` bytes and one POST of `post` bytes; returns
    (body bytes to the client, body bytes from the client, exchanges)."""
    host = g.host(upstream.port, s.id)
    out = 0
    for _ in range(n):
        r = curl(host, "/bytes/%d" % size, gw=g, http2=http2)
        assert r.status == 200 and len(r.body) == size, r
        out += len(r.body)
    r = curl(host, "/echo", gw=g, http2=http2, data=b"x" * post, method="POST")
    assert r.status == 200 and r.json()["body_length"] == post, r
    return out + len(r.body), post, n + 1


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
def test_traffic_is_metered(gw_factory, mredis, msandbox, upstream, curl, http2):
    g = start_gw(gw_factory, mredis)
    t0 = int(time.time() * 1000)
    body_out, body_in, n = traffic(curl, g, msandbox, upstream, http2=http2)
    wait_egress(mredis, msandbox.id, body_out)
    time.sleep(3 * FLUSH_MS / 1000)  # anything late would show now
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, body_out, body_in, n)
    for r in recs:
        assert r["project"] == msandbox.project and r["gateway"] == INSTANCE, r
        assert t0 - 1000 <= int(r["from_ms"]) and int(r["to_ms"]) <= int(time.time() * 1000) + 1000, r
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")
    # about one record per flush interval with traffic, not one per request
    # (a request's egress is billed once its client has it, which can fall
    # in the interval after the one that billed its ingress)
    assert len(recs) <= 2 * n


# HTTP/2: the END_STREAM goes with the last body bytes, never alone after
# them. curl stops reading at the Content-Length: an empty END_STREAM frame
# after the body stayed unread in its socket, so its close sent a reset, and
# the reset's ACK, the only one for the last bytes when curl's delayed ACK was
# still pending (a loaded machine), is not processed by the gateway's kernel
# (tcpi_bytes_acked stays put): those bytes, 18 KB, counted as never
# acknowledged and were not billed (test_traffic_is_metered[http2] failed 3
# runs in 8 on ASan with two busy cores, 0 in 30 since). /bytes/100000 comes
# in 64 KiB writes, so its last piece is over the final send's 16 KiB;
# windows of 16 MiB keep flow control out of the way.
def test_http2_end_stream_carries_the_last_body_bytes(gw_factory, mredis, msandbox, upstream, certs):
    g = start_gw(gw_factory, mredis)
    big = 1 << 24
    for _ in range(3):  # each of three fetches
        c = RawH2(g, g.host(upstream.port, msandbox.id), certs["ca"])
        try:
            c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, big)) +
                   frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", big - 65535)))
            status, _, body = c.get("/bytes/100000")
            assert status == 200 and len(body) == 100000, (status, len(body))
            datas = [f for f in c.frames if f.type == DATA]
            assert datas[-1].flags & END_STREAM, datas[-1]
            assert len(datas[-1].payload) > 0, \
                "the END_STREAM came alone after %d body bytes (DATA frames: %s)" % (
                    len(body), [len(f.payload) for f in datas])
        finally:
            c.close()


class _CutApp:
    """An app that answers with a Content-Length it does not keep: its head,
    `sent` body bytes, then it closes (the app killed mid-body)."""

    def __init__(self, declared, sent):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.port = self.srv.getsockname()[1]
        self.declared, self.sent = declared, sent
        self.gateway_closed = threading.Event()  # the gateway closed its end after the cut body
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            with conn:
                req = b""
                while b"\r\n\r\n" not in req:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    req += chunk
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % self.declared + b"z" * self.sent)
                conn.shutdown(socket.SHUT_WR)
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass
                self.gateway_closed.set()

    def close(self):
        self.srv.close()


# A response the app cuts short (killed mid-body) ends with an ERROR send,
# and h2o writes what that send carries before it closes the connection
# (HTTP/1.1) or resets the stream (HTTP/2): those bytes reach the client and
# are billed like a final send's. They were not, and since the final send
# carries the last 16 KiB, a slow client of a cut response got 16,384 bytes
# more than it was billed (the CI soak, acct2, "app killed"). The client
# reads only once the app has closed, so that the gateway holds the rest of
# the body when it learns the body is cut.
def test_a_cut_response_is_billed_what_its_client_received(gw_factory, mredis, certs):
    g = start_gw(gw_factory, mredis, limits={"response_buffer_bytes": 12 * 1024 * 1024})
    app = _CutApp(declared=16000000, sent=8000000)
    try:
        sid = gwtest.new_sandbox_id("cut")
        gwtest.register_sandbox(mredis, sid, ports={app.port: "public"}, project="p-" + sid)
        host = g.host(app.port, sid)
        ctx = ssl.create_default_context(cafile=certs["ca"])
        ctx.set_alpn_protocols(["http/1.1"])
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.settimeout(30)
        raw.connect(("127.0.0.1", g.tls_port))
        sock = ctx.wrap_socket(raw, server_hostname=host)
        sock.sendall(b"GET /cut HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
        # the app has written all it will (8 MB) and closed, and the
        # gateway, having read its end, closed the upstream connection: it
        # holds most of the body while the client has not read
        assert app.gateway_closed.wait(30), "the gateway did not close the cut upstream connection"
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionError, ssl.SSLError):
                break
            if not chunk:
                break
            data += chunk
        sock.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head[:200]
        assert 100000 < len(body) <= 8000000, len(body)
        gwtest.wait_for(lambda: metric(g, "lizard_in_flight_requests") == 0, 30, what="the request to end")
        wait_egress(mredis, sid, 1, timeout=20)
        time.sleep(3 * FLUSH_MS / 1000 + 1.5)  # anything late would show now (the ledger checks once a second)
        billed = total(records(mredis, sid), "egress")
        assert len(body) <= billed < len(body) + HEAD_BOUND, \
            "the client received %d body bytes of a cut response and was billed %d" % (len(body), billed)
    finally:
        app.close()


# The most a connection is billed beyond what its client's TCP received
# (docs/metering.md, Metering): the last piece of a response, billed as it is handed to
# h2o (upstream/response.c FINAL_SEND_MAX_BYTES), plus the head, which is
# counted as its HTTP/1.1 text.
FINAL_PIECE_BOUND = 16 * 1024


def _unread_client(g, host, tls, path):
    """A client with a small receive buffer that asks for path and never
    reads. Returns its socket (TLS or plain: the same descriptor)."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", g.tls_port if tls else g.plain_port))
    sock = raw
    if tls:
        ctx = ssl.create_default_context(cafile=g.certs["ca"])
        ctx.set_alpn_protocols(["http/1.1"])
        sock = ctx.wrap_socket(raw, server_hostname=host)
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), host.encode()))
    return sock


def _queued(sock):
    """Bytes in the client kernel's receive queue: received by its TCP, never read."""
    import fcntl
    import termios
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def _read_all(g, host, path):
    """A well-behaved client: reads the whole answer (Connection: close), returns its bytes."""
    sock = socket.create_connection(("127.0.0.1", g.plain_port), timeout=30)
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), host.encode()))
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


def test_unread_bytes_are_not_billed(gw_factory, mredis, upstream):
    """Clients that never read their socket (a 4 KiB receive buffer), then
    reset it, are billed what their TCP received, not what the kernel's
    socket buffers took (2.83 MB per connection before: everything written to
    the socket was billed), over plain and TLS listeners; a client that reads
    is billed all of it."""
    g = start_gw(gw_factory, mredis, start=False)
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True  # the plain listener serves instead of redirecting
    g.overrides["listen"] = cfg["listen"]
    g.start()
    stalled, reader = gwtest.new_sandbox_id("ur"), gwtest.new_sandbox_id("rd")
    for sid in (stalled, reader):
        gwtest.register_sandbox(mredis, sid, ports={upstream.port: "public"}, project="p-" + sid)
    size = 20 * 1000 * 1000
    host = g.host(upstream.port, stalled)

    clients = [_unread_client(g, host, tls, "/bytes/%d" % size) for tls in (False, True) * 4]
    gwtest.wait_for(lambda: all(_queued(c) > 0 for c in clients), 30, what="the first bytes at every client")
    # time for the gateway to fill the kernel's buffers toward each client
    # (loopback: milliseconds); the figures below are bytes, not times
    time.sleep(1.5)
    received = 0
    for c in clients:
        received += _queued(c)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()  # RST: what the client's kernel held is gone too
    gwtest.wait_for(lambda: metric(g, "lizard_in_flight_requests") == 0, 30, what="the stalled requests to end")

    body = _read_all(g, g.host(upstream.port, reader), "/bytes/1000000")
    head, _, rest = body.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and len(rest) == 1000000, (head, len(rest))
    wait_egress(mredis, reader, 1000000)
    time.sleep(3 * FLUSH_MS / 1000)  # anything late would show now

    billed = total(records(mredis, stalled), "egress")
    bound = received + len(clients) * (FINAL_PIECE_BOUND + HEAD_BOUND)
    assert billed <= bound, ("%d connections that never read were billed %d bytes; their TCP received %d (bound %d)"
                             % (len(clients), billed, received, bound))
    assert incr_total(mredis, stalled) == billed
    read_billed = total(records(mredis, reader), "egress")
    assert 1000000 <= read_billed < 1000000 + HEAD_BOUND and abs(read_billed - len(body)) < HEAD_BOUND, (read_billed, len(body))


def ws_frame(payload, mask=b"\x01\x02\x03\x04", opcode=0x2):
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def test_websocket_is_metered(gw_factory, mredis, msandbox, upstream, certs):
    """Frames both ways are counted exactly, plus one upgrade head each way."""
    g = start_gw(gw_factory, mredis)
    host = g.host(upstream.port, msandbox.id)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    raw = socket.create_connection(("127.0.0.1", g.tls_port), timeout=10)
    sock = ctx.wrap_socket(raw, server_hostname=host)
    sock.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" % host).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    sent = recvd = 0
    for size in (10, 1000, 70000):
        payload = os.urandom(size)
        frame = ws_frame(payload)
        sock.sendall(frame)
        sent += len(frame)
        hdr = recv_exact(sock, 2)
        n = hdr[1] & 0x7F
        ext = recv_exact(sock, 2 if n == 126 else 8 if n == 127 else 0)
        n = struct.unpack("!H", ext)[0] if n == 126 else struct.unpack("!Q", ext)[0] if n == 127 else n
        assert recv_exact(sock, n) == payload
        recvd += 2 + len(ext) + n
    close = ws_frame(struct.pack("!H", 1000), opcode=0x8)
    sock.sendall(close)
    sent += len(close)
    echo = recv_exact(sock, 4)  # the app echoes the 2-byte close payload
    recvd += len(echo)
    sock.close()

    wait_egress(mredis, msandbox.id, recvd)
    time.sleep(3 * FLUSH_MS / 1000)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, recvd, sent, 1)
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")


def test_redis_killed_during_traffic(gw_factory, mredis, msandbox, upstream, curl):
    """Counts made while Redis is down are kept in memory and written once it
    is back (a fresh, empty Redis: exactly the outage's traffic appears).
    One worker: its route cache then surely holds the route during the outage."""
    g = start_gw(gw_factory, mredis, workers=1)
    b0, _, _ = traffic(curl, g, msandbox, upstream, n=1)  # caches the route
    wait_egress(mredis, msandbox.id, b0)
    time.sleep(3 * FLUSH_MS / 1000)
    seq_before = max(int(r["seq"]) for r in records(mredis))

    mredis.kill()
    body_out, body_in, n = traffic(curl, g, msandbox, upstream)  # the route is served from the cache
    time.sleep(4 * FLUSH_MS / 1000)
    assert metric(g, "lizard_metering_pending_records") >= 1
    mredis.start()  # same port, empty

    wait_egress(mredis, msandbox.id, body_out)
    time.sleep(3 * FLUSH_MS / 1000)
    recs = check_stream(mredis)
    mine = [r for r in recs if r["sandbox"] == msandbox.id]
    check_bounds(mine, body_out, body_in, n)
    assert all(int(r["seq"]) > seq_before for r in recs), "seq must keep increasing: %r" % recs
    assert incr_total(mredis, msandbox.id) == total(mine, "egress")
    assert metric(g, "lizard_metering_pending_records") == 0


def test_redis_paused_during_traffic(gw_factory, mredis, msandbox, upstream, curl):
    """A Redis that stops answering (shorter than the EXEC deadline): nothing
    lost, nothing written twice, order kept."""
    g = start_gw(gw_factory, mredis, workers=1)
    b0, i0, n0 = traffic(curl, g, msandbox, upstream, n=1)
    wait_egress(mredis, msandbox.id, b0)
    mredis.pause()
    try:
        b1, i1, n1 = traffic(curl, g, msandbox, upstream, n=2)
        time.sleep(1.0)  # several flush intervals pass while Redis hangs
    finally:
        mredis.resume()
    wait_egress(mredis, msandbox.id, b0 + b1)
    time.sleep(3 * FLUSH_MS / 1000)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, b0 + b1, i0 + i1, n0 + n1)
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")


def test_redis_refusing_writes(gw_factory, mredis, msandbox, upstream, curl):
    """Redis answers but refuses the transaction (out of memory: EXECABORT):
    the batch is kept and sent again, unchanged, once Redis accepts."""
    g = start_gw(gw_factory, mredis)
    mredis.cmd("CONFIG", "SET", "maxmemory", "1")
    try:
        body_out, body_in, n = traffic(curl, g, msandbox, upstream)
        gwtest.wait_for(lambda: metric(g, "lizard_metering_flush_failures_total") >= 2, 10, what="failed flushes")
        assert records(mredis, msandbox.id) == []
        assert metric(g, "lizard_metering_pending_records") >= 1
    finally:
        mredis.cmd("CONFIG", "SET", "maxmemory", "0")
    wait_egress(mredis, msandbox.id, body_out)
    time.sleep(3 * FLUSH_MS / 1000)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, body_out, body_in, n)
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")
    assert metric(g, "lizard_metering_pending_records") == 0


def test_sigterm_flushes(gw_factory, mredis, msandbox, upstream, curl):
    """With a flush interval far away, only the final flush on SIGTERM can
    write the records; the exit code is 0."""
    g = start_gw(gw_factory, mredis, flush_ms=60000)
    body_out, body_in, n = traffic(curl, g, msandbox, upstream)
    time.sleep(0.3)
    assert records(mredis, msandbox.id) == []
    assert g.stop() == 0, gwtest.tail(g.log)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    assert len(recs) == 1, recs  # one sandbox, one flush: one record
    check_bounds(recs, body_out, body_in, n)
    assert recs[0]["project"] == msandbox.project
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")
    assert not os.path.exists(g.config()["metering"]["spill_file"])


def test_sigterm_with_redis_down_spills_and_replays(gw_factory, mredis, msandbox, upstream, curl):
    g = start_gw(gw_factory, mredis, flush_ms=60000)
    spill = g.config()["metering"]["spill_file"]
    if os.path.exists(spill):
        os.unlink(spill)
    body_out, body_in, n = traffic(curl, g, msandbox, upstream)
    mredis.kill()
    t = time.monotonic()
    assert g.stop() == 0, gwtest.tail(g.log)
    assert time.monotonic() - t < 8, "the final flush must give up on a dead Redis quickly"

    lines = journal_file.sealed(spill)
    mine = [r for r in lines if r["sandbox"] == msandbox.id]
    assert len(mine) == 1, lines
    assert mine[0]["project"] == msandbox.project and mine[0]["gateway"] == INSTANCE
    check_bounds([{k: str(v) for k, v in r.items()} for r in mine], body_out, body_in, n)

    # damaged entries (a disk error, a hand edit) are reported and skipped alone
    with open(spill, "ab") as f:
        f.write(journal_file.entry({"t": "rec", "sandbox": "broken", "egress": 1})[:-12] + b"x" * 11 + b"\n")
        f.write(b"not json at all\n")

    mredis.start()
    g.start()
    recs = gwtest.wait_for(lambda: records(mredis, msandbox.id), 10, what="replayed records")
    # it had malformed entries: kept for a person to look at, not deleted (the journal is rewritten)
    aside = glob.glob(spill + ".malformed-*")
    assert len(aside) == 1, aside
    with open(aside[0]) as f:
        assert "not json at all" in f.read()
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    assert [int(r["seq"]) for r in recs] == [mine[0]["seq"]], "the replay keeps the spilled seq"
    assert int(recs[0]["egress"]) == mine[0]["egress"] and int(recs[0]["ingress"]) == mine[0]["ingress"]
    assert incr_total(mredis, msandbox.id) == mine[0]["egress"]
    with open(g.log, "rb") as f:
        log = f.read().decode("utf-8", "replace")
    assert "skipping a malformed journal entry: its checksum does not match" in log, log
    assert "skipping a malformed journal entry: not an entry" in log, log
    assert "kept as %s" % aside[0] in log, log
    assert g.alive()

    # new records of this run come after the replayed ones (the new Redis is empty: register again)
    gwtest.register_sandbox(mredis, msandbox.id, ports={upstream.port: "public"}, project=msandbox.project)
    traffic(curl, g, msandbox, upstream, n=1)
    assert g.stop() == 0
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    assert len(recs) == 2 and int(recs[1]["seq"]) > int(recs[0]["seq"]), recs


def sigkill(g):
    os.kill(g.proc.pid, signal.SIGKILL)
    g.proc.wait()
    g.proc = None


def test_sigkill_loses_nothing_journaled(gw_factory, mredis, msandbox, upstream, curl):
    """A gateway killed with SIGKILL (the OOM killer, a node dying) 2 s after
    serving 3 MB, with the flush interval a minute away: nothing reached
    Redis, everything reached the journal (a count is on disk within
    metering.journal_interval_ms, 1 s by default); the next start on the same
    journal writes all of it, once. Without the journal all of it is lost."""
    g = start_gw(gw_factory, mredis, flush_ms=60000)
    spill = g.config()["metering"]["spill_file"]
    body_out, body_in, n = traffic(curl, g, msandbox, upstream, n=3, size=1000000)
    # the bound under test: 2 s after the last response (the journal's 1 s, and as much again for
    # a loaded machine)
    time.sleep(2.0)
    assert records(mredis, msandbox.id) == []
    sigkill(g)
    assert os.path.exists(spill), "no journal after a SIGKILL"

    g.start()
    wait_egress(mredis, msandbox.id, body_out, timeout=15)
    assert g.stop() == 0, gwtest.tail(g.log)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, body_out, body_in, n)
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")
    assert all(r["gateway"] == INSTANCE for r in recs)
    assert not os.path.exists(spill)


def test_replay_executes_nothing_twice(gw_factory, mredis):
    """A journal whose batches the previous run may have executed without
    saying so (a SIGKILL between an EXEC and the journal's entry of where it
    went): at the next start each is looked for in the stream first. The one
    Redis holds is not executed again (its record once, its total as it
    was); the one it lacks is executed."""
    g = start_gw(gw_factory, mredis, start=False)
    spill = g.config()["metering"]["spill_file"]
    os.makedirs(os.path.dirname(spill), exist_ok=True)
    ran, lost = gwtest.new_sandbox_id("ran"), gwtest.new_sandbox_id("lost")
    now = int(time.time() * 1000)

    def rec(sandbox, seq, egress):
        return {"t": "rec", "sandbox": sandbox, "project": "p", "egress": egress, "ingress": 5, "from_ms": now - 900,
                "to_ms": now - 800, "gateway": "old-gw", "seq": seq}

    # what the killed run's EXEC of the first batch wrote
    mredis.cmd("XADD", "lizard:egress", "*", "sandbox", ran, "project", "p", "egress", "500", "ingress", "5", "from_ms",
               str(now - 900), "to_ms", str(now - 800), "gateway", "old-gw", "seq", "42")
    mredis.cmd("INCRBY", "lizard:egress:{%s}" % ran, "500")
    with open(spill, "wb") as f:
        f.write(journal_file.HEADER)
        f.write(journal_file.entry({"t": "batch", "first": 42, "last": 42, "records": 1}))
        f.write(journal_file.entry(rec(ran, 42, 500)))
        f.write(journal_file.entry({"t": "batch", "first": 43, "last": 43, "records": 1}))
        f.write(journal_file.entry(rec(lost, 43, 700)))
    g.start()
    gwtest.wait_for(lambda: records(mredis, lost), 10, what="the batch Redis lacked executed")
    assert g.stop() == 0, gwtest.tail(g.log)
    assert [int(r["seq"]) for r in records(mredis, ran)] == [42], records(mredis, ran)
    assert incr_total(mredis, ran) == 500
    assert [int(r["seq"]) for r in records(mredis, lost)] == [43]
    assert incr_total(mredis, lost) == 700
    assert "is in the stream: not executed again" in gwtest.tail(g.log, 50), gwtest.tail(g.log, 50)


def test_journal_on_a_full_disk(gw_factory, mredis, msandbox, upstream, curl, workdir):
    """The journal on a full filesystem (a 128 KiB tmpfs, filled): the write
    fails, which stderr says once and the metric counts; the stale journal is
    set aside (a crash must not replay it as whole); billing goes on into
    Redis, every byte; once there is room the journal is written whole again
    and the stale copy removed. Needs mount(2) (root): skipped without it."""
    mnt = os.path.join(workdir, "full-" + gwtest.new_sandbox_id())
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", mnt], capture_output=True).returncode != 0:
        os.rmdir(mnt)
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        spill = os.path.join(mnt, "egress.spill")
        g = start_gw(gw_factory, mredis, metering={"flush_interval_ms": FLUSH_MS, "spill_file": spill})
        gwtest.wait_for(lambda: os.path.exists(spill), 10, what="the journal")
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"x" * 512) > 0:
                pass
        except OSError:
            pass  # full
        os.close(fd)
        # traffic until the journal needs a page the filesystem has not got (every flush writes entries)
        body_out = body_in = n = 0
        deadline = time.monotonic() + 30
        while metric(g, "lizard_metering_journal_failures_total") == 0:
            assert time.monotonic() < deadline, "no journal write failed on a full filesystem"
            o, i, k = traffic(curl, g, msandbox, upstream, n=1, size=1000, post=10)
            body_out, body_in, n = body_out + o, body_in + i, n + k
        assert "No space left on device" in gwtest.tail(g.log, 50), gwtest.tail(g.log, 50)
        assert glob.glob(spill + ".unwritable-*"), os.listdir(mnt)
        # nothing is lost meanwhile: Redis takes every byte
        wait_egress(mredis, msandbox.id, body_out)
        os.unlink(filler)
        gwtest.wait_for(lambda: not glob.glob(spill + ".unwritable-*") and os.path.exists(spill), 10,
                        what="the journal written again, the stale copy removed")
        assert "written again" in gwtest.tail(g.log, 50)
        assert g.stop() == 0, gwtest.tail(g.log)
        recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
        check_bounds(recs, body_out, body_in, n)
        assert incr_total(mredis, msandbox.id) == total(recs, "egress")
    finally:
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(mnt, ignore_errors=True)


def spill_lines(path):
    return journal_file.sealed(path)


def test_spill_file_in_use_is_refused(gw_factory, mredis, msandbox, upstream, curl):
    """Two gateways on one host with the same spill_file (the default path is
    the same for all) would replace each other's records at exit: the second
    refuses to start, and takes the file over once the first is gone."""
    g1 = start_gw(gw_factory, mredis, flush_ms=60000)
    spill = g1.config()["metering"]["spill_file"]
    g2 = start_gw(gw_factory, mredis, start=False, instance_id="meter-gw-2",
                  metering={"flush_interval_ms": FLUSH_MS, "spill_file": spill})
    os.makedirs(g2.workdir, exist_ok=True)
    g2.write_config()
    proc = subprocess.Popen([gwtest.gateway_binary(), "-c", g2.config_path], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=g2.env(), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        gwtest.stop_process(proc)
        raise AssertionError("a second gateway started on a spill file in use")
    assert proc.returncode != 0, out
    assert ("metering.spill_file %s is in use by another lizard-gateway; give each instance its own spill_file "
            "(and instance_id)" % spill).encode() in out, out
    assert g1.alive()

    body_out, body_in, n = traffic(curl, g1, msandbox, upstream)
    mredis.kill()
    assert g1.stop() == 0, gwtest.tail(g1.log)
    mine = [r for r in spill_lines(spill) if r["sandbox"] == msandbox.id]
    assert len(mine) == 1 and mine[0]["gateway"] == INSTANCE, mine

    # the lock went with the first process: the second starts and replays its records
    mredis.start()
    g2.start()
    recs = gwtest.wait_for(lambda: records(mredis, msandbox.id), 10, what="replayed records")
    assert [(r["gateway"], int(r["seq"])) for r in recs] == [(INSTANCE, mine[0]["seq"])]
    check_bounds(recs, body_out, body_in, n)


def test_spill_keeps_records_with_odd_projects(gw_factory, mredis, upstream, curl):
    """A project id cut at 256 bytes inside a character, or not UTF-8 at all
    (raw bytes from the control plane), is written cleaned; no record of any
    sandbox is lost at exit."""
    long_project = "a" * 255 + "\u00e9"  # 257 bytes: the cut at 256 falls inside the last character
    sandboxes = {"good": ("p-good", "p-good"), "cut": (long_project, "a" * 255), "raw": (None, "p-??x")}
    ids = {}
    for k, (project, _) in sandboxes.items():
        ids[k] = gwtest.new_sandbox_id(k)
        gwtest.register_sandbox(mredis, ids[k], ports={upstream.port: "public"}, project=project or "x", publish=False)
    mredis.cmd("HSET", "lizard:sbx:{%s}" % ids["raw"], "project", b"p-\xff\xfex")
    g = start_gw(gw_factory, mredis, flush_ms=60000)
    sent = {}
    for k, sid in ids.items():
        r = curl(g.host(upstream.port, sid), "/bytes/%d" % (1000 * (len(sent) + 1)), gw=g)
        assert r.status == 200, r
        sent[k] = len(r.body)
    mredis.kill()
    assert g.stop() == 0, gwtest.tail(g.log)
    spill = g.config()["metering"]["spill_file"]
    lines = {r["sandbox"]: r for r in spill_lines(spill)}
    assert set(lines) == set(ids.values()), (lines, gwtest.tail(g.log))
    for k, sid in ids.items():
        assert lines[sid]["project"] == sandboxes[k][1], lines[sid]
        assert lines[sid]["egress"] >= sent[k]

    mredis.start()
    g.start()
    for k, sid in ids.items():
        recs = gwtest.wait_for(lambda: records(mredis, sid), 10, what="replayed records of %s" % k)
        assert recs[0]["project"] == sandboxes[k][1], recs
    assert g.stop() == 0
    assert not os.path.exists(spill), "nothing is left: the journal is removed at exit"
    assert not glob.glob(spill + ".malformed-*")


def test_spill_line_with_nul_is_skipped_alone(gw_factory, mredis):
    """A NUL byte in one spill line makes that line malformed, not the next;
    the file is set aside (not deleted) after the replay."""
    g = start_gw(gw_factory, mredis, start=False)
    spill = g.config()["metering"]["spill_file"]
    os.makedirs(os.path.dirname(spill), exist_ok=True)

    def rec(sandbox, seq):
        return json.dumps({"sandbox": sandbox, "project": "p", "egress": 100, "ingress": 1, "from_ms": 1, "to_ms": 2,
                           "gateway": "old-gw", "seq": seq}).encode()

    second, third = gwtest.new_sandbox_id("second"), gwtest.new_sandbox_id("third")
    with open(spill, "wb") as f:
        f.write(b'{"sandbox":"x\x00garbage"}\n' + rec(second, 10) + b"\n" + rec(third, 11) + b"\n")
    g.start()
    gwtest.wait_for(lambda: records(mredis, third), 10, what="replayed records")
    assert [r["sandbox"] for r in records(mredis) if r["gateway"] == "old-gw"] == [second, third]
    aside = glob.glob(spill + ".malformed-*")
    assert len(aside) == 1, aside
    with open(aside[0], "rb") as f:
        assert f.read().startswith(b'{"sandbox":"x\x00garbage"}\n')
    assert metric(g, 'lizard_metering_spill_records_total{op="malformed"}') == 1
    assert metric(g, 'lizard_metering_spill_records_total{op="replayed"}') == 2


def test_spill_directory_is_checked_at_load(gw_factory, mredis):
    """A spill_file whose directory does not exist is found by --check and at
    start, not at SIGTERM when the records it should hold are lost."""
    g = start_gw(gw_factory, mredis, start=False)
    missing = os.path.join(g.workdir, "no-such-dir")
    g.overrides["metering"]["spill_file"] = os.path.join(missing, "egress.spill")
    os.makedirs(g.workdir, exist_ok=True)
    g.write_config()
    for args in (["--check"], []):
        r = subprocess.run([gwtest.gateway_binary(), "-c", g.config_path] + args, capture_output=True, text=True,
                           env=g.env(), timeout=20)
        assert r.returncode != 0, (args, r)
        assert "config: metering.spill_file: the directory %s does not exist" % missing in r.stderr, r.stderr


def test_records_lost_at_exit_are_said(gw_factory, mredis, msandbox, upstream, curl, workdir):
    """Redis down and the spill file's directory gone at SIGTERM: the records
    can go nowhere. That is said on stderr with their number, and the exit
    status is 3 (the process ends, so no scrape would see the counter)."""
    d = os.path.join(workdir, "lost-" + gwtest.new_sandbox_id())
    os.makedirs(d)
    g = start_gw(gw_factory, mredis, metering={"flush_interval_ms": 60000, "spill_file": os.path.join(d, "egress.spill")})
    traffic(curl, g, msandbox, upstream, n=1)
    assert metric(g, "lizard_metering_records_lost_total") == 0
    mredis.kill()
    shutil.rmtree(d)
    assert g.stop() == 3, gwtest.tail(g.log)
    log = gwtest.tail(g.log, 50)
    assert "1 records lost at exit" in log, log


def test_spill_handover_to_another_instance(gw_factory, mredis, msandbox, upstream, curl):
    """Spilled counts outlive the pod (deploy/kubernetes: a StatefulSet whose
    per-pod volume claim holds the spill file): gateway A spills at SIGTERM
    (Redis down) and exits; gateway B, another instance_id, starts on the
    same volume and spill_file: the stream then holds A's records, with A's
    gateway and seq, exactly once (B's restart replays nothing again)."""
    a = start_gw(gw_factory, mredis, flush_ms=60000, instance_id="handover-a")
    spill = a.config()["metering"]["spill_file"]
    body_out, body_in, n = traffic(curl, a, msandbox, upstream)
    mredis.kill()
    assert a.stop() == 0, gwtest.tail(a.log)
    spilled = [r for r in spill_lines(spill) if r["sandbox"] == msandbox.id]
    assert len(spilled) == 1 and spilled[0]["gateway"] == "handover-a", spilled

    mredis.start()
    b = start_gw(gw_factory, mredis, flush_ms=FLUSH_MS, instance_id="handover-b",
                 metering={"flush_interval_ms": FLUSH_MS, "spill_file": spill})
    gwtest.wait_for(lambda: records(mredis, msandbox.id), 10, what="A's records replayed by B")
    assert b.stop() == 0
    assert not os.path.exists(spill), "everything written: the journal is removed at exit"
    b.start()  # a second start finds nothing to replay
    gwtest.wait_for(lambda: metric(b, "lizard_workers") > 0, 10, what="B started again")
    assert b.stop() == 0
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    assert [(r["gateway"], int(r["seq"])) for r in recs] == [("handover-a", spilled[0]["seq"])], recs
    check_bounds(recs, body_out, body_in, n)
    assert incr_total(mredis, msandbox.id) == spilled[0]["egress"]
