"""Calls that run for minutes (CONTRACT.md, Long calls; docs/long-calls.md, Long calls):
nothing is cut at 60 s, a port's timeout:<n> replaces the defaults, every cut
is visible (the 504's message, HTTP/2 INTERNAL_ERROR, the access log's "cut",
lizard_responses_cut_total), a caller that leaves stops the work, sockets
keep alive through silence, and gRPC clients get gRPC answers.

The apps: long_call_app.py (a code-execution API: NDJSON /execute, blocking
/exec, and calls that watch their caller), the MCP SDK from npm
(apps/mcp-long), Debian's Jupyter and grpcio. The real-program scenarios run
concurrently in the background of the whole session (long_calls_bg.py,
started by conftest.py): their silences (90 s, 120 s) overlap each other
and the rest of the suite, and their test, ordered last, judges them."""

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import uuid

import h2.events
import pytest

import gwtest
from test_access_log import h2_connect, metric
from long_calls_bg import CURL_CALLS, Proc, Scenario, curl_run

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN_HEADER = "X-Lizard-Access-Token"
INTERNAL_ERROR = 0x2
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(msg):
    if IN_CI:
        pytest.fail(msg + " - required in CI (tests/lib/deps.sh installs it)", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def app(workdir):
    p = Proc([sys.executable, os.path.join(HERE, "long_call_app.py")], os.path.join(workdir, "long-app"), "long-app")
    yield p
    p.stop()


def get_json(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def h2_events(sock, conn, until, timeout):
    """Reads frames until until(event) is true for one; returns the events seen."""
    seen = []
    sock.settimeout(timeout)
    while True:
        data = sock.recv(65536)
        if not data:
            return seen
        for ev in conn.receive_data(data):
            seen.append(ev)
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if until(ev):
                sock.sendall(conn.data_to_send())
                return seen
        sock.sendall(conn.data_to_send())


def h2_get(g, host, path, ca, token=None, headers=()):
    """A GET over HTTP/2: (socket, connection, stream id), the request sent."""
    sock, conn = h2_connect(g, host, ca)
    hd = [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", path)] + list(headers)
    if token:
        hd.append((TOKEN_HEADER.lower(), token))
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, hd, end_stream=True)
    sock.sendall(conn.data_to_send())
    return sock, conn, sid


def log_line(g, path):
    return gwtest.access_log_line(g, path, timeout=15)


# --- timeout:<n> ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_port_timeout_cuts_a_silent_head(gw_factory, register_sandbox, curl, app, http2):
    """timeout:<n> shorter than the call: 504 whose message names the limit,
    its value, that it is the gateway's and how to raise it; the access log
    says cut first_byte_timeout and the metric counts it."""
    g = gw_factory({}, name="gw-port-timeout-%s" % ("h2" if http2 else "h1"))
    sid = gwtest.new_sandbox_id("pto")
    token = register_sandbox(sid, ports={app.port: "private"}, extra={"timeout:%d" % app.port: "1500"})
    before = metric(g, "lizard_responses_cut_total", 'reason="first_byte_timeout"')
    rid = uuid.uuid4().hex
    r = curl(g.host(app.port, sid), "/exec?after_s=8&id=" + rid, method="POST", data="x", http2=http2, gw=g,
             headers={TOKEN_HEADER: token})
    assert r.status == 504 and r.error_code() == "upstream_timeout", r
    msg = r.json()["error"]["message"]
    assert "gateway" in msg and "1500 ms" in msg and "timeout:%d" % app.port in msg, msg
    assert "responsive" not in msg, msg  # it does not blame the app
    rec = log_line(g, "/exec?after_s=8&id=" + rid)
    assert rec["status"] == 504 and rec.get("cut") == "first_byte_timeout" and rec["error"] == "upstream_timeout", rec
    gwtest.wait_for(lambda: metric(g, "lizard_responses_cut_total", 'reason="first_byte_timeout"') == before + 1, 10,
                    what="the cut counted")


def test_default_timeout_message_names_the_key(gw_factory, register_sandbox, curl, app):
    """Without timeout:<n>, the 504 names upstream.first_byte_timeout_ms and
    its value, and how to raise it for the port."""
    g = gw_factory({"upstream": {"first_byte_timeout_ms": 700}}, name="gw-default-timeout")
    sid = gwtest.new_sandbox_id("dto")
    register_sandbox(sid, ports={app.port: "public"})
    r = curl(g.host(app.port, sid), "/exec?after_s=5", method="POST", data="x", gw=g)
    assert r.status == 504, r
    msg = r.json()["error"]["message"]
    assert "upstream.first_byte_timeout_ms = 700 ms" in msg and "timeout:%d" % app.port in msg, msg


def test_port_timeout_cuts_a_silent_body_h2_internal_error(gw_factory, register_sandbox, certs, curl, app):
    """Mid-body silence past timeout:<n>: HTTP/2 resets the stream with
    INTERNAL_ERROR (never PROTOCOL_ERROR), HTTP/1.1 closes before the body's
    end; both lines say cut idle_timeout and the metric counts them."""
    g = gw_factory({}, name="gw-port-timeout-body")
    sid = gwtest.new_sandbox_id("ptb")
    register_sandbox(sid, ports={app.port: "public"}, extra={"timeout:%d" % app.port: "1200"})
    host = g.host(app.port, sid)
    before = metric(g, "lizard_responses_cut_total", 'reason="idle_timeout"')

    path2 = "/hold-body?id=" + uuid.uuid4().hex
    sock, conn, stream = h2_get(g, host, path2, certs["ca"])
    try:
        seen = h2_events(sock, conn, lambda e: isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)), 15)
    finally:
        sock.close()
    resets = [e for e in seen if isinstance(e, h2.events.StreamReset)]
    body = b"".join(e.data for e in seen if isinstance(e, h2.events.DataReceived))
    assert body == b'{"rows": [1, 2, 3', body
    assert resets and resets[0].error_code == INTERNAL_ERROR, seen

    path1 = "/hold-body?id=" + uuid.uuid4().hex
    with pytest.raises(gwtest.CurlError) as ei:
        curl(host, path1, gw=g)
    assert ei.value.rc == 18, ei.value  # transfer closed with outstanding read data

    for path in (path2, path1):
        rec = log_line(g, path)
        assert rec["status"] == 200 and rec.get("cut") == "idle_timeout", rec
    gwtest.wait_for(lambda: metric(g, "lizard_responses_cut_total", 'reason="idle_timeout"') == before + 2, 10,
                    what="both cuts counted")


