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
import subprocess
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
    yield from desktop_gateway(workdir, certs, redis, "desktop")


def desktop_gateway(workdir, certs, redis, name):
    """A gateway with K1 as its link key and VIEWERS viewers per sandbox, in workdir/name (a generator for a fixture)."""
    d = os.path.join(workdir, name)
    os.makedirs(d, exist_ok=True)
    keys_file = os.path.join(d, "link-keys")
    with open(keys_file, "w") as f:
        f.write(ref.keys_text(dict([K1])))
    os.chmod(keys_file, 0o600)
    g = gwtest.Gateway(d, certs, redis.port, name="gw-desktop",
                       overrides={"auth": {"link_keys_file": keys_file, "link_max_ttl_s": MAX_TTL},
                                  "limits": {"max_desktop_viewers": VIEWERS}})
    # the 1 GiB cut test measures RSS: ASan must not keep what was freed
    gwtest.small_asan_quarantine(g)
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


def test_view_only_viewer_cannot_disconnect_the_others(desk_gw, redis, certs, workdir):
    """Xvnc with its defaults disconnects every other client when one asks
    for the desktop alone (ClientInit shared 0). A view-only viewer that asks
    so is joined as shared: the full viewer (the owner, or the agent) keeps
    its session and its updates."""
    x = rfb.Xvnc(workdir, always_shared=False).start()
    try:
        sid, _ = rfb.register_desktop(redis, x.port)
        host = desk_gw.host(x.port, sid)

        async def go():
            async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, x.port)) as full:
                st, _, _ = await rfb.handshake(full)
                await full.send(rfb.SET_PIXEL_FORMAT + rfb.SET_ENCODINGS_RAW + rfb.fbur())
                await rfb.read_update(st)
                async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, x.port, view_only=True)) as viewer:
                    vst, _, _ = await rfb.handshake(viewer, shared=0)
                    await viewer.send(rfb.SET_PIXEL_FORMAT + rfb.SET_ENCODINGS_RAW + rfb.fbur())
                    await rfb.read_update(vst)  # the view-only viewer's session is up: Xvnc has seen its ClientInit
                    await full.send(rfb.fbur())
                    await rfb.read_update(st)  # a disconnected full viewer fails here (closed)

        run(go())
    finally:
        x.stop()


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


