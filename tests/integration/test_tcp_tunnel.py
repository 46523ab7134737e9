"""Raw TCP ports (CONTRACT.md, Raw TCP ports): a proto:<n> = tcp port is
reached through GET /.lizard/tcp (subprotocol lizard.tcp.v1) on its preview
host, binary WebSocket messages carrying the TCP bytes both ways. The
sandbox's service is a real redis-server on a loopback port; the client is
python3-websockets (and a raw socket where the test needs to see frames)."""

import asyncio
import os
import socket
import ssl
import time

import pytest

import gwtest

MIB = 1024 * 1024
PROTO = "lizard.tcp.v1"
TOKEN_HEADER = "X-Lizard-Access-Token"


def tcp_sandbox(register_sandbox, port, access="private"):
    return gwtest.register_tcp_sandbox(register_sandbox.redis, port, access)


def connect(gw, host, ca, token=None, subprotocols=(PROTO,), path="/.lizard/tcp"):
    import websockets

    ctx = ssl.create_default_context(cafile=ca)
    headers = [(TOKEN_HEADER, token)] if token else []
    return websockets.connect("wss://%s:%d%s" % (host, gw.tls_port, path), host="127.0.0.1", port=gw.tls_port, ssl=ctx,
                              server_hostname=host, extra_headers=headers, subprotocols=list(subprotocols),
                              compression=None, max_size=16 * MIB, ping_interval=None, open_timeout=10,
                              close_timeout=5)


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


async def read_until(ws, n):
    """Reads binary messages until n bytes came; text would be a gateway bug."""
    got = b""
    while len(got) < n:
        m = await asyncio.wait_for(ws.recv(), 20)
        assert isinstance(m, bytes), "the tunnel sent a text message: %r" % m
        got += m
    return got


def metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.rpartition(" ")[2])
    return 0.0


def test_redis_through_the_tunnel_2mb_both_ways(gateway, register_sandbox, sandbox_redis, certs, redis):
    """SET then GET of a 2 MiB value: the bytes go both ways in order, sent
    in many messages and fragments; the 101 names the subprotocol; metering
    counts the tunnel's bytes."""
    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)
    value = os.urandom(2 * MIB)
    cmd = resp("SET", "k-" + sid, value)

    async def go():
        async with connect(gateway, host, certs["ca"], token) as ws:
            assert ws.subprotocol == PROTO
            # the command in 64 KiB messages, the last one in fragments
            pieces = [cmd[i:i + 65536] for i in range(0, len(cmd), 65536)]
            for p in pieces[:-1]:
                await ws.send(p)
            last = pieces[-1]
            await ws.send([last[:7], last[7:100], last[100:]])
            assert await read_until(ws, 5) == b"+OK\r\n"
            await ws.send(resp("GET", "k-" + sid))
            want = b"$%d\r\n%s\r\n" % (len(value), value)
            got = await read_until(ws, len(want))
            assert got == want, "the 2 MiB value came back altered (%d bytes, want %d)" % (len(got), len(want))
            await ws.send(resp("PING"))
            assert await read_until(ws, 7) == b"+PONG\r\n"

    run(go())

    def billed():
        v = redis.cmd("GET", "lizard:egress:{%s}" % sid)
        return v is not None and int(v) >= 2 * MIB

    gwtest.wait_for(billed, 20, what="the tunnel's 2 MiB to be metered in lizard:egress:{%s}" % sid)


def test_without_credential_401_before_upgrade(gateway, register_sandbox, sandbox_redis, certs):
    import websockets

    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)

    async def go():
        with pytest.raises(websockets.InvalidStatusCode) as e:
            async with connect(gateway, host, certs["ca"]):
                pass
        assert e.value.status_code == 401
        with pytest.raises(websockets.InvalidStatusCode) as e:
            async with connect(gateway, host, certs["ca"], "wrong-token"):
                pass
        assert e.value.status_code == 403
        # the same handshake with the token: the tunnel (the checks above were the credential's, not the port's)
        async with connect(gateway, host, certs["ca"], token) as ws:
            assert ws.subprotocol == PROTO
            await ws.send(resp("PING"))
            assert await read_until(ws, 7) == b"+PONG\r\n"

    run(go())


def test_plain_http_to_tcp_port_is_400_not_http_port(gateway, register_sandbox, sandbox_redis, curl):
    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)
    for path in ("/", "/.lizard/tcp"):
        r = curl(host, path, headers={TOKEN_HEADER: token, "Accept": "application/json"})
        assert r.status == 400, (path, r)
        assert r.error_code() == "not_http_port", (path, r)