def test_revocation_and_upstream_reset_cuts_are_visible(gw_factory, register_sandbox, redis, certs, app):
    """The other reasons a response is cut, over HTTP/2: a publish that
    unexposes the port mid-stream (revoked) and an app that closes mid-body
    (upstream_reset) both reset the stream with INTERNAL_ERROR, and their
    access-log lines and the metric say why."""
    g = gw_factory({}, name="gw-cut-reasons")
    sid = gwtest.new_sandbox_id("cutr")
    register_sandbox(sid, ports={app.port: "public"})
    host = g.host(app.port, sid)
    before = {r: metric(g, "lizard_responses_cut_total", 'reason="%s"' % r) for r in ("revoked", "upstream_reset")}

    path = "/hold-body?id=" + uuid.uuid4().hex
    sock, conn, _ = h2_get(g, host, path, certs["ca"])
    try:
        h2_events(sock, conn, lambda e: isinstance(e, h2.events.DataReceived), 10)
        redis.cmd("HDEL", "lizard:sbx:{%s}" % sid, "port:%d" % app.port)
        redis.cmd("PUBLISH", "lizard:routes", sid)
        seen = h2_events(sock, conn, lambda e: isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)), 10)
    finally:
        sock.close()
    assert [e.error_code for e in seen if isinstance(e, h2.events.StreamReset)] == [INTERNAL_ERROR], seen
    assert log_line(g, path).get("cut") == "revoked"

    register_sandbox(sid, ports={app.port: "public"})
    sock, conn, _ = h2_get(g, host, "/die-body", certs["ca"])
    try:
        seen = h2_events(sock, conn, lambda e: isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)), 10)
    finally:
        sock.close()
    assert b"".join(e.data for e in seen if isinstance(e, h2.events.DataReceived)) == b'{"rows": [1', seen
    assert [e.error_code for e in seen if isinstance(e, h2.events.StreamReset)] == [INTERNAL_ERROR], seen
    assert log_line(g, "/die-body").get("cut") == "upstream_reset"
    for r in ("revoked", "upstream_reset"):
        gwtest.wait_for(lambda r=r: metric(g, "lizard_responses_cut_total", 'reason="%s"' % r) == before[r] + 1, 10,
                        what="the %s cut counted" % r)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "999", "7000", ""])
