"""The HTTP front refuses what two HTTP/1 parties could read differently, and
never writes anything but one well-formed request line to a sandbox.

- h2o patch 0001: HEAD responses over HTTP/1.1 are clean under UBSan.
- h2o patches 0010/0020 (RFC 9112 framing): differing or repeated
  Content-Length, Content-Length with Transfer-Encoding, any
  Transfer-Encoding but exactly "chunked", obs-fold, several Host fields,
  bare LF line endings: 400, the connection closed, nothing after the bad head
  read as a request, the app never reached, and another client on another
  connection served all along.
- The gateway (request_line.c, pipeline.c, proxy.c): an absolute-form target
  is forwarded in origin-form, CONNECT gets 405 with Allow, OPTIONS * is
  forwarded as such, a method that is not a token never reaches the app.

Raw sockets (plain trusted listener and TLS) and python3-h2; the app is an
in-process recording server (browser_helpers.RecordingApp), so "the app never
got it" is read from what it recorded.
"""

import http.client
import json
import os
import re
import socket
import ssl
import threading
import time

import pytest

import browser_helpers as bh
import gwtest

# Generous bounds (x10 or more of what a loaded 2-core machine needs): the
# point is "served at all while under attack", not a latency figure.
STEADY_TIMEOUT_S = 30
IO_TIMEOUT_S = 15


def _app_handler(app, req):
    return 200, [("Content-Type", "text/plain")], b"app:" + req.path.encode("latin-1")


class SteadyClient:
    """A well-behaved client on its own keep-alive connection to the plain
    listener, asking GET /steady in a loop; counts 200s and anything else."""

    def __init__(self, port, host):
        self.port, self.host = port, host
        self.ok = 0
        self.bad = []
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        conn = None
        while not self.stop_ev.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=IO_TIMEOUT_S)
                conn.request("GET", "/steady", headers={"Host": self.host})
                r = conn.getresponse()
                r.read()
                with self.lock:
                    if r.status == 200:
                        self.ok += 1
                    else:
                        self.bad.append(r.status)
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.bad.append(repr(e))
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(0.01)
        if conn is not None:
            conn.close()

    def count(self):
        with self.lock:
            return self.ok

    def served_after(self, before, n=3):
        """Waits until n more requests were answered 200 (generous bound)."""
        gwtest.wait_for(lambda: self.count() >= before + n, STEADY_TIMEOUT_S,
                        what="%d more 200s for the concurrent client (had %d, errors %r)" % (n, before, self.bad[-3:]))


class Front:
    pass


@pytest.fixture(scope="module")
def front(workdir, certs, redis):
    """A gateway whose plain listener is trusted (serves instead of
    redirecting), a recording app as a public port of one sandbox, and a
    steady client hammering it on another connection for the whole module."""
    f = Front()
    f.app = bh.RecordingApp(_app_handler).start()
    f.gw = gwtest.Gateway(os.path.join(workdir, "h1-framing"), certs, redis.port, name="gw-h1")
    cfg = f.gw.config()
    cfg["listen"][1]["trusted"] = True
    f.gw.overrides = {"listen": cfg["listen"]}
    f.gw.start()
    f.sid = gwtest.new_sandbox_id("hf")
    f.token = gwtest.register_sandbox(redis, f.sid, ports={f.app.port: "public", f.app.port + 1: "private"})
    f.host = f.gw.host(f.app.port, f.sid)
    f.private_host = f.gw.host(f.app.port + 1, f.sid)
    f.ca = certs["ca"]
    f.steady = SteadyClient(f.gw.plain_port, f.host)
    f.steady.thread.start()
    f.steady.served_after(0, 1)
    yield f
    f.steady.stop_ev.set()
    f.steady.thread.join(timeout=IO_TIMEOUT_S + 5)
    rc = f.gw.stop()
    f.app.stop()
    reports = f.gw.collect_sanitizer_reports()
    if reports:
        pytest.fail("sanitizer reports from the gateway:\n" + "\n\n".join(reports), pytrace=False)
    assert rc == 0, "the gateway exited with %s on SIGTERM" % rc
    assert not f.steady.bad, "the concurrent client got errors: %r" % f.steady.bad[:10]


