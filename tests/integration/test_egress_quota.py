"""egress_quota (docs/access-control.md, Who may reach a sandbox, and how much): once the
running total lizard:egress:{<id>} has reached the sandbox's quota, new
requests and tunnels (WebSocket, TCP) get 429 egress_quota_exceeded on every
gateway sharing the Redis, responses already streaming finish, and a quota
the control plane raises (HSET + PUBLISH) opens again. Real gateways, a real
redis-server, the real upstream; clients are curl and raw TLS sockets."""

import json
import os
import socket
import ssl

import pytest

import gwtest

MIB = 1024 * 1024
QUOTA = MIB
BIG = 32 * MIB  # the in-flight download: more than the gateway and the kernels hold for a client that stopped reading
PATTERN = b"0123456789abcdef"  # upstream.py's /bytes/<n>


def _get(curl_runner, g, host, path="/echo", headers=None):
    return curl_runner.request("https://%s:%d%s" % (host, g.tls_port, path),
                               resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)], headers=headers)


def _tls(g, host, rcvbuf=None):
    raw = socket.socket()
    if rcvbuf:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", g.tls_port))
    ctx = ssl.create_default_context(cafile=g.certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(raw, server_hostname=host)


def _upgrade(g, host, path, protocol=None, keep=False):
    """Sends a WebSocket upgrade; returns (status, error code or None), and
    with keep the open socket as well."""
    sock = _tls(g, host)
    head = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" % (path, host))
    if protocol:
        head += "Sec-WebSocket-Protocol: %s\r\n" % protocol
    sock.sendall((head + "\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the gateway closed before answering the upgrade: %r" % data
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    status, headers, _ = gwtest.parse_head(raw_head + b"\r\n\r\n")
    code = None
    if status != 101:
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            assert chunk
            body += chunk
        code = json.loads(body[:length])["error"]["code"]
    if keep:
        return status, code, sock
    sock.close()
    return status, code


def _ws_echo(sock, payload):
    """One masked binary message (under 126 bytes) through a tunnel to upstream.py's /ws; returns its echo."""
    mask = b"\x01\x02\x03\x04"
    sock.sendall(bytes([0x82, 0x80 | len(payload)]) + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload)))
    data = b""
    while len(data) < 2 or len(data) < 2 + (data[1] & 0x7F):
        chunk = sock.recv(4096)
        assert chunk, "the tunnel closed"
        data += chunk
    return data[2:2 + (data[1] & 0x7F)]


class _Download:
    """GET <path> on a TLS connection whose client reads only when told to
    (a fixed receive buffer; the gateway's back-pressure holds the rest)."""

    def __init__(self, g, host, path):
        self.sock = _tls(g, host, rcvbuf=256 * 1024)
        self.sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path.encode(), host.encode()))
        self.data = bytearray()

    def read(self, at_least=None):
        while at_least is None or len(self.data) < at_least:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            self.data += chunk  # a bytearray: appending does not copy what came before
        return self.data

    def body(self):
        self.read()
        self.sock.close()
        head, _, body = bytes(self.data).partition(b"\r\n\r\n")
        return gwtest.parse_head(head + b"\r\n\r\n")[0], body


@pytest.fixture
def own_upstream(workdir):
    """An upstream of this test's own: its byte count is this test's traffic alone."""
    u = gwtest.Upstream(os.path.join(workdir, "upstream-quota"))
    u.start()
    yield u
    u.stop()


def _metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _refused(r):
    return r.status == 429 and r.error_code() == "egress_quota_exceeded"