def test_websocket_without_the_subprotocol_is_400(gateway, register_sandbox, sandbox_redis, certs):
    import websockets

    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)

    async def go():
        with pytest.raises(websockets.InvalidStatusCode) as e:
            async with connect(gateway, host, certs["ca"], token, subprotocols=()):
                pass
        assert e.value.status_code == 400

    run(go())


def test_nothing_listening_is_502(gateway, register_sandbox, certs):
    import websockets

    port = gwtest.free_port()
    sid, token = tcp_sandbox(register_sandbox, port)
    host = gateway.host(port, sid)

    async def go():
        with pytest.raises(websockets.InvalidStatusCode) as e:
            async with connect(gateway, host, certs["ca"], token):
                pass
        assert e.value.status_code == 502
        # a raw service starts listening there: the same request opens the tunnel, its greeting comes first
        server = await asyncio.start_server(greet, "127.0.0.1", port)
        try:
            async with connect(gateway, host, certs["ca"], token) as ws:
                assert await read_until(ws, 6) == b"hello\n"
        finally:
            server.close()

    async def greet(reader, writer):
        writer.write(b"hello\n")
        await writer.drain()
        await reader.read()
        writer.close()

    run(go())


def test_sandbox_fin_closes_1000(gateway, register_sandbox, sandbox_redis, certs):
    """redis-server answers QUIT and closes: the tunnel closes with 1000
    after the reply."""
    import websockets

    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)

    async def go():
        async with connect(gateway, host, certs["ca"], token) as ws:
            await ws.send(resp("QUIT"))
            assert await read_until(ws, 5) == b"+OK\r\n"
            with pytest.raises(websockets.ConnectionClosed) as e:
                await asyncio.wait_for(ws.recv(), 10)
            assert e.value.rcvd is not None and e.value.rcvd.code == 1000, e.value

    run(go())


def test_text_message_is_a_protocol_error(gateway, register_sandbox, sandbox_redis, certs):
    import websockets

    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = gateway.host(sandbox_redis.port, sid)

    async def go():
        async with connect(gateway, host, certs["ca"], token) as ws:
            await ws.send("PING\r\n")
            with pytest.raises(websockets.ConnectionClosed) as e:
                await asyncio.wait_for(ws.recv(), 10)
            assert e.value.rcvd is not None and e.value.rcvd.code == 1002, e.value

    run(go())


def test_revocation_closes_4403_other_sandbox_untouched(gateway, register_sandbox, sandbox_redis, certs, redis):
    import websockets

    sid_a, token_a = tcp_sandbox(register_sandbox, sandbox_redis.port)
    sid_b, token_b = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host_a, host_b = gateway.host(sandbox_redis.port, sid_a), gateway.host(sandbox_redis.port, sid_b)

    async def go():
        async with connect(gateway, host_a, certs["ca"], token_a) as a, \
                connect(gateway, host_b, certs["ca"], token_b) as b:
            for ws in (a, b):
                await ws.send(resp("PING"))
                assert await read_until(ws, 7) == b"+PONG\r\n"
            redis.cmd("HSET", "lizard:sbx:{%s}" % sid_a, "token_sha256", gwtest.sha256_hex("rotated"))
            redis.cmd("PUBLISH", "lizard:routes", sid_a)
            with pytest.raises(websockets.ConnectionClosed) as e:
                # generous: one round trip of the publish on a loaded machine
                await asyncio.wait_for(a.recv(), 10)
            assert e.value.rcvd is not None and e.value.rcvd.code == 4403, e.value
            await b.send(resp("PING"))
            assert await read_until(b, 7) == b"+PONG\r\n", "another sandbox's tunnel must stay up"

    run(go())


# --- keep-alive Pings on the TCP tunnel, with a raw client that sees the frames -------------


def raw_tunnel(g, host, token, ca, path="/.lizard/tcp"):
    """A TLS socket that did the handshake; returns (sock, leftover bytes)."""
    ctx = ssl.create_default_context(cafile=ca)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=10), server_hostname=host)
    extra = ("Sec-WebSocket-Protocol: %s\r\n" % PROTO) if path == "/.lizard/tcp" else ""
    extra += ("%s: %s\r\n" % (TOKEN_HEADER, token)) if token else ""
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n"
               % (path, host, extra)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        assert d, "closed during the handshake"
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head, head  # RFC 6455 1.3's example key
    return s, rest


def read_frame(s, buf):
    """(opcode, payload, rest) of the next unmasked frame."""
    while True:
        if len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126 and len(buf) >= 4:
                n, off = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127 and len(buf) >= 10:
                n, off = int.from_bytes(buf[2:10], "big"), 10
            if n < 126 or off > 2:
                if len(buf) >= off + n:
                    return buf[0] & 0x0F, buf[off:off + n], buf[off + n:]
        d = s.recv(65536)
        if not d:
            return None, b"", buf
        buf += d


