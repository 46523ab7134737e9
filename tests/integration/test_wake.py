"""Waking a paused sandbox and activity (CONTRACT.md, "Waking a paused
sandbox" and "Activity").

The control plane is deploy/resume-consumer.py, the example docs/wake.md
points to: it consumes lizard:resume with a consumer group and, after a
delay, writes state=running and publishes. Held requests (HTTP/1.1 GET, POST
with a body, an HTTP/2 stream, a WebSocket upgrade) complete after the
wake; concurrent requests and several gateways produce exactly one resume
request; the timeout answers 503 with Retry-After; a client that leaves
while held leaves nothing behind; credentials are checked before anything
wakes. Activity: ZADD lizard:activity GT moves for traffic (a request, a
frame on an idle WebSocket), not for X-Lizard-No-Activity requests."""

import asyncio
import http.client
import os
import subprocess
import threading
import time

import pytest

import gwtest
import test_proxy as tp

CONSUMER = os.path.join(gwtest.REPO, "deploy", "resume-consumer.py")


# --- helpers -------------------------------------------------------------------


class Consumer:
    """deploy/resume-consumer.py as a process: the control plane's side."""

    def __init__(self, workdir, redis, delay):
        os.makedirs(workdir, exist_ok=True)
        self.log = os.path.join(workdir, "resume-consumer.log")
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([gwtest.PYTHON, CONSUMER, "--redis", "127.0.0.1:%d" % redis.port, "--delay",
                                      str(delay), "--consumer", "test-%d" % os.getpid()],
                                     stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if line.strip() != "ready":
            gwtest.stop_process(self.proc)
            raise RuntimeError("resume-consumer did not start: %r %s" % (line, gwtest.tail(self.log)))

    def stop(self):
        gwtest.stop_process(self.proc)
        self.proc.stdout.close()


@pytest.fixture
def consumer(workdir, redis):
    """consumer(delay) starts the control-plane stand-in; stopped after the test."""
    made = []

    def start(delay=1.0):
        c = Consumer(os.path.join(workdir, "consumer"), redis, delay)
        made.append(c)
        return c

    yield start
    for c in made:
        c.stop()


def paused_sandbox(redis, upstream_port, access="private", state="paused", resume="auto"):
    sid = gwtest.new_sandbox_id("wk")
    extra = {"resume": resume} if resume is not None else None
    token = gwtest.register_sandbox(redis, sid, state=state, ports={upstream_port: access}, extra=extra)
    return sid, token


def resume_requests(redis, sid):
    """The entries of lizard:resume for sid, as dicts."""
    out = []
    for _id, flat in redis.cmd("XRANGE", "lizard:resume", "-", "+"):
        d = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
        if d.get("sandbox") == sid:
            out.append(d)
    return out


def state_of(redis, sid):
    v = redis.cmd("HGET", "lizard:sbx:{%s}" % sid, "state")
    return v.decode() if v else None


def metrics(g):
    status, body = g.admin_get("/metrics")
    assert status == 200
    out = {}
    for ln in body.decode().splitlines():
        if ln and not ln.startswith("#"):
            name, _, value = ln.rpartition(" ")
            out[name] = float(value)
    return out


def metric(g, name):
    return metrics(g).get(name, 0)


def token_hdr(token):
    return {"X-Lizard-Access-Token": token}


def raw_request(g, host, ca, path="/echo", headers=None):
    """An HTTP/1.1 request written on a fresh TLS connection, not read: the
    socket is returned (the caller reads or closes it)."""
    sock = tp.tls_connect(g, host, ca, timeout=60)
    lines = ["GET %s HTTP/1.1" % path, "Host: %s" % host, "Accept: */*"]
    lines += ["%s: %s" % kv for kv in (headers or {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def read_status(sock, timeout=60):
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed before a status line")
        buf += data
    return int(buf.split(b" ", 2)[1])


# --- waking --------------------------------------------------------------------


@tp.H1_H2
def test_held_get_completes_after_the_wake(gateway, redis, upstream, consumer, curl, http2):
    """A request for a paused sandbox with resume: auto is held, one resume
    request is written, and the request is proxied once the control plane
    says running."""
    sid, token = paused_sandbox(redis, upstream.port)
    consumer(delay=1.0)
    t0 = time.monotonic()
    r = curl(gateway.host(upstream.port, sid), "/echo/held", headers=token_hdr(token), http2=http2, timeout=40)
    waited = time.monotonic() - t0
    assert r.status == 200, r
    assert r.json()["path"] == "/echo/held"
    assert state_of(redis, sid) == "running"
    reqs = resume_requests(redis, sid)
    assert len(reqs) == 1, reqs
    assert reqs[0]["gateway"] and int(reqs[0]["at_ms"]) > 0, reqs
    # the consumer waits 1 s before it writes running: the answer cannot have come before (a lower bound
    # only: it proves the request was held, not refused and retried)
    assert waited >= 0.9, waited
    # the fleet-wide lock the gateway took
    assert redis.cmd("GET", "lizard:resume:{%s}" % sid) is not None


def test_held_post_with_body_completes(gateway, redis, upstream, consumer, curl):
    sid, token = paused_sandbox(redis, upstream.port)
    consumer(delay=0.5)
    body = os.urandom(300 * 1024)
    r = curl(gateway.host(upstream.port, sid), "/echo/post", headers=token_hdr(token), data=body, method="POST",
             timeout=40)
    assert r.status == 200, r
    j = r.json()
    assert j["method"] == "POST" and j["body_length"] == len(body), j
    assert j["body_sha256"] == gwtest.sha256_hex(body), "the body held with the request must reach the app intact"
    assert len(resume_requests(redis, sid)) == 1


def test_held_websocket_upgrade_completes(gateway, redis, upstream, consumer, certs):
    sid, token = paused_sandbox(redis, upstream.port)
    consumer(delay=0.5)
    host = gateway.host(upstream.port, sid)

    async def go():
        async with tp.ws_connect(gateway, host, "/ws", certs["ca"], token_hdr(token)) as ws:
            await ws.send("after the wake")
            return await ws.recv()

    assert tp.run(go(), timeout=60) == "after the wake"
    assert len(resume_requests(redis, sid)) == 1
    assert state_of(redis, sid) == "running"


def test_public_port_wakes_without_credential(gateway, redis, upstream, consumer, curl):
    sid, _ = paused_sandbox(redis, upstream.port, access="public")
    consumer(delay=0.3)
    r = curl(gateway.host(upstream.port, sid), "/echo/public", timeout=40)
    assert r.status == 200, r
    assert len(resume_requests(redis, sid)) == 1


def test_concurrent_requests_one_resume_request(gateway, redis, upstream, consumer, certs):
    """200 requests at once for one paused sandbox (on both workers): one
    XADD, and all 200 answered by the sandbox after the wake."""
    sid, token = paused_sandbox(redis, upstream.port)
    host = gateway.host(upstream.port, sid)
    n = 200
    results = [None] * n
    start = threading.Barrier(n + 1)

    def one(i):
        conn = tp.GwConnection(gateway, host, certs["ca"])
        conn.timeout = 90
        try:
            start.wait(30)
            results[i] = conn.fetch("GET", "/echo/%d" % i, headers=token_hdr(token))[0]
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = repr(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    start.wait(30)
    # the control plane starts only once requests are held: they pile up on a paused sandbox
    gwtest.wait_for(lambda: resume_requests(redis, sid), 30, what="the resume request")
    # the consumer's group starts at "$" when it makes it: made here first from 0, so that the request
    # already written is read however this test is ordered (alone, it was missed and every request got 503)
    try:
        redis.cmd("XGROUP", "CREATE", "lizard:resume", "control-plane", "0", "MKSTREAM")
    except gwtest.RespError as e:
        assert "BUSYGROUP" in str(e), e
    consumer(delay=1.0)
    for t in threads:
        t.join(120)
    assert results == [200] * n, [r for r in results if r != 200][:5]
    assert len(resume_requests(redis, sid)) == 1, resume_requests(redis, sid)


def test_two_gateways_one_resume_request(gw_factory, redis, upstream, consumer, curl):
    gws = [gw_factory({"instance_id": "wake-fleet-%d" % i}, name="wake-fleet-%d" % i) for i in (1, 2)]
    sid, token = paused_sandbox(redis, upstream.port)
    results = []

    def one(g):
        results.append(curl(g.host(upstream.port, sid), "/echo/fleet", headers=token_hdr(token), gw=g, timeout=60))

    threads = [threading.Thread(target=one, args=(g,)) for g in gws for _ in range(5)]
    for t in threads:
        t.start()
    gwtest.wait_for(lambda: sum(metric(g, "lizard_wake_held_requests") for g in gws) == 10, 30,
                    what="10 requests held on two gateways")
    consumer(delay=0.5)
    for t in threads:
        t.join(90)
    assert [r.status for r in results] == [200] * 10, results
    reqs = resume_requests(redis, sid)
    assert len(reqs) == 1, reqs
    assert reqs[0]["gateway"] in ("wake-fleet-1", "wake-fleet-2")
    # the other gateway tried and found the lock taken
    assert sum(metric(g, 'lizard_wake_resume_requests_total{result="sent"}') for g in gws) == 1
    assert sum(metric(g, 'lizard_wake_resume_requests_total{result="deduplicated"}') for g in gws) >= 1


@pytest.mark.parametrize("publish", [True, False], ids=["publish", "publish_lost"])
def test_starting_is_waited_for_without_a_resume_request(gateway, redis, upstream, curl, publish):
    """starting is waited for like paused, without a resume request; when the
    control plane's publish is lost, the gateway's own re-read finds the
    change anyway."""
    sid, token = paused_sandbox(redis, upstream.port, state="starting")
    results = []
    t = threading.Thread(target=lambda: results.append(
        curl(gateway.host(upstream.port, sid), "/echo/starting", headers=token_hdr(token), timeout=40)))
    t.start()
    gwtest.wait_for(lambda: metric(gateway, "lizard_wake_held_requests") >= 1, 20, what="the request held")
    redis.cmd("HSET", "lizard:sbx:{%s}" % sid, "state", "running")
    if publish:
        redis.cmd("PUBLISH", "lizard:routes", sid)
    t.join(40)
    assert results and results[0].status == 200, results
    assert resume_requests(redis, sid) == []


@pytest.mark.parametrize("state,resume", [("stopped", "auto"), ("paused", None), ("paused", "manual")])
def test_not_woken(gateway, redis, upstream, curl, state, resume):
    """stopped is never woken; paused without resume: auto is refused at once."""
    sid, token = paused_sandbox(redis, upstream.port, state=state, resume=resume)
    r = curl(gateway.host(upstream.port, sid), "/echo", headers=token_hdr(token))
    tp.assert_curl_error(r, 503, "sandbox_not_running", sid, upstream.port)
    assert r.headers.get("retry-after"), r
    assert resume_requests(redis, sid) == []
    assert state_of(redis, sid) == state


@pytest.mark.parametrize("how", ["none", "wrong_header", "wrong_query"])
def test_no_credential_never_wakes(gateway, redis, upstream, curl, how):
    sid, _ = paused_sandbox(redis, upstream.port)
    host = gateway.host(upstream.port, sid)
    if how == "none":
        r = curl(host, "/echo")
        tp.assert_curl_error(r, 401, "missing_token")
    elif how == "wrong_header":
        r = curl(host, "/echo", headers=token_hdr("not-the-token"))
        tp.assert_curl_error(r, 403, "invalid_token")
    else:
        r = curl(host, "/echo?lizard_token=not-the-token")
        tp.assert_curl_error(r, 403, "invalid_token")
    assert resume_requests(redis, sid) == []
    assert redis.cmd("GET", "lizard:resume:{%s}" % sid) is None
    assert state_of(redis, sid) == "paused"


def test_timeout_answers_503_with_retry_after(gw_factory, redis, upstream, curl):
    """No control plane answers: after routing.resume_timeout_ms the held
    request gets 503 sandbox_not_running with Retry-After."""
    g = gw_factory({"routing": {"resume_timeout_ms": 2000}}, name="wake-timeout")
    sid, token = paused_sandbox(redis, upstream.port)
    t0 = time.monotonic()
    r = curl(g.host(upstream.port, sid), "/echo", headers=token_hdr(token), gw=g, timeout=60)
    waited = time.monotonic() - t0
    tp.assert_curl_error(r, 503, "sandbox_not_running", sid, upstream.port)
    assert int(r.headers["retry-after"]) > 0, r
    # held the configured 2 s, not refused at once; the upper bound is only there to catch "never"
    # (generous: the machine is shared and loaded)
    assert 1.9 <= waited < 30, waited
    assert len(resume_requests(redis, sid)) == 1
    assert metric(g, "lizard_wake_timeouts_total") == 1
    assert metric(g, "lizard_wake_held_requests") == 0


def test_resume_timeout_zero_asks_and_answers_at_once(gw_factory, redis, upstream, curl):
    """routing.resume_timeout_ms 0 (docs/wake.md: asks for the resume, holds
    nothing): 503 sandbox_not_running with Retry-After, and the resume
    request is written all the same."""
    g = gw_factory({"routing": {"resume_timeout_ms": 0}}, name="wake-zero")
    sid, token = paused_sandbox(redis, upstream.port)
    r = curl(g.host(upstream.port, sid), "/echo", headers=token_hdr(token), gw=g, timeout=60)
    tp.assert_curl_error(r, 503, "sandbox_not_running", sid, upstream.port)
    assert int(r.headers["retry-after"]) > 0, r
    gwtest.wait_for(lambda: len(resume_requests(redis, sid)) == 1, 10, what="the resume request")
    assert metric(g, "lizard_wake_held_requests") == 0


def test_failed_resume_request_leaves_no_lock(gw_factory, redis, upstream, consumer, curl):
    """The XADD of the resume request fails (lizard:resume is a string): the
    lock is not left behind, so the request is asked for again within a
    second or two once the stream can take it, and the held request is
    proxied; before, the lock stood for 30 s with no request behind it and
    the held request ran into its 503."""
    redis.cmd("DEL", "lizard:resume")
    redis.cmd("SET", "lizard:resume", "not a stream")
    g = gw_factory({"routing": {"resume_timeout_ms": 25000}, "workers": 1}, name="wake-xadd-fails")
    sid, token = paused_sandbox(redis, upstream.port)
    out = {}
    try:
        t = threading.Thread(target=lambda: out.update(
            r=curl(g.host(upstream.port, sid), "/echo/held", headers=token_hdr(token), gw=g, timeout=60)))
        t.start()
        gwtest.wait_for(lambda: metric(g, 'lizard_wake_resume_requests_total{result="failed"}') >= 1, 10,
                        what="a failed resume request")
        assert redis.cmd("GET", "lizard:resume:{%s}" % sid) is None, "a lock with no request behind it"
        assert "WRONGTYPE" in gwtest.tail(g.log, 50)
    finally:
        # the stream and the consumer's group in one step, from id 0: a resume request written before
        # the consumer starts is read all the same (its own group would start at "$")
        redis.cmd("DEL", "lizard:resume")
        redis.cmd("XGROUP", "CREATE", "lizard:resume", "control-plane", "0", "MKSTREAM")
    consumer(delay=0.2)
    t.join(timeout=90)
    r = out["r"]
    assert r.status == 200, r
    assert state_of(redis, sid) == "running"
    assert len(resume_requests(redis, sid)) == 1
    assert redis.cmd("GET", "lizard:resume:{%s}" % sid) is not None


def test_limit_per_sandbox_429(gw_factory, redis, upstream, certs, curl):
    g = gw_factory({"limits": {"max_held_requests_per_sandbox": 2}, "workers": 1}, name="wake-limit")
    sid, token = paused_sandbox(redis, upstream.port)
    host = g.host(upstream.port, sid)
    socks = [raw_request(g, host, certs["ca"], headers=token_hdr(token)) for _ in range(2)]
    try:
        gwtest.wait_for(lambda: metric(g, "lizard_wake_held_requests") == 2, 20, what="two held requests")
        r = curl(host, "/echo", headers=token_hdr(token), gw=g)
        tp.assert_curl_error(r, 429, "too_many_connections", sid, upstream.port)
        assert metric(g, "lizard_wake_refused_total") == 1
    finally:
        for s in socks:
            s.close()
    gwtest.wait_for(lambda: metric(g, "lizard_wake_held_requests") == 0, 20, what="the held requests released")


def test_client_leaving_while_held_leaves_nothing(gw_factory, redis, upstream, certs):
    """HTTP/1.1 connections closed and HTTP/2 streams reset while held are
    released at once (long before the timeout), with no upstream connection
    made; the gateway exits clean under ASan (gw_factory checks)."""
    import h2.config
    import h2.connection

    g = gw_factory({"routing": {"resume_timeout_ms": 120000}}, name="wake-leave")
    sid, token = paused_sandbox(redis, upstream.port)
    host = g.host(upstream.port, sid)
    before = upstream.stats()["requests"]

    socks = [raw_request(g, host, certs["ca"], headers=token_hdr(token)) for _ in range(3)]
    h2sock = tp.tls_connect(g, host, certs["ca"], alpn=("h2",), timeout=30)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    streams = []
    for i in range(2):
        s = conn.get_next_available_stream_id()
        conn.send_headers(s, [(":method", "GET"), (":scheme", "https"), (":authority", host),
                              (":path", "/echo/h2-%d" % i), ("x-lizard-access-token", token)], end_stream=True)
        streams.append(s)
    h2sock.sendall(conn.data_to_send())

    gwtest.wait_for(lambda: metric(g, "lizard_wake_held_requests") == 5, 20, what="five held requests")
    for s in socks:
        s.close()
    conn.reset_stream(streams[0])
    h2sock.sendall(conn.data_to_send())
    # released within a few seconds although the timeout is 120 s (bound generous: loaded machine)
    gwtest.wait_for(lambda: metric(g, "lizard_wake_held_requests") == 1, 20, what="four released")
    h2sock.close()  # the whole HTTP/2 connection goes: its last stream too
    gwtest.wait_for(lambda: metric(g, "lizard_wake_held_requests") == 0, 20, what="all released")
    assert metric(g, "lizard_wake_abandoned_total") == 5
    assert metric(g, "lizard_wake_timeouts_total") == 0
    assert upstream.stats()["requests"] - before - 1 == 0, "a held request must cost no upstream connection"
    assert g.stop() == 0


def test_wake_metrics(gateway, redis, upstream, consumer, curl):
    before = metrics(gateway)
    sid, token = paused_sandbox(redis, upstream.port)
    consumer(delay=0.5)
    r = curl(gateway.host(upstream.port, sid), "/echo", headers=token_hdr(token), timeout=40)
    assert r.status == 200
    after = metrics(gateway)

    def delta(name):
        return after.get(name, 0) - before.get(name, 0)

    assert delta('lizard_wake_resume_requests_total{result="sent"}') == 1
    assert delta("lizard_wake_held_requests_total") == 1
    assert delta("lizard_wake_milliseconds_count") >= 1
    assert delta("lizard_wake_milliseconds_sum") >= 400  # the consumer waits 0.5 s before it writes running
    assert after['lizard_wake_milliseconds_bucket{le="+Inf"}'] == after["lizard_wake_milliseconds_count"]
    assert after["lizard_wake_held_requests"] == 0


def test_demo_wakes_a_paused_sandbox(tmp_path):
    """deploy/demo.sh runs the example consumer: after `demo.sh pause`, the
    preview URL wakes the demo sandbox and loads."""
    run_dir = str(tmp_path / "demo-run")
    ports = {k: gwtest.free_port() for k in ("DEMO_TLS_PORT", "DEMO_PLAIN_PORT", "DEMO_ADMIN_PORT", "DEMO_APP_PORT",
                                             "DEMO_APP2_PORT", "DEMO_REDIS_PORT")}
    env = dict(os.environ, DEMO_RUN=run_dir, DEMO_GATEWAY=gwtest.gateway_binary(), DEMO_NO_INSTALL="1",
               **{k: str(v) for k, v in ports.items()})
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")
    demo = os.path.join(gwtest.REPO, "deploy", "demo.sh")
    try:
        r = subprocess.run(["bash", demo], env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, "demo.sh failed: %s\n%s" % (r.stdout, r.stderr)
        url = [w for w in r.stdout.split() if w.startswith("https://") and "lizard_token=" in w][0]
        r = subprocess.run(["bash", demo, "pause"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rc = gwtest.RespClient(ports["DEMO_REDIS_PORT"])
        assert rc.cmd("HGET", "lizard:sbx:{demo}", "state") == b"paused"
        host = url.split("//", 1)[1].split(":", 1)[0]
        resp = gwtest.Curl(str(tmp_path / "curl"), os.path.join(run_dir, "ca.pem")).request(
            url.split("?", 1)[0], headers={"X-Lizard-Access-Token": url.split("lizard_token=", 1)[1]},
            resolve=["%s:%d:127.0.0.1" % (host, ports["DEMO_TLS_PORT"])], timeout=40)
        assert resp.status == 200 and b"Sandbox demo" in resp.body, resp
        assert rc.cmd("HGET", "lizard:sbx:{demo}", "state") == b"running"
        assert len(rc.cmd("XRANGE", "lizard:resume", "-", "+")) == 1
        rc.close()
    finally:
        subprocess.run(["bash", demo, "stop"], env=env, capture_output=True, timeout=60)


# --- activity ------------------------------------------------------------------


def activity_of(redis, sid):
    v = redis.cmd("ZSCORE", "lizard:activity", sid)
    return int(float(v)) if v is not None else None


@pytest.fixture
def activity_gw(gw_factory):
    return gw_factory({"metering": {"flush_interval_ms": 200}}, name="activity")


def test_activity_moves_with_traffic(activity_gw, redis, upstream, curl):
    g = activity_gw
    sid, token = paused_sandbox(redis, upstream.port, state="running")
    t0 = int(time.time() * 1000)
    assert curl(g.host(upstream.port, sid), "/echo", headers=token_hdr(token), gw=g).status == 200
    first = gwtest.wait_for(lambda: activity_of(redis, sid), 10, what="the activity of the sandbox")
    assert first >= t0 - 1000, (first, t0)
    time.sleep(0.3)
    assert curl(g.host(upstream.port, sid), "/echo", headers=token_hdr(token), gw=g).status == 200
    gwtest.wait_for(lambda: activity_of(redis, sid) > first, 10, what="the activity to move on")


def test_activity_written_at_sigterm(gw_factory, redis, upstream, curl):
    """The last interval's activity is written by the final flush: with a
    flush interval far away, a clean stop is the only flush."""
    g = gw_factory({"metering": {"flush_interval_ms": 60000}}, name="activity-stop")
    sid, token = paused_sandbox(redis, upstream.port, state="running")
    t0 = int(time.time() * 1000)
    assert curl(g.host(upstream.port, sid), "/echo", headers=token_hdr(token), gw=g).status == 200
    time.sleep(0.3)
    assert activity_of(redis, sid) is None
    assert g.stop() == 0, gwtest.tail(g.log)
    score = activity_of(redis, sid)
    assert score is not None and score >= t0 - 1000, (score, t0)


def test_no_activity_header_is_not_activity(activity_gw, redis, upstream, curl):
    g = activity_gw
    sid, token = paused_sandbox(redis, upstream.port, state="running")
    hdr = dict(token_hdr(token), **{"X-Lizard-No-Activity": "1"})
    for _ in range(3):
        r = curl(g.host(upstream.port, sid), "/echo", headers=hdr, gw=g)
        assert r.status == 200
        # and, as every X-Lizard- header, it is not forwarded
        assert all(k.lower() != "x-lizard-no-activity" for k, _ in r.json()["headers"]), r.json()["headers"]
    # a control: another sandbox with traffic shows up, so flushes did happen meanwhile
    other, otoken = paused_sandbox(redis, upstream.port, state="running")
    assert curl(g.host(upstream.port, other), "/echo", headers=token_hdr(otoken), gw=g).status == 200
    gwtest.wait_for(lambda: activity_of(redis, other), 10, what="the control sandbox's activity")
    time.sleep(0.5)
    assert activity_of(redis, sid) is None


def test_idle_websocket_frame_is_activity(activity_gw, redis, upstream, certs):
    """A WebSocket open and idle for several flushes, then one frame: the
    frame moves the sandbox's time (the upgrade request itself counted
    first)."""
    g = activity_gw
    sid, token = paused_sandbox(redis, upstream.port, state="running")
    host = g.host(upstream.port, sid)

    async def go():
        async with tp.ws_connect(g, host, "/ws", certs["ca"], token_hdr(token)) as ws:
            await asyncio.to_thread(gwtest.wait_for, lambda: activity_of(redis, sid), 10, 0.05, "activity")
            # the upgrade's own bytes are billed once the client's TCP acknowledged them (checked every
            # second, docs/metering.md Metering) and flushed; that bill moves the activity too: wait for it
            await asyncio.to_thread(gwtest.wait_for, lambda: int(redis.cmd("GET", "lizard:egress:{%s}" % sid) or 0) > 0,
                                    15, 0.05, "the 101 billed")
            await asyncio.sleep(0.6)
            idle = activity_of(redis, sid)
            await asyncio.sleep(0.6)  # three more flushes with the tunnel open and nothing moving
            still = activity_of(redis, sid)
            await ws.send("wake up")
            assert await ws.recv() == "wake up"
            await asyncio.to_thread(gwtest.wait_for, lambda: activity_of(redis, sid) > still, 10, 0.05,
                                    "activity after the frame")
            return idle, still, activity_of(redis, sid)

    idle, still, moved = tp.run(go())
    assert still == idle, "an open tunnel that moves no byte is not activity"
    assert moved > still
