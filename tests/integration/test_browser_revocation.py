"""Revocation reaches open connections (CONTRACT.md, Authentication): when a
publish on lizard:routes shows that a sandbox's port is no longer exposed,
that it is not running, that its token or its lifecycle changed, or that it
is gone, the gateway closes that sandbox's open WebSocket tunnels and
in-flight responses that the new record refuses, within one round trip of
the publish. Another sandbox's tunnel stays open, and a publish that refuses
nothing closes nothing.

Each test shows that the publish is the cause: the Redis change is written
first WITHOUT the publish, and the tunnel (or stream) is shown to still work
after it; only then is the publish sent, and the close is awaited.

Real gateway, real redis-server, the real upstream.py (its /ws echo, /sse and
/slow-head), python3-websockets and curl as clients."""

import asyncio
import os
import secrets
import select
import ssl
import subprocess
import time

import pytest

import browser_helpers as bh
import gwtest

# The contract says one round trip of the publish (a Redis HGETALL here;
# measured about 1-5 ms on loopback). The bound asserted is generous because
# the machine is a loaded 2-core one shared with other test runs: x5 the 1 s
# that issue 15 asks for. What the test proves is the cause (open just before
# the publish, closed after it), not a latency.
CLOSE_BOUND_S = 5.0
# How long a tunnel is watched to still work after a change that was written
# but not published (nothing may happen without the publish).
UNPUBLISHED_WAIT_S = 0.5


def key(sid):
    return "lizard:sbx:{%s}" % sid


def change(redis, sid, port, kind, token):
    """Writes one kind of revocation into the sandbox's hash (no publish)."""
    k = key(sid)
    if kind == "unexpose":
        redis.cmd("HDEL", k, "port:%d" % port)
    elif kind == "stop":
        redis.cmd("HSET", k, "state", "stopped")
    elif kind == "pause":
        redis.cmd("HSET", k, "state", "paused")
    elif kind == "rotate":
        redis.cmd("HSET", k, "token_sha256", gwtest.sha256_hex("rotated-" + token))
    elif kind == "lifecycle":
        redis.cmd("HSET", k, "lifecycle", "lc-new-" + secrets.token_hex(4))
    elif kind == "delete":
        redis.cmd("DEL", k)
    elif kind == "private":
        redis.cmd("HSET", k, "port:%d" % port, "private")
    elif kind == "harmless":
        # fields that refuse nothing: the project, another port
        redis.cmd("HSET", k, "project", "other-project", "port:1", "public")
    else:
        raise AssertionError(kind)


def publish(redis, sid):
    redis.cmd("PUBLISH", "lizard:routes", sid)


