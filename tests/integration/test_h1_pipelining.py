"""HTTP/1.1 clients that pipeline requests (issue 36, finding 4; libh2o patch
0320): a connection serves at most limits.max_requests_per_connection
requests (the last answered `Connection: close`, as nginx's
keepalive_requests), and a client that keeps sending requests without
reading the answers stops getting them run at the app once
limits.max_pipelined_unsent_bytes of answers wait unsent in the kernel.
Before, 20 connections that never read got 110,100 requests run at the app
in 12 s.

Over TLS with raw sockets (the attacker) and curl (a real client across the
cap); a well-behaved client on another address (127.0.0.2) keeps fetching
from the same app during the attack, its answers counted and timed."""

import os
import re
import socket
import ssl
import subprocess
import threading
import time

import pytest

import gwtest
from test_h2_security import BYSTANDER_ADDR, metrics

RESPONSE_BYTES = 4096


@pytest.fixture(scope="module")
def app(workdir):
    u = gwtest.Upstream(os.path.join(workdir, "pipelining-app"))
    u.start()
    yield u
    u.stop()


def make_gw(gw_factory, register_sandbox, app, certs, **limits):
    g = gw_factory({"limits": limits} if limits else None)
    g.sid = gwtest.new_sandbox_id("pipe")
    register_sandbox(g.sid, ports={app.port: "public"})
    g.sbx_host = g.host(app.port, g.sid)
    g.ca = certs["ca"]
    return g


