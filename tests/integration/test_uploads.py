"""Uploads that stream (issue 41; CONTRACT.md, Forwarding; docs/uploads.md):
request bodies reach the sandbox as the client sends them, over HTTP/1.1
(Content-Length and chunked) and HTTP/2 (with and without content-length),
with back-pressure both ways; the gateway's memory does not follow the size
of the uploads in flight; limits.max_request_body_bytes answers 413
body_too_large as the bytes are counted, or cuts a response the app already
started; an early answer (401, 404) ends a body still arriving without
hanging the connection; ingress is billed as the bytes arrive.

The apps: upload_app.py (reads bodies as they come, reports its first body
byte and the whole body's sha256 on an events file: the order of events
across processes, no clock) and Debian's Flask (flask_app.py /upload,
request.stream). The clients: curl (--limit-rate), python3-h2, raw sockets."""

import hashlib
import json
import os
import socket
import ssl
import subprocess
import threading
import time

import pytest

import gwtest
from test_browser_e2e import browser_env  # noqa: F401 (a fixture)
from test_metering import records, total
from test_proxy import assert_curl_error, tls_connect

MIB = 1024 * 1024
MODES = ["h1-length", "h1-chunked", "h2-length", "h2-nolength"]


# --- the apps ------------------------------------------------------------------------


