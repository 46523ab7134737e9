"""WebSocket over HTTP/2 (RFC 8441 extended CONNECT), driven with python3-h2
against the gateway over TLS (ALPN h2), to a real WebSocket server in the
"sandbox" (ws_upstream.py, python3-websockets), which gets an HTTP/1.1
upgrade. The gateway offers SETTINGS_ENABLE_CONNECT_PROTOCOL; a CONNECT
:protocol websocket goes through the preview pipeline like any request and
the stream then carries the WebSocket's frames.

The library's own refusal of :protocol on a connection that did not offer
it (h2o patch 0530) is tested by tests/engine/h2o_master_smoke.c.
"""

import json
import os
import socket
import ssl
import struct
import time

import h2.config
import h2.errors
import h2.connection
import h2.events
import h2.settings
import pytest

import browser_helpers as bh
import gwtest
from upstream import WS_GUID
from test_metering import (FLUSH_MS, check_bounds, check_stream, incr_total, mredis, msandbox,  # noqa: F401
                           start_gw, total, wait_egress)
from test_metering import ws_frame as masked_frame
from test_proxy import raw_upstream, ws_sandbox, ws_upstream  # noqa: F401

OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 1, 2, 8, 9, 10


def ws_frame(opcode, payload):
    """A client frame (masked with a fresh key)."""
    return masked_frame(payload, mask=os.urandom(4), opcode=opcode)