def test_quota_reached_through_one_gateway_refuses_on_every_gateway(gw_factory, redis, register_sandbox, own_upstream,
                                                                    curl_runner):
    upstream = own_upstream
    # routes are cached for 10 minutes: what refuses below is the publish, never a cache expiry; B has one
    # worker, so that the record it cached (under the quota) is the one every request there is checked against
    a = gw_factory({"routing": {"cache_ttl_ms": 600000}}, name="gw-quota-a")
    b = gw_factory({"routing": {"cache_ttl_ms": 600000}, "workers": 1}, name="gw-quota-b")
    sid, free = gwtest.new_sandbox_id("q"), gwtest.new_sandbox_id("qf")
    ports = {upstream.port: "public", redis.port: "public"}  # redis.port: a raw TCP service for the tunnel
    register_sandbox(sid, ports=ports, extra={"proto:%d" % redis.port: "tcp", "egress_quota": str(QUOTA)})
    register_sandbox(free, ports={upstream.port: "public"})
    host, tcp_host = (a.host(p, sid).split(":")[0] for p in (upstream.port, redis.port))
    free_host = a.host(upstream.port, free).split(":")[0]
    for g in (a, b):
        assert _get(curl_runner, g, host).status == 200
    status, _, ws = _upgrade(a, host, "/ws", keep=True)  # a tunnel opened under the quota stays open
    assert status == 101 and _ws_echo(ws, b"under the quota") == b"under the quota"

    # a download through A passes the quota while it streams, then stalls (its client stops reading)
    dl = _Download(a, host, "/bytes/%d" % BIG)
    dl.read(at_least=2 * QUOTA)
    gwtest.wait_for(lambda: _refused(_get(curl_runner, a, host)), 30, what="A to refuse once its flush saw the total")
    assert _metric(a, "lizard_egress_quota_reached_total") >= 1
    gwtest.wait_for(lambda: _refused(_get(curl_runner, b, host)), 30, what="B to refuse after A's publish")
    r = _get(curl_runner, b, host, "/bytes/10")
    assert _refused(r) and r.headers.get("cache-control") == "no-store", r
    for g in (a, b):
        assert _upgrade(g, host, "/ws") == (429, "egress_quota_exceeded")
        assert _upgrade(g, tcp_host, "/.lizard/tcp", "lizard.tcp.v1") == (429, "egress_quota_exceeded")
    assert _metric(b, 'lizard_errors_total{code="egress_quota_exceeded"}') >= 3
    written = upstream.stats()["bytes_written"]
    print("upstream bytes written when refused: %d of %d" % (written, BIG))
    assert written < BIG, "the download was over before the quota took effect: nothing here was in flight"

    # what was already open goes on: the tunnel, and the download, every byte of it
    assert _ws_echo(ws, b"past the quota") == b"past the quota"
    ws.close()
    status, body = dl.body()
    assert status == 200 and len(body) == BIG, (status, len(body))
    assert body == (PATTERN * (BIG // len(PATTERN))), "the in-flight body is not the upstream's"

    # a sandbox without egress_quota is never refused, whatever its total
    assert len(_get(curl_runner, a, free_host, "/bytes/%d" % (2 * QUOTA)).body) == 2 * QUOTA
    gwtest.wait_for(lambda: int(redis.cmd("GET", "lizard:egress:{%s}" % free) or 0) >= 2 * QUOTA, 30,
                    what="the free sandbox's bytes to be flushed")
    for g in (a, b):
        assert _get(curl_runner, g, free_host).status == 200

    # the control plane raises the quota: open again on both, tunnels included, at its publish
    redis.cmd("HSET", "lizard:sbx:{%s}" % sid, "egress_quota", str(1 << 40))
    redis.cmd("PUBLISH", "lizard:routes", sid)
    for g in (a, b):
        gwtest.wait_for(lambda: _get(curl_runner, g, host).status == 200, 30, what="the raised quota")
        assert _upgrade(g, host, "/ws")[0] == 101
        assert _upgrade(g, tcp_host, "/.lizard/tcp", "lizard.tcp.v1")[0] == 101


def test_route_read_knows_the_total(gateway, redis, register_sandbox, upstream, curl_runner):
    """A gateway that never saw the sandbox's traffic refuses at its first
    read of the record: the total comes with it. A quota of 0 refuses at
    once; a malformed one is ignored (and logged), as for req_rate."""
    over, zero, bad, free = (gwtest.new_sandbox_id(p) for p in ("qo", "qz", "qb", "qn"))
    redis.cmd("SET", "lizard:egress:{%s}" % over, str(5 * MIB))
    redis.cmd("SET", "lizard:egress:{%s}" % free, str(1 << 50))
    register_sandbox(over, ports={upstream.port: "public"}, extra={"egress_quota": str(5 * MIB)})
    register_sandbox(zero, ports={upstream.port: "public"}, extra={"egress_quota": "0"})
    register_sandbox(bad, ports={upstream.port: "public"}, extra={"egress_quota": "5MB"})
    register_sandbox(free, ports={upstream.port: "public"})
    for sid, refused in ((over, True), (zero, True), (bad, False), (free, False)):
        r = _get(curl_runner, gateway, gateway.host(upstream.port, sid).split(":")[0])
        assert _refused(r) if refused else r.status == 200, (sid, r)
    r = _get(curl_runner, gateway, gateway.host(upstream.port, over).split(":")[0])
    assert "quota" in r.json()["error"]["message"] and r.json()["error"]["sandboxId"] == over
    with open(gateway.log) as f:
        assert any(bad in ln and "egress_quota is not a decimal" in ln for ln in f)
    # a private port: a client without the token learns nothing of the quota
    token = register_sandbox(over, ports={upstream.port: "private"}, extra={"egress_quota": str(5 * MIB)})
    host = gateway.host(upstream.port, over).split(":")[0]
    r = _get(curl_runner, gateway, host)
    assert r.status == 401 and r.error_code() == "missing_token", r
    r = _get(curl_runner, gateway, host, headers={"X-Lizard-Access-Token": token})
    assert _refused(r), r
