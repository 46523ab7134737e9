"""Desktops (CONTRACT.md "Desktops"; issue 42): a proto:<n> = rfb port is a
VNC server in the sandbox. The gateway serves the noVNC viewer on its host
and joins a WebSocket (subprotocol binary or none, any path) to the VNC
port; a view-only link (lzv1) makes the gateway drop the viewer's input
after the RFB handshake.

Real components: the built gateway, redis-server, Debian's TigerVNC Xvnc
(the X server's own state checked with xdotool), an echoing RFB server where
the bytes the gateway lets through must be seen exactly, python3-websockets,
a raw TLS socket and curl as clients."""

import asyncio
import gzip
import os
import socket
import ssl
import struct
import time

import pytest

import browser_helpers as bh
import gwtest
import rfb_helpers as rfb
import share_link_ref as ref
from test_tunnel_bounds import close_of

K1 = ("k1", b"k1-secret-" + b"d" * 40)
MAX_TTL = 3600
VIEWERS = 3
NOVNC = "/usr/share/novnc"


def run(coro, timeout=90):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


@pytest.fixture(scope="module")
def desk_gw(workdir, certs, redis):
    d = os.path.join(workdir, "desktop")
    os.makedirs(d, exist_ok=True)
    keys_file = os.path.join(d, "link-keys")
    with open(keys_file, "w") as f:
        f.write(ref.keys_text(dict([K1])))
    os.chmod(keys_file, 0o600)
    g = gwtest.Gateway(d, certs, redis.port, name="gw-desktop",
                       overrides={"auth": {"link_keys_file": keys_file, "link_max_ttl_s": MAX_TTL},
                                  "limits": {"max_desktop_viewers": VIEWERS}})
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture(scope="module")
def xvnc(workdir):
    x = rfb.Xvnc(workdir).start()
    yield x
    x.stop()


@pytest.fixture(scope="module")
def echo_rfb():
    s = rfb.EchoRfbServer().start()
    yield s
    s.stop()


def link(sid, port, view_only=False, ttl=600, epoch=0):
    return ref.mint(K1[0], K1[1], sid, port, int(time.time()) + ttl, epoch, view_only=view_only)


def metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.rpartition(" ")[2])
    return 0.0


def dcurl(g, curl_runner):
    def go(host, path="/", headers=None, **kw):
        url = "https://%s:%d%s" % (host, g.tls_port, path)
        return curl_runner.request(url, resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)], headers=headers, **kw)

    return go


# --- the viewer ---------------------------------------------------------------------------------


def test_viewer_served_from_the_gateway(desk_gw, redis, curl_runner, xvnc):
    """/ is a 302 to the pinned viewer, set up to connect back to this host;
    its files are Debian's noVNC, immutable, gzip when asked; anything else
    on the port is 400 not_http_port; nothing without a credential."""
    sid, token = rfb.register_desktop(redis, xvnc.port)
    host = desk_gw.host(xvnc.port, sid)
    c = dcurl(desk_gw, curl_runner)
    r = c(host, "/", headers={rfb.TOKEN_HEADER: token})
    assert r.status == 302, r
    target = bh.location_target(r, host)
    assert target.startswith("/.lizard/viewer/") and "/vnc.html?" in target, target
    assert "autoconnect=true" in target and "path=.lizard/rfb" in target and "view_only=false" in target, target
    assert r.headers.get("cache-control") == "no-store"
    base = target.split("vnc.html")[0]

    with open(os.path.join(NOVNC, "vnc.html"), "rb") as f:
        html = f.read()
    r = c(host, target, headers={rfb.TOKEN_HEADER: token})
    assert r.status == 200 and r.body == html, r
    assert r.headers["content-type"].startswith("text/html")
    assert "immutable" in r.headers["cache-control"]
    r = c(host, base + "app/ui.js", headers={rfb.TOKEN_HEADER: token, "Accept-Encoding": "gzip"})
    assert r.status == 200 and r.headers.get("content-encoding") == "gzip", r
    assert r.headers["content-type"].startswith("text/javascript")
    with open(os.path.join(NOVNC, "app/ui.js"), "rb") as f:
        assert gzip.decompress(r.body) == f.read()
    r = c(host, base + "app/ui.js", headers={rfb.TOKEN_HEADER: token}, extra_args=("--head",))
    assert r.status == 200 and int(r.headers["content-length"]) == os.path.getsize(NOVNC + "/app/ui.js"), r

    for path, method in (("/vnc.html", None), (base + "nope.js", None), ("/", "POST"), ("/.lizard/viewer/0000/vnc.html", None)):
        r = c(host, path, headers={rfb.TOKEN_HEADER: token, "Accept": "application/json"}, method=method)
        assert r.status == 400 and r.error_code() == "not_http_port", (path, method, r)
    r = c(host, target, headers={"Accept": "application/json"})
    assert r.status == 401 and r.error_code() == "missing_token", r