def parse_frames(buf):
    """Whole server frames (unmasked) at the start of buf: ([(opcode, payload)], rest)."""
    out = []
    while len(buf) >= 2:
        op, n, at = buf[0] & 0x0F, buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, at = struct.unpack("!H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, at = struct.unpack("!Q", buf[2:10])[0], 10
        if len(buf) < at + n:
            break
        out.append((op, buf[at:at + n]))
        buf = buf[at + n:]
    return out, buf


class H2:
    """One HTTP/2 connection to the gateway; streams' events are kept per stream."""

    def __init__(self, gw, host, validate=True):
        self.host = host
        self.authority = "%s:%d" % (host, gw.tls_port)
        ctx = ssl.create_default_context(cafile=CA[0])
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", gw.tls_port), timeout=10)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        assert self.sock.selected_alpn_protocol() == "h2"
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8", validate_outbound_headers=validate,
                                        normalize_outbound_headers=validate)
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        self.flush()
        self.remote_settings = {}
        self.streams = {}  # id -> {"status", "headers", "data", "ended", "reset"}
        self.pump(lambda: h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL in self.remote_settings or self.settings_seen)

    settings_seen = False

    def flush(self):
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def st(self, sid):
        return self.streams.setdefault(sid, {"status": None, "headers": [], "data": b"", "ended": False, "reset": None})

    def pump(self, until, timeout=10):
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() > deadline:
                raise TimeoutError("no such event from the gateway")
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise ConnectionError("the gateway closed the connection")
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    self.settings_seen = True
                    for k, v in ev.changed_settings.items():
                        self.remote_settings[k] = v.new_value
                elif isinstance(ev, h2.events.ResponseReceived):
                    s = self.st(ev.stream_id)
                    for k, v in ev.headers:
                        if k == ":status":
                            s["status"] = int(v)
                        else:
                            s["headers"].append((k, v))
                elif isinstance(ev, h2.events.DataReceived):
                    self.st(ev.stream_id)["data"] += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    self.st(ev.stream_id)["ended"] = True
                elif isinstance(ev, h2.events.StreamReset):
                    self.st(ev.stream_id)["reset"] = ev.error_code
            self.flush()

    def connect(self, path, protocol="websocket", extra=(), drop=()):
        sid = self.conn.get_next_available_stream_id()
        hl = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "https"), (":path", path),
              (":authority", self.authority), ("sec-websocket-version", "13")] + list(extra)
        hl = [(k, v) for k, v in hl if k not in drop]
        self.conn.send_headers(sid, hl, end_stream=False)
        self.flush()
        self.pump(lambda: self.st(sid)["status"] is not None or self.st(sid)["reset"] is not None)
        return sid

    def get(self, path, headers=()):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":path", path),
                                     (":authority", self.authority)] + list(headers), end_stream=True)
        self.flush()
        return sid

    def send(self, sid, opcode, payload):
        """One frame, in DATA frames as the stream's window allows."""
        data = ws_frame(opcode, payload)
        while data:
            self.pump(lambda: self.conn.local_flow_control_window(sid) > 0)
            n = min(len(data), self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            self.conn.send_data(sid, data[:n])
            data = data[n:]
            self.flush()

    def frames(self, sid, n=1, timeout=10):
        """The next n server frames on sid (taken from its data)."""

        def have():
            st = self.st(sid)
            return len(parse_frames(st["data"])[0]) >= n or st["ended"] or st["reset"] is not None

        self.pump(have, timeout)
        got = parse_frames(self.st(sid)["data"])[0][:n]
        self.st(sid)["data"] = _rest_after(self.st(sid)["data"], len(got))
        return got

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _rest_after(buf, n):
    """buf without its first n frames."""
    for _ in range(n):
        frames, _ = parse_frames(buf)
        if not frames:
            break
        ln = buf[1] & 0x7F
        buf = buf[(2 if ln < 126 else 4 if ln == 126 else 10) + len(frames[0][1]):]
    return buf


CA = [None]


@pytest.fixture(autouse=True)
def _ca(certs):
    CA[0] = certs["ca"]


def hdr(headers, name):
    return [v for k, v in headers if k == name]


def test_extended_connect_offered_and_echo(gateway, ws_sandbox, ws_upstream):
    """SETTINGS has ENABLE_CONNECT_PROTOCOL=1; a CONNECT :protocol websocket
    with the token gets 200 and echoes through the sandbox's WebSocket
    server, which got an HTTP/1.1 upgrade with the gateway's key; the access
    log line says CONNECT over HTTP/2."""
    c = H2(gateway, ws_sandbox.host)
    try:
        assert c.remote_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL) == 1, c.remote_settings
        cid = "h2echo-" + gwtest.new_sandbox_id()
        sid = c.connect("/echo?id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), ws_sandbox.token),
                                                   ("sec-websocket-protocol", "chat, superchat")])
        s = c.st(sid)
        assert s["status"] == 200, s
        assert not hdr(s["headers"], "sec-websocket-accept") and not hdr(s["headers"], "upgrade"), s["headers"]
        c.send(sid, OP_TEXT, "héllo over h2".encode())
        assert c.frames(sid) == [(OP_TEXT, "héllo over h2".encode())]
        big = os.urandom(200000)
        c.send(sid, OP_BINARY, big)
        assert c.frames(sid) == [(OP_BINARY, big)]
        c.send(sid, OP_CLOSE, struct.pack("!H", 1000))
        assert c.frames(sid)[0][0] == OP_CLOSE
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
    finally:
        c.close()
    info = ws_upstream.wait_closed(cid)
    heads = {k.lower(): v for k, v in info["headers"]}
    assert info["close_code"] == 1000, info
    assert heads["upgrade"].lower() == "websocket" and heads["sec-websocket-version"] == "13", heads
    assert len(heads["sec-websocket-key"]) == 24, heads
    assert heads["sec-websocket-protocol"] == "chat, superchat", heads
    assert bh.TOKEN_HEADER.lower() not in heads, "the token reached the sandbox"
    rec = gwtest.access_log_line(gateway, "/echo?id=" + cid)
    assert rec["method"] == "CONNECT" and rec["protocol"] == "HTTP/2" and rec["status"] == 200, rec


def test_without_token_is_401(gateway, ws_sandbox):
    c = H2(gateway, ws_sandbox.host)
    try:
        sid = c.connect("/echo")
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
        s = c.st(sid)
        assert s["status"] == 401, s
        assert json.loads(s["data"])["error"]["code"] == "missing_token", s["data"]
    finally:
        c.close()