class EventsApp:
    """An app process that writes JSON events to a file (upload_app.py, flask_app.py)."""

    def __init__(self, workdir, script, args=()):
        os.makedirs(workdir, exist_ok=True)
        self.events_path = os.path.join(workdir, "events.jsonl")
        self.log = os.path.join(workdir, "app.log")
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([gwtest.PYTHON, os.path.join(gwtest.HERE, script), "--port", "0", "--events",
                                      self.events_path] + list(args), stdout=subprocess.PIPE, stderr=logf,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            gwtest.stop_process(self.proc)
            raise RuntimeError("%s did not start: %r %s" % (script, line, gwtest.tail(self.log)))
        self.port = int(line.split()[1])

    def events(self, uid):
        try:
            with open(self.events_path) as f:
                return [e for e in map(json.loads, f) if e.get("id") == uid]
        except FileNotFoundError:
            return []

    def event(self, uid, name):
        for e in self.events(uid):
            if e["event"] == name:
                return e
        return None

    def wait_event(self, uid, names, timeout=30):
        names = (names,) if isinstance(names, str) else names
        found = {}

        def seen():
            for e in self.events(uid):
                if e["event"] in names:
                    found["e"] = e
                    return True
            return False

        gwtest.wait_for(seen, timeout, what="the app's %s event of upload %s" % ("/".join(names), uid))
        return found["e"]

    def stop(self):
        gwtest.stop_process(self.proc)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def app(workdir):
    a = EventsApp(os.path.join(workdir, "upload-app"), "upload_app.py")
    yield a
    a.stop()


@pytest.fixture(scope="module")
def flask_upload(workdir):
    a = EventsApp(os.path.join(workdir, "flask-upload"), "flask_app.py", ("--domain", gwtest.DOMAIN))
    yield a
    a.stop()


class Target:
    def __init__(self, gw, register_sandbox, port, access="private"):
        self.id = gwtest.new_sandbox_id("up")
        self.token = register_sandbox(self.id, ports={port: access})
        self.host = gw.host(port, self.id)
        self.gw = gw
        self.port = port


def new_uid():
    return gwtest.new_sandbox_id("u")


def pattern_file(path, size):
    """A file of `size` bytes (a repeated, not all-equal block); returns its sha256."""
    block = hashlib.sha256(b"lizard").digest() * 2048
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = block[:min(left, len(block))]
            f.write(piece)
            h.update(piece)
            left -= len(piece)
    return h.hexdigest()


def curl_upload(t, certs, path, mode, src, uid, rate=None, token=True, extra=(), out=None, stdin=None):
    """Starts curl uploading the file `src` to t in `mode` (MODES); returns the Popen (stdout: -w's http code).
    stdin=subprocess.PIPE: the body comes from the test through curl's stdin instead (`src` is then its length)."""
    gw = t.gw
    url = "https://%s:%d%s" % (t.host, gw.tls_port, path)
    args = ["curl", "-sS", "-v", "--cacert", certs["ca"], "--resolve", "%s:%d:127.0.0.1" % (t.host, gw.tls_port),
            "--noproxy", "*", "-o", out or os.devnull, "-w", "%{http_code}\\n", "-H", "X-Upload-Id: " + uid,
            "--max-time", "120"]
    if token:
        args += ["-H", "X-Lizard-Access-Token: " + t.token]
    if rate:
        args += ["--limit-rate", rate]
    args.append("--http2" if mode.startswith("h2") else "--http1.1")
    if stdin is not None:
        # from a pipe: HTTP/1.1 chunked, HTTP/2 without content-length, unless a length is given
        args += ["-X", "POST", "-T", "-"]
        if mode.endswith("-length"):
            args += ["-H", "Content-Length: %d" % src, "-H", "Transfer-Encoding:"]
    elif mode == "h2-nolength":
        args += ["-X", "POST", "-T", "-"]
        stdin = open(src, "rb")
    else:
        args += ["--data-binary", "@" + src]
        if mode == "h1-chunked":
            args += ["-H", "Transfer-Encoding: chunked"]
    args += list(extra) + [url]
    p = subprocess.Popen(args, stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    if stdin not in (None, subprocess.PIPE):
        stdin.close()
    return p


def finish(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out.decode(), err.decode("utf-8", "replace")


def block_of(uid):
    return hashlib.sha256(uid.encode()).digest() * 2048


def upload_in_two_halves(app, p, uid, size):
    """Feeds curl's stdin the first half of a `size`-byte body, waits for the
    app to report its first body byte (the rest of the body is not even
    written yet: the order of events, no clock), then the second half.
    Returns the body's sha256."""
    block, h, fed = block_of(uid), hashlib.sha256(), 0

    def feed(upto):
        nonlocal fed
        while fed < upto:
            piece = block[:min(len(block), upto - fed)]
            p.stdin.write(piece)
            h.update(piece)
            fed += len(piece)
        p.stdin.flush()

    try:
        feed(size // 2)
    except (BrokenPipeError, ValueError):
        raise AssertionError("curl stopped reading its body (%s): %s" % (p.wait(), p.stderr.read().decode("utf-8", "replace")[-3000:]))
    try:
        app.wait_event(uid, "first_byte", timeout=30)
    except Exception:
        p.kill()
        raise AssertionError("the app had no body byte while half of the body was still to be sent: %s" %
                             p.stderr.read().decode("utf-8", "replace")[-2000:])
    feed(size)
    return h.hexdigest()  # finish()'s communicate closes curl's stdin: the body's end


# --- streaming, end to end -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_upload_streams_to_the_app(gateway, register_sandbox, app, certs, tmp_path, mode):
    """curl --limit-rate: the app has the first body bytes before the client
    sent the second half of the body, and the whole body arrives intact
    (sha256 at both ends), framed as the client declared it (Content-Length)
    or chunked."""
    t = Target(gateway, register_sandbox, app.port)
    size = 3 * MIB
    uid, out = new_uid(), str(tmp_path / "out")
    p = curl_upload(t, certs, "/upload", mode, size, uid, rate="4M", out=out, stdin=subprocess.PIPE)
    digest = upload_in_two_halves(app, p, uid, size)
    rc, code, err = finish(p)
    assert rc == 0 and code.strip() == "200", (rc, code, err[-2000:])
    with open(out) as f:
        answer = json.load(f)
    assert answer["bytes"] == size and answer["sha256"] == digest, answer
    assert answer["framing"] == ("chunked" if mode in ("h1-chunked", "h2-nolength") else "length"), answer


def test_expect_100_continue_is_answered(gateway, register_sandbox, app, certs, tmp_path):
    """curl asks for 100-continue on an HTTP/1.1 upload over 1 MiB: the
    gateway's 100 comes (curl does not wait out its 1 s expect timeout), and
    the upload goes through; the app sees no Expect."""
    t = Target(gateway, register_sandbox, app.port)
    src = str(tmp_path / "body")
    digest = pattern_file(src, 3 * MIB)
    uid, out = new_uid(), str(tmp_path / "out")
    rc, code, err = finish(curl_upload(t, certs, "/upload", "h1-length", src, uid, out=out))
    assert rc == 0 and code.strip() == "200", (rc, code, err[-2000:])
    assert "> Expect: 100-continue" in err, "curl did not ask for 100-continue: " + err[-3000:]
    assert "< HTTP/1.1 100 Continue" in err and "Done waiting for 100-continue" not in err, err[-3000:]
    with open(out) as f:
        report = json.load(f)
    assert report["sha256"] == digest and "expect" not in report, report


def test_flask_reads_the_stream_as_it_comes(gateway, register_sandbox, flask_upload, certs, tmp_path):
    """A real app (Flask's request.stream) reports its first bytes before the client is done."""
    t = Target(gateway, register_sandbox, flask_upload.port)
    size = 3 * MIB
    for mode in ("h1-length", "h2-length"):
        uid, out = new_uid(), str(tmp_path / ("out-" + mode))
        p = curl_upload(t, certs, "/upload", mode, size, uid, rate="4M", out=out, stdin=subprocess.PIPE)
        digest = upload_in_two_halves(flask_upload, p, uid, size)
        rc, code, err = finish(p)
        assert rc == 0 and code.strip() == "200", (mode, rc, code, err[-2000:])
        with open(out) as f:
            assert json.load(f) == {"bytes": size, "sha256": digest}
        assert flask_upload.wait_event(uid, "done")["sha256"] == digest


# --- early answers -------------------------------------------------------------------------


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
@pytest.mark.parametrize("why", ["missing_token", "port_not_exposed"])
def test_early_answer_on_streaming_upload(gateway, register_sandbox, app, certs, tmp_path, http2, why):
    """A 50 MB POST answered before the forward (401 without a token, 404 on
    a port not exposed): curl gets the answer and is not left hanging; the
    next request works (HTTP/2: on the same connection)."""
    t = Target(gateway, register_sandbox, app.port)
    src = str(tmp_path / "body")
    pattern_file(src, 50 * MIB)
    uid = new_uid()
    host = t.host if why == "missing_token" else gateway.host(app.port + 1 if app.port < 65535 else 1, t.id)
    url = "https://%s:%d" % (host, gateway.tls_port)
    out = str(tmp_path / "out")
    args = ["curl", "-sS", "-v", "--cacert", certs["ca"], "--resolve", "%s:%d:127.0.0.1" % (host, gateway.tls_port),
            "--noproxy", "*", "--max-time", "60", "--http2" if http2 else "--http1.1",
            "-o", out, "-w", "%{http_code} %{num_connects}\\n", "--data-binary", "@" + src,
            "-H", "X-Upload-Id: " + uid]
    if why == "port_not_exposed":
        args += ["-H", "X-Lizard-Access-Token: " + t.token]
    args += [url + "/upload", "--next", "-sS", "--cacert", certs["ca"], "--http2" if http2 else "--http1.1",
             "--resolve", "%s:%d:127.0.0.1" % (host, gateway.tls_port), "--noproxy", "*", "-o", os.devnull,
             "-w", "%{http_code} %{num_connects}\\n", url + "/again"]
    r = subprocess.run(args, capture_output=True, timeout=90)
    err = r.stderr.decode("utf-8", "replace")
    lines = r.stdout.decode().split()
    status = 401 if why == "missing_token" else 404
    assert r.returncode == 0 and len(lines) == 4, (r.returncode, lines, err[-3000:])
    assert int(lines[0]) == status, (lines, err[-3000:])
    with open(out, "rb") as f:
        body = json.loads(f.read())
    assert body["error"]["code"] == (why if why == "missing_token" else "port_not_exposed"), body
    # the second request: answered too (no token for /again: the same early answer), HTTP/2 on the same connection
    assert int(lines[2]) == status, (lines, err[-3000:])
    if http2:
        assert lines[3] == "0", "HTTP/2: the second request took a new connection: %s" % err[-3000:]
    assert app.events(uid) == [], "the app saw a request that was answered before the forward"


# --- limits.max_request_body_bytes ---------------------------------------------------------------

LIMIT = 1 * MIB


@pytest.fixture
def small_gw(gw_factory):
    return gw_factory({"limits": {"max_request_body_bytes": LIMIT}})


def metric_value(g, name, label):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("mode", MODES)
def test_413_declared_or_counted(small_gw, register_sandbox, app, certs, tmp_path, mode):
    """Over limits.max_request_body_bytes: the contract's 413 body_too_large
    (JSON), declared (at the head: the app sees nothing) or counted as the
    bytes arrive (chunked, HTTP/2 without content-length: the app got at
    most the limit, never h2o's reset or text)."""
    t = Target(small_gw, register_sandbox, app.port)
    src = str(tmp_path / "body")
    pattern_file(src, 3 * LIMIT)
    uid, out = new_uid(), str(tmp_path / "out")
    p = curl_upload(t, certs, "/upload", mode, src, uid, out=out)
    rc, code, err = finish(p)
    assert code.strip() == "413", (rc, code, err[-3000:])
    with open(out, "rb") as f:
        body = f.read()
    assert json.loads(body)["error"]["code"] == "body_too_large", body
    if mode.endswith("-length"):
        assert app.events(uid) == [], "a declared length over the limit reached the app"
    else:
        e = app.wait_event(uid, ("closed", "done"))
        assert e["event"] == "closed" and e["bytes"] <= LIMIT, e


class H2Upload:
    """One HTTP/2 request whose body the test sends piece by piece (python3-h2),
    as the stream's flow-control window allows."""

    def __init__(self, gw, host, ca, path, headers=(), content_length=None):
        import h2.config
        import h2.connection

        self.sock = tls_connect(gw, host, ca, alpn=("h2",))
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True,
                                                                                header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sid = self.conn.get_next_available_stream_id()
        hl = [(":method", "POST"), (":scheme", "https"), (":authority", "%s:%d" % (host, gw.tls_port)), (":path", path)]
        hl += list(headers)
        if content_length is not None:
            hl.append(("content-length", str(content_length)))
        self.conn.send_headers(self.sid, hl)
        self.sock.sendall(self.conn.data_to_send())
        self.status, self.body, self.reset, self.ended, self.sent = None, b"", None, False, 0

    def pump(self, timeout=0.2):
        import h2.events

        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError, BlockingIOError):
            return
        if not data:
            raise ConnectionError("the gateway closed the connection")
        for ev in self.conn.receive_data(data):
            if getattr(ev, "stream_id", None) != self.sid:
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                self.status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                self.body += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, self.sid)
            elif isinstance(ev, h2.events.StreamReset):
                self.reset = ev.error_code
            elif isinstance(ev, h2.events.StreamEnded):
                self.ended = True
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def send(self, n, stall_pumps=10):
        """Sends up to n body bytes; stops early when the stream ends or is
        reset, or its window stays shut for stall_pumps reads. Returns what it sent."""
        block, done, shut = b"u" * 16384, 0, 0
        while done < n and self.reset is None and not self.ended:
            window = min(self.conn.local_flow_control_window(self.sid), self.conn.max_outbound_frame_size, n - done,
                         len(block))
            if window <= 0:
                shut += 1
                if shut > stall_pumps:
                    break
                self.pump()
                continue
            shut = 0
            self.conn.send_data(self.sid, block[:window])
            self.sock.sendall(self.conn.data_to_send())
            done += window
            self.sent += window
            self.pump(0)
        return done

    def end(self):
        self.conn.end_stream(self.sid)
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()


def h1_chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.mark.parametrize("http2", [False, True], ids=["h1-chunked", "h2-nolength"])
def test_413_after_the_app_answered_cuts(small_gw, register_sandbox, app, certs, http2):
    """The app answered (its head and a first chunk are out) before the
    counted body passed the limit: the response is cut (HTTP/1.1 closed
    before its end, HTTP/2 RST_STREAM INTERNAL_ERROR), reason body_too_large
    in the access log and the metric; the app got at most the limit. The
    client sends past the limit only after it read the app's answer."""
    import h2.errors

    g = small_gw
    t = Target(g, register_sandbox, app.port)
    uid = new_uid()
    path = "/upload/%s?answer_first=1" % uid
    before = metric_value(g, "lizard_responses_cut_total", 'reason="body_too_large"')
    if http2:
        up = H2Upload(g, t.host, certs["ca"], path, [("x-lizard-access-token", t.token), ("x-upload-id", uid)])
        try:
            up.send(LIMIT // 4)
            gwtest.wait_for(lambda: up.pump() or b"early" in up.body, 15, what="the app's early answer")
            assert up.status == 200
            up.send(3 * LIMIT)
            gwtest.wait_for(lambda: up.pump() or up.reset is not None, 15, what="the stream's reset")
            assert up.reset == h2.errors.ErrorCodes.INTERNAL_ERROR and not up.ended, (up.reset, up.ended)
        finally:
            up.close()
    else:
        s = tls_connect(g, t.host, certs["ca"])
        try:
            s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\nX-Upload-Id: %s\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n" % (path, t.host, t.token, uid)).encode())
            s.sendall(h1_chunk(b"u" * (LIMIT // 4)))
            got = b""
            while b"early" not in got:
                piece = s.recv(65536)
                assert piece, "closed before the app's answer: %r" % got
                got += piece
            assert got.startswith(b"HTTP/1.1 200"), got
            try:
                for _ in range(3 * LIMIT // 65536):
                    s.sendall(h1_chunk(b"u" * 65536))
            except OSError:
                pass  # the gateway closed: what a client sees of the cut
            s.settimeout(15)
            try:
                while True:
                    piece = s.recv(65536)
                    if not piece:
                        break
                    got += piece
            except ConnectionResetError:
                pass
            assert not got.endswith(b"0\r\n\r\n"), "the response was not cut: %r" % got[-200:]
        finally:
            s.close()
    e = app.wait_event(uid, ("closed", "done"))
    assert e["event"] == "closed" and e["bytes"] <= LIMIT, e
    line = gwtest.access_log_line(g, path)
    assert line.get("cut") == "body_too_large", line
    gwtest.wait_for(lambda: metric_value(g, "lizard_responses_cut_total", 'reason="body_too_large"') == before + 1, 5,
                    what="lizard_responses_cut_total{reason=body_too_large}")


# --- metering ----------------------------------------------------------------------------------------

HEAD_BOUND = 1024  # the request head as the gateway counts it (HTTP/1.1 text), curl's headers included


@pytest.mark.parametrize("mode", ["h1-length", "h1-chunked", "h2-nolength"])
def test_ingress_billed_as_sent(gateway, redis, register_sandbox, app, certs, tmp_path, mode):
    """Ingress (billing's XADD records) is the body the client sent, and the head."""
    t = Target(gateway, register_sandbox, app.port)
    src = str(tmp_path / "body")
    pattern_file(src, 3 * MIB + 17)
    uid = new_uid()
    rc, code, err = finish(curl_upload(t, certs, "/upload", mode, src, uid))
    assert rc == 0 and code.strip() == "200", (rc, code, err[-2000:])

    def billed():
        return total(records(redis, t.id), "ingress") >= 3 * MIB + 17

    gwtest.wait_for(billed, 15, what="the upload's ingress in the metering records")
    time.sleep(1.2)  # a further flush interval: nothing more is billed later
    ingress = total(records(redis, t.id), "ingress")
    assert 3 * MIB + 17 <= ingress < 3 * MIB + 17 + HEAD_BOUND, ingress


def test_aborted_upload_bills_what_arrived(gateway, redis, register_sandbox, app, certs):
    """A client that leaves mid-upload: what reached the app is billed, not the declared length."""
    t = Target(gateway, register_sandbox, app.port)
    uid = new_uid()
    s = tls_connect(gateway, t.host, certs["ca"])
    s.sendall(("POST /upload HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\nX-Upload-Id: %s\r\n"
               "Content-Length: %d\r\n\r\n" % (t.host, t.token, uid, 64 * MIB - 1)).encode())
    block = b"x" * 65536
    sent = 0
    while sent < 4 * MIB:
        s.sendall(block)
        sent += len(block)
    gwtest.wait_for(lambda: any(e["event"] == "progress" and e["bytes"] >= 3 * MIB for e in app.events(uid)), 15,
                    what="the app's progress past 3 MiB")
    s.close()
    e = app.wait_event(uid, "closed")
    assert 3 * MIB <= e["bytes"] <= sent, e
    gwtest.wait_for(lambda: total(records(redis, t.id), "ingress") >= e["bytes"], 15, what="the ingress billed")
    time.sleep(1.2)
    ingress = total(records(redis, t.id), "ingress")
    # what the app got, and the head; at most what was sent (never the declared 64 MiB)
    assert e["bytes"] <= ingress <= sent + HEAD_BOUND, (ingress, e, sent)


def test_h2_upload_silent_for_a_while(gateway, register_sandbox, app, certs):
    """An HTTP/2 upload whose client pauses longer than h2o's connection idle
    timeout (10 s), the only stream on its connection: the connection stays
    (libh2o patch 0501; the gateway's first-byte limit bounds the silence),
    and the body completes intact."""
    t = Target(gateway, register_sandbox, app.port)
    uid = new_uid()
    up = H2Upload(gateway, t.host, certs["ca"], "/upload", [("x-lizard-access-token", t.token), ("x-upload-id", uid)],
                  content_length=2 * 100000)
    try:
        assert up.send(100000) == 100000
        app.wait_event(uid, "first_byte")
        quiet_until = time.monotonic() + 12  # past h2o's 10 s idle timeout; reading all along, sending nothing
        while time.monotonic() < quiet_until:
            up.pump(0.5)
        assert up.send(100000) == 100000
        up.end()
        gwtest.wait_for(lambda: up.pump() or up.ended or up.reset is not None, 15, what="the answer")
        assert up.status == 200 and up.reset is None, (up.status, up.reset)
        assert json.loads(up.body)["bytes"] == 200000, up.body
    finally:
        up.close()


# --- memory and back-pressure ------------------------------------------------------------------------

RSS_BOUND_KIB = (64 if gwtest.gateway_is_sanitized() else 16) * 1024  # ASan's shadow and quarantine keep freed chunks


class RssWatch:
    """The gateway's resident set, sampled while a test runs: the peak over the baseline."""

    def __init__(self, pid):
        self.pid, self.base, self.peak, self.stop = pid, gwtest.rss_kib(pid), 0, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.02):
            try:
                self.peak = max(self.peak, gwtest.rss_kib(self.pid))
            except (FileNotFoundError, AssertionError):
                return  # the gateway is gone (a test that failed before growth())

    def growth(self):
        self.stop.set()
        self.thread.join()
        return max(0, self.peak - self.base)


def generated(uid, size):
    """The body of upload uid: `size` bytes made on the fly, in pieces."""
    block = hashlib.sha256(uid.encode()).digest() * 8192
    left = size
    while left:
        n = min(left, len(block))
        yield block[:n]
        left -= n


def generated_sha256(uid, size):
    h = hashlib.sha256()
    for piece in generated(uid, size):
        h.update(piece)
    return h.hexdigest()


def h1_upload_on_the_fly(gw, t, ca, uid, size, results, path="/upload"):
    """POSTs `size` generated bytes with a Content-Length over HTTP/1.1; results[uid] = the app's JSON answer."""
    s = tls_connect(gw, t.host, ca, timeout=120)
    try:
        s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\nX-Upload-Id: %s\r\n"
                   "Content-Length: %d\r\n\r\n" % (path, t.host, t.token, uid, size)).encode())
        for piece in generated(uid, size):
            s.sendall(piece)
        got = b""
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            piece = s.recv(65536)
            if not piece:
                break
            got += piece
        results[uid] = json.loads(got.split(b"\r\n\r\n", 1)[1])
    finally:
        s.close()


def test_ten_large_uploads_hold_no_body_in_memory(gw_factory, register_sandbox, app, certs):
    """Ten 200 MB uploads at once, generated on the fly: the gateway's RSS
    grows by less than 16 MiB (64 under ASan); buffered, it would hold them
    whole (gigabytes)."""
    size = 200 * 1000 * 1000
    g = gw_factory({"limits": {"max_request_body_bytes": 256 * MIB}}, start=False)
    # RSS is measured: ASan must not keep what was freed
    gwtest.small_asan_quarantine(g)
    g.start()
    t = Target(g, register_sandbox, app.port)
    warm = {}
    h1_upload_on_the_fly(g, t, certs["ca"], new_uid(), 4 * MIB, warm)  # the first connections' buffers, once
    watch = RssWatch(g.proc.pid)
    results, uids = {}, [new_uid() for _ in range(10)]
    threads = [threading.Thread(target=h1_upload_on_the_fly, args=(g, t, certs["ca"], u, size, results)) for u in uids]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=600)
    growth = watch.growth()
    for u in uids:
        assert results.get(u) == {"bytes": size, "sha256": generated_sha256(u, size), "framing": "length"}, u
    assert growth < RSS_BOUND_KIB, "the gateway's RSS grew by %d KiB during ten 200 MB uploads" % growth


IN_FLIGHT_BOUND = 32 * MIB  # the kernel's socket buffers on the way (client, gateway, app; loopback autotuning) and one chunk


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_app_that_stops_reading_stops_the_client(gateway, register_sandbox, app, certs, http2):
    """Back-pressure: an app that reads none of a 60 MiB body (under the 64
    MiB limit, which a buffering gateway would take whole): the client's bytes
    in flight stay bounded by the socket buffers on the way, and the
    gateway's RSS does not grow."""
    t = Target(gateway, register_sandbox, app.port)
    uid, size = new_uid(), 60 * MIB
    watch = RssWatch(gateway.proc.pid)
    if http2:
        up = H2Upload(gateway, t.host, certs["ca"], "/upload?stop=1",
                      [("x-lizard-access-token", t.token), ("x-upload-id", uid)], content_length=size)
        try:
            sent = up.send(size, stall_pumps=20)
            app.wait_event(uid, "stopped")
            sent += up.send(size - sent, stall_pumps=20)  # the window stays shut
        finally:
            up.close()
    else:
        s = tls_connect(gateway, t.host, certs["ca"], timeout=120)
        counter = {"sent": 0}

        def send():
            try:
                s.sendall(("POST /upload?stop=1 HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\nX-Upload-Id: %s\r\n"
                           "Content-Length: %d\r\n\r\n" % (t.host, t.token, uid, size)).encode())
                block = b"s" * 65536
                while counter["sent"] < size:
                    s.sendall(block)
                    counter["sent"] += len(block)
            except OSError:
                pass

        th = threading.Thread(target=send, daemon=True)
        th.start()
        try:
            app.wait_event(uid, "stopped")
            last, still = -1, 0
            while still < 6 and counter["sent"] < size:  # no progress for 6 looks in a row: stalled
                still = still + 1 if counter["sent"] == last else 0
                last = counter["sent"]
                time.sleep(0.5)
            sent = counter["sent"]
        finally:
            s.close()
            th.join(timeout=10)
    growth = watch.growth()
    assert sent < IN_FLIGHT_BOUND, "the client got %d bytes of a 60 MiB body out to an app that reads nothing" % sent
    assert growth < RSS_BOUND_KIB, "the gateway's RSS grew by %d KiB" % growth


# --- a browser ---------------------------------------------------------------------------------------

def test_chromium_upload_streams(browser_env, gw_factory, register_sandbox, app, tmp_path):
    """Chromium (playwright-core, browser/upload.js) uploads 200 MiB from a
    page, a fetch() whose body is a stream (over HTTP/2): the app reports its
    first body byte while the page still holds the second half of the body,
    and the whole body arrives intact."""
    from test_browser_e2e import BROWSER_DIR

    gateway = gw_factory({"limits": {"max_request_body_bytes": 256 * MIB}})
    t = Target(gateway, register_sandbox, app.port)
    uid, mib = new_uid(), 200
    url = "https://%s:%d/?lizard_token=%s" % (t.host, gateway.tls_port, t.token)
    cfg = {"executablePath": browser_env["chromium"], "userDataDir": str(tmp_path / "profile"),
           "resolverRules": "MAP *.%s 127.0.0.1" % gwtest.DOMAIN, "url": url, "uploadId": uid, "mib": mib,
           "timeoutMs": 120000}
    p = subprocess.Popen([browser_env["node"], os.path.join(BROWSER_DIR, "upload.js"), json.dumps(cfg)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=BROWSER_DIR)
    try:
        line = json.loads(p.stdout.readline() or b"{}")
        assert line.get("half"), "the page did not get to the second half: %r %s" % (
            line, p.stderr.read().decode("utf-8", "replace")[-2000:] if p.poll() is not None else "")
        app.wait_event(uid, "first_byte", timeout=60)  # the second half is not even made yet
        p.stdin.write(b"go\n")
        p.stdin.flush()
        out = json.loads(p.stdout.readline() or b"{}")
    finally:
        p.kill()
        p.wait()
    assert not out.get("error") and out.get("status") == 200, out
    expect = hashlib.sha256()
    for k in range(mib):
        expect.update(bytes([k % 251]) * MIB)
    assert json.loads(out["body"]) == {"bytes": mib * MIB, "sha256": expect.hexdigest(), "framing": "chunked"}, out
    assert out.get("protocol") in ("h2", None), out