# --- the tunnel: full and view-only, byte for byte ------------------------------------------------


def test_full_link_joins_the_vnc_server_and_moves_its_pointer(desk_gw, redis, certs, xvnc):
    """A full link's WebSocket (subprotocol binary) is Xvnc's RFB session:
    a PointerEvent moves the X server's pointer."""
    sid, _ = rfb.register_desktop(redis, xvnc.port)
    host = desk_gw.host(xvnc.port, sid)

    async def go():
        async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, xvnc.port)) as ws:
            assert ws.subprotocol == "binary"
            st, w, h = await rfb.handshake(ws)
            assert (w, h) == (640, 480)
            await ws.send(rfb.SET_PIXEL_FORMAT + rfb.SET_ENCODINGS_RAW)
            await ws.send(rfb.pointer_event(123, 45) + rfb.fbur())
            await rfb.read_update(st)  # Xvnc handles a client's messages in order: the pointer moved before
            assert xvnc.pointer() == (123, 45)
            assert metric(desk_gw, 'lizard_desktop_viewers{mode="full"}') >= 1

    run(go())


def test_view_only_link_drops_input_at_the_x_server(desk_gw, redis, certs, xvnc):
    """Through a view-only link the screen still updates, and the same
    PointerEvent changes nothing on the X server; the gateway counts it."""
    sid, _ = rfb.register_desktop(redis, xvnc.port)
    host = desk_gw.host(xvnc.port, sid)
    before = metric(desk_gw, "lizard_desktop_input_dropped_total")

    async def go():
        async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, xvnc.port, view_only=True), subprotocols=()) as ws:
            assert ws.subprotocol is None
            st, w, h = await rfb.handshake(ws)
            await ws.send(rfb.SET_PIXEL_FORMAT + rfb.SET_ENCODINGS_RAW)
            await ws.send(rfb.pointer_event(7, 9) + rfb.fbur())
            await rfb.read_update(st)
            start = xvnc.pointer()
            await ws.send(rfb.pointer_event(start[0] + 50, start[1] + 40, 1) + rfb.key_event(0x61) + rfb.fbur())
            await rfb.read_update(st)
            assert xvnc.pointer() == start, "a view-only viewer moved the X server's pointer"
            assert metric(desk_gw, 'lizard_desktop_viewers{mode="view_only"}') >= 1

    run(go())
    assert metric(desk_gw, "lizard_desktop_input_dropped_total") >= before + 3


SPLITS = ["whole", "per_message", "byte_by_byte", "fragments"]


@pytest.mark.parametrize("minor,security", [(3, 1), (7, 1), (8, 1), (3, 2), (8, 2)])
@pytest.mark.parametrize("split", SPLITS)
def test_view_only_passes_exactly_the_non_input_messages(desk_gw, redis, certs, minor, security, split):
    """Every client message type, sent whole, one per frame, byte by byte
    and as fragments: the echoing server gets exactly the non-input ones, in
    order; a full link passes everything."""
    server = rfb.EchoRfbServer(security=security).start()
    try:
        sid, _ = rfb.register_desktop(redis, server.port)
        host = desk_gw.host(server.port, sid)
        msgs = rfb.all_messages()
        want = b"".join(m for m, passes in msgs if passes)
        everything = b"".join(m for m, _ in msgs)

        async def session(token, expect):
            async with rfb.ws_connect(desk_gw, host, certs["ca"], token) as ws:
                st, _, _ = await rfb.handshake(ws, minor, security)
                if split == "whole":
                    await ws.send(everything)
                elif split == "per_message":
                    for m, _ in msgs:
                        await ws.send(m)
                elif split == "byte_by_byte":
                    for i in range(len(everything)):
                        await ws.send(everything[i:i + 1])
                else:
                    await ws.send([everything[i:i + 5] for i in range(0, len(everything), 5)])
                got = await st.read(len(expect))
                assert got == expect
                # nothing more comes: a marker's echo is the next thing read
                await ws.send(rfb.fbur(9, 9, 9, 9))
                assert await st.read(10) == rfb.fbur(9, 9, 9, 9)

        run(session(link(sid, server.port, view_only=True), want))
        run(session(link(sid, server.port), everything))
    finally:
        server.stop()