def test_bad_protocol_is_400_and_missing_path_is_reset(gateway, ws_sandbox):
    c = H2(gateway, ws_sandbox.host, validate=False)
    try:
        sid = c.connect("/echo", protocol="connect-udp", extra=[(bh.TOKEN_HEADER.lower(), ws_sandbox.token)])
        assert c.st(sid)["status"] == 400, c.st(sid)
        sid = c.connect("/echo", extra=[(bh.TOKEN_HEADER.lower(), ws_sandbox.token)], drop=(":path",))
        assert c.st(sid)["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR, c.st(sid)
        sid = c.connect("/echo", extra=[(bh.TOKEN_HEADER.lower(), ws_sandbox.token)], drop=(":scheme",))
        assert c.st(sid)["reset"] == h2.errors.ErrorCodes.PROTOCOL_ERROR, c.st(sid)
        # plain CONNECT (no :protocol) stays refused
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "CONNECT"), (":authority", c.authority)], end_stream=False)
        c.flush()
        c.pump(lambda: c.st(sid)["status"] is not None or c.st(sid)["reset"] is not None)
        assert c.st(sid)["status"] == 405 or c.st(sid)["reset"] is not None, c.st(sid)
    finally:
        c.close()


def test_two_websockets_and_a_get_on_one_connection(gateway, ws_sandbox, ws_upstream):
    """Two WebSockets and a GET multiplexed on one HTTP/2 connection; its close
    closes both WebSockets' app sides."""
    c = H2(gateway, ws_sandbox.host)
    tok = [(bh.TOKEN_HEADER.lower(), ws_sandbox.token)]
    ids = ["h2mux%d-%s" % (i, gwtest.new_sandbox_id()) for i in (0, 1)]
    try:
        a = c.connect("/echo?id=" + ids[0], extra=tok)
        b = c.connect("/echo?id=" + ids[1], extra=tok)
        assert c.st(a)["status"] == 200 and c.st(b)["status"] == 200
        g = c.get("/_info?id=none", headers=tok)
        c.send(a, OP_TEXT, b"to a")
        c.send(b, OP_TEXT, b"to b")
        assert c.frames(b) == [(OP_TEXT, b"to b")]
        assert c.frames(a) == [(OP_TEXT, b"to a")]
        c.pump(lambda: c.st(g)["ended"])
        assert c.st(g)["status"] == 404, c.st(g)  # the app's own answer, over the same connection
    finally:
        c.close()
    for i in ids:
        ws_upstream.wait_closed(i)