@pytest.fixture(autouse=True)
def front_guard(request):
    """After each test of this module: the gateway is alive and logged no
    sanitizer report (that is what makes the HEAD test fail on an unpatched
    h2o built with UBSan)."""
    yield
    if "front" not in request.fixturenames:
        return
    f = request.getfixturevalue("front")
    assert f.gw.alive(), "the gateway died:\n%s" % gwtest.tail(f.gw.log)
    reports = f.gw.collect_sanitizer_reports()
    new = [r for r in reports if r not in getattr(f.gw, "_reported", [])]
    if new:
        f.gw._reported = list(reports)
        pytest.fail("sanitizer report during this test:\n" + "\n\n".join(new), pytrace=False)


# --- raw connections ----------------------------------------------------------------


def connect(f, tls):
    raw = socket.create_connection(("127.0.0.1", f.gw.tls_port if tls else f.gw.plain_port), timeout=IO_TIMEOUT_S)
    if not tls:
        return raw
    ctx = ssl.create_default_context(cafile=f.ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(raw, server_hostname=f.host)


def send_until_close(sock, data):
    """Sends data in one write and reads until the peer closes. Returns
    (bytes, closed): closed is False if the connection was still open after
    IO_TIMEOUT_S."""
    sock.sendall(data)
    buf = b""
    deadline = time.monotonic() + IO_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                return buf, False
            if not chunk:
                return buf, True
            buf += chunk
        return buf, False
    finally:
        sock.close()


def responses(data, heads=0):
    """Splits what arrived on a connection into [(status, head, body)], by
    Content-Length (every answer here has one; the first `heads` answer HEAD
    requests and have no body); a rest that is not a complete response is
    returned as status 0."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ", head)
        cl = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
        n = 0 if len(out) < heads else int(cl.group(1)) if cl else -1
        if not sep or not m or n < 0 or len(rest) < n:
            out.append((0, data, b""))
            break
        out.append((int(m.group(1)), head, rest[:n]))
        data = rest[n:]
    return out


def statuses(data, heads=0):
    return [r[0] for r in responses(data, heads)]


def app_paths(f, marker):
    return [r["path"] for r in f.app.snapshot() if marker in r["path"]]


def one_request(f, raw, tls=True, head=False):
    """A raw request on a fresh connection that asks to close: (status, head, body)."""
    sock = connect(f, tls)
    data, closed = send_until_close(sock, raw)
    assert closed, "the gateway kept the connection open: %r" % data[:300]
    rs = responses(data, 1 if head else 0)
    assert len(rs) == 1, "want one answer: %r" % data[:500]
    return rs[0]


# --- 0001: HEAD over HTTP/1.1 -----------------------------------------------------


def test_head_over_http1_is_clean(front):
    """h2o 2.2.5 passed NULL to memcpy for every bodiless final send (HEAD):
    UBSan reports it, and front_guard fails the test. Proxied and
    gateway-answered HEADs both."""
    f = front
    for host, want in ((f.host, 200), (f.private_host, 401), ("unknown.example", 404)):
        for tls in (False, True):
            raw = ("HEAD /head-%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (want, host)).encode()
            status, head, body = one_request(f, raw, tls, head=True)
            assert status == want, (host, tls, head)
            assert body == b"", body[:100]
    # keep-alive: several HEADs on one connection, then one GET
    sock = connect(f, True)
    reqs = b"".join(b"HEAD /head-ka HTTP/1.1\r\nHost: %s\r\n\r\n" % f.host.encode() for _ in range(3))
    reqs += b"GET /head-ka HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % f.host.encode()
    data, closed = send_until_close(sock, reqs)
    assert closed and statuses(data, heads=3) == [200, 200, 200, 200], data[:600]
    assert data.endswith(b"app:/head-ka")


# --- 0010 / 0020: framing -----------------------------------------------------------

# Each case: the bad head (with a marker path), then what a desynchronised
# reader would take for a second request. {h} is the sandbox host, {m} the case name.
SMUGGLED = "GET /smuggled-{m} HTTP/1.1\r\nHost: {h}\r\n\r\n"
CASES = {
    "cl_differ": "POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\n" + SMUGGLED,
    "cl_identical": "POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc" + SMUGGLED,
    "cl_and_te": ("POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "0\r\n\r\n" + SMUGGLED),
    "te_and_cl": ("POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
                  "0\r\n\r\n" + SMUGGLED),
    "te_cow_then_chunked": ("POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: cow\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    "te_chunked_twice": ("POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED),
    "te_list": "POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "te_http10": "POST /bad-{m} HTTP/1.0\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "obs_fold": "GET /bad-{m} HTTP/1.1\r\nHost: {h}\r\nX-Folded: a\r\n b\r\n\r\n" + SMUGGLED,
    "obs_fold_tab": "GET /bad-{m} HTTP/1.1\r\nHost: {h}\r\nX-Lizard-Access-Token: abc\r\n\tdef\r\n\r\n" + SMUGGLED,
    "two_hosts": "GET /bad-{m} HTTP/1.1\r\nHost: 1-other.lizard.test\r\nHost: {h}\r\n\r\n" + SMUGGLED,
    "two_hosts_same": "GET /bad-{m} HTTP/1.1\r\nHost: {h}\r\nHost: {h}\r\n\r\n" + SMUGGLED,
    "bare_lf_everywhere": "GET /bad-{m} HTTP/1.1\nHost: {h}\n\n" + SMUGGLED,
    "bare_lf_request_line": "GET /bad-{m} HTTP/1.1\nHost: {h}\r\n\r\n" + SMUGGLED,
    "bare_lf_in_headers": ("POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nX-A: b\nContent-Length: 41\r\n\r\n" + SMUGGLED),
    "bare_lf_end_of_head": "GET /bad-{m} HTTP/1.1\r\nHost: {h}\r\n\n" + SMUGGLED,
    "empty_method": " /bad-{m} HTTP/1.1\r\nHost: {h}\r\n\r\n" + SMUGGLED,
}


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_framing_is_refused(front, case, tls):
    f = front
    m = "%s-%s" % (case, "tls" if tls else "plain")
    raw = CASES[case].format(h=f.host, m=m).encode()
    before = f.steady.count()

    data, closed = send_until_close(connect(f, tls), raw)

    assert statuses(data) == [400], "want exactly one answer, a 400: %r" % data[:500]
    assert closed, "the connection stayed open after the 400"
    assert b"connection: close" in data.lower()
    assert app_paths(f, m) == [], "the app got %r" % app_paths(f, m)
    f.steady.served_after(before)


def test_well_formed_framing_still_works(front):
    """The same shapes, well-formed: one Content-Length, chunked alone, one
    Host, CRLF throughout, pipelined on one connection."""
    f = front
    h = f.host.encode()
    reqs = (b"POST /ok-cl HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\n\r\nabc" % h
            + b"POST /ok-te HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" % h
            + b"\r\nGET /ok-last HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % h)
    data, closed = send_until_close(connect(f, True), reqs)
    assert closed and statuses(data) == [200, 200, 200], data[:800]
    got = {r["path"]: r for r in f.app.snapshot() if r["path"].startswith("/ok-")}
    assert set(got) == {"/ok-cl", "/ok-te", "/ok-last"}, got.keys()
    assert got["/ok-cl"]["body"] == b"abc" and got["/ok-te"]["body"] == b"abc"


# --- 0030: strict chunk sizes --------------------------------------------------------


def _padded_request(m, h, size=None):
    """A whole request of exactly `size` bytes (an X-Pad header fills it): the
    data of a chunk a front proxy reads as `size` bytes long."""
    req = "GET /smuggled-{m} HTTP/1.1\r\nHost: {h}\r\nX-Pad: \r\n\r\n".format(m=m, h=h)
    if size is None:
        return req
    assert len(req) <= size
    return req.replace("X-Pad: ", "X-Pad: " + "p" * (size - len(req)))


CHUNK_HEAD = "POST /bad-{m} HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNK_CASES = {
    # HAProxy and nginx read "0x80" as an error; 2.2.5 read it as the last
    # chunk ("0" with the extension "x80"), so the 128 bytes of data that a
    # front reading the size as 0x80 forwards became a request of their own
    "hex_prefix": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "0x80\r\n" + "\r\n" + _padded_request(m, h, 126) + "\r\n0\r\n\r\n",
    "trailing_garbage": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5zz\r\nhello\r\n0\r\n\r\n",
    "size_not_below_2_63": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "8000000000000000\r\nhello\r\n0\r\n\r\n",
    "seventeen_digits": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "00000000000000005\r\nhello\r\n0\r\n\r\n",
    "space_then_crlf": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5 \r\nhello\r\n0\r\n\r\n",
    "bare_lf_after_size": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5\nhello\r\n0\r\n\r\n",
    "bare_lf_after_data": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5\r\nhello\n0\r\n\r\n",
    "cr_cr_lf_after_data": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5\r\nhello\r\r\n0\r\n\r\n",
    "control_in_extension": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "5;a\x01b\r\nhello\r\n0\r\n\r\n",
    # a bare LF ended the trailer section: what follows was a second request
    "bare_lf_ends_trailers": lambda m, h: CHUNK_HEAD.format(m=m, h=h) + "0\r\n\n" + _padded_request(m, h),
}


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("case", sorted(CHUNK_CASES))
def test_lenient_chunk_sizes_are_refused(front, case, tls):
    """h2o patch 0030: a chunked request body whose framing RFC 9112 7.1 rules
    out gets 400 and the connection is closed; neither the request nor what
    a front proxy could have read as a second request reaches the app."""
    f = front
    m = "chunk-%s-%s" % (case, "tls" if tls else "plain")
    raw = CHUNK_CASES[case](m, f.host).encode()
    before = f.steady.count()

    data, closed = send_until_close(connect(f, tls), raw)

    assert statuses(data) == [400], "want exactly one answer, a 400: %r" % data[:500]
    assert closed, "the connection stayed open after the 400"
    assert app_paths(f, m) == [], "the app got %r" % app_paths(f, m)
    f.steady.served_after(before)


def test_well_formed_chunks_still_pass(front):
    """What RFC 9112 allows still reaches the app whole: upper- and lowercase
    hex, leading zeros, extensions (with BWS before ";"), trailer fields."""
    f = front
    h = f.host.encode()
    body = (b"5;name=value\r\nhello\r\n00A ; ext\r\n0123456789\r\nb\r\n-abcdefghij\r\n"
            b"0\r\nX-Trailer: 1\r\n\r\n")
    reqs = (b"POST /chunk-ok HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % h + body
            + b"GET /chunk-ok-last HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % h)
    data, closed = send_until_close(connect(f, True), reqs)
    assert closed and statuses(data) == [200, 200], data[:800]
    got = {r["path"]: r for r in f.app.snapshot() if r["path"].startswith("/chunk-ok")}
    assert got["/chunk-ok"]["body"] == b"hello0123456789-abcdefghij", got["/chunk-ok"]
    assert "/chunk-ok-last" in got


# --- the gateway: request-target forms, CONNECT, methods ------------------------------


def test_absolute_form_is_forwarded_in_origin_form(front):
    f = front
    for tls in (False, True):
        for target, want in (("http://%s/abs-1?x=1" % f.host, "/abs-1?x=1"),
                             ("HTTPS://%s:%d/abs-2" % (f.host.upper(), f.gw.tls_port), "/abs-2"),
                             ("http://%s?abs-3=1" % f.host, "/?abs-3=1")):
            raw = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, f.host)).encode()
            status, head, body = one_request(f, raw, tls)
            assert status == 200, (target, head)
            assert body == b"app:" + want.encode(), body
    paths = [r["path"] for r in f.app.snapshot() if "abs-" in r["path"]]
    assert paths and all(p.startswith("/") for p in paths), paths


def contract_code(body):
    """The contract's error code in a JSON error body, or None when the body
    is not one (the plain-text refusals of a request line)."""
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def test_absolute_form_naming_another_host_is_refused(front):
    f = front
    other = gwtest.new_sandbox_id("ho")
    for target in ("http://evil.example/abs-evil", "http://1-%s.lizard.test/abs-other" % other,
                   "http://u:p@%s/abs-userinfo" % f.host, "ftp://%s/abs-ftp" % f.host):
        raw = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, f.host)).encode()
        status, head, body = one_request(f, raw)
        assert status == 400, (target, head)
        # another host: the contract's bad_host; not http(s) or with userinfo: a
        # plain HTTP-level 400 (the contract has no code for a malformed target)
        assert contract_code(body) == "bad_host" or (contract_code(body) is None and b"not a path" in body), body
    assert app_paths(f, "abs-evil") == [] and app_paths(f, "abs-other") == []
    assert app_paths(f, "abs-userinfo") == [] and app_paths(f, "abs-ftp") == []


def test_target_that_is_not_origin_form_is_refused(front):
    f = front
    for target in ("relative-no-slash", "*"):
        raw = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, f.host)).encode()
        status, head, body = one_request(f, raw)
        assert status == 400, (target, head)
        assert contract_code(body) is None and b"The request target is not a path" in body, body
    assert app_paths(f, "relative-no-slash") == []


def test_connect_is_refused_with_405(front):
    f = front
    n_before = len(f.app.snapshot())
    for tls in (False, True):
        for target in ("evil.example:443", "%s:443" % f.host, "127.0.0.1:22"):
            raw = ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, f.host)).encode()
            sock = connect(f, tls)
            sock.sendall(raw)
            head, sock2 = b"", sock
            deadline = time.monotonic() + IO_TIMEOUT_S
            while b"}}" not in head and time.monotonic() < deadline:
                chunk = sock2.recv(65536)
                if not chunk:
                    break
                head += chunk
            sock2.close()
            assert head.startswith(b"HTTP/1.1 405 "), head[:300]
            hl = head.lower()
            assert b"\r\nallow: get, head, post, put, patch, delete, options\r\n" in hl, head[:500]
            assert b"CONNECT is not forwarded" in head and b'"code"' not in head, head[:500]
    assert [r for r in f.app.snapshot()[n_before:] if r["method"] == "CONNECT"] == []


def h2_exchange(f, headers, body=None):
    """One HTTP/2 stream with exactly these header fields (no validation by
    the client library). Returns (status, headers, body) or ("reset", code)."""
    import h2.config
    import h2.connection
    import h2.events

    ctx = ssl.create_default_context(cafile=f.ca)
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", f.gw.tls_port), timeout=IO_TIMEOUT_S)
    sock = ctx.wrap_socket(raw, server_hostname=f.host)
    try:
        assert sock.selected_alpn_protocol() == "h2"
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8", validate_outbound_headers=False,
            normalize_outbound_headers=False, validate_inbound_headers=False))
        conn.initiate_connection()
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            conn.send_data(sid, body, end_stream=True)
        sock.sendall(conn.data_to_send())
        status, rh, rb = None, [], b""
        deadline = time.monotonic() + IO_TIMEOUT_S
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return ("closed", None)
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    for k, v in ev.headers:
                        if k == ":status":
                            status = int(v)
                        else:
                            rh.append((k, v))
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    rb += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    return status, rh, rb
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    return ("reset", ev.error_code)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    return ("goaway", ev.error_code)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
        raise TimeoutError("no HTTP/2 answer")
    finally:
        sock.close()


def test_h2_connect_is_refused(front):
    f = front
    authority = "%s:%d" % (f.host, f.gw.tls_port)
    n_before = len(f.app.snapshot())
    # with :scheme and :path (h2o 2.2.5 takes it as a request): the gateway's 405
    status, rh, body = h2_exchange(f, [(":method", "CONNECT"), (":scheme", "https"), (":authority", authority),
                                       (":path", "/h2-connect")])
    assert status == 405, (status, rh, body)
    assert dict(rh).get("allow") == "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", rh
    assert b"CONNECT is not forwarded" in body and contract_code(body) is None, body
    # a real CONNECT (RFC 9113 8.5: no :scheme or :path) never becomes a request: h2o resets the stream
    res = h2_exchange(f, [(":method", "CONNECT"), (":authority", "evil.example:443")])
    assert res[0] in ("reset", 405), res
    assert [r for r in f.app.snapshot()[n_before:] if r["method"] == "CONNECT"] == []


def test_h2_method_that_is_not_a_token_never_reaches_the_app(front):
    f = front
    authority = "%s:%d" % (f.host, f.gw.tls_port)
    for method in ("GET /inj-m HTTP/1.1\tX", "GET /inj-m HTTP/1.1 X", "G(E)T"):
        res = h2_exchange(f, [(":method", method), (":scheme", "https"), (":authority", authority),
                              (":path", "/inj-path")])
        # the gateway answers a plain 400; an h2o that refuses it first resets the stream
        if res[0] != "reset":
            status, rh, body = res
            assert status == 400, res
            assert b"The method is not a token" in body and contract_code(body) is None, body
    assert app_paths(f, "inj-") == []
    assert [r for r in f.app.snapshot() if "inj-m" in r["method"]] == []


def test_options_asterisk(front):
    """OPTIONS * asks about the server: it goes to the app as such (after the
    same credential rules as any request); * with another method is 400."""
    f = front
    for tls in (False, True):
        n_before = len(f.app.snapshot())
        raw = ("OPTIONS * HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % f.host).encode()
        status, head, body = one_request(f, raw, tls)
        assert status == 200 and body == b"app:*", (head, body)
        new = f.app.snapshot()[n_before:]
        assert [(r["method"], r["path"]) for r in new if r["path"] == "*"] == [("OPTIONS", "*")], new
        # private port without a credential: 401, nothing forwarded
        raw = ("OPTIONS * HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % f.private_host).encode()
        status, head, body = one_request(f, raw, tls)
        assert status == 401, head
    authority = "%s:%d" % (f.host, f.gw.tls_port)
    status, rh, body = h2_exchange(f, [(":method", "OPTIONS"), (":scheme", "https"), (":authority", authority),
                                       (":path", "*")])
    assert status == 200 and body == b"app:*", (status, body)


def test_options_asterisk_on_the_redirecting_listener(gw_factory, redis):
    """The plain listener that is not trusted redirects to https: OPTIONS *
    goes to the https root, not to a URL glued to '*'."""
    g = gw_factory({}, name="gw-h1-redirect")
    host = g.host(3000, gwtest.new_sandbox_id("hr"))
    raw = ("OPTIONS * HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode()
    sock = socket.create_connection(("127.0.0.1", g.plain_port), timeout=IO_TIMEOUT_S)
    data, closed = send_until_close(sock, raw)
    assert closed and data.startswith(b"HTTP/1.1 308 "), data[:300]
    loc = [ln for ln in data.split(b"\r\n") if ln.lower().startswith(b"location:")]
    assert loc and loc[0].split(b":", 1)[1].strip() == ("https://%s:%d/" % (host, g.tls_port)).encode(), loc


def test_h2_path_that_is_not_origin_form_never_reaches_the_app(front):
    """An HTTP/2 :path is origin-form or OPTIONS' "*" (RFC 9113 8.3.1): an
    absolute URI, a relative path or "*" with GET is refused (by the gateway
    with a plain 400, or earlier by h2o with a stream reset)."""
    f = front
    authority = "%s:%d" % (f.host, f.gw.tls_port)
    for path in ("http://%s/h2-abs" % f.host, "h2-relative", "*"):
        res = h2_exchange(f, [(":method", "GET"), (":scheme", "https"), (":authority", authority), (":path", path)])
        if res[0] != "reset":
            status, rh, body = res
            assert status == 400 and b"not a path" in body and contract_code(body) is None, (path, res)
    assert app_paths(f, "h2-abs") == [] and app_paths(f, "h2-relative") == []


class RawApp:
    """A sandbox app that answers every request with fixed bytes, then closes."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(IO_TIMEOUT_S)
                buf = b""
                try:
                    while b"\r\n\r\n" not in buf:
                        chunk = c.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    c.sendall(self.answer)
                except OSError:
                    pass

    def stop(self):
        self.sock.close()


BAD_ANSWERS = {
    # picohttpparser gives an obs-fold line of a response no name: the
    # gateway passed it to the client as a header with an empty name (RFC
    # 9112 5.2 lets a gateway answer 502 instead)
    "folded_header": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n"
                      b"Connection: close\r\n\r\nok", "folded"),
    "not_http": (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not HTTP/1.x"),
    "bad_status_code": (b"HTTP/1.1 2x0 OK\r\nX-From-App: 1\r\nContent-Length: 2\r\n\r\nok", "not HTTP/1.x"),
    "status_out_of_range": (b"HTTP/1.1 600 Odd\r\nX-From-App: 1\r\nContent-Length: 0\r\n\r\n", "not HTTP/1.x"),
    "two_lengths": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
                    "two different Content-Length"),
    "length_not_a_number": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nContent-Length: 2x\r\n\r\nok", "not a number"),
    "other_coding": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nTransfer-Encoding: gzip\r\n\r\nok", "other than chunked"),
    "unasked_101": (b"HTTP/1.1 101 Switching Protocols\r\nX-From-App: 1\r\nUpgrade: websocket\r\n\r\n", "101"),
    "closed_in_head": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nContent-Le", "middle of its response head"),
    # h2o patch 0030 on the sandbox side: 2.2.5 read "0x80" as the last
    # chunk (an empty 200), "5zz" as 5
    "chunk_hex_prefix": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nTransfer-Encoding: chunked\r\n\r\n0x80\r\n\r\n"
                         + b"x" * 126 + b"\r\n0\r\n\r\n", "chunked body is malformed"),
    "chunk_trailing_garbage": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               b"5zz\r\nhello\r\n0\r\n\r\n", "chunked body is malformed"),
    "chunk_bare_lf": (b"HTTP/1.1 200 OK\r\nX-From-App: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"5\nhello\r\n0\r\n\r\n", "chunked body is malformed"),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_malformed_response_is_bad_upstream_response(front, redis, case):
    """A sandbox answer that is not valid HTTP/1.1 is the contract's 502
    bad_upstream_response (it was port_not_open, "nothing is listening", or
    for the chunked cases a 200), with a message that says what was wrong,
    and none of the app's headers: its head was never trusted."""
    f = front
    answer, says = BAD_ANSWERS[case]
    app = RawApp(answer)
    try:
        sid = gwtest.new_sandbox_id("br")
        gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
        host = f.gw.host(app.port, sid)
        for tls in (False, True):
            raw = ("GET /bad-answer HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode()
            status, head, body = one_request(f, raw, tls)
            assert status == 502, head
            err = json.loads(body)["error"]
            assert err["code"] == "bad_upstream_response", err
            assert "not valid HTTP/1.1" in err["message"] and says in err["message"], err["message"]
            assert (err["sandboxId"], err["port"]) == (sid, app.port), err
            assert b"x-from-app" not in head.lower(), head
    finally:
        app.stop()
    # an app that closes without a byte is still port_not_open (nothing answered)
    app = RawApp(b"")
    try:
        sid = gwtest.new_sandbox_id("bc")
        gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
        raw = ("GET /no-answer HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % f.gw.host(app.port, sid)).encode()
        status, head, body = one_request(f, raw, True)
        assert (status, json.loads(body)["error"]["code"]) == (502, "port_not_open"), (head, body)
    finally:
        app.stop()


def test_chunked_response_broken_after_it_started_is_cut(front, redis):
    """Once the response has started (here: a first chunk in its own read),
    broken chunked framing cuts it: the client sees a truncated body (no
    last chunk, the connection closed), never a complete one."""
    f = front

    def serve(c):
        c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        time.sleep(2.0)  # long enough that even a loaded gateway reads the first chunk on its own
        c.sendall(b"0x80\r\n\r\n")

    app = ScriptedApp(serve)
    try:
        sid = gwtest.new_sandbox_id("bk")
        gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
        raw = ("GET /cut HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % f.gw.host(app.port, sid)).encode()
        data, closed = send_until_close(connect(f, True), raw)
        assert closed and data.startswith(b"HTTP/1.1 200 "), data[:300]
        head, _, rest = data.partition(b"\r\n\r\n")
        assert rest.startswith(b"5\r\nhello\r\n") and not rest.endswith(b"0\r\n\r\n"), rest
    finally:
        app.stop()


class ScriptedApp(RawApp):
    """A sandbox app that reads one request head, then runs serve(conn)."""

    def __init__(self, serve):
        self.serve = serve
        super().__init__(b"")

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(IO_TIMEOUT_S)
                buf = b""
                try:
                    while b"\r\n\r\n" not in buf:
                        chunk = c.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    self.serve(c)
                except OSError:
                    pass


# --- client headers the sandbox never sees ------------------------------------------


def test_underscore_headers_and_real_ip_are_not_forwarded(front):
    """nginx's defaults (underscores_in_headers off; X-Real-IP is a proxy's,
    not a client's): a client header with an underscore in its name
    (Transfer_Encoding, X_Lizard_Access_Token: servers that map "_" to "-",
    as CGI/WSGI/PHP do, would read them as the real ones) and a client-sent
    X-Real-IP never reach the app, over HTTP/1.1 (plain and TLS) and HTTP/2;
    the request itself is served, and other headers pass."""
    f = front
    sent = [("Transfer_Encoding", "chunked"), ("X_Lizard_Access_Token", "not-for-the-app"),
            ("content_length", "99"), ("X-Real-IP", "198.51.100.7"), ("X-Kept", "yes")]
    for tls in (False, True):
        m = "/underscore-h1-%s" % ("tls" if tls else "plain")
        lines = "".join("%s: %s\r\n" % kv for kv in sent)
        raw = ("GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (m, f.host, lines)).encode()
        status, head, body = one_request(f, raw, tls)
        assert (status, body) == (200, b"app:" + m.encode()), (head, body)
    status, rh, body = h2_exchange(f, [(":method", "GET"), (":scheme", "https"), (":authority", f.host),
                                       (":path", "/underscore-h2")] + [(k.lower(), v) for k, v in sent])
    assert (status, body) == (200, b"app:/underscore-h2"), (status, rh, body)
    got = [r for r in f.app.snapshot() if r["path"].startswith("/underscore-")]
    assert sorted(r["path"] for r in got) == ["/underscore-h1-plain", "/underscore-h1-tls", "/underscore-h2"], got
    for r in got:
        names = [k for k, _ in r["headers"]]
        assert not [k for k in names if "_" in k], (r["path"], names)
        assert "x-real-ip" not in names and "198.51.100.7" not in repr(r["headers"]), (r["path"], r["headers"])
        assert ("x-kept", "yes") in r["headers"], (r["path"], r["headers"])


# --- 0210: the response head without sprintf ----------------------------------------

DATE_RE = rb"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT"


def test_response_head_bytes(front, redis):
    """libh2o patch 0210 writes the status line, Date, Connection,
    Content-Length and Server itself instead of with sprintf: the bytes a
    client reads are the ones sprintf wrote (status and reason as the app
    sent them, a length of 11 digits, no Content-Length on a chunked answer,
    a gateway error's head), over TLS and plain."""
    f = front
    cases = [
        (b"HTTP/1.1 203 Fine By Me\r\nContent-Length: 5\r\nX-K: v\r\n\r\nhello", "GET",
         rb"HTTP/1\.1 203 Fine By Me\r\nDate: " + DATE_RE +
         rb"\r\nConnection: close\r\nContent-Length: 5\r\nServer: lizard-gateway\r\n", b"hello"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 98765432101\r\n\r\n", "HEAD",
         rb"HTTP/1\.1 200 OK\r\nDate: " + DATE_RE +
         rb"\r\nConnection: close\r\nContent-Length: 98765432101\r\nServer: lizard-gateway\r\n", b""),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "GET",
         rb"HTTP/1\.1 200 OK\r\nDate: " + DATE_RE + rb"\r\nConnection: close\r\nServer: lizard-gateway\r\n", None),
    ]
    for answer, method, want, body in cases:
        app = RawApp(answer)
        try:
            sid = gwtest.new_sandbox_id("rh")
            gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
            host = f.gw.host(app.port, sid)
            for tls in (False, True):
                sock = connect(f, tls)
                raw = ("%s /head HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (method, host)).encode()
                data, closed = send_until_close(sock, raw)
                assert closed, data[:300]
                head, _, rest = data.partition(b"\r\n\r\n")
                assert re.match(want, head + b"\r\n"), (method, head)
                if body is not None:
                    assert rest == body, rest
                else:
                    assert b"\r\ncontent-length:" not in head.lower() and rest.endswith(b"0\r\n\r\n"), data
        finally:
            app.stop()
    # a gateway error: its own status line and JSON length
    for tls in (False, True):
        sock = connect(f, tls)
        host = f.gw.host(f.app.port, gwtest.new_sandbox_id("nx"))
        data, closed = send_until_close(sock, ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
        head, _, rest = data.partition(b"\r\n\r\n")
        m = re.match(rb"HTTP/1\.1 404 Not Found\r\nDate: " + DATE_RE +
                     rb"\r\nConnection: close\r\nContent-Length: (\d+)\r\nServer: lizard-gateway\r\n", head + b"\r\n")
        assert m, head
        assert int(m.group(1)) == len(rest) and json.loads(rest)["error"]["code"] == "sandbox_not_found", data