def test_bad_port_timeout_is_ignored_and_logged_once(gw_factory, register_sandbox, curl, app, value):
    """A timeout:<n> that is not a decimal from 1000 to
    upstream.max_port_timeout_ms (here 5000) is ignored: the defaults apply
    (the 504 names upstream.first_byte_timeout_ms) and the gateway says so
    once per (sandbox, lifecycle) in each worker, however many requests."""
    g = gw_factory({"workers": 1, "upstream": {"first_byte_timeout_ms": 600, "max_port_timeout_ms": 5000}},
                   name="gw-bad-timeout")
    sid = gwtest.new_sandbox_id("bto")
    register_sandbox(sid, ports={app.port: "public"}, extra={"timeout:%d" % app.port: value})
    host = g.host(app.port, sid)
    for _ in range(3):
        r = curl(host, "/exec?after_s=3", method="POST", data="x", gw=g)
        assert r.status == 504, r
        assert "upstream.first_byte_timeout_ms = 600 ms" in r.json()["error"]["message"], r.json()
    with open(g.log) as f:
        lines = [ln for ln in f if "sandbox %s" % sid in ln and "timeout:%d" % app.port in ln]
    assert len(lines) == 1, lines
    assert ('is "%s"' % value) in lines[0] and "5000" in lines[0], lines[0]


def test_valid_port_timeout_above_default_lets_the_call_through(gw_factory, register_sandbox, curl, app):
    """timeout:<n> replaces the defaults both ways: longer than
    upstream.first_byte_timeout_ms, the call is answered."""
    g = gw_factory({"upstream": {"first_byte_timeout_ms": 500, "idle_timeout_ms": 500}}, name="gw-long-port")
    sid = gwtest.new_sandbox_id("ltp")
    register_sandbox(sid, ports={app.port: "public"}, extra={"timeout:%d" % app.port: "6000"})
    r = curl(g.host(app.port, sid), "/exec?after_s=2", method="POST", data="x", gw=g)
    assert r.status == 200 and r.json()["exit_code"] == 0, r


STREAMED_TYPES = ["text/event-stream", "application/x-ndjson", "application/jsonl", "application/json-seq",
                  "application/connect+json", "application/connect+proto", "application/grpc", "application/grpc+proto",
                  "Application/X-NDJSON; charset=utf-8"]


def test_streamed_types_are_not_cut_for_silence(gw_factory, register_sandbox, curl_runner, app):
    """Streamed media types carry their own heartbeats: neither
    upstream.idle_timeout_ms (1 s here) nor the port's timeout:<n> cuts their
    silences (2.5 s), while application/json is cut at the port's limit. All
    at once (threads): the suite pays one silence."""
    g = gw_factory({"upstream": {"idle_timeout_ms": 1000}}, name="gw-streamed")
    sid, sid_port = gwtest.new_sandbox_id("strm"), gwtest.new_sandbox_id("strmp")
    token = register_sandbox(sid, ports={app.port: "private"})
    register_sandbox(sid_port, ports={app.port: "private"}, token=token, extra={"timeout:%d" % app.port: "1000"})
    cases = [(t, sid) for t in STREAMED_TYPES] + [("application/x-ndjson", sid_port), ("application/json", sid),
                                                   ("application/json", sid_port)]
    calls = [Scenario(t, lambda t=t, s=s: curl_run(curl_runner, g, g.host(app.port, s),
                                                   "/execute?silent_s=2.5&type=" + urllib.parse.quote(t), False, token,
                                                   timeout=30))
             for t, s in cases]
    for c in calls:
        c.start()
    for c in calls:
        c.join(60)
    results = [(t, s == sid_port, c.result[0]) for (t, s), c in zip(cases, calls)]
    assert all(rc == 0 for t, _, rc in results[:-2]), results
    assert all(rc == 18 for t, _, rc in results[-2:]), results  # application/json: cut mid-body