def masked(opcode, payload, key=b"\x01\x02\x03\x04"):
    assert len(payload) < 126
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))


def test_tcp_tunnel_pings_and_pong_timeout(gw_factory, register_sandbox, sandbox_redis, certs):
    """At a 300 ms interval the idle tunnel gets Pings; answered, it stays up
    and still carries bytes; a client that stops answering is closed after
    upstream.websocket_idle_timeout_ms."""
    g = gw_factory({"upstream": {"websocket_ping_interval_ms": 300, "websocket_idle_timeout_ms": 2000}})
    sid, token = tcp_sandbox(register_sandbox, sandbox_redis.port)
    host = g.host(sandbox_redis.port, sid)
    s, buf = raw_tunnel(g, host, token, certs["ca"])
    pings = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:  # past the idle timeout: answered Pings keep it open
        op, payload, buf = read_frame(s, buf)
        assert op == 0x9, "expected a Ping, got opcode %r" % op
        pings += 1
        s.sendall(masked(0xA, payload))
    assert pings >= 3
    t0 = time.monotonic()  # the client's last write: the idle timeout counts from it (or from an earlier Pong)
    s.sendall(bytes([0x82, 0x80 | len(resp("PING"))]) + b"\0\0\0\0" + resp("PING"))
    while True:
        op, payload, buf = read_frame(s, buf)
        if op != 0x9:
            break
    assert (op, payload) == (0x2, b"+PONG\r\n")
    # now silent: closed once no Pong came for the idle timeout
    while True:
        op, payload, buf = read_frame(s, buf)
        if op in (None, 0x8):
            break
        assert op == 0x9
    assert time.monotonic() - t0 > 1.5, "closed before the idle timeout"
    assert metric(g, "lizard_websocket_pong_timeouts_total") >= 1
    assert metric(g, "lizard_websocket_pings_total") >= pings
    s.close()


# --- keep-alive Pings on HTTP WebSocket tunnels ---------------------------------------------


@pytest.fixture(scope="module")
def ws_upstream(workdir):
    from test_proxy import WsUpstream

    u = WsUpstream(os.path.join(workdir, "ws-upstream-keepalive"))
    yield u
    u.stop()


def test_http_websocket_pings_never_reach_the_sandbox(gw_factory, register_sandbox, ws_upstream, certs):
    """An idle WebSocket to the echo upstream gets the gateway's Pings at the
    interval; the client's Pongs to them never reach the upstream (which
    counts every frame it receives), a Pong of the client's own does, and
    the tunnel still echoes after them. A client that then answers nothing
    is closed after the idle timeout."""
    g = gw_factory({"upstream": {"websocket_ping_interval_ms": 300, "websocket_idle_timeout_ms": 2000}})
    sid = gwtest.new_sandbox_id("wsk")
    register_sandbox(sid, ports={ws_upstream.port: "public"})
    host = g.host(ws_upstream.port, sid)
    cid = "keepalive-" + sid
    s, buf = raw_tunnel(g, host, None, certs["ca"], path="/echo?id=" + cid)
    pings = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:  # past the idle timeout: answered Pings keep it open
        op, payload, buf = read_frame(s, buf)
        assert op == 0x9, "expected a Ping, got opcode %r" % op
        assert payload.startswith(b"lizard-ping "), payload
        pings += 1
        s.sendall(masked(0xA, payload))
    assert pings >= 3
    # the answer to the next Ping, an unsolicited Pong (the app's business) and a message, in one write
    op, payload, buf = read_frame(s, buf)
    assert op == 0x9
    t0 = time.monotonic()  # the client's last write: the idle timeout counts from it
    s.sendall(masked(0xA, payload) + masked(0xA, b"the client's own") + masked(0x1, b"still there?"))
    while True:
        op, payload, buf = read_frame(s, buf)
        if op != 0x9:
            break
    assert (op, payload) == (0x1, b"still there?"), "the tunnel must still echo after the Pings"
    info = ws_upstream.info(cid)
    assert info.get("frames_pong", 0) == 1, "only the client's own Pong may reach the app: %r" % info
    assert info["messages"] == 1, info
    # now silent: closed once no Pong came for the idle timeout
    while True:
        op, payload, buf = read_frame(s, buf)
        if op in (None, 0x8):
            break
        assert op == 0x9
    assert time.monotonic() - t0 > 1.5, "closed before the idle timeout"
    assert metric(g, "lizard_websocket_pong_timeouts_total") >= 1
    assert metric(g, "lizard_websocket_pings_total") >= pings
    s.close()
    assert ws_upstream.wait_closed(cid)["frames_pong"] == 1