def test_revocation_ends_the_stream(gateway, register_sandbox, ws_sandbox, ws_upstream):
    """A publish that changes the token ends the stream and closes the app's
    side (as over HTTP/1.1, the tunnel closes without a Close frame)."""
    c = H2(gateway, ws_sandbox.host)
    cid = "h2rev-" + gwtest.new_sandbox_id()
    try:
        sid = c.connect("/echo?id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), ws_sandbox.token)])
        assert c.st(sid)["status"] == 200
        c.send(sid, OP_TEXT, b"before")
        assert c.frames(sid) == [(OP_TEXT, b"before")]
        register_sandbox(ws_sandbox.id, ports={ws_upstream.port: "private"}, token="a-new-token-" + gwtest.new_sandbox_id())
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
    finally:
        c.close()
    ws_upstream.wait_closed(cid)


def test_app_close_ends_stream_and_client_reset_closes_app(gateway, ws_sandbox, ws_upstream):
    c = H2(gateway, ws_sandbox.host)
    tok = [(bh.TOKEN_HEADER.lower(), ws_sandbox.token)]
    try:
        sid = c.connect("/close?code=4001&reason=bye", extra=tok)
        assert c.st(sid)["status"] == 200
        f = c.frames(sid)
        assert f and f[0][0] == OP_CLOSE and struct.unpack("!H", f[0][1][:2])[0] == 4001, f
        c.send(sid, OP_CLOSE, struct.pack("!H", 4001))
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
        assert c.st(sid)["ended"], c.st(sid)

        cid = "h2rst-" + gwtest.new_sandbox_id()
        sid = c.connect("/idle?id=" + cid, extra=tok)
        assert c.st(sid)["status"] == 200
        gwtest.wait_for(lambda: ws_upstream.info(cid)["open"], 5, what="the app's side open")
        c.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        c.flush()
        info = ws_upstream.wait_closed(cid)
        assert not info["open"]
        # the connection is still good
        sid = c.connect("/echo", extra=tok)
        c.send(sid, OP_TEXT, b"still here")
        assert c.frames(sid) == [(OP_TEXT, b"still here")]
    finally:
        c.close()


def own_gateway(gw_factory, register_sandbox, ws_upstream, overrides):
    """A gateway of the test's own with these settings, a private port of a
    new sandbox on ws_upstream: (an H2 connection to it, the token)."""
    gw = gw_factory(overrides)
    sandbox_id = gwtest.new_sandbox_id("wsh2o")
    token = register_sandbox(sandbox_id, ports={ws_upstream.port: "private"})
    return H2(gw, gw.host(ws_upstream.port, sandbox_id)), token


def test_pings_arrive_and_pongs_are_not_forwarded(gw_factory, register_sandbox, ws_upstream):
    c, token = own_gateway(gw_factory, register_sandbox, ws_upstream,
                           {"upstream": {"websocket_ping_interval_ms": 300}})
    cid = "h2ping-" + gwtest.new_sandbox_id()
    try:
        sid = c.connect("/idle?id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), token)])
        assert c.st(sid)["status"] == 200
        f = c.frames(sid)
        assert f and f[0][0] == OP_PING, f
        c.send(sid, OP_PONG, f[0][1])
        f2 = c.frames(sid)
        assert f2 and f2[0][0] == OP_PING, f2
    finally:
        c.close()
    info = ws_upstream.wait_closed(cid)
    assert info.get("frames_pong", 0) == 0, "the gateway's Pong reached the app: %r" % info


def test_tcp_tunnel_over_h2(gateway, register_sandbox, upstream):
    """/.lizard/tcp over an HTTP/2 stream: the tcp port's bytes as binary
    frames both ways, and a revocation's Close 4403."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    sid_, token = gwtest.register_tcp_sandbox(register_sandbox.redis, port)
    c = H2(gateway, gateway.host(port, sid_))
    try:
        sid = c.connect("/.lizard/tcp", extra=[(bh.TOKEN_HEADER.lower(), token),
                                                ("sec-websocket-protocol", "lizard.tcp.v1")])
        assert c.st(sid)["status"] == 200, c.st(sid)
        conn, _ = srv.accept()
        conn.sendall(b"hello from tcp")
        f = c.frames(sid)
        assert f == [(OP_BINARY, b"hello from tcp")], f
        c.send(sid, OP_BINARY, b"and back")
        conn.settimeout(5)
        assert conn.recv(100) == b"and back"
        # revoked (a new token published): Close 4403 on the stream, as over HTTP/1.1
        gwtest.register_sandbox(register_sandbox.redis, sid_, ports={port: "private"}, token="new-" + sid_,
                                extra={"proto:%d" % port: "tcp"})
        f = c.frames(sid)
        assert f and f[0][0] == OP_CLOSE and struct.unpack("!H", f[0][1][:2])[0] == 4403, f
        conn.close()
    finally:
        c.close()
        srv.close()


H2O_HTTP2_IDLE_TIMEOUT_S = 10  # h2o's http2.idle_timeout (the gateway keeps its default)


def test_quiet_websocket_outlives_the_connections_idle_timeout(gw_factory, register_sandbox, ws_upstream):
    """A WebSocket stream is not an idle HTTP/2 connection: after the
    client's last message (which the app does not answer) and no Ping (off),
    the stream still works past h2o's connection idle timeout."""
    c, token = own_gateway(gw_factory, register_sandbox, ws_upstream, {"upstream": {"websocket_ping_interval_ms": 0}})
    cid = "h2quiet-" + gwtest.new_sandbox_id()
    try:
        sid = c.connect("/idle?id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), token)])
        assert c.st(sid)["status"] == 200
        c.send(sid, OP_TEXT, b"unanswered")
        gwtest.wait_for(lambda: ws_upstream.info(cid).get("frames_text", 0) == 1, 5, what="the app to get the message")
        time.sleep(H2O_HTTP2_IDLE_TIMEOUT_S + 2)
        c.send(sid, OP_PING, b"still there?")
        assert c.frames(sid) == [(OP_PONG, b"still there?")], c.st(sid)
    finally:
        c.close()


def test_websocket_over_h2_is_metered(gw_factory, mredis, msandbox, upstream):  # noqa: F811
    """The frames both ways are counted, plus the head each way (as
    test_metering.py's HTTP/1.1 WebSocket): ingress what the client sent
    through the stream, egress what it received, billed as the HTTP/2
    connection's TCP acknowledged it."""
    g = start_gw(gw_factory, mredis)
    c = H2(g, g.host(upstream.port, msandbox.id))
    sent = recvd = 0
    try:
        sid = c.connect("/ws")
        assert c.st(sid)["status"] == 200, c.st(sid)
        for size in (10, 1000, 70000):
            payload = os.urandom(size)
            frame = ws_frame(OP_BINARY, payload)
            c.send(sid, OP_BINARY, payload)
            sent += len(frame)
            assert c.frames(sid) == [(OP_BINARY, payload)]
            recvd += len(frame) - 4  # the echo is unmasked
        c.send(sid, OP_CLOSE, struct.pack("!H", 1000))
        sent += 2 + 4 + 2
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
        recvd += 4  # the app echoes the 2-byte close payload
    finally:
        c.close()
    wait_egress(mredis, msandbox.id, recvd)
    time.sleep(3 * FLUSH_MS / 1000)
    recs = [r for r in check_stream(mredis) if r["sandbox"] == msandbox.id]
    check_bounds(recs, recvd, sent, 1)
    assert incr_total(mredis, msandbox.id) == total(recs, "egress")


def test_client_message_past_the_bound_closes_1009(gw_factory, register_sandbox, ws_upstream):
    """The client's frames over HTTP/2 are walked and charged as over
    HTTP/1.1: a message past limits.websocket_max_message_bytes gets Close
    1009, and the app gets the Close too, not the message."""
    c, token = own_gateway(gw_factory, register_sandbox, ws_upstream, {"limits": {"websocket_max_message_bytes": 1000}})
    cid = "h2big-" + gwtest.new_sandbox_id()
    try:
        sid = c.connect("/echo?id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), token)])
        c.send(sid, OP_BINARY, b"x" * 500)
        assert c.frames(sid) == [(OP_BINARY, b"x" * 500)]
        c.send(sid, OP_BINARY, b"y" * 5000)
        f = c.frames(sid)
        assert f and f[0][0] == OP_CLOSE and struct.unpack("!H", f[0][1][:2])[0] == 1009, f
    finally:
        c.close()
    info = ws_upstream.wait_closed(cid)
    assert info["messages"] == 1 and info["close_code"] == 1009, info


def accept_for(head):
    """The Sec-WebSocket-Accept an app owes the upgrade request `head` (RFC 6455 4.2.2)."""
    import base64
    import hashlib
    key = [ln.split(b":", 1)[1].strip() for ln in head.split(b"\r\n") if ln.lower().startswith(b"sec-websocket-key:")]
    return base64.b64encode(hashlib.sha1(key[0] + WS_GUID.encode()).digest())


def test_a_101_without_the_gateways_accept_is_502(gateway, register_sandbox, raw_upstream):  # noqa: F811
    """The browser never sees the key over HTTP/2, so the gateway checks the
    app's Sec-WebSocket-Accept: a 101 with another one is 502
    bad_upstream_response (a right one: 200)."""
    import base64

    def serve(u, s, n):
        head = u.read_request(s)
        if head is None:
            return
        accept = accept_for(head)
        if n == 0:
            accept = base64.b64encode(b"not the right one, twenty")[:28]
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        s.recv(1)  # until the gateway closes

    u = raw_upstream(serve)
    sandbox_id = gwtest.new_sandbox_id("wsh2a")
    register_sandbox(sandbox_id, ports={u.port: "public"})
    c = H2(gateway, gateway.host(u.port, sandbox_id))
    try:
        sid = c.connect("/ws")
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
        assert c.st(sid)["status"] == 502, c.st(sid)
        assert json.loads(c.st(sid)["data"])["error"]["code"] == "bad_upstream_response", c.st(sid)
        sid = c.connect("/ws")
        assert c.st(sid)["status"] == 200, c.st(sid)
    finally:
        c.close()


def gateway_fds(gw):
    """The gateway's open descriptors (/proc/<pid>/fd: what `ls` or lsof shows an operator)."""
    return len(os.listdir("/proc/%d/fd" % gw.proc.pid))


def h1_websocket(gw, host, path, token):
    """An HTTP/1.1 WebSocket over TLS (ALPN http/1.1): the socket past the 101."""
    ctx = ssl.create_default_context(cafile=CA[0])
    ctx.set_alpn_protocols(["http/1.1"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gw.tls_port), timeout=10), server_hostname=host)
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s: %s\r\n\r\n"
               % (path, host, bh.TOKEN_HEADER, token)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def test_idle_websocket_costs_one_descriptor_over_h2(gw_factory, register_sandbox, ws_upstream):
    """What an operator counts in /proc/<pid>/fd: an idle WebSocket over
    HTTP/2 holds one descriptor of the gateway's (the sandbox's connection;
    the client's stream is the HTTP/2 connection's, with no socketpair
    behind it), over HTTP/1.1 two (the client's connection too). Each
    tunnel echoes first, so each is through to the app."""
    n = 8
    gw = gw_factory({"upstream": {"websocket_ping_interval_ms": 0}})
    sandbox_id = gwtest.new_sandbox_id("wsh2fd")
    token = register_sandbox(sandbox_id, ports={ws_upstream.port: "private"})
    host = gw.host(ws_upstream.port, sandbox_id)
    tok = [(bh.TOKEN_HEADER.lower(), token)]
    c = H2(gw, host)
    try:
        # a first exchange on the connection (the token checked, the route known), then the count without tunnels
        sid = c.connect("/echo", extra=tok)
        c.send(sid, OP_TEXT, b"warm")
        assert c.frames(sid) == [(OP_TEXT, b"warm")]
        c.conn.end_stream(sid)
        c.flush()
        c.pump(lambda: c.st(sid)["ended"] or c.st(sid)["reset"] is not None)
        time.sleep(0.5)
        baseline = gateway_fds(gw)
        for i in range(n):
            sid = c.connect("/echo", extra=tok)
            assert c.st(sid)["status"] == 200, c.st(sid)
            c.send(sid, OP_TEXT, b"tunnel %d" % i)
            assert c.frames(sid) == [(OP_TEXT, b"tunnel %d" % i)]
        gwtest.wait_for(lambda: gateway_fds(gw) - baseline == n, 10,
                        what="%d descriptors for %d idle WebSockets over HTTP/2 (now %d)" % (n, n, gateway_fds(gw) - baseline))
    finally:
        c.close()
    gwtest.wait_for(lambda: gateway_fds(gw) <= baseline - 1, 15,
                    what="the tunnels' and the connection's descriptors closed (now %d)" % (gateway_fds(gw) - baseline))
    baseline = gateway_fds(gw)
    socks = []
    try:
        for i in range(n):
            socks.append(h1_websocket(gw, host, "/echo", token))
        gwtest.wait_for(lambda: gateway_fds(gw) - baseline == 2 * n, 10,
                        what="%d descriptors for %d WebSockets over HTTP/1.1 (now %d)" % (2 * n, n, gateway_fds(gw) - baseline))
    finally:
        for s in socks:
            s.close()


MIB = 1024 * 1024


def test_back_pressure_toward_a_client_that_does_not_read(gw_factory, register_sandbox, ws_upstream):
    """The app floods a WebSocket whose HTTP/2 client reads nothing (its
    stream's window stays shut): the gateway takes from the app only what
    it can hand to the stream, so the app blocks, far short of the flood."""
    c, token = own_gateway(gw_factory, register_sandbox, ws_upstream, {"upstream": {"websocket_ping_interval_ms": 0}})
    cid = "h2flood-" + gwtest.new_sandbox_id()
    try:
        sid = c.connect("/flood?mib=200&id=" + cid, extra=[(bh.TOKEN_HEADER.lower(), token)])
        assert c.st(sid)["status"] == 200, c.st(sid)
        # the client reads nothing more (no WINDOW_UPDATE): what the app gets out is what the buffers on the way hold
        gwtest.wait_for(lambda: ws_upstream.info(cid).get("sent", 0) > MIB, 10, what="the flood to start")
        last = -1
        while ws_upstream.info(cid).get("sent", 0) != last:
            last = ws_upstream.info(cid).get("sent", 0)
            time.sleep(1)
        print("WebSocket over HTTP/2 back-pressure: the app got %.1f MiB out" % (last / MIB))
        assert last < 64 * MIB, "the app wrote %.1f MiB to a client that read nothing: no back-pressure" % (last / MIB)
        # and the tunnel still works once the client reads
        got = 0
        while got < 3 * MIB:
            before = len(c.st(sid)["data"])
            c.pump(lambda: len(c.st(sid)["data"]) > before)
            got += len(c.st(sid)["data"])
            c.st(sid)["data"] = b""
    finally:
        c.close()
    ws_upstream.wait_closed(cid)


def test_back_pressure_from_a_client_to_an_app_that_does_not_read(gw_factory, register_sandbox, raw_upstream):
    """The client sends to an app that reads nothing past its 101: the
    stream's window is opened again only as the app's side takes the bytes,
    so the client is held to the window and the buffers on the way."""
    import threading

    stop = threading.Event()
    taken = []

    def serve(u, s, n):
        head = u.read_request(s)
        if head is None:
            return
        accept = accept_for(head)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        stop.wait(60)  # reads nothing until the test is done
        s.settimeout(1)
        try:
            while True:
                d = s.recv(1 << 20)
                if not d:
                    break
                taken.append(len(d))
        except OSError:
            pass

    u = raw_upstream(serve)
    gw = gw_factory({"upstream": {"websocket_ping_interval_ms": 0}})
    sandbox_id = gwtest.new_sandbox_id("wsh2bp")
    register_sandbox(sandbox_id, ports={u.port: "public"})
    c = H2(gw, gw.host(u.port, sandbox_id))
    sent = 0
    try:
        sid = c.connect("/ws")
        assert c.st(sid)["status"] == 200, c.st(sid)
        data = b""
        while sent < 256 * MIB:
            if not data:
                data = ws_frame(OP_BINARY, b"z" * 65536)
            try:
                c.pump(lambda: c.conn.local_flow_control_window(sid) > 0, timeout=3)
            except TimeoutError:
                break  # held: no WINDOW_UPDATE for 3 s
            n = min(len(data), c.conn.local_flow_control_window(sid), c.conn.max_outbound_frame_size)
            c.conn.send_data(sid, data[:n])
            c.flush()
            data = data[n:]
            sent += n
        print("WebSocket over HTTP/2 back-pressure: the client got %.1f MiB in" % (sent / MIB))
        assert sent < 64 * MIB, "the client sent %.1f MiB to an app that read nothing: no back-pressure" % (sent / MIB)
    finally:
        stop.set()
        c.close()