def frame0(payload, opcode=0x2):
    """A client's frame (binary by default) masked with the key 0 (the payload as is: fast for big ones)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n <= 0xFFFF:
        head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", n)
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
                if (ln < 126 or off > 2) and len(b) >= off + ln and b[0] & 0x0F == 0x9:
                    self.s.sendall(frame0(b[off:off + ln], 0xA))  # the gateway's keep-alive Ping (a slow sender)
                    self.buf = b[off + ln:]
                    continue
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
        dropped = metric(desk_gw, "lizard_desktop_input_dropped_total")
        total = 1 << 30
        s.sendall(frame0(struct.pack(">BxxxI", 6, total)))
        chunk = frame0(b"\x04" * (1 << 20))  # key events' bytes inside the text are text
        for _ in range(total >> 20):
            s.sendall(chunk)
        rss1 = gwtest.rss_kib(desk_gw.proc.pid)
        s.sendall(frame0(rfb.fbur(5, 6, 7, 8)))
        assert st.read(10) == rfb.fbur(5, 6, 7, 8), "the tunnel did not carry the message after the 1 GiB text"
        assert echo_rfb.received - before == 10, "bytes of the cut text reached the server"
        assert metric(desk_gw, "lizard_desktop_input_dropped_total") - dropped == 1, "not counted as one dropped message"
        assert rss1 - rss0 < 64 * 1024, "the gateway's RSS grew by %d KiB while dropping 1 GiB" % (rss1 - rss0)
    finally:
        s.close()


# --- bad input ------------------------------------------------------------------------------------


def test_rfb_port_whose_app_is_not_vnc(desk_gw, redis, certs, upstream):
    """An rfb port with an HTTP app on it (it says nothing first) or a
    service that greets with something else: the WebSocket closes 1011 and
    says the port is not a VNC server."""
    import websockets

    banner = socket.socket()
    banner.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    banner.bind(("127.0.0.1", gwtest.free_port()))
    banner.listen(8)

    def serve():
        try:
            c, _ = banner.accept()
            c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            time.sleep(5)
            c.close()
        except OSError:
            pass

    import threading

    threading.Thread(target=serve, daemon=True).start()
    try:
        for port, what in ((upstream.port, "sent no RFB greeting"), (banner.getsockname()[1], "not a VNC server")):
            sid, token = rfb.register_desktop(redis, port)
            host = desk_gw.host(port, sid)

            async def go():
                async with rfb.ws_connect(desk_gw, host, certs["ca"], token) as ws:
                    with pytest.raises(websockets.ConnectionClosed) as e:
                        await asyncio.wait_for(ws.recv(), 30)
                    assert e.value.rcvd is not None and e.value.rcvd.code == 1011, e.value
                    assert what in e.value.rcvd.reason, e.value.rcvd.reason

            run(go())
    finally:
        banner.close()


def test_view_only_link_refusals(desk_gw, redis, curl_runner, xvnc, upstream):
    """403 invalid_token for a view-only link of another port, with a bad
    signature (a full link's S under the lzv1 prefix, or altered), expired,
    and on a port that is not a desktop; each message says which."""
    sid, _ = rfb.register_desktop(redis, xvnc.port, extra={"port:%d" % upstream.port: "private"})
    redis.cmd("PUBLISH", "lizard:routes", sid)
    host = desk_gw.host(xvnc.port, sid)
    c = dcurl(desk_gw, curl_runner)
    good = link(sid, xvnc.port, view_only=True)
    full = link(sid, xvnc.port)
    cases = [
        (link(sid, upstream.port, view_only=True), host, "another port"),
        ("lzv1." + full[len("lzs1."):], host, "signature"),
        (good[:-3] + bh.flip_char(good[-3:], 0) + good[-2:], host, "signature"),
        (ref.mint(K1[0], K1[1], sid, xvnc.port, int(time.time()) - 5, 0, view_only=True), host, "expired"),
        (link(sid, upstream.port, view_only=True), desk_gw.host(upstream.port, sid), "view-only"),
    ]
    for token, h, says in cases:
        r = c(h, "/", headers={rfb.TOKEN_HEADER: token, "Accept": "application/json"})
        assert r.status == 403 and r.error_code() == "invalid_token", (token, r)
        assert says in r.json()["error"]["message"], (says, r.json())
    # and the good one works, here only
    r = c(host, "/", headers={rfb.TOKEN_HEADER: good})
    assert r.status == 302 and "view_only=true" in r.headers["location"], r


def test_sign_link_view_prints_a_view_only_link(desk_gw, redis, curl_runner, echo_rfb):
    """`lizard-gateway sign-link --view`: an lzv1 link the independent
    implementation mints byte for byte, whose URL opens the viewer view-only."""
    sid, _ = rfb.register_desktop(redis, echo_rfb.port)
    host = desk_gw.host(echo_rfb.port, sid)
    r = subprocess.run([gwtest.gateway_binary(), "sign-link", "-c", desk_gw.config_path, "--sandbox", sid, "--port",
                        str(echo_rfb.port), "--ttl", "600", "--epoch", "0", "--view"],
                       capture_output=True, timeout=30, env=desk_gw.env())
    assert r.returncode == 0, r.stderr.decode()
    url, token = r.stdout.decode().splitlines()
    assert token.startswith("lzv1.") and url == "https://%s:%d/?lizard_token=%s" % (host, desk_gw.tls_port, token), url
    assert "view-only" in r.stderr.decode()
    assert ref.mint(K1[0], K1[1], sid, echo_rfb.port, ref.parse(token)["exp"], 0, view_only=True) == token
    c = dcurl(desk_gw, curl_runner)
    r = c(host, "/", headers={rfb.TOKEN_HEADER: token})
    assert r.status == 302 and "view_only=true" in r.headers["location"], r


def test_view_only_cookie_stays_view_only_and_a_full_link_upgrades_it(desk_gw, redis, certs, curl_runner, echo_rfb):
    """A view-only link on a navigation becomes a view-only cookie: the
    viewer is told so and the tunnel it opens drops input, even when the
    viewer is asked for input (view_only=false). A full link on the same
    browser then replaces the cookie with a full one."""
    sid, access = rfb.register_desktop(redis, echo_rfb.port)
    host = desk_gw.host(echo_rfb.port, sid)
    c = dcurl(desk_gw, curl_runner)

    def cookie_of(token):
        r = c(host, "/?lizard_token=" + token, headers=bh.NAVIGATION)
        assert r.status == 302, r
        cs = bh.set_cookies(r)
        assert len(cs) == 1, r
        return cs[0].value

    async def echoed(cookie):
        async with rfb.ws_connect(desk_gw, host, certs["ca"], cookie="%s=%s" % (bh.COOKIE_NAME, cookie)) as ws:
            st, _, _ = await rfb.handshake(ws)
            await ws.send(rfb.pointer_event(1, 2) + rfb.fbur())
            return await st.read(10)

    view = cookie_of(link(sid, echo_rfb.port, view_only=True))
    assert view.startswith("w1."), view
    r = c(host, "/", headers={"Cookie": "%s=%s" % (bh.COOKIE_NAME, view)})
    assert r.status == 302 and "view_only=true" in r.headers["location"], r
    assert run(echoed(view)) == rfb.fbur(), "the view-only cookie's tunnel let a PointerEvent through"

    full = cookie_of(link(sid, echo_rfb.port))
    assert full.startswith("l1."), full
    r = c(host, "/", headers={"Cookie": "%s=%s" % (bh.COOKIE_NAME, full)})
    assert r.status == 302 and "view_only=false" in r.headers["location"], r
    assert run(echoed(full)) == rfb.pointer_event(1, 2) + rfb.fbur()[:4]

    # the access token on a browser holding a view-only cookie: the cookie it gets instead is a full one
    cookie_of(link(sid, echo_rfb.port, view_only=True))
    token_cookie = cookie_of(access)
    assert not token_cookie.startswith("w1."), token_cookie
    r = c(host, "/", headers={"Cookie": "%s=%s" % (bh.COOKIE_NAME, token_cookie)})
    assert r.status == 302 and "view_only=false" in r.headers["location"], r


def test_viewers_per_sandbox_bounded(desk_gw, redis, certs, echo_rfb):
    """limits.max_desktop_viewers (3 here) per sandbox: the fourth viewer is
    429 too_many_connections before the upgrade, another sandbox's viewers
    are not affected, and a closed viewer frees its place."""
    import websockets

    sid, token = rfb.register_desktop(redis, echo_rfb.port)
    other, other_token = rfb.register_desktop(redis, echo_rfb.port)
    host, other_host = desk_gw.host(echo_rfb.port, sid), desk_gw.host(echo_rfb.port, other)

    async def go():
        open_ = []
        for _ in range(VIEWERS):
            ws = await rfb.ws_connect(desk_gw, host, certs["ca"], token)
            await rfb.handshake(ws)
            open_.append(ws)
        assert metric(desk_gw, 'lizard_desktop_viewers{mode="full"}') >= VIEWERS
        req = ("GET /.lizard/rfb HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s: %s\r\n"
               "Accept: application/json\r\n\r\n" % (host, rfb.TOKEN_HEADER, token)).encode()
        got, sock = bh.h1_raw(desk_gw.tls_port, host, req, certs["ca"], read_until=b"}")
        sock.close()
        assert got.startswith(b"HTTP/1.1 429") and b"too_many_connections" in got, got
        # ten viewers past the limit, each refused before the upgrade, while a viewer of another sandbox keeps
        # getting its answers
        async with rfb.ws_connect(desk_gw, other_host, certs["ca"], other_token) as other:
            ost, _, _ = await rfb.handshake(other)
            answered = 0
            for i in range(10):
                with pytest.raises(websockets.InvalidStatusCode) as e:
                    async with rfb.ws_connect(desk_gw, host, certs["ca"], token):
                        pass
                assert e.value.status_code == 429
                await other.send(rfb.fbur(i))
                answered += await ost.read(10) == rfb.fbur(i)
            assert answered == 10, "the other sandbox's viewer got %d of 10 answers" % answered
        await open_.pop().close()
        deadline = time.monotonic() + 20
        while True:  # the slot is given back when the gateway has seen the close
            try:
                async with rfb.ws_connect(desk_gw, host, certs["ca"], token) as ws:
                    await rfb.handshake(ws)
                break
            except websockets.InvalidStatusCode as e:
                assert e.status_code == 429 and time.monotonic() < deadline
                await asyncio.sleep(0.1)
        for ws in open_:
            await ws.close()

    run(go())
    gwtest.wait_for(lambda: metric(desk_gw, 'lizard_desktop_viewers{mode="full"}') == 0, 30,
                    what="the viewers' gauge back to 0 once they closed")


def view_only_viewer_closed_4403(desk_gw, redis, certs, echo_rfb, change):
    """A view-only viewer (a link) and the owner's (the access token) open;
    change(redis, sid) writes the record and publishes: the viewer gets
    4403, the owner's session goes on."""
    import websockets

    sid, token = rfb.register_desktop(redis, echo_rfb.port)
    host = desk_gw.host(echo_rfb.port, sid)

    async def go():
        async with rfb.ws_connect(desk_gw, host, certs["ca"], link(sid, echo_rfb.port, view_only=True)) as viewer, \
                rfb.ws_connect(desk_gw, host, certs["ca"], token) as owner:
            st, _, _ = await rfb.handshake(viewer)
            ost, _, _ = await rfb.handshake(owner)
            assert metric(desk_gw, 'lizard_desktop_viewers{mode="view_only"}') >= 1
            change(redis, sid)
            redis.cmd("PUBLISH", "lizard:routes", sid)
            with pytest.raises(websockets.ConnectionClosed) as e:
                await st.read(1, timeout=20)
            assert e.value.rcvd is not None and e.value.rcvd.code == 4403, e.value
            await owner.send(rfb.fbur())
            assert await ost.read(10) == rfb.fbur()

    run(go())
    gwtest.wait_for(lambda: metric(desk_gw, 'lizard_desktop_viewers{mode="view_only"}') == 0, 30,
                    what="the view-only gauge back to 0")


def test_revocation_closes_a_viewer_4403(desk_gw, redis, certs, echo_rfb):
    """Bumping link_epoch closes the view-only viewer opened with a link
    (4403); a full viewer opened with the access token stays."""
    view_only_viewer_closed_4403(desk_gw, redis, certs, echo_rfb,
                                 lambda r, sid: r.cmd("HINCRBY", "lizard:sbx:{%s}" % sid, "link_epoch", 1))


def test_a_desktop_that_stops_being_one_closes_its_view_only_viewers_4403(desk_gw, redis, certs, echo_rfb):
    """proto:<n> changed from rfb to tcp: a view-only link grants nothing on
    a port that is not a desktop (no walk would drop its input there), so its
    open viewer closes (4403); the owner's, opened with the access token,
    stays."""
    view_only_viewer_closed_4403(desk_gw, redis, certs, echo_rfb,
                                 lambda r, sid: r.cmd("HSET", "lizard:sbx:{%s}" % sid, "proto:%d" % echo_rfb.port, "tcp"))