def hgetall_calls(redis):
    """HGETALLs Redis has run (a sandbox record read: route fetches and revocation re-reads)."""
    for line in redis.cmd("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_hgetall:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def ws_connect(gw, host, path, ca, headers=None):
    import websockets

    ctx = ssl.create_default_context(cafile=ca)
    return websockets.connect("wss://%s:%d%s" % (host, gw.tls_port, path), host="127.0.0.1", port=gw.tls_port, ssl=ctx,
                              server_hostname=host, extra_headers=list((headers or {}).items()), compression=None,
                              ping_interval=None, open_timeout=10, close_timeout=2)


async def echo(ws, text):
    await ws.send(text)
    got = await asyncio.wait_for(ws.recv(), 5)
    assert got == text, (text, got)


async def wait_closed(ws, bound):
    """Seconds until the tunnel is closed by the gateway (recv raises), or
    None if it still works after `bound` seconds."""
    import websockets

    t0 = time.monotonic()
    try:
        while True:
            await asyncio.wait_for(ws.recv(), max(0.01, bound - (time.monotonic() - t0)))
    except websockets.ConnectionClosed:
        return time.monotonic() - t0
    except asyncio.TimeoutError:
        return None


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def credentials(how, curl, host, token):
    """(path suffix, headers) that carry the sandbox's credential `how`."""
    if how == "header":
        return "", {bh.TOKEN_HEADER: token}
    if how == "query":
        return "&lizard_token=" + token, {}
    if how == "cookie":
        r = curl(host, "/echo?lizard_token=" + token, headers=bh.NAVIGATION)
        assert r.status == 302, r
        return "", {"Cookie": "%s=%s" % (bh.COOKIE_NAME, bh.set_cookies(r)[0].value)}
    if how == "public":
        return "", {}
    raise AssertionError(how)


def two_sandboxes(register_sandbox, gateway, upstream, public=False):
    out = []
    for name in ("rev", "oth"):
        sid = gwtest.new_sandbox_id(name)
        token = register_sandbox(sid, ports={upstream.port: "public" if public else "private"})
        out.append((sid, token, gateway.host(upstream.port, sid)))
    return out


# kind of revocation, credential the tunnel was opened with
CASES = [("unexpose", "header"), ("stop", "header"), ("rotate", "header"), ("lifecycle", "header"),
         ("delete", "header"), ("pause", "cookie"), ("rotate", "cookie"), ("unexpose", "cookie"),
         ("lifecycle", "cookie"), ("rotate", "query"), ("stop", "query"), ("private", "public"),
         ("unexpose", "public")]


@pytest.mark.parametrize("kind,how", CASES, ids=["%s-%s" % c for c in CASES])
def test_open_websocket_closed_by_revocation_publish(gateway, redis, register_sandbox, upstream, certs, curl, kind, how):
    (sid, token, host), (other, other_token, other_host) = two_sandboxes(register_sandbox, gateway, upstream,
                                                                         public=how == "public")
    suffix, headers = credentials(how, curl, host, token)
    osuffix, oheaders = credentials(how, curl, other_host, other_token)

    async def go():
        async with ws_connect(gateway, host, "/ws?id=a" + suffix, certs["ca"], headers) as a, \
                ws_connect(gateway, other_host, "/ws?id=b" + osuffix, certs["ca"], oheaders) as b:
            await echo(a, "a before")
            await echo(b, "b before")
            # a publish that refuses nothing closes nothing
            change(redis, sid, upstream.port, "harmless", token)
            reads = hgetall_calls(redis)
            publish(redis, sid)
            assert await wait_closed(a, UNPUBLISHED_WAIT_S) is None, "a publish that refuses nothing closed the tunnel"
            await echo(a, "a after a harmless publish")
            # the re-read that publish caused has run in Redis, so it saw the harmless record and not the change
            # below (a loaded machine can delay it past the half second above)
            gwtest.wait_for(lambda: hgetall_calls(redis) > reads, 20, what="the gateway's re-read of the sandbox")
            # the change alone (not published yet) does nothing either
            change(redis, sid, upstream.port, kind, token)
            assert await wait_closed(a, UNPUBLISHED_WAIT_S) is None, "closed before the publish"
            await echo(a, "a just before the publish")
            t0 = time.monotonic()
            publish(redis, sid)
            closed = await wait_closed(a, CLOSE_BOUND_S)
            took = time.monotonic() - t0
            assert closed is not None, "the tunnel still works %.1f s after the %s publish" % (CLOSE_BOUND_S, kind)
            # the other sandbox's tunnel is untouched
            for i in range(3):
                await echo(b, "b after %d" % i)
            return took

    took = run(go())
    print("%s/%s: tunnel closed %.1f ms after the publish" % (kind, how, took * 1000))
    assert took < CLOSE_BOUND_S


def test_websocket_survives_republish_of_same_token(gateway, redis, register_sandbox, upstream, certs, curl):
    """A rotation back to the same token (the control plane rewrote the
    record) leaves tunnels opened with that token open: the credential is
    still valid."""
    sid = gwtest.new_sandbox_id("same")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid)

    async def go():
        async with ws_connect(gateway, host, "/ws", certs["ca"], {bh.TOKEN_HEADER: token}) as a:
            await echo(a, "one")
            redis.cmd("HSET", key(sid), "token_sha256", gwtest.sha256_hex(token))
            publish(redis, sid)
            assert await wait_closed(a, 1.0) is None
            await echo(a, "two")
        return True

    assert run(go())