# --- a caller that leaves -------------------------------------------------------------------------------------


def closed_within(app, rid, t_client_closed):
    """Seconds from the client's close to the app seeing its connection close."""
    box = {}

    def seen():
        box["c"] = get_json(app.port, "/_closed?id=" + rid)["closed_at"]
        return box["c"] is not None

    gwtest.wait_for(seen, 10, what="the app to see its connection closed")
    return box["c"] - t_client_closed


def wait_seen(app, rid):
    gwtest.wait_for(lambda: get_json(app.port, "/_closed?id=" + rid)["seen_at"] is not None, 10,
                    what="the app to have the request")


@pytest.mark.parametrize("where", ["head", "body"])
@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_client_that_leaves_closes_the_sandbox_connection(gateway, register_sandbox, certs, app, http2, where):
    """The client disconnects while its call waits for its head or streams:
    the app sees its connection close at once, and the connection is never
    pooled (the app saw it closed). The contract's figure is 1 s (measured
    here: 1-2 ms over both protocols once the gateway watches the HTTP/1.1
    client, which it does 200 ms after the call began); the bound is 2.5 s so that a
    loaded machine's scheduling does not fail it, against main's 60 s (the
    first-byte timeout) or never (a silent body)."""
    sid = gwtest.new_sandbox_id("leave")
    register_sandbox(sid, ports={app.port: "public"})
    host = gateway.host(app.port, sid)
    rid = uuid.uuid4().hex
    path = ("/hold-head?id=" if where == "head" else "/hold-body?id=") + rid
    if http2:
        sock, conn, stream = h2_get(gateway, host, path, certs["ca"])
        if where == "body":
            h2_events(sock, conn, lambda e: isinstance(e, h2.events.DataReceived), 10)
    else:
        ctx = ssl.create_default_context(cafile=certs["ca"])
        sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gateway.tls_port), timeout=10),
                               server_hostname=host)
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
        if where == "body":
            got = b""
            while b"1, 2, 3" not in got:
                got += sock.recv(4096)
    wait_seen(app, rid)
    time.sleep(0.5)  # past the gateway's 200 ms before it watches an HTTP/1.1 client
    t = time.monotonic()
    sock.close()
    took = closed_within(app, rid, t)
    print("the app saw its caller leave %.3f s after the client closed" % took)
    assert took < 2.5, "the app saw its caller leave %.2f s after the client closed" % took


def test_drain_end_cuts_what_still_runs(gw_factory, register_sandbox, curl_runner, app):
    """SIGTERM: calls still running when the 6 s drain ends are cut, visibly:
    the streaming one ends without its last chunk (curl error 18), the one
    waiting for its head is reset (HTTP/2), both access-log lines say cut
    shutdown, and the gateway still exits 0."""
    g = gw_factory({}, name="gw-drain-cut")
    sid = gwtest.new_sandbox_id("drain")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = g.host(app.port, sid)
    ids = {"stream": uuid.uuid4().hex, "head": uuid.uuid4().hex}
    paths = {"stream": "/execute?silent_s=60&id=" + ids["stream"], "head": "/exec?after_s=60&id=" + ids["head"]}
    # the stream over HTTP/1.1, the call still waiting for its head over HTTP/2 (its stream is reset)
    calls = {k: Scenario(k, lambda k=k, p=p: curl_run(curl_runner, g, host, p, k == "head", token, timeout=60))
             for k, p in paths.items()}
    for c in calls.values():
        c.start()
    for rid in ids.values():
        wait_seen(app, rid)
    assert g.stop() == 0
    for c in calls.values():
        c.join(30)
        assert not c.is_alive() and c.error is None, c.error
    rc, body, err, took = calls["stream"].result
    assert rc == 18 and body == b'{"type":"started"}\n', (rc, body, err)
    # the reset, and the connection that the GOAWAY of the drain's start lets close after its last stream
    assert calls["head"].result[0] in (18, 92) and calls["head"].result[1] == b"", calls["head"].result
    for k, p in paths.items():
        rec = log_line(g, p)
        assert rec.get("cut") == "shutdown", rec