def connect(g, source=None, rcvbuf=None, timeout=10):
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect: the window the client offers
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if source is not None:
        raw.bind((source, 0))
    raw.settimeout(timeout)
    raw.connect(("127.0.0.1", g.tls_port))
    ctx = ssl.create_default_context(cafile=g.ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(raw, server_hostname=g.sbx_host)


def request(g, path):
    return ("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (path, g.sbx_host, g.tls_port)).encode()


class ResponseReader:
    """Reads HTTP/1.1 responses with a Content-Length off a socket, one at a time."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the connection closed")
        self.buf += data

    def next(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        n = int(re.search(rb"\r\ncontent-length: *(\d+)", head, re.I).group(1))
        while len(rest) < n:
            self._fill()
            head, _, rest = self.buf.partition(b"\r\n\r\n")
        self.buf = rest[n:]
        return int(head.split(b" ", 2)[1]), head.decode("latin-1").lower(), rest[:n]


class Bystander:
    """GETs /echo one after the other on keep-alive connections from another address, while an attack runs."""

    def __init__(self, g):
        self.g, self.ok, self.errors, self.times = g, 0, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                s = connect(self.g, source=BYSTANDER_ADDR, timeout=30)
                r = ResponseReader(s)
                for _ in range(20):
                    if self._stop.is_set():
                        break
                    t0 = time.monotonic()
                    s.sendall(request(self.g, "/echo"))
                    status, _, body = r.next()
                    self.times.append(time.monotonic() - t0)
                    if status == 200 and b'"method": "GET"' in body:
                        self.ok += 1
                    else:
                        self.errors.append(status)
                    time.sleep(0.02)
                s.close()
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))

    def __enter__(self):
        self._thread.start()
        gwtest.wait_for(lambda: self.ok >= 1 or self.errors, 15, what="the bystander's first answer")
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=40)

    def p99(self):
        t = sorted(self.times)
        return t[min(len(t) - 1, int(len(t) * 0.99))] if t else 0.0


def settled(app, endpoint, quiet_s=1.5, timeout=30):
    """Waits until the app's count of `endpoint` requests has not moved for quiet_s; returns it."""
    def count():
        return app.stats()["endpoints"].get(endpoint, 0)
    last, since = count(), time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def test_a_client_that_does_not_read_stops_getting_requests_served(gw_factory, register_sandbox, app, certs):
    """20 connections each pipeline 2,000 requests for 4 KiB answers and never read: once 64 KiB of answers wait
    unsent in the kernel, the gateway reads no more requests from them, so only about what their windows and that
    mark hold is run at the app. Before, the answers went into the kernel's buffers as fast as the app made them."""
    g = make_gw(gw_factory, register_sandbox, app, certs)
    app.get_json("/_reset")
    socks = [connect(g, rcvbuf=16384) for _ in range(20)]
    data = request(g, "/bytes/%d" % RESPONSE_BYTES) * 2000

    def send(s):
        try:
            s.sendall(data)
        except OSError:
            pass  # the gateway stopped reading, the send timed out: the point

    with Bystander(g) as good:
        senders = [threading.Thread(target=send, args=(s,), daemon=True) for s in socks]
        for t in senders:
            t.start()
        at_app = settled(app, "bytes")  # the attacker's (the bystander fetches /echo)
    for s in socks:
        s.close()
    waits = metrics(g)['lizard_http1_events_total{event="pipeline_wait"}']
    print("pipelining: %d of %d requests run at the app, %d waits; bystander %d ok, p99 %.1f ms" %
          (at_app, 20 * 2000, waits, good.ok, good.p99() * 1000))
    assert not good.errors, good.errors[:3]
    assert good.ok >= 10 and good.p99() < 5.0, (good.ok, good.p99())
    assert waits >= 20, "no connection waited for its client"
    # per connection: the client's window (about 32 KiB here) and 64 KiB unsent, of 4 KiB answers, plus what is in
    # flight; 60 each leaves room for a kernel's choices
    assert at_app <= 20 * 60, "%d requests of clients that never read ran at the app" % at_app


def test_a_pipelining_client_that_reads_is_served_whole(gw_factory, register_sandbox, app, certs):
    """A client that pipelines 64 requests for 64 KiB answers and reads only once the connection has had to wait for
    it gets every answer, in order and whole: the connection goes on when the client catches up."""
    g = make_gw(gw_factory, register_sandbox, app, certs)
    s = connect(g, rcvbuf=16384, timeout=30)
    try:
        s.sendall(request(g, "/bytes/65536") * 64)
        gwtest.wait_for(lambda: metrics(g)['lizard_http1_events_total{event="pipeline_wait"}'] >= 1, 15,
                        what="the connection to wait for its client")
        r = ResponseReader(s)
        for i in range(64):
            status, _, body = r.next()
            assert status == 200 and body == gwtest_pattern(65536), "answer %d" % i
    finally:
        s.close()


def gwtest_pattern(n):
    block = (b"0123456789abcdef" * 4096)[:65536]
    return (block * (n // len(block) + 1))[:n]


def test_requests_per_connection_are_capped(gw_factory, register_sandbox, app, certs):
    """With limits.max_requests_per_connection 5 the fifth answer on a connection says `Connection: close` and the
    connection ends; curl, fetching 12 URLs, opens a new connection after each fifth and gets all 12."""
    g = make_gw(gw_factory, register_sandbox, app, certs, max_requests_per_connection=5)
    s = connect(g)
    try:
        r = ResponseReader(s)
        for i in range(1, 6):
            s.sendall(request(g, "/bytes/10"))
            status, head, _ = r.next()
            assert status == 200
            assert ("connection: close" in head) == (i == 5), (i, head)
        with pytest.raises(EOFError):
            r.next()
    finally:
        s.close()
    url = "https://%s:%d/bytes/10" % (g.sbx_host, g.tls_port)
    out = subprocess.run(["curl", "-sS", "--http1.1", "--cacert", g.ca, "--resolve", "%s:%d:127.0.0.1" % (g.sbx_host, g.tls_port),
                          "-w", "%{http_code} %{num_connects}\n"] + ["-o", "/dev/null", url] * 12,
                         capture_output=True, text=True, timeout=60)
    lines = out.stdout.split()
    codes, connects = lines[0::2], [int(n) for n in lines[1::2]]
    assert codes == ["200"] * 12, out.stdout + out.stderr
    assert sum(connects) == 3, connects


def make_plain_gw(gw_factory, register_sandbox, app, cap):
    """A gateway with limits.max_requests_per_connection `cap` and a trusted plain listener (no TLS in the way of the
    TCP ends the test looks at), a private port with its token."""
    g = gw_factory({"limits": {"max_requests_per_connection": cap}}, start=False)
    g.overrides["listen"] = [{"address": "127.0.0.1:%d" % g.tls_port, "tls": True},
                             {"address": "127.0.0.1:%d" % g.plain_port, "tls": False, "trusted": True}]
    g.start()
    g.sid = gwtest.new_sandbox_id("pipe")
    g.token = register_sandbox(g.sid, ports={app.port: "private"})
    g.sbx_host = g.host(app.port, g.sid)
    return g


def test_a_capped_connection_ends_with_a_fin_behind_pipelined_requests(gw_factory, register_sandbox, app):
    """RFC 9112 9.6 (libh2o patch 0580): with limits.max_requests_per_connection 3, a client pipelines 3 requests (the
    third at the app for a while) and 2 more behind them, unread by the gateway when it answers the third. The client
    gets the 3 answers, the last with `Connection: close`, then the end of the stream. Before, the gateway's close with the 2 requests unread made the kernel answer with a
    reset in place of the FIN (which can destroy answers a client has not read yet)."""
    g = make_plain_gw(gw_factory, register_sandbox, app, 3)
    app.get_json("/_reset")

    def req(path):
        return ("GET %s HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\n\r\n" % (path, g.sbx_host, g.token)).encode()

    s = socket.create_connection(("127.0.0.1", g.plain_port), timeout=30)
    try:
        s.sendall(req("/bytes/10") * 2 + req("/slow-head/500"))
        gwtest.wait_for(lambda: app.stats()["endpoints"].get("slow-head", 0) >= 1, 15, what="the third request at the app")
        s.sendall(req("/bytes/10") * 2)  # behind the capped request: the gateway does not read them
        r = ResponseReader(s)
        heads = [r.next()[:2] for _ in range(3)]
        assert [st for st, _ in heads] == [200, 200, 200], heads
        assert "connection: close" in heads[2][1] and "connection: close" not in heads[1][1], heads
        assert r.buf == b"" and s.recv(65536) == b"", "more than the 3 answers"  # the FIN, not a reset
        assert app.stats()["endpoints"].get("bytes", 0) == 2, "a request behind the capped one ran at the app"
    finally:
        s.close()


def test_h2load_pipelining_across_the_cap(gw_factory, register_sandbox, app):
    """h2load --h1 -m16 over connections capped at 100 requests: every request h2load counts as done succeeded, none
    hangs. h2load itself counts the 15 requests it had pipelined behind each `Connection: close` as failed (it does
    not send them again: nghttp2's src/h2load.cc, Client::try_again_or_fail); nginx with keepalive_requests gets the
    same counts (docs/performance.md)."""
    g = make_plain_gw(gw_factory, register_sandbox, app, 100)
    out = subprocess.run(["h2load", "--h1", "-n2000", "-c1", "-m16", "-H", "x-lizard-access-token: " + g.token,
                          "--connect-to", "127.0.0.1:%d" % g.plain_port, "http://%s/bytes/100" % g.sbx_host],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, "
                  r"(\d+) timeout", out.stdout)
    assert m, out.stdout + out.stderr
    total, _, done, ok, failed, _, timeout = (int(x) for x in m.groups())
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out.stdout)
    print("h2load across the cap:", m.group(0))
    assert total == 2000 and timeout == 0 and ok == done and int(codes.group(1)) == done, out.stdout
    # each close drops what was pipelined behind it (15), and nothing else is lost
    assert failed % 15 == 0 and done + failed == total and done >= 100 * (failed // 15), out.stdout