def _curl_stream(gw, host, path, headers, http2):
    args = ["curl", "-sS", "-N", "--no-buffer", "--max-time", "60", "--cacert", gw.certs["ca"], "--noproxy", "*",
            "--resolve", "%s:%d:127.0.0.1" % (host, gw.tls_port), "--http2" if http2 else "--http1.1",
            "-o", "-", "-w", "\nHTTP %{http_code}\n"]
    for k, v in headers.items():
        args += ["-H", "%s: %s" % (k, v)]
    args.append("https://%s:%d%s" % (host, gw.tls_port, path))
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _read_events(proc, n, timeout):
    """Reads stdout lines until n 'data:' lines came; returns them."""
    got, buf = [], b""
    deadline = time.monotonic() + timeout
    while len(got) < n:
        left = deadline - time.monotonic()
        assert left > 0, "only %d events within %.0f s" % (len(got), timeout)
        r, _, _ = select.select([proc.stdout], [], [], left)
        if not r:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, "the stream ended after %d events: %r" % (len(got), proc.stderr.read())
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.startswith(b"data:"):
                got.append(line)
    return got


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
@pytest.mark.parametrize("kind", ["unexpose", "rotate", "stop"])
def test_streaming_response_cut_by_revocation_publish(gateway, redis, register_sandbox, upstream, kind, http2):
    """A server-sent event stream in flight ends (truncated: HTTP/1.1 without
    its last chunk, HTTP/2 with RST_STREAM) after the publish; the other
    sandbox's stream goes on."""
    (sid, token, host), (other, other_token, other_host) = two_sandboxes(register_sandbox, gateway, upstream)
    path = "/sse?n=600&interval_ms=50"
    a = _curl_stream(gateway, host, path, {bh.TOKEN_HEADER: token}, http2)
    b = _curl_stream(gateway, other_host, path, {bh.TOKEN_HEADER: other_token}, http2)
    try:
        _read_events(a, 2, 15)
        _read_events(b, 2, 15)
        change(redis, sid, upstream.port, kind, token)
        _read_events(a, 3, 5)  # unpublished: still streaming
        t0 = time.monotonic()
        publish(redis, sid)
        try:
            rc = a.wait(timeout=CLOSE_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail("the stream still runs %.0f s after the %s publish" % (CLOSE_BOUND_S, kind))
        took = time.monotonic() - t0
        err = a.stderr.read().decode("utf-8", "replace")
        # curl: 18 partial file (HTTP/1.1 closed mid-chunk), 92 HTTP/2 stream error, 56 recv failure
        assert rc != 0, "the stream ended as if complete: %s" % err
        assert b.poll() is None, "the other sandbox's stream ended too"
        _read_events(b, 3, 5)
        print("%s h%s: stream cut %.1f ms after the publish (curl %d: %s)" % (kind, "2" if http2 else "1",
                                                                              took * 1000, rc, err.strip()))
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()


@pytest.mark.parametrize("kind,status,code", [("unexpose", 404, "port_not_exposed"), ("rotate", 403, "invalid_token"),
                                              ("stop", 503, "sandbox_not_running")])
def test_request_waiting_for_its_answer_gets_the_new_answer(gateway, redis, register_sandbox, upstream, kind, status, code):
    """A request forwarded before the publish and still waiting for the
    app's response head is answered as a new request would be."""
    sid = gwtest.new_sandbox_id("wait")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid)
    p = _curl_stream(gateway, host, "/slow-head/20000", {bh.TOKEN_HEADER: token, "Accept": "application/json"}, False)
    try:
        time.sleep(1.0)  # forwarded by now; the app sleeps 20 s before its head
        assert p.poll() is None
        change(redis, sid, upstream.port, kind, token)
        t0 = time.monotonic()
        publish(redis, sid)
        out, err = p.communicate(timeout=CLOSE_BOUND_S)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    text = out.decode("utf-8", "replace")
    assert text.rstrip().endswith("HTTP %d" % status), text
    assert '"code":"%s"' % code in text, text
    assert took < CLOSE_BOUND_S


def test_revocation_missed_while_redis_was_away_is_applied_on_resubscription(workdir, certs, register_sandbox,
                                                                             upstream):
    """Pub/sub loses what is published while the subscription is down (here
    cut with CLIENT KILL TYPE pubsub): once it is confirmed again, every
    sandbox with open connections is read again, and what its record now
    refuses is closed."""
    r = gwtest.Redis(os.path.join(workdir, "revoke-redis-%d" % gwtest.free_port()))
    r.start()
    g = gwtest.Gateway(os.path.join(workdir, "gw-revoke-resub"), certs, r.port, name="gw-revoke-resub",
                       overrides={"workers": 1})
    g.start()
    try:
        sid = gwtest.new_sandbox_id("resub")
        token = gwtest.register_sandbox(r, sid, ports={upstream.port: "private"})
        keep = gwtest.new_sandbox_id("keep")
        keep_token = gwtest.register_sandbox(r, keep, ports={upstream.port: "private"}, lifecycle="lc-keep")
        host, keep_host = g.host(upstream.port, sid), g.host(upstream.port, keep)

        async def go():
            async with ws_connect(g, host, "/ws", certs["ca"], {bh.TOKEN_HEADER: token}) as a, \
                    ws_connect(g, keep_host, "/ws", certs["ca"], {bh.TOKEN_HEADER: keep_token}) as b:
                await echo(a, "before the outage")
                # unexposed, and its publish lost with the gateway's subscription (not sent at all here:
                # only the re-read after the resubscription can close the tunnel)
                r.cmd("HDEL", key(sid), "port:%d" % upstream.port)
                assert r.cmd("CLIENT", "KILL", "TYPE", "pubsub") >= 1
                closed = await wait_closed(a, 20)
                assert closed is not None, "a revocation missed during the outage was never applied"
                await echo(b, "the other sandbox is untouched")
                return closed

        took = run(go())
        print("applied %.0f ms after the subscription was cut (reconnect backoff included)" % (took * 1000))
    finally:
        g.stop()
        r.stop()