def test_http_websocket_flood_intact_with_tracking(gw_factory, register_sandbox, ws_upstream, certs):
    """Frame tracking on (a short Ping interval), 4 MiB from the app in 64 KiB
    messages arrive intact and the Pings that come fall between frames
    (every frame parses, every payload is the app's)."""
    g = gw_factory({"upstream": {"websocket_ping_interval_ms": 50}})
    sid = gwtest.new_sandbox_id("wsf")
    register_sandbox(sid, ports={ws_upstream.port: "public"})
    host = g.host(ws_upstream.port, sid)
    s, buf = raw_tunnel(g, host, None, certs["ca"], path="/flood?mib=4&id=flood-" + sid)
    got = 0
    while True:
        op, payload, buf = read_frame(s, buf)
        if op == 0x9:
            s.sendall(masked(0xA, payload))
            continue
        if op == 0x1:
            assert payload == b"done"
            break
        assert op == 0x2 and payload == b"\x5a" * 65536, (op, len(payload))
        got += len(payload)
        time.sleep(0.005)  # a slower reader: the flood takes a while
    assert got == 4 * MIB
    s.close()


def frames_while_sending(s, seconds, every=0.1):
    """Sends a small binary message every `every` s for `seconds` s; returns
    the opcodes of the frames the gateway sent meanwhile."""
    import select

    got, buf = [], b""
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        s.sendall(masked(0x2, b"still typing"))
        if s.pending() or select.select([s], [], [], every)[0]:
            op, _, buf = read_frame(s, buf)
            got.append(op)
    return got


def sink_server():
    """A TCP service that reads everything and never writes (a log collector, an upload)."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=lambda c=c: [None for _ in iter(lambda: c.recv(65536), b"")], daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_client_frames_keep_tunnels_from_being_pinged(gw_factory, register_sandbox, ws_upstream, certs):
    """A tunnel carrying the client's frames is not silent: the gateway sends
    no Ping while the client sends a message every 100 ms (interval 1.5 s,
    the sandbox writing nothing back), on an HTTP WebSocket and on a TCP
    tunnel; once the client stops, the Pings come (CONTRACT.md: a Ping after
    the interval without a frame)."""
    g = gw_factory({"upstream": {"websocket_ping_interval_ms": 1500, "websocket_idle_timeout_ms": 60000}})
    sid = gwtest.new_sandbox_id("wsq")
    register_sandbox(sid, ports={ws_upstream.port: "public"})
    cid = "typing-" + sid
    s, buf = raw_tunnel(g, g.host(ws_upstream.port, sid), None, certs["ca"], path="/idle?id=" + cid)
    assert buf == b""
    assert frames_while_sending(s, 4.5) == [], "Pinged while the client was sending"
    op, payload, _ = read_frame(s, b"")
    assert op == 0x9 and payload.startswith(b"lizard-ping "), (op, payload)
    assert ws_upstream.info(cid).get("frames_binary", 0) >= 10
    s.close()

    srv = sink_server()
    sid, token = tcp_sandbox(register_sandbox, srv.getsockname()[1])
    s, buf = raw_tunnel(g, g.host(srv.getsockname()[1], sid), token, certs["ca"])
    assert buf == b""
    assert frames_while_sending(s, 4.5) == [], "Pinged while the client was sending"
    op, _, _ = read_frame(s, b"")
    assert op == 0x9
    s.close()
    srv.close()


def test_a_client_that_never_answers_the_close_is_closed_after_2s(gw_factory, register_sandbox, certs):
    """The gateway's Close (here 1002, for a text message) left unanswered by
    a client that keeps its socket open: the tunnel is freed after the 2 s
    close wait all the same (its timer is the proxy's: a tunnel's own,
    freed inside its own expiry, was a use after free)."""
    g = gw_factory()
    srv = sink_server()
    sid, token = tcp_sandbox(register_sandbox, srv.getsockname()[1])
    s, buf = raw_tunnel(g, g.host(srv.getsockname()[1], sid), token, certs["ca"])
    try:
        gwtest.wait_for(lambda: metric(g, 'lizard_tunnels_open{kind="tcp"}') == 1, 10, what="the tunnel to open")
        s.sendall(masked(0x1, b"text"))
        op, payload, buf = read_frame(s, buf)
        assert (op, payload[:2]) == (0x8, b"\x03\xea"), (op, payload)
        # no answer, socket open: gone after the close wait (generous: a loaded machine)
        gwtest.wait_for(lambda: metric(g, 'lizard_tunnels_open{kind="tcp"}') == 0, 20, what="the tunnel to be freed")
    finally:
        s.close()
        srv.close()
