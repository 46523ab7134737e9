"""The proxy core (issue 4), end to end with real upstreams: responses that
stream (server-sent events, chunked bodies) over HTTP/1.1 and HTTP/2,
back-pressure against a slow client (memory stays flat, no temp files),
WebSocket tunnels over wss (python3-websockets on both sides), pooled
keep-alive upstream connections and the retry of a dead one, the Host modes,
upstream errors (502 port_not_open, 504 upstream_timeout), hop-by-hop headers,
and 413 body_too_large. Each test states one promise of CONTRACT.md
(Forwarding, Errors) and fails when the gateway breaks it.

Upstreams: upstream.py (the shared HTTP/1.1 one), ws_upstream.py (WebSocket,
python3-websockets) and RawUpstream below (a socket server that answers what
each test scripts, for the cases no well-behaved server produces)."""

import asyncio
import email.utils
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request

import pytest

import browser_helpers as bh
import gwtest

H1_H2 = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
MIB = 1024 * 1024


# --- helpers -------------------------------------------------------------------


def assert_error(resp_status, headers, body, status, code, sandbox_id=None, port=None):
    """A gateway error as the contract says: status, JSON with the code, no-store."""
    assert resp_status == status, (resp_status, headers, body[:300])
    assert "no-store" in headers.get("cache-control", ""), headers
    assert headers.get("content-type", "").startswith("application/json"), headers
    err = json.loads(body)["error"]
    assert err["code"] == code, err
    assert err.get("message"), err
    if sandbox_id is not None:
        assert err.get("sandboxId") == sandbox_id, err
    if port is not None:
        assert err.get("port") == port, err
    return err


def assert_curl_error(r, status, code, sandbox_id=None, port=None):
    return assert_error(r.status, r.headers, r.body, status, code, sandbox_id, port)


def tls_context(ca, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(list(alpn))
    return ctx


def tls_connect(gw, host, ca, alpn=("http/1.1",), timeout=10):
    raw = socket.create_connection(("127.0.0.1", gw.tls_port), timeout=timeout)
    return tls_context(ca, alpn).wrap_socket(raw, server_hostname=host)


class GwConnection(http.client.HTTPConnection):
    """One keep-alive HTTPS connection to the gateway (127.0.0.1, SNI and
    Host the preview host), for many requests on one client connection."""

    def __init__(self, gw, host, ca):
        super().__init__(host, gw.tls_port, timeout=15)
        self._ca = ca

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.sock = tls_context(self._ca).wrap_socket(raw, server_hostname=self.host)

    def fetch(self, method, path, headers=None, body=None):
        self.request(method, path, body=body, headers=headers or {})
        r = self.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data


class H2Client:
    """A raw HTTP/2 client over TLS (python3-h2): sequential requests on one
    connection, every DATA frame timestamped on arrival."""

    def __init__(self, gw, host, ca, timeout=15):
        import h2.config
        import h2.connection

        self.host = host
        self.authority = "%s:%d" % (host, gw.tls_port)
        self.timeout = timeout
        self.sock = tls_connect(gw, host, ca, alpn=("h2",), timeout=timeout)
        assert self.sock.selected_alpn_protocol() == "h2", "the gateway did not negotiate h2"
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True,
                                                                                header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()

    def request(self, method, path, headers=(), body=None, on_data=None):
        """Returns (status, {name: value}, [(arrival_wall_time, bytes), ...]).
        Raises StreamReset when the gateway resets the stream."""
        import h2.events

        sid = self.conn.get_next_available_stream_id()
        hl = [(":method", method), (":scheme", "https"), (":authority", self.authority), (":path", path)]
        hl += [(k.lower(), v) for k, v in headers]
        if body is not None:
            hl.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, hl, end_stream=body is None)
        self.sock.sendall(self.conn.data_to_send())
        pending = memoryview(body) if body is not None else None
        status, resp_headers, chunks = None, {}, []
        deadline = time.monotonic() + self.timeout
        while True:
            # send what the flow-control window allows of the request body
            while pending is not None and len(pending):
                n = min(len(pending), self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
                if n <= 0:
                    break
                self.conn.send_data(sid, pending[:n].tobytes(), end_stream=n == len(pending))
                pending = pending[n:]
                self.sock.sendall(self.conn.data_to_send())
            if time.monotonic() > deadline:
                raise TimeoutError("no complete HTTP/2 answer within %ss" % self.timeout)
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            now = time.time()
            if not data:
                raise ConnectionError("the gateway closed the connection")
            for ev in self.conn.receive_data(data):
                if getattr(ev, "stream_id", None) != sid:
                    continue
                if isinstance(ev, h2.events.ResponseReceived):
                    for k, v in ev.headers:
                        if k == ":status":
                            status = int(v)
                        else:
                            resp_headers[k] = v if k not in resp_headers else resp_headers[k] + ", " + v
                elif isinstance(ev, h2.events.DataReceived):
                    chunks.append((now, ev.data))
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                    if on_data is not None:
                        on_data(now, ev.data)
                elif isinstance(ev, h2.events.StreamEnded):
                    self.sock.sendall(self.conn.data_to_send())
                    return status, resp_headers, chunks
                elif isinstance(ev, h2.events.StreamReset):
                    raise StreamReset(ev.error_code)
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)


class StreamReset(Exception):
    def __init__(self, error_code):
        super().__init__("the gateway reset the stream with %r" % (error_code,))
        self.error_code = error_code


def curl_stream(curl_runner, gw, host, path, http2, headers=None, timeout=15):
    """Runs curl --no-buffer and timestamps each piece of the decoded body as
    it reaches curl's stdout: [(arrival_wall_time, bytes), ...]."""
    args = ["curl", "-sS", "--no-buffer", "--max-time", str(timeout), "--cacert", curl_runner.ca, "--noproxy", "*",
            "--http2" if http2 else "--http1.1", "--resolve", "%s:%d:127.0.0.1" % (host, gw.tls_port)]
    for k, v in (headers or {}).items():
        args += ["-H", "%s: %s" % (k, v)]
    args.append("https://%s:%d%s" % (host, gw.tls_port, path))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks = []
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout + 5
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.5)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            chunks.append((time.time(), data))
        rc = proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert rc == 0, "curl exited %s: %s" % (rc, err.decode("utf-8", "replace"))
    return chunks


def arrivals(chunks, sep):
    """Splits the concatenated body at `sep`; returns [(arrival time of the
    piece's last byte, piece text)] for every complete piece."""
    out, buf = [], b""
    for t, data in chunks:
        buf += data
        while sep in buf:
            piece, buf = buf.split(sep, 1)
            out.append((t, piece.decode()))
    return out