def test_unknown_message_type_closes_1002(desk_gw, redis, certs, echo_rfb):
    sid, _ = rfb.register_desktop(redis, echo_rfb.port)
    host = desk_gw.host(echo_rfb.port, sid)

    async def go():
        import websockets

        async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, echo_rfb.port, view_only=True)) as ws:
            st, _, _ = await rfb.handshake(ws)
            await ws.send(rfb.fbur())
            assert await st.read(10) == rfb.fbur()
            await ws.send(bytes([7, 0, 0, 0]))
            with pytest.raises(websockets.ConnectionClosed) as e:
                await st.read(1)
            assert e.value.rcvd is not None and e.value.rcvd.code == 1002, e.value
            assert "cannot size" in e.value.rcvd.reason

    run(go())


def raw_rfb_tunnel(g, host, token, ca):
    """A raw TLS WebSocket to a desktop (so a test can send frames as fast as it likes)."""
    ctx = ssl.create_default_context(cafile=ca)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=30), server_hostname=host)
    s.sendall(("GET /.lizard/rfb HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Protocol: binary\r\n%s: %s\r\n\r\n" % (host, rfb.TOKEN_HEADER, token)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        assert d, "closed during the handshake"
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return s, rest


def frame0(payload):
    """A client's binary frame masked with the key 0 (the payload as is: fast for big ones)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x82, 0x80 | n])
    elif n <= 0xFFFF:
        head = bytes([0x82, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", n)
    return head + b"\x00\x00\x00\x00" + payload


class RawStream:
    """The payloads of the gateway's binary frames on a raw socket, as one byte stream."""

    def __init__(self, s, buf):
        self.s, self.buf, self.data = s, buf, b""

    def _frame(self):
        while True:
            b = self.buf
            if len(b) >= 2:
                ln, off = b[1] & 0x7F, 2
                if ln == 126 and len(b) >= 4:
                    ln, off = struct.unpack(">H", b[2:4])[0], 4
                elif ln == 127 and len(b) >= 10:
                    ln, off = struct.unpack(">Q", b[2:10])[0], 10
                if (ln < 126 or off > 2) and len(b) >= off + ln:
                    assert b[0] & 0x0F == 0x2, "not a binary frame: %r (close: %r)" % (b[:40], close_of(b))
                    self.data += b[off:off + ln]
                    self.buf = b[off + ln:]
                    return
            d = self.s.recv(65536)
            assert d, "the gateway closed the tunnel"
            self.buf += d

    def read(self, n):
        while len(self.data) < n:
            self._frame()
        out, self.data = self.data[:n], self.data[n:]
        return out


def test_one_gib_cut_text_of_a_view_only_viewer_is_dropped_without_buffering(desk_gw, redis, certs, echo_rfb):
    """A ClientCutText that declares 1 GiB, and sends it, through a
    view-only link: none of it reaches the server, the gateway's RSS stays
    flat, and the tunnel carries the next message. (A fixed bound on RSS
    growth: 64 MiB, far below the 1 GiB a buffering gateway would need.)"""
    sid, _ = rfb.register_desktop(redis, echo_rfb.port)
    host = desk_gw.host(echo_rfb.port, sid)
    s, buf = raw_rfb_tunnel(desk_gw, host, link(sid, echo_rfb.port, view_only=True), certs["ca"])
    try:
        st = RawStream(s, buf)
        assert st.read(12) == b"RFB 003.008\n"
        s.sendall(frame0(b"RFB 003.008\n"))
        assert st.read(2) == b"\x01\x01"
        s.sendall(frame0(b"\x01"))
        assert st.read(4) == b"\x00" * 4
        s.sendall(frame0(b"\x01"))
        st.read(4 + 16 + 4 + 4)
        rss0 = gwtest.rss_kib(desk_gw.proc.pid)
        before = echo_rfb.received
        total = 1 << 30
        s.sendall(frame0(struct.pack(">BxxxI", 6, total)))
        chunk = frame0(b"\x04" * (1 << 20))  # key events' bytes inside the text are text
        for _ in range(total >> 20):
            s.sendall(chunk)
        rss1 = gwtest.rss_kib(desk_gw.proc.pid)
        s.sendall(frame0(rfb.fbur(5, 6, 7, 8)))
        assert st.read(10) == rfb.fbur(5, 6, 7, 8), "the tunnel did not carry the message after the 1 GiB text"
        assert echo_rfb.received - before == 10, "bytes of the cut text reached the server"
        assert rss1 - rss0 < 64 * 1024, "the gateway's RSS grew by %d KiB while dropping 1 GiB" % (rss1 - rss0)
    finally:
        s.close()