# --- keepalive ------------------------------------------------------------------------------------------------


def ss_timers(filt):
    out = subprocess.run(["ss", "-tnoH", "state", "established", filt], capture_output=True, text=True,
                         check=True).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def test_client_and_sandbox_sockets_keep_alive(gateway, register_sandbox, certs, app):
    """Both sockets of a silent call have SO_KEEPALIVE with the first probe
    after 60 s (ss shows the keepalive timer and its time left)."""
    if shutil.which("ss") is None:
        missing("ss is missing (iproute2)")
    sid = gwtest.new_sandbox_id("ka")
    register_sandbox(sid, ports={app.port: "public"})
    host = gateway.host(app.port, sid)
    rid = uuid.uuid4().hex
    ctx = ssl.create_default_context(cafile=certs["ca"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gateway.tls_port), timeout=10), server_hostname=host)
    try:
        sock.sendall(("GET /hold-head?id=%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (rid, host)).encode())
        wait_seen(app, rid)
        client_port = sock.getsockname()[1]
        # the gateway's end of the client's connection, and its connection to the app
        front = ss_timers("( sport = :%d and dport = :%d )" % (gateway.tls_port, client_port))
        back = [ln for ln in ss_timers("( dport = :%d )" % app.port)]
        assert front and back, (front, back)
        for ln in (front[0], back[0]):
            m = re.search(r"timer:\(keepalive,(\d+)(?:min(\d+))?(?:sec|ms)", ln)
            assert m, ln
            left = int(m.group(1)) * (60 if m.group(2) is not None else 1)
            assert 50 <= left <= 60, ln
    finally:
        sock.close()


# --- gRPC clients ---------------------------------------------------------------------------------------------


def grpc_call(g, host, certs, metadata=()):
    import grpc

    with open(certs["ca"], "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    opts = [("grpc.ssl_target_name_override", host), ("grpc.default_authority", host)]
    with grpc.secure_channel("127.0.0.1:%d" % g.tls_port, creds, options=opts) as ch:
        call = ch.unary_unary("/lizard.test.Exec/Run", request_serializer=None, response_deserializer=None)
        try:
            call(b"\x0a\x02hi", timeout=20, metadata=list(metadata))
        except grpc.RpcError as e:
            return e.code(), e.details()
    return grpc.StatusCode.OK, None


def test_grpc_client_gets_grpc_answers(gateway, register_sandbox, certs, app):
    """python3-grpcio against a port that is not proto:<n> = h2c: UNAVAILABLE
    with the gateway's message; without a credential on a private port:
    UNAUTHENTICATED with the message (not "Received http2 header with
    status: 401")."""
    grpc = pytest.importorskip("grpc") if not IN_CI else __import__("grpc")
    sid = gwtest.new_sandbox_id("grpc")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = gateway.host(app.port, sid)

    code, details = grpc_call(gateway, host, certs, [(TOKEN_HEADER.lower(), token)])
    assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
    assert "h2c" in details and "port %d" % app.port in details.lower(), details

    code, details = grpc_call(gateway, host, certs)
    assert code == grpc.StatusCode.UNAUTHENTICATED, (code, details)
    assert "private" in details and "status: 401" not in details, details

    code, details = grpc_call(gateway, gateway.host(app.port, gwtest.new_sandbox_id("nosuch")), certs)
    assert code == grpc.StatusCode.NOT_FOUND, (code, details)

    # an h2c port goes to the app over HTTP/2 (test_grpc.py); this app speaks HTTP/1.x: a 502 that says so
    sid_h2c = gwtest.new_sandbox_id("grpch2c")
    register_sandbox(sid_h2c, ports={app.port: "public"}, extra={"proto:%d" % app.port: "h2c"})
    code, details = grpc_call(gateway, gateway.host(app.port, sid_h2c), certs)
    assert code == grpc.StatusCode.UNAVAILABLE and "h2c" in details and "HTTP/2" in details, (code, details)


def test_grpc_over_http1_gets_the_same_headers(gateway, register_sandbox, curl, app):
    """A content-type: application/grpc request over HTTP/1.1 is not valid
    gRPC, but gets the same Trailers-Only head: 200, grpc-status 14 and the
    message percent-encoded, no body."""
    sid = gwtest.new_sandbox_id("grpc1")
    register_sandbox(sid, ports={app.port: "public"})
    r = curl(gateway.host(app.port, sid), "/lizard.test.Exec/Run", method="POST", data=b"\x00\x00\x00\x00\x00",
             headers={"Content-Type": "application/grpc+proto"})
    assert r.status == 200 and r.body == b"", r
    assert r.headers.get("content-type") == "application/grpc", r.headers
    assert r.headers.get("grpc-status") == "14", r.headers
    msg = r.headers.get("grpc-message", "")
    assert "h2c" in msg and all(0x20 <= ord(c) <= 0x7e for c in msg), msg


# --- bad answers ---------------------------------------------------------------------------------------------


def test_bad_upstream_response_quotes_the_first_bytes(gateway, register_sandbox, curl, app):
    """bad_upstream_response says what the app sent: its first bytes,
    escaped, at most 64 (an app that speaks HTTP/2, or writes a bare word)."""
    sid = gwtest.new_sandbox_id("badans")
    register_sandbox(sid, ports={app.port: "public"})
    host = gateway.host(app.port, sid)
    r = curl(host, "/bytes?text=Unauthorized%0A")
    assert r.status == 502 and r.error_code() == "bad_upstream_response", r
    assert 'It sent: "Unauthorized\\n"' in r.json()["error"]["message"], r.json()
    # an HTTP/2 server's first frame (SETTINGS), then more than 64 bytes
    r = curl(host, "/bytes?text=%00%00%12%04%00%00%00%00%00" + "x" * 80)
    msg = r.json()["error"]["message"]
    assert r.status == 502 and 'It sent: "\\x00\\x00\\x12\\x04\\x00\\x00\\x00\\x00\\x00' + "x" * 55 + '..."' in msg, msg


# --- real programs, on the default configuration -------------------------------------------------------------



def test_real_long_calls_are_not_cut(long_calls_background):
    """On the default configuration, concurrently: an NDJSON execution
    stream silent 90 s and a blocking call answered after 120 s, each over
    HTTP/1.1 and HTTP/2 (curl); an MCP tool call of the official SDK silent
    90 s with a JSON answer (enableJsonResponse); a Jupyter cell silent
    120 s. Each gets its whole answer (main cut the first four at 60 s and
    the MCP call with a 504). They run in the background of the session
    (long_calls_bg.py, on a gateway of their own): this test, ordered last,
    judges them."""
    bg = long_calls_background
    if bg.missing:
        missing(bg.missing)
    threads = bg.results()
    for k, t in threads.items():
        assert not t.is_alive() and t.error is None, (k, t.error)

    # every scenario is judged, then all that failed are reported together
    bad = []
    for k in ("ndjson-h1", "ndjson-h2"):
        rc, body, err, took = threads[k].result
        types_ = [json.loads(ln).get("type") for ln in body.splitlines()]
        if rc != 0 or types_ != ["started", "result"] or took < 90:
            bad.append("%s: curl %d after %.1f s, %r" % (k, rc, took, body[:60]))
    for k in ("exec-h1", "exec-h2"):
        rc, body, err, took = threads[k].result
        if rc != 0 or not body.startswith(b"{") or json.loads(body).get("exit_code") != 0 or took < 120:
            bad.append("%s: curl %d after %.1f s, %r" % (k, rc, took, body[:60]))
    rc, out, err, took = threads["mcp"].result
    if rc != 0 or out != "slept 90 s":
        bad.append("mcp: exit %d after %.1f s, %r" % (rc, took, out[:120]))
    text, status, took = threads["jupyter"].result
    if status != "ok" or text != "cell done 42\n" or took < 120:
        bad.append("jupyter: %s after %.1f s, %r" % (status, took, text))
    assert not bad, "\n".join(bad)
    for k, path in CURL_CALLS:
        rec = log_line(bg.gw, bg.path(k, path))
        assert rec["status"] == 200 and "cut" not in rec and "error" not in rec, rec
    rc, reports = bg.stop_gateway()
    assert not reports, "sanitizer reports from the long calls' gateway:\n" + "\n\n".join(reports)
    assert rc == 0, "the long calls' gateway exited with %s on SIGTERM" % rc