def deleted_files(pid):
    """Files the process holds open or mapped that were unlinked (temp files)."""
    found = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.endswith("(deleted)"):
            found.add("fd " + target)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if line.rstrip().endswith("(deleted)"):
                found.add("map " + line.split(None, 5)[-1].strip())
    return found


def app_requests_since(upstream, before):
    """Requests upstream.py got since its counter read `before` (the /_stats
    call that reads it now is not counted)."""
    return upstream.stats()["requests"] - before - 1


# --- upstreams -------------------------------------------------------------------


class WsUpstream:
    """ws_upstream.py (python3-websockets) as a process."""

    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.log = os.path.join(workdir, "ws_upstream.log")
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([gwtest.PYTHON, os.path.join(gwtest.HERE, "ws_upstream.py"), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            gwtest.stop_process(self.proc)
            raise RuntimeError("ws_upstream did not start: %r %s" % (line, gwtest.tail(self.log)))
        self.port = int(line.split()[1])

    def stop(self):
        gwtest.stop_process(self.proc)
        self.proc.stdout.close()

    def info(self, conn_id):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open("http://127.0.0.1:%d/_info?id=%s" % (self.port, conn_id), timeout=5) as r:
            return json.loads(r.read())

    def wait_closed(self, conn_id, timeout=5):
        return gwtest.wait_for(lambda: (lambda i: i if not i["open"] else None)(self.info(conn_id)), timeout,
                               what="the upstream side of WebSocket %s to close" % conn_id)


class RawUpstream:
    """A TCP server on 127.0.0.1 that runs serve(sock, n) in a thread for the
    n-th accepted connection (n from 0): the test scripts the bytes."""

    def __init__(self, serve):
        self.serve = serve
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.connections = 0
        self.requests = []  # request heads (bytes), in arrival order
        self.lock = threading.Lock()
        self.threads = []
        self.running = True
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while self.running:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                n = self.connections
                self.connections += 1
            t = threading.Thread(target=self._run, args=(s, n), daemon=True)
            self.threads.append(t)
            t.start()

    def _run(self, s, n):
        try:
            self.serve(self, s, n)
        except OSError:
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass

    def read_request(self, s):
        """Reads one request head and its Content-Length body; returns the
        head (bytes) or None at EOF."""
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        with self.lock:
            self.requests.append(head)
        return head

    def stop(self):
        self.running = False
        self.lsock.close()


def reset(s):
    """Closes s with an RST (SO_LINGER 0), as a crashed app's kernel would."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


def head_headers(head):
    """[(lowercase name, value)] of a raw request head."""
    out = []
    for line in head.decode("iso-8859-1").split("\r\n")[1:]:
        k, _, v = line.partition(":")
        out.append((k.strip().lower(), v.strip()))
    return out


# --- fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ws_upstream(workdir):
    u = WsUpstream(os.path.join(workdir, "ws-upstream"))
    yield u
    u.stop()


@pytest.fixture
def pub(register_sandbox, upstream, gateway):
    """A public sandbox port on upstream.py: (sandbox id, preview host)."""
    sid = gwtest.new_sandbox_id("px")
    register_sandbox(sid, ports={upstream.port: "public"})
    return sid, gateway.host(upstream.port, sid)


@pytest.fixture
def raw_upstream():
    made = []

    def make(serve):
        u = RawUpstream(serve)
        made.append(u)
        return u

    yield make
    for u in made:
        u.stop()


# --- streaming: server-sent events and chunked bodies ------------------------------

SSE_EVENTS = 5
SSE_INTERVAL_MS = 200
# under one interval: a gateway that holds an event until the next one comes is 200 ms late; a loaded 2-core CI
# machine running four processes per event (app, gateway, curl, pytest) can be 50 ms late without batching anything
MAX_LATENCY_S = 0.150


def check_event_latency(events, count, interval_s, what):
    """events: [(arrival wall time, event text with the upstream's write time)]."""
    assert len(events) == count, "expected %d %s, got %d: %r" % (count, what, len(events), events)
    lat = []
    for arrived, sent_at in events:
        lat.append(arrived - sent_at)
    worst = max(lat)
    assert worst < MAX_LATENCY_S, "%s must reach the client as written: latencies (ms) %s" % (
        what, ["%.1f" % (x * 1000) for x in lat])
    # not batched: consecutive pieces arrive about one interval apart
    gaps = [b[0] - a[0] for a, b in zip(events, events[1:])]
    assert min(gaps) > interval_s / 2, "%s arrived batched: gaps (ms) %s" % (what, ["%.0f" % (g * 1000) for g in gaps])
    return lat


def timing_attempts(measure, attempts=3):
    """Runs a timing measurement up to `attempts` times and passes when one
    run meets the bound. On a loaded 2-core machine one event can be delayed
    by the scheduler; a gateway that batches or buffers fails every run."""
    for i in range(attempts):
        try:
            return measure()
        except AssertionError:
            if i == attempts - 1:
                raise


def sse_events(chunks):
    out = []
    for t, text in arrivals(chunks, b"\n\n"):
        data = [ln[6:] for ln in text.split("\n") if ln.startswith("data: ")]
        assert data, text
        out.append((t, json.loads(data[0])["t"]))
    return out


@H1_H2
def test_sse_events_reach_client_as_written(curl_runner, gateway, pub, http2):
    _, host = pub
    path = "/sse?n=%d&interval_ms=%d" % (SSE_EVENTS, SSE_INTERVAL_MS)

    def measure():
        chunks = curl_stream(curl_runner, gateway, host, path, http2)
        return check_event_latency(sse_events(chunks), SSE_EVENTS, SSE_INTERVAL_MS / 1000.0, "server-sent events")

    lat = timing_attempts(measure)
    print("SSE latency via curl %s (ms): %s" % ("h2" if http2 else "h1", ["%.2f" % (x * 1000) for x in lat]))


def test_sse_events_reach_raw_h2_client_as_written(gateway, pub, certs):
    """The same with a raw HTTP/2 client that timestamps each DATA frame."""
    _, host = pub

    def measure():
        c = H2Client(gateway, host, certs["ca"])
        try:
            status, headers, chunks = c.request("GET", "/sse?n=%d&interval_ms=%d" % (SSE_EVENTS, SSE_INTERVAL_MS),
                                                headers=[("accept", "text/event-stream")])
        finally:
            c.close()
        assert status == 200 and headers.get("content-type") == "text/event-stream", (status, headers)
        return check_event_latency(sse_events(chunks), SSE_EVENTS, SSE_INTERVAL_MS / 1000.0, "server-sent events")

    lat = timing_attempts(measure)
    print("SSE latency via raw h2 (ms): %s" % ["%.2f" % (x * 1000) for x in lat])


def test_sse_head_arrives_before_first_event(gateway, pub, certs):
    """An event stream shows its head at once (EventSource fires 'open'),
    long before the app writes its first event."""
    _, host = pub
    s = tls_connect(gateway, host, certs["ca"])
    try:
        # the upstream writes the head, then event 0 at once; ask for a long
        # interval and read the head before event 1 is due
        t0 = time.monotonic()
        s.sendall(("GET /sse?n=2&interval_ms=1500 HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            assert d, buf
            buf += d
        assert time.monotonic() - t0 < 1.0, "the head waited for the body"
        assert buf.startswith(b"HTTP/1.1 200"), buf
        assert b"transfer-encoding: chunked" in buf.lower(), buf
    finally:
        s.close()


@H1_H2
def test_chunked_body_streams(curl_runner, gateway, pub, http2):
    _, host = pub

    def measure():
        chunks = curl_stream(curl_runner, gateway, host, "/chunked?pieces=4&delay_ms=200&size=16", http2)
        pieces = []
        for t, line in arrivals(chunks, b"\n"):
            if line.startswith("piece "):
                pieces.append((t, float(line.split()[2].rstrip("."))))
        return check_event_latency(pieces, 4, 0.2, "chunks")

    timing_attempts(measure)


def read_until_close(s, timeout=15):
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = s.recv(65536)
        if not d:
            return data
        data += d
    raise AssertionError("the gateway kept the connection open: %r" % data[-300:])


def parse_h1_responses(data, methods):
    """Splits HTTP/1.1 responses as a client must frame them (RFC 9112 6.3):
    no body after HEAD, 1xx, 204 and 304; else chunked (decoded strictly),
    else Content-Length, else to the end. Returns [(status, headers, body)]."""
    out = []
    for method in methods:
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep, "a truncated head: %r" % head[:300]
        lines = head.decode("iso-8859-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = [ln.split(":", 1) for ln in lines[1:]]
        headers = {}
        for k, v in fields:
            headers.setdefault(k.strip().lower(), []).append(v.strip())
        if method == "HEAD" or status in (204, 304) or status < 200:
            body = b""
        elif "transfer-encoding" in headers:
            assert headers["transfer-encoding"] == ["chunked"], headers
            body = b""
            while True:
                size_line, _, data = data.partition(b"\r\n")
                n = int(size_line, 16)
                if n == 0:
                    assert data.startswith(b"\r\n"), data[:50]
                    data = data[2:]
                    break
                body += data[:n]
                assert data[n:n + 2] == b"\r\n", data[n:n + 10]
                data = data[n + 2:]
        elif "content-length" in headers:
            n = int(headers["content-length"][0])
            body, data = data[:n], data[n:]
        else:
            body, data = data, b""
        out.append((status, headers, body))
    assert data == b"", "bytes after the last response: %r" % data[:300]
    return out


def test_h1_bodies_are_framed_once(gateway, pub, certs):
    """HTTP/1.1 framing of what the app sends, as the client reads it, on one
    keep-alive connection: a length is passed on, a body of unknown length is
    chunked exactly once (h2o master chunks itself; the gateway's own encoder
    runs on 2.2.5 only), HEAD, 204 and 304 carry no body and no chunking, an
    HTTP/1.0 client gets the body to the end of the connection; the access
    log's bytes_sent counts body bytes, never the chunk framing."""
    _, host = pub
    block = (b"0123456789abcdef" * 4096)[:65536]
    reqs = [("GET", "/bytes/3000"), ("GET", "/bytes/3001?chunked=1"), ("HEAD", "/bytes/3002?chunked=1"),
            ("GET", "/status/204"), ("GET", "/status/304"), ("GET", "/bytes/5")]
    raw = b"".join(("%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (m, p, host, "Connection: close\r\n" if i == len(reqs) - 1 else ""))
                   .encode() for i, (m, p) in enumerate(reqs))
    s = tls_connect(gateway, host, certs["ca"], timeout=15)
    try:
        s.sendall(raw)
        data = read_until_close(s)
    finally:
        s.close()
    got = parse_h1_responses(data, [m for m, _ in reqs])
    assert [r[0] for r in got] == [200, 200, 200, 204, 304, 200], [r[:2] for r in got]
    assert got[0][1]["content-length"] == ["3000"] and got[0][2] == block[:3000]
    assert "content-length" not in got[1][1] and got[1][2] == block[:3001], got[1][1]
    for status, headers, _ in got[2:5]:
        assert "transfer-encoding" not in headers, (status, headers)
    assert got[5][2] == block[:5]

    s = tls_connect(gateway, host, certs["ca"], timeout=15)
    try:
        s.sendall(("GET /bytes/3003?chunked=1 HTTP/1.0\r\nHost: %s\r\n\r\n" % host).encode())
        data = read_until_close(s)
    finally:
        s.close()
    (status, headers, body), = parse_h1_responses(data, ["GET"])
    assert status == 200 and "transfer-encoding" not in headers and body == block[:3003], (headers, body[:50])

    def bytes_sent(prefix):
        def find():
            with open(gateway.config()["log"]["access"]) as f:
                recs = [json.loads(ln) for ln in f if ln.strip()]
            hits = [r for r in recs if r.get("path", "").split("?")[0] == prefix]
            return hits[-1]["bytes_sent"] if hits else None
        gwtest.wait_for(lambda: find() is not None, 10, what="the access log line of " + prefix)
        return find()

    assert [bytes_sent(p) for p in ("/bytes/3000", "/bytes/3001", "/bytes/3002", "/bytes/3003", "/status/204")] == \
        [3000, 3001, 0, 3003, 0]


# --- back-pressure --------------------------------------------------------------------

BODY_BYTES = 300 * MIB
READ_SECONDS = 8.0
STALL_SECONDS = 2.0
MAX_RSS_GROWTH_MIB = 32


@pytest.fixture
def bp_gateway(gw_factory, tmp_path):
    """A gateway of its own (so other tests' memory does not count) with
    TMPDIR set to an empty directory. (h2o 2.2.5 puts its temp files in
    /tmp whatever TMPDIR says: the test also looks for unlinked files the
    process holds.)"""
    tmpdir = tmp_path / "gw-tmp"
    tmpdir.mkdir()
    g = gw_factory({"workers": 1}, name="gw-bp", start=False)
    base_env = g.env

    def env():
        e = base_env()
        e["TMPDIR"] = str(tmpdir)
        # under ASan, freed memory waits in a quarantine of 256 MB by default,
        # which would count as growth: keep it small (no effect without ASan)
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4:thread_local_quarantine_size_kb=256"
        return e

    g.env = env
    g.start()
    g.tmpdir = str(tmpdir)
    return g


@H1_H2
def test_slow_client_back_pressure(bp_gateway, curl_runner, register_sandbox, upstream, http2, tmp_path):
    """The app serves 300 MB as fast as it can; the client reads 1 MB/s for
    8 s, then stops reading for 2 s. The gateway must read the app only as
    fast as the client takes it: its memory stays flat and no temp file
    appears (h2o 2.2.5's own proxy held hundreds of MB here)."""
    g = bp_gateway
    sid = gwtest.new_sandbox_id("bp")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    pid = g.proc.pid

    # warm up: TLS, HTTP/2 and the route cache are set up before the baseline
    for _ in range(3):
        r = curl_runner.request("https://%s:%d/bytes/%d" % (host, g.tls_port, MIB), http2=http2,
                                resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)])
        assert r.status == 200 and len(r.body) == MIB, r
    time.sleep(0.3)
    base_rss = gwtest.rss_kib(pid)
    base_deleted = deleted_files(pid)
    up_before = upstream.stats()["bytes_written"]

    out = str(tmp_path / "body.out")
    args = ["curl", "-sS", "--limit-rate", "1M", "--max-time", "60", "--cacert", curl_runner.ca, "--noproxy", "*",
            "--http2" if http2 else "--http1.1", "--resolve", "%s:%d:127.0.0.1" % (host, g.tls_port), "-o", out,
            "https://%s:%d/bytes/%d" % (host, g.tls_port, BODY_BYTES)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = base_rss
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < READ_SECONDS:
            peak = max(peak, gwtest.rss_kib(pid))
            time.sleep(0.1)
        assert proc.poll() is None, "curl ended early: %s" % proc.stderr.read().decode()
        os.kill(proc.pid, signal.SIGSTOP)  # the client stops reading
        t1 = time.monotonic()
        while time.monotonic() - t1 < STALL_SECONDS:
            peak = max(peak, gwtest.rss_kib(pid))
            time.sleep(0.1)
        got = os.path.getsize(out)
        up_written = upstream.stats()["bytes_written"] - up_before
        new_deleted = deleted_files(pid) - base_deleted
        tmp_files = os.listdir(g.tmpdir)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()

    growth_mib = (peak - base_rss) / 1024.0
    print("back-pressure %s: RSS base %.1f MiB, peak growth %.1f MiB; client got %.1f MiB, app wrote %.1f MiB" % (
        "h2" if http2 else "h1", base_rss / 1024.0, growth_mib, got / MIB, up_written / MIB))
    # the exchange really streamed at the client's pace
    assert 3 * MIB < got < 30 * MIB, "the client got %d bytes in %.0f s at 1 MB/s" % (got, READ_SECONDS)
    assert growth_mib < MAX_RSS_GROWTH_MIB, (
        "the gateway's RSS grew by %.1f MiB while a slow client read %.1f MiB (the app wrote %.1f MiB)"
        % (growth_mib, got / MIB, up_written / MIB))
    # what the app could write is what the client took plus socket buffers
    assert up_written < got + 64 * MIB, "the app wrote %.1f MiB for a client that read %.1f MiB: no back-pressure" % (
        up_written / MIB, got / MIB)
    assert not new_deleted, "the gateway spilled the response to temp files: %r" % sorted(new_deleted)
    assert tmp_files == [], "the gateway wrote files into its TMPDIR: %r" % tmp_files


# --- WebSocket ----------------------------------------------------------------------------


@pytest.fixture
def ws_sandbox(register_sandbox, ws_upstream, gateway):
    class S:
        pass

    s = S()
    s.id = gwtest.new_sandbox_id("ws")
    s.token = register_sandbox(s.id, ports={ws_upstream.port: "private"})
    s.host = gateway.host(ws_upstream.port, s.id)
    return s


def ws_connect(gw, host, path, ca, headers=None, **kw):
    """websockets.connect to wss://host:tls_port/path on 127.0.0.1 with SNI and
    Host the preview host, trusting the test CA."""
    import websockets

    ctx = ssl.create_default_context(cafile=ca)
    return websockets.connect("wss://%s:%d%s" % (host, gw.tls_port, path), host="127.0.0.1", port=gw.tls_port,
                              ssl=ctx, server_hostname=host, extra_headers=list((headers or {}).items()),
                              compression=None, max_size=16 * MIB, ping_interval=None, open_timeout=10,
                              close_timeout=5, **kw)


def run(coro, timeout=30):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def token_hdr(token):
    return {bh.TOKEN_HEADER: token}


def test_websocket_messages(gateway, ws_sandbox, ws_upstream, certs):
    """Text, binary, a 1 MiB message, fragmented messages both ways and
    ping/pong through the tunnel."""
    big = os.urandom(MIB)
    cid = "msg-" + gwtest.new_sandbox_id()

    async def go():
        async with ws_connect(gateway, ws_sandbox.host, "/echo?id=" + cid, certs["ca"],
                              token_hdr(ws_sandbox.token)) as ws:
            await ws.send("héllo, tunnel")
            assert await ws.recv() == "héllo, tunnel"
            await ws.send(bytes(range(256)))
            assert await ws.recv() == bytes(range(256))
            await ws.send(big)
            echoed = await ws.recv()
            assert isinstance(echoed, bytes) and echoed == big, "the 1 MiB message came back altered"
            # client -> app in 3 fragments; the app echoes the whole message
            await ws.send(["frag-a|", "frag-b|", "frag-c"])
            assert await ws.recv() == "frag-a|frag-b|frag-c"
            # app -> client in 4 fragments
            await ws.send("fragmented:4")
            assert await ws.recv() == "part0part1part2part3"
            pong = await ws.ping(b"are you there")
            await asyncio.wait_for(pong, 5)
        return True

    assert run(go())
    info = ws_upstream.wait_closed(cid)
    assert info["messages"] == 5, info
    assert info["close_code"] == 1000, "the client's close must reach the app: %r" % info


def test_websocket_close_codes_both_ways(gateway, ws_sandbox, ws_upstream, certs):
    import websockets

    async def app_closes():
        async with ws_connect(gateway, ws_sandbox.host, "/close?code=4001&reason=app%20says%20bye", certs["ca"],
                              token_hdr(ws_sandbox.token)) as ws:
            try:
                await ws.recv()
            except websockets.ConnectionClosed as e:
                return e.rcvd.code if e.rcvd else None, e.rcvd.reason if e.rcvd else None
        return None, None

    assert run(app_closes()) == (4001, "app says bye"), "the app's close code and reason must reach the client"

    cid = "close-" + gwtest.new_sandbox_id()

    async def client_closes():
        async with ws_connect(gateway, ws_sandbox.host, "/echo?id=" + cid, certs["ca"],
                              token_hdr(ws_sandbox.token)) as ws:
            await ws.send("x")
            await ws.recv()
            await ws.close(1000, "client done")
            return ws.close_code

    assert run(client_closes()) == 1000, "the app must answer the client's close"
    info = ws_upstream.wait_closed(cid)
    assert (info["close_code"], info["close_reason"]) == (1000, "client done"), info


@pytest.mark.parametrize("how", ["header", "cookie", "query"])
def test_websocket_token_modes(gateway, ws_sandbox, ws_upstream, certs, curl, how):
    """The token as a header, as the gateway's cookie, or as ?lizard_token=
    (accepted in place on an upgrade, no redirect); none of them reaches the
    app."""
    cid = "tok-%s-%s" % (how, gwtest.new_sandbox_id())
    path = "/echo?id=" + cid
    headers, cookie_value = {}, None
    if how == "header":
        headers = token_hdr(ws_sandbox.token)
    elif how == "cookie":
        r = curl(ws_sandbox.host, "/?lizard_token=" + ws_sandbox.token, headers=bh.NAVIGATION)
        assert r.status == 302, r
        cookie_value = bh.set_cookies(r)[0].value
        headers = {"Cookie": "app=1; %s=%s" % (bh.COOKIE_NAME, cookie_value)}
    else:
        path += "&lizard_token=" + ws_sandbox.token

    async def go():
        async with ws_connect(gateway, ws_sandbox.host, path, certs["ca"], headers) as ws:
            await ws.send("ping via " + how)
            return await ws.recv()

    assert run(go()) == "ping via " + how
    info = ws_upstream.wait_closed(cid)
    seen = {"path": info["path"], "headers": [(k.lower(), v) for k, v in info["headers"]]}
    bh.assert_no_credentials(seen, ws_sandbox.token, [cookie_value] if cookie_value else [])
    assert info["path"] == "/echo?id=" + cid, info["path"]
    if how == "cookie":
        assert [v for k, v in seen["headers"] if k == "cookie"] == ["app=1"], seen["headers"]


def test_websocket_without_token_is_401(gateway, ws_sandbox, certs):
    import websockets

    async def go():
        async with ws_connect(gateway, ws_sandbox.host, "/echo", certs["ca"]):
            pass

    with pytest.raises(websockets.InvalidStatusCode) as ei:
        run(go())
    assert ei.value.status_code == 401


def test_websocket_idle_timeout(gw_factory, register_sandbox, ws_upstream, certs):
    """upstream.websocket_idle_timeout_ms closes a tunnel in which no byte
    moved for that long, and only such a tunnel."""
    import websockets

    # 2 s: the busy tunnel's 200 ms ticks leave it 1.8 s of slack against a loaded machine's stalls
    g = gw_factory({"upstream": {"websocket_idle_timeout_ms": 2000}})
    sid = gwtest.new_sandbox_id("wsi")
    register_sandbox(sid, ports={ws_upstream.port: "public"})
    host = g.host(ws_upstream.port, sid)
    busy_id, idle_id = "busy-" + sid, "idle-" + sid

    async def busy():
        # a message every 200 ms for 3 s: never idle for 2 s
        async with ws_connect(g, host, "/echo?id=" + busy_id, certs["ca"]) as ws:
            for i in range(15):
                await ws.send("tick %d" % i)
                assert await ws.recv() == "tick %d" % i
                await asyncio.sleep(0.2)
        return True

    async def idle():
        async with ws_connect(g, host, "/idle?id=" + idle_id, certs["ca"]) as ws:
            t0 = time.monotonic()
            try:
                await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed:
                return time.monotonic() - t0
            except asyncio.TimeoutError:
                return None
        return None

    assert run(busy()), "a busy tunnel was closed"
    waited = run(idle())
    assert waited is not None, "an idle tunnel stayed open past websocket_idle_timeout_ms"
    assert 1.5 < waited < 8, "closed after %.2f s for a 2 s idle timeout" % waited
    info = ws_upstream.wait_closed(idle_id)
    assert not info["open"], info


def test_websocket_back_pressure(bp_gateway, register_sandbox, ws_upstream, certs):
    """The app floods a tunnel whose client does not read: the gateway reads
    the app only as fast as it can write to the client, so the app blocks
    and the gateway's memory stays flat."""
    g = bp_gateway
    sid = gwtest.new_sandbox_id("wsbp")
    register_sandbox(sid, ports={ws_upstream.port: "public"})
    host = g.host(ws_upstream.port, sid)
    pid = g.proc.pid
    cid = "flood-" + sid
    base_rss = gwtest.rss_kib(pid)
    s = tls_connect(g, host, certs["ca"])
    try:
        s.sendall(("GET /flood?mib=200&id=%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                   % (cid, host)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(1)  # byte by byte: leave the frames unread
            assert d, head
            head += d
        assert head.startswith(b"HTTP/1.1 101"), head
        peak = base_rss
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            peak = max(peak, gwtest.rss_kib(pid))
            time.sleep(0.1)
        sent = ws_upstream.info(cid).get("sent", 0)
        new_deleted = deleted_files(pid)
    finally:
        s.close()
    growth_mib = (peak - base_rss) / 1024.0
    print("WebSocket back-pressure: RSS growth %.1f MiB, the app got %.1f MiB out" % (growth_mib, sent / MIB))
    assert sent > MIB, "the flood did not start: %r" % ws_upstream.info(cid)
    assert sent < 64 * MIB, "the app wrote %.1f MiB to a client that read nothing: no back-pressure" % (sent / MIB)
    assert growth_mib < MAX_RSS_GROWTH_MIB, "the gateway's RSS grew by %.1f MiB" % growth_mib
    assert not [f for f in new_deleted if "h2o" in f], new_deleted
    ws_upstream.wait_closed(cid)


@pytest.mark.parametrize("mode", ["preserve", "localhost"])
def test_host_header_modes(gw_factory, register_sandbox, upstream, ws_upstream, certs, mode):
    """upstream.host_header: the app sees the preview host unchanged
    ("preserve") or localhost:<port> ("localhost"), for plain requests and
    WebSocket upgrades alike."""
    g = gw_factory({"upstream": {"host_header": mode}})
    sid = gwtest.new_sandbox_id("hh")
    register_sandbox(sid, ports={upstream.port: "public", ws_upstream.port: "public"})

    http_host = g.host(upstream.port, sid)
    c = GwConnection(g, http_host, certs["ca"])
    try:
        status, _, body = c.fetch("GET", "/echo", headers={"Host": "%s:%d" % (http_host, g.tls_port)})
    finally:
        c.close()
    assert status == 200, body
    hosts = [v for k, v in json.loads(body)["headers"] if k.lower() == "host"]
    want = ["%s:%d" % (http_host, g.tls_port)] if mode == "preserve" else ["localhost:%d" % upstream.port]
    assert hosts == want, hosts
    if mode == "localhost":
        fwd = [v for k, v in json.loads(body)["headers"] if k.lower() == "x-forwarded-host"]
        assert fwd and fwd[0].split(":")[0] == http_host, "X-Forwarded-Host keeps the preview host: %r" % fwd

    ws_host = g.host(ws_upstream.port, sid)
    cid = "hh-%s-%s" % (mode, sid)

    async def go():
        async with ws_connect(g, ws_host, "/echo?id=" + cid, certs["ca"]) as ws:
            await ws.send("h")
            return await ws.recv()

    assert run(go()) == "h"
    info = ws_upstream.wait_closed(cid)
    hosts = [v for k, v in info["headers"] if k.lower() == "host"]
    want = ["%s:%d" % (ws_host, g.tls_port)] if mode == "preserve" else ["localhost:%d" % ws_upstream.port]
    assert hosts == want, info["headers"]


# --- pooled upstream connections ------------------------------------------------------


@H1_H2
def test_keepalive_reuse_counted_at_upstream(gw_factory, register_sandbox, upstream, certs, http2):
    """Many requests, on one client connection and on many: the app sees one
    connection (one worker, so one pool)."""
    g = gw_factory({"workers": 1})
    sid = gwtest.new_sandbox_id("ka")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)

    def one_connection(n):
        if http2:
            c = H2Client(g, host, certs["ca"])
            try:
                for _ in range(n):
                    status, _, _ = c.request("GET", "/echo")
                    assert status == 200
            finally:
                c.close()
        else:
            c = GwConnection(g, host, certs["ca"])
            try:
                for _ in range(n):
                    assert c.fetch("GET", "/echo")[0] == 200
            finally:
                c.close()

    one_connection(1)  # opens the pooled connection
    before = upstream.stats()
    one_connection(30)
    for _ in range(5):
        one_connection(2)
    after = upstream.stats()
    # the second /_stats call is a request and a connection of its own
    assert after["requests"] - before["requests"] == 40 + 1, (before, after)
    opened = after["connections"] - before["connections"] - 1
    assert opened == 0, "40 requests opened %d new upstream connections: the pooled one was not reused" % opened


def test_dead_pooled_connection_is_retried_for_get(gw_factory, register_sandbox, raw_upstream, certs):
    """The app resets a pooled keep-alive connection when it is reused (as an
    app that restarted would): a GET is retried once on a fresh connection and
    the client sees 200; a POST is not retried (it may have had an effect):
    502 port_not_open."""

    def serve(u, s, n):
        first = True
        while True:
            head = u.read_request(s)
            if head is None:
                return
            if not first:
                reset(s)  # dies when reused, without answering
                return
            first = False
            body = b"conn %d" % n
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n%s" % (len(body), body))

    u = raw_upstream(serve)
    g = gw_factory({"workers": 1})
    sid = gwtest.new_sandbox_id("dead")
    register_sandbox(sid, ports={u.port: "public"})
    host = g.host(u.port, sid)
    c = GwConnection(g, host, certs["ca"])
    try:
        status, _, body = c.fetch("GET", "/a")
        assert (status, body) == (200, b"conn 0"), body
        time.sleep(0.1)
        # reuses conn 0, which dies: retried on conn 1
        status, _, body = c.fetch("GET", "/b")
        assert (status, body) == (200, b"conn 1"), "a GET on a dead pooled connection must be retried: %r" % body
        assert u.connections == 2, u.connections
        assert [h.split(b" ")[1] for h in u.requests] == [b"/a", b"/b", b"/b"], u.requests
        # conn 1 is pooled now and dies on reuse too: a POST is not retried
        status, headers, body = c.fetch("POST", "/c", body=b"effect", headers={"Content-Type": "text/plain"})
        assert_error(status, headers, body, 502, "port_not_open", sid, u.port)
        assert u.connections == 2, "a POST must not be retried on a fresh connection"
    finally:
        c.close()


def test_pooled_connection_closed_by_app_after_answer(gw_factory, register_sandbox, raw_upstream, certs):
    """An app that closes each keep-alive connection right after answering
    (without saying Connection: close): every request still gets 200."""

    def serve(u, s, n):
        if u.read_request(s) is None:
            return
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.05)

    u = raw_upstream(serve)
    g = gw_factory({"workers": 1})
    sid = gwtest.new_sandbox_id("cls")
    register_sandbox(sid, ports={u.port: "public"})
    c = GwConnection(g, g.host(u.port, sid), certs["ca"])
    try:
        for i in range(6):
            status, _, body = c.fetch("GET", "/r%d" % i)
            assert (status, body) == (200, b"ok"), (i, status, body)
    finally:
        c.close()
    assert u.connections >= 6


# --- upstream errors -----------------------------------------------------------------


@H1_H2
def test_refused_connection_is_502_port_not_open(curl, register_sandbox, gateway, http2):
    sid = gwtest.new_sandbox_id("ref")
    port = gwtest.free_port()
    register_sandbox(sid, ports={port: "public"})
    r = curl(gateway.host(port, sid), "/anything", http2=http2)
    err = assert_curl_error(r, 502, "port_not_open", sid, port)
    assert "0.0.0.0" in err["message"], "the message should hint at binding 0.0.0.0: %r" % err


def test_refused_websocket_upgrade_is_502(register_sandbox, gateway, certs):
    import websockets

    sid = gwtest.new_sandbox_id("wsref")
    port = gwtest.free_port()
    register_sandbox(sid, ports={port: "public"})

    async def go():
        async with ws_connect(gateway, gateway.host(port, sid), "/echo", certs["ca"]):
            pass

    with pytest.raises(websockets.InvalidStatusCode) as ei:
        run(go())
    assert ei.value.status_code == 502


@H1_H2
def test_first_byte_timeout_is_504(gw_factory, curl, register_sandbox, upstream, http2):
    g = gw_factory({"upstream": {"first_byte_timeout_ms": 400}})
    sid = gwtest.new_sandbox_id("slow")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    t0 = time.monotonic()
    r = curl(host, "/slow-head/3000", http2=http2, gw=g)
    took = time.monotonic() - t0
    assert_curl_error(r, 504, "upstream_timeout", sid, upstream.port)
    assert took < 2.0, "answered after %.2f s for a 0.4 s first-byte timeout" % took
    # an answer inside the timeout is not affected
    assert curl(host, "/slow-head/100", http2=http2, gw=g).status == 200


def test_connect_timeout_is_504(gw_factory, curl, register_sandbox):
    """A microVM that does not answer the SYN: made on loopback with a
    listener whose accept queue is full (the kernel then drops SYNs)."""
    with gwtest.blackhole_port() as port:
        g = gw_factory({"upstream": {"connect_timeout_ms": 400}})
        sid = gwtest.new_sandbox_id("cto")
        register_sandbox(sid, ports={port: "public"})
        t0 = time.monotonic()
        r = curl(g.host(port, sid), "/", gw=g)
        took = time.monotonic() - t0
        assert_curl_error(r, 504, "upstream_timeout", sid, port)
        assert took < 2.0, "answered after %.2f s for a 0.4 s connect timeout" % took


# --- hop-by-hop headers -------------------------------------------------------------


@H1_H2
def test_hop_by_hop_request_headers_not_forwarded(curl, pub, http2):
    _, host = pub
    headers = {"X-End": "kept", "X-Custom-Hop": "secret"}
    if not http2:  # HTTP/2 forbids connection-specific fields (RFC 9113 8.2.2)
        headers.update({"Connection": "keep-alive, X-Custom-Hop", "Keep-Alive": "timeout=5", "TE": "trailers",
                        "Proxy-Connection": "keep-alive"})
    if not http2:  # a chunked upload: the app gets the body with a length instead
        headers["Transfer-Encoding"] = "chunked"
    data = b"x" * 1000
    r = curl(host, "/echo", http2=http2, method="POST", data=data, headers=headers)
    assert r.status == 200, r
    seen = [(k.lower(), v) for k, v in r.json()["headers"]]
    names = [k for k, _ in seen]
    assert ("x-end", "kept") in seen, seen
    for hop in ("keep-alive", "te", "transfer-encoding", "proxy-connection"):
        assert hop not in names, "%s was forwarded: %r" % (hop, seen)
    if not http2:
        assert "x-custom-hop" not in names, "a header listed in Connection was forwarded: %r" % seen
    assert [v.lower() for k, v in seen if k == "connection"] == ["keep-alive"], "the gateway's own Connection only: %r" % seen
    assert r.json()["body_length"] == len(data) and r.json()["body_sha256"] == gwtest.sha256_hex(data), r.json()


@H1_H2
def test_hop_by_hop_response_headers_not_forwarded(curl, register_sandbox, raw_upstream, gateway, http2):
    def serve(u, s, n):
        while u.read_request(s) is not None:
            s.sendall(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Resp-Hop\r\nX-Resp-Hop: secret\r\n"
                      b"Keep-Alive: timeout=30\r\nTrailer: X-Trailer\r\nProxy-Connection: keep-alive\r\n"
                      b"Upgrade: h2c\r\nX-End: kept\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")

    u = raw_upstream(serve)
    sid = gwtest.new_sandbox_id("hop")
    register_sandbox(sid, ports={u.port: "public"})
    r = curl(gateway.host(u.port, sid), "/", http2=http2)
    assert r.status == 200 and r.body == b"hello world", r
    names = [k for k, _ in r.header_list]
    assert r.headers.get("x-end") == "kept", r.header_list
    for hop in ("x-resp-hop", "keep-alive", "trailer", "proxy-connection", "upgrade"):
        assert hop not in names, "%s was forwarded: %r" % (hop, r.header_list)
    if http2:
        assert "transfer-encoding" not in names and "connection" not in names, r.header_list
    else:
        # the gateway's own framing, once
        assert r.get_all("transfer-encoding") in ([], ["chunked"]), r.header_list
        assert all("x-resp-hop" not in v.lower() for v in r.get_all("connection")), r.header_list


@H1_H2
def test_responses_carry_the_gateways_date(curl, register_sandbox, raw_upstream, gateway, http2):
    """Every response has exactly one Date (RFC 9110 6.6.1: a server with a
    clock sends one), parseable, over HTTP/1.1 and HTTP/2 alike, a gateway
    error too, and it is the gateway's: an app's own Date (here 1994's) is
    replaced, as h2o 2.2.5 does for both protocols. h2o master wrote none on
    HTTP/2 (patch 0211 of its series)."""
    app_date = "Sun, 06 Nov 1994 08:49:37 GMT"

    def serve(u, s, n):
        while u.read_request(s) is not None:
            s.sendall(("HTTP/1.1 200 OK\r\nDate: %s\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
                       % app_date).encode())

    u = raw_upstream(serve)
    sid = gwtest.new_sandbox_id("date")
    register_sandbox(sid, ports={u.port: "public"})
    before = time.time()
    ok = curl(gateway.host(u.port, sid), "/", http2=http2)
    err = curl(gateway.host(u.port, gwtest.new_sandbox_id("nodate")), "/", http2=http2)
    after = time.time()
    assert ok.status == 200 and ok.body == b"ok", ok
    assert err.status >= 400 and err.error_code(), err
    for r in (ok, err):
        assert r.http_version == ("2" if http2 else "1.1"), r
        dates = r.get_all("date")
        assert len(dates) == 1, "one Date, the gateway's: %r" % (r.header_list,)
        when = email.utils.parsedate_to_datetime(dates[0])
        assert when.tzinfo is not None and dates[0].endswith(" GMT"), dates
        # the gateway's clock (whole seconds, read once per loop turn), not the app's 1994: a minute of slack either
        # side only keeps a stalled loaded machine from failing it (the app's date is 32 years off)
        assert before - 60 <= when.timestamp() <= after + 60, (dates, before, after)


# --- 413 body_too_large -------------------------------------------------------------

BODY_LIMIT = 64 * 1024


@pytest.fixture
def small_body_gw(gw_factory):
    return gw_factory({"limits": {"max_request_body_bytes": BODY_LIMIT}})


def read_h1_response(s, buf=b"", timeout=10):
    """Reads one HTTP/1.1 response with a Content-Length body from s (buf:
    what was already read of it)."""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in buf and time.monotonic() < deadline:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(body) < n and time.monotonic() < deadline:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return int(lines[0].split()[1]), headers, body


def test_413_declared_length_h1(small_body_gw, register_sandbox, upstream, certs):
    """Content-Length over limits.max_request_body_bytes: the contract's 413
    body_too_large (JSON, no-store, CORS), before any body byte is sent."""
    g = small_body_gw
    sid = gwtest.new_sandbox_id("big")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    before = upstream.stats()["requests"]
    s = tls_connect(g, host, certs["ca"])
    try:
        s.sendall(("POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\n"
                   "Origin: https://app.example\r\nContent-Length: %d\r\n\r\n" % (host, 10 * MIB)).encode())
        status, headers, body = read_h1_response(s)
    finally:
        s.close()
    err = assert_error(status, headers, body, 413, "body_too_large")
    assert headers.get("access-control-allow-origin") == "https://app.example", headers
    assert "origin" in headers.get("vary", "").lower(), headers
    assert err.get("sandboxId") == sid and err.get("port") == upstream.port, err
    assert app_requests_since(upstream, before) == 0, "an over-limit body must not reach the app"

    # logged and counted like any other answer
    def logged():
        with open(g.config()["log"]["access"]) as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
        return [ln for ln in lines if ln.get("status") == 413 and ln.get("error") == "body_too_large"]

    gwtest.wait_for(logged, 5, what="an access-log line for the 413")


def test_413_html_for_browser_navigation(small_body_gw, register_sandbox, upstream, certs):
    g = small_body_gw
    sid = gwtest.new_sandbox_id("bigh")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    s = tls_connect(g, host, certs["ca"])
    try:
        s.sendall(("POST /form HTTP/1.1\r\nHost: %s\r\nSec-Fetch-Mode: navigate\r\nAccept: text/html\r\n"
                   "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n"
                   % (host, 2 * BODY_LIMIT)).encode())
        status, headers, body = read_h1_response(s)
    finally:
        s.close()
    assert status == 413, (status, headers, body)
    assert headers.get("content-type", "").startswith("text/html"), headers
    assert b"body_too_large" in body and b"<html" in body.lower(), body[:300]
    assert "no-store" in headers.get("cache-control", ""), headers


def test_413_curl_upload_h1(small_body_gw, register_sandbox, upstream, curl_runner, tmp_path):
    """A 2 MiB upload as curl sends it by default (Content-Length with
    Expect: 100-continue): the contract's 413, and nothing reaches the app."""
    g = small_body_gw
    sid = gwtest.new_sandbox_id("bigc")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    data = tmp_path / "upload.bin"
    data.write_bytes(b"z" * (2 * MIB))
    before = upstream.stats()["requests"]
    r = curl_runner.request("https://%s:%d/echo" % (host, g.tls_port), resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)],
                            extra_args=["--data-binary", "@" + str(data)])
    assert_curl_error(r, 413, "body_too_large", sid, upstream.port)
    assert app_requests_since(upstream, before) == 0


def test_413_chunked_body_h1(small_body_gw, register_sandbox, upstream, certs):
    """A chunked upload with no declared length that grows past the limit:
    the 413 comes once the limit is crossed (the gateway's count: h2o patch 0500)."""
    g = small_body_gw
    sid = gwtest.new_sandbox_id("bigk")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    before = upstream.stats()["requests"]
    s = tls_connect(g, host, certs["ca"])
    piece = 16 * 1024
    sent = 0
    try:
        s.sendall(("POST /echo HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % host).encode())
        # up to the limit at once, then one chunk at a time until the gateway
        # answers (it stops reading then: more would only be reset)
        first = b""
        for _ in range(2 * BODY_LIMIT // piece):
            s.sendall(b"%x\r\n%s\r\n" % (piece, b"c" * piece))
            sent += piece
            if sent < BODY_LIMIT:
                continue
            s.settimeout(3)
            try:
                first = s.recv(65536)
                break
            except socket.timeout:
                continue
        s.settimeout(10)
        status, headers, body = read_h1_response(s, first)
    finally:
        s.close()
    assert BODY_LIMIT <= sent <= BODY_LIMIT + piece, "the 413 came after %d bytes for a %d limit" % (sent, BODY_LIMIT)
    assert_error(status, headers, body, 413, "body_too_large", sid, upstream.port)
    # the body streamed to the app as it came (docs/uploads.md), which got at most the limit
    # (test_uploads.py::test_413_declared_or_counted counts it) and answered nothing
    assert app_requests_since(upstream, before) <= 1


def test_body_at_limit_is_forwarded(small_body_gw, register_sandbox, upstream, curl):
    g = small_body_gw
    sid = gwtest.new_sandbox_id("lim")
    register_sandbox(sid, ports={upstream.port: "public"})
    data = os.urandom(BODY_LIMIT - 1)
    for http2 in (False, True):
        r = curl(g.host(upstream.port, sid), "/echo", gw=g, data=data, method="POST", http2=http2)
        assert r.status == 200 and r.json()["body_sha256"] == gwtest.sha256_hex(data), r


def test_413_app_status_passes_unchanged(small_body_gw, register_sandbox, upstream, curl):
    """A 413 the app itself answers is the app's, not rewritten."""
    g = small_body_gw
    sid = gwtest.new_sandbox_id("app413")
    register_sandbox(sid, ports={upstream.port: "public"})
    r = curl(g.host(upstream.port, sid), "/status/413", gw=g)
    assert r.status == 413 and r.json() == {"status": 413}, r


def test_413_h2(small_body_gw, register_sandbox, upstream, certs):
    """Over HTTP/2 too, a declared length over the limit gets the contract's
    413 (h2o patch 0130; 2.2.5 sent RST_STREAM(REFUSED_STREAM), which
    clients retry). The undeclared-length case and the stream's end are in
    test_h2_security.py."""
    g = small_body_gw
    sid = gwtest.new_sandbox_id("bigh2")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    before = upstream.stats()["requests"]
    c = H2Client(g, host, certs["ca"])
    try:
        status, headers, chunks = c.request("POST", "/echo", headers=[("content-type", "application/octet-stream")],
                                            body=b"q" * (4 * BODY_LIMIT))
    finally:
        c.close()
    assert app_requests_since(upstream, before) == 0
    assert_error(status, headers, b"".join(d for _, d in chunks), 413, "body_too_large", sid, upstream.port)
