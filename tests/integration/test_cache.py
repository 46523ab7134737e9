"""The route cache (issue 5), end to end against a real redis-server: pub/sub
invalidation within one round trip, TTL bounds, single-flight misses,
negative entries, and Redis outages survived (CONTRACT.md, "Redis").

Each test first shows that the cache is really in use (a change written
without PUBLISH is not seen yet), so that a gateway without a cache or
without invalidation fails it."""

import asyncio
import http.client
import json
import os
import re
import secrets
import socket
import ssl
import subprocess
import threading
import time
import urllib.request

import pytest

import gwtest

# --- helpers ---------------------------------------------------------------


def hgetall_calls(redis):
    """HGETALLs the server has executed (INFO commandstats)."""
    info = redis.cmd("INFO", "commandstats").decode()
    m = re.search(r"^cmdstat_hgetall:calls=(\d+)", info, re.M)
    return int(m.group(1)) if m else 0


def metric(gw, name, labels=None):
    status, body = gw.admin_get("/metrics")
    assert status == 200
    want = name + ("{%s}" % labels if labels else "")
    for line in body.decode().splitlines():
        if line.startswith(want + " "):
            return int(line.split()[1])
    raise AssertionError("metric %s not found" % want)


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class GwConnection(http.client.HTTPConnection):
    """A keep-alive HTTPS connection to the gateway on 127.0.0.1 with SNI and
    Host set to a preview hostname; reconnects the same way when closed."""

    def __init__(self, gw, host, ctx):
        super().__init__(host, gw.tls_port, timeout=15)
        self._ctx = ctx

    def connect(self):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)

    def get(self, path="/", headers=None):
        self.request("GET", path, headers=headers or {})
        r = self.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def error_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except Exception:  # noqa: BLE001
        return None


async def _raw_get(port, host, ctx, path, connected, start, results, idx):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=host)
    connected.append(idx)
    await start.wait()
    writer.write(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    line = data.split(b"\r\n", 1)[0].decode()
    results[idx] = int(line.split()[1]) if line.startswith("HTTP/") else 0


def concurrent_gets(gw, host, ctx, n, path="/", before_send=None):
    """Opens n TLS connections, calls before_send(), then sends one request on
    each at once; returns the n statuses."""

    async def run():
        start, connected, results = asyncio.Event(), [], [None] * n
        tasks = [asyncio.ensure_future(_raw_get(gw.tls_port, host, ctx, path, connected, start, results, i))
                 for i in range(n)]
        deadline = time.monotonic() + 20
        while len(connected) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(connected) == n, "only %d connections" % len(connected)
        if before_send is not None:
            before_send()
        start.set()
        await asyncio.gather(*tasks)
        return results

    return asyncio.run(run())


class ExtraUpstream:
    """upstream.py on a given loopback address and port (a second microVM)."""

    def __init__(self, workdir, host, port):
        self.host, self.port = host, port
        self.stats_calls = 0
        os.makedirs(workdir, exist_ok=True)
        self.log = os.path.join(workdir, "upstream-%s-%d.log" % (host, port))
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([gwtest.PYTHON, os.path.join(gwtest.HERE, "upstream.py"), "--host", host, "--port",
                                      str(port)], stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            gwtest.stop_process(self.proc)
            raise RuntimeError("upstream did not start: %r %s" % (line, gwtest.tail(self.log)))

    def requests(self):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open("http://%s:%d/_stats" % (self.host, self.port), timeout=5) as r:
            self.stats_calls += 1
            return json.loads(r.read())["requests"] - self.stats_calls  # every /_stats counts itself

    def stop(self):
        gwtest.stop_process(self.proc)
        self.proc.stdout.close()


def free_port_on(hosts):
    for _ in range(50):
        p = gwtest.free_port()
        ok = True
        for h in hosts:
            with socket.socket() as s:
                try:
                    s.bind((h, p))
                except OSError:
                    ok = False
        if ok:
            return p
    raise RuntimeError("no free port")


def established_to(addr, port):
    return len(local_ends_to(addr, port))


def local_ends_to(addr, port):
    """The local address:port of each established connection to addr:port."""
    out = subprocess.run(["ss", "-Htn", "state", "established", "dst", "%s:%d" % (addr, port)], capture_output=True)
    return {ln.split()[2] for ln in out.stdout.decode().splitlines() if ln.strip()}


@pytest.fixture
def ctx(certs):
    return tls_context(certs["ca"])


@pytest.fixture
def own_redis(workdir):
    """A redis-server of this test only, so that it can be killed."""
    r = gwtest.Redis(os.path.join(workdir, "redis-cache-%s" % secrets.token_hex(3)))
    r.start()
    yield r
    r.stop()


@pytest.fixture
def upstream_pair(workdir):
    """Two upstreams on the same port at 127.0.0.2 and 127.0.0.3."""
    port = free_port_on(["127.0.0.2", "127.0.0.3"])
    ups = [ExtraUpstream(os.path.join(workdir, "ups-pair"), h, port) for h in ("127.0.0.2", "127.0.0.3")]
    yield ups
    for u in ups:
        u.stop()


def warm(gw, host, ctx, n=16, path="/echo", headers=None):
    """n requests on n new connections: every worker caches the route."""
    for _ in range(n):
        c = GwConnection(gw, host, ctx)
        status, _, body = c.get(path, headers)
        c.close()
        assert status == 200, (status, body)


def statuses(gw, host, ctx, n=8, path="/echo", headers=None):
    """Statuses and error codes of n requests on n new connections (so both workers answer)."""
    out = set()
    for _ in range(n):
        c = GwConnection(gw, host, ctx)
        status, _, body = c.get(path, headers)
        c.close()
        out.add((status, error_code(body) if status != 200 else None))
    return out


# --- invalidation by PUBLISH -------------------------------------------------


def test_unexpose_and_publish_refuses_the_next_request(gateway, redis, upstream, ctx):
    sid = gwtest.new_sandbox_id("inv")
    host = gateway.host(upstream.port, sid)
    lc = "lc-" + secrets.token_hex(4)
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"}, lifecycle=lc)
    warm(gateway, host, ctx)
    # written without a message: the cache still answers (the change is not seen yet)
    gwtest.register_sandbox(redis, sid, ports={}, lifecycle=lc, publish=False)
    assert statuses(gateway, host, ctx) == {(200, None)}
    # the message: refused at once, by every worker
    redis.cmd("PUBLISH", "lizard:routes", sid)
    assert statuses(gateway, host, ctx) == {(404, "port_not_exposed")}


def test_killed_sandbox_and_publish_refuses_the_next_request(gateway, redis, upstream, ctx):
    sid = gwtest.new_sandbox_id("kil")
    host = gateway.host(upstream.port, sid)
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    warm(gateway, host, ctx)
    gwtest.unregister_sandbox(redis, sid)
    assert statuses(gateway, host, ctx) == {(404, "sandbox_not_found")}


def test_addr_change_and_publish_reaches_the_new_upstream(gateway, redis, upstream_pair, ctx):
    a, b = upstream_pair
    sid = gwtest.new_sandbox_id("mov")
    host = gateway.host(a.port, sid)
    gwtest.register_sandbox(redis, sid, addr="127.0.0.2", ports={a.port: "public"})
    # 16 new connections: SO_REUSEPORT spreads them at random, and a worker
    # that got none of them would look the moved VM up below (odds 2^-15)
    warm(gateway, host, ctx, n=16)
    assert (a.requests(), b.requests()) == (16, 0)
    # the VM moved (new address, new lifecycle), no message yet: still the old address
    gwtest.register_sandbox(redis, sid, addr="127.0.0.3", ports={a.port: "public"}, publish=False)
    warm(gateway, host, ctx, n=4)
    assert (a.requests(), b.requests()) == (20, 0)
    redis.cmd("PUBLISH", "lizard:routes", sid)
    warm(gateway, host, ctx, n=8)
    assert (a.requests(), b.requests()) == (20, 8)


def test_token_rotation_and_publish_refuses_the_old_token_at_once(gateway, redis, upstream, ctx):
    sid = gwtest.new_sandbox_id("rot")
    host = gateway.host(upstream.port, sid)
    lc = "lc-" + secrets.token_hex(4)
    old = gwtest.register_sandbox(redis, sid, ports={upstream.port: "private"}, lifecycle=lc)
    warm(gateway, host, ctx, headers={"X-Lizard-Access-Token": old})
    new = secrets.token_urlsafe(24)
    redis.cmd("HSET", "lizard:sbx:{%s}" % sid, "token_sha256", gwtest.sha256_hex(new))
    assert statuses(gateway, host, ctx, headers={"X-Lizard-Access-Token": old}) == {(200, None)}  # cached
    redis.cmd("PUBLISH", "lizard:routes", sid)
    assert statuses(gateway, host, ctx, headers={"X-Lizard-Access-Token": old}) == {(403, "invalid_token")}
    assert statuses(gateway, host, ctx, headers={"X-Lizard-Access-Token": new}) == {(200, None)}


def test_new_sandbox_after_not_found_is_served_once_published(gateway, redis, upstream, ctx):
    sid = gwtest.new_sandbox_id("neg")
    host = gateway.host(upstream.port, sid)
    assert statuses(gateway, host, ctx) == {(404, "sandbox_not_found")}
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    assert statuses(gateway, host, ctx) == {(200, None)}


# --- hits make no Redis call; misses are shared ------------------------------


def test_hit_path_makes_no_redis_call(gw_factory, redis, upstream, ctx):
    gw = gw_factory({"routing": {"cache_ttl_ms": 120000}})
    sid = gwtest.new_sandbox_id("hit")
    host = gw.host(upstream.port, sid)
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    before_warm = hgetall_calls(redis)
    warm(gw, host, ctx)
    warm_calls = hgetall_calls(redis) - before_warm
    assert 1 <= warm_calls <= gw.config()["workers"], "one HGETALL per worker at most, got %d" % warm_calls

    before, hits_before = hgetall_calls(redis), metric(gw, "lizard_route_cache_total", 'result="hit"')
    conns = [GwConnection(gw, host, ctx) for _ in range(8)]
    for i in range(1000):
        status, _, body = conns[i % 8].get("/echo?i=%d" % i)
        assert status == 200, body
    for c in conns:
        c.close()
    assert hgetall_calls(redis) - before == 0, "cache hits must not call Redis"
    assert metric(gw, "lizard_route_cache_total", 'result="hit"') - hits_before >= 1000


def test_concurrent_misses_share_one_hgetall(gw_factory, redis, upstream, ctx):
    gw = gw_factory({"workers": 1, "redis": {"lookup_timeout_ms": 5000}})
    sid = gwtest.new_sandbox_id("sf")
    host = gw.host(upstream.port, sid)
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    before = hgetall_calls(redis)
    coalesced_before = metric(gw, "lizard_route_cache_total", 'result="coalesced"')

    # Redis holds every command for a while (3 s: a loaded machine's gateway reads all 200 within it), so all 200
    # requests are waiting at once
    results = concurrent_gets(gw, host, ctx, 200, "/status/204",
                              before_send=lambda: redis.cmd("CLIENT", "PAUSE", "3000", "ALL"))
    assert results == [204] * 200, results
    assert hgetall_calls(redis) - before == 1
    assert metric(gw, "lizard_route_cache_total", 'result="coalesced"') - coalesced_before == 199


def test_unknown_sandbox_misses_are_shared_and_cached_negatively(gw_factory, redis, ctx):
    # The negative TTL is long (6 s) so that what follows the 200 concurrent
    # misses fits in it on a loaded machine; the checks below are ordered by
    # when the entry can have been made (the HGETALL reply came before the
    # first 404 was read), not by fixed sleeps.
    gw = gw_factory({"workers": 1, "redis": {"lookup_timeout_ms": 5000}, "routing": {"negative_ttl_ms": 6000}})
    sid = gwtest.new_sandbox_id("nx")
    host = gw.host(3000, sid)
    before = hgetall_calls(redis)
    paused = []

    def pause():
        paused.append(time.monotonic())  # the 200 handshakes are done: the requests go now
        redis.cmd("CLIENT", "PAUSE", "1000", "ALL")

    results = concurrent_gets(gw, host, ctx, 200, before_send=pause)
    t_sent = paused[0]
    t_answered = time.monotonic()  # the negative entry was made before this
    assert results == [404] * 200, results
    assert hgetall_calls(redis) - before == 1

    # remembered: more requests within negative_ttl_ms make no Redis call, even when the
    # sandbox appears meanwhile without a message
    gwtest.register_sandbox(redis, sid, ports={3000: "public"}, publish=False)
    c = GwConnection(gw, host, ctx)
    done = 0
    # the entry lives at least until t_sent + 1 s (the pause) + 6 s; stop well before
    while done < 100 and time.monotonic() < t_sent + 6.0:
        status, _, body = c.get("/")
        assert (status, error_code(body)) == (404, "sandbox_not_found"), (done, status, body)
        done += 1
    assert done >= 10, "too slow to say anything about a 6 s negative TTL (%d requests)" % done
    assert hgetall_calls(redis) - before == 1
    # ... but only that long: past t_answered + 6 s the entry is gone for sure
    time.sleep(max(0.0, t_answered + 6.2 - time.monotonic()))
    status, _, body = c.get("/")
    assert error_code(body) != "sandbox_not_found", (status, body)
    c.close()


def test_random_hostname_flood_costs_one_lookup_per_name(gw_factory, redis, ctx):
    gw = gw_factory({"workers": 1, "routing": {"negative_ttl_ms": 30000}})
    names = [gwtest.new_sandbox_id("rnd") for _ in range(50)]
    before = hgetall_calls(redis)
    for _ in range(4):
        for n in names:
            c = GwConnection(gw, gw.host(3000, n), ctx)
            status, _, body = c.get("/")
            c.close()
            assert (status, error_code(body)) == (404, "sandbox_not_found")
    assert hgetall_calls(redis) - before == 50


# --- TTL and subscription bounds ---------------------------------------------


def test_cache_ttl_bounds_staleness_without_a_message(gw_factory, redis, upstream, ctx):
    gw = gw_factory({"routing": {"cache_ttl_ms": 3000}})
    sid = gwtest.new_sandbox_id("ttl")
    host = gw.host(upstream.port, sid)
    lc = "lc-" + secrets.token_hex(4)
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"}, lifecycle=lc)
    t0 = time.monotonic()  # before warm(): every entry it makes was fetched after this, so is fresh until t0 + 3 s
    warm(gw, host, ctx)
    gwtest.register_sandbox(redis, sid, ports={}, lifecycle=lc, publish=False)  # the message is "lost"
    seen = statuses(gw, host, ctx, n=4)
    if time.monotonic() - t0 < 2.5:
        assert seen == {(200, None)}, "the cache was not used"
    time.sleep(3.2)
    assert statuses(gw, host, ctx) == {(404, "port_not_exposed")}


def test_resubscription_drops_the_whole_cache(gw_factory, own_redis, upstream, ctx):
    gw = gw_factory({"redis": {"address": "127.0.0.1:%d" % own_redis.port}, "routing": {"cache_ttl_ms": 120000}})
    workers = gw.config()["workers"]
    gwtest.wait_for(lambda: own_redis.cmd("PUBSUB", "NUMSUB", "lizard:routes")[1] == workers, 10, what="subscribers")
    sid = gwtest.new_sandbox_id("rs")
    host = gw.host(upstream.port, sid)
    lc = "lc-" + secrets.token_hex(4)
    gwtest.register_sandbox(own_redis, sid, ports={upstream.port: "public"}, lifecycle=lc)
    warm(gw, host, ctx)
    # a change whose message the gateway never hears
    gwtest.register_sandbox(own_redis, sid, ports={}, lifecycle=lc, publish=False)
    assert statuses(gw, host, ctx) == {(200, None)}
    flushes = metric(gw, "lizard_route_cache_flushes_total")
    assert own_redis.cmd("CLIENT", "KILL", "TYPE", "pubsub") == workers
    gwtest.wait_for(lambda: metric(gw, "lizard_route_cache_flushes_total") >= flushes + workers, 10,
                    what="resubscription")
    assert statuses(gw, host, ctx) == {(404, "port_not_exposed")}


# --- Redis outages ----------------------------------------------------------


def outage_gateway(gw_factory, own_redis, **routing):
    over = {"redis": {"address": "127.0.0.1:%d" % own_redis.port, "lookup_timeout_ms": 500},
            "routing": routing}
    gw = gw_factory(over)
    gwtest.wait_for(lambda: metric(gw, "lizard_redis_connected_workers") == gw.config()["workers"], 10,
                    what="workers connected")
    return gw


def test_redis_killed_mid_traffic(gw_factory, own_redis, upstream, ctx):
    gw = outage_gateway(gw_factory, own_redis, cache_ttl_ms=1000, stale_ttl_ms=60000)
    cached, uncached = gwtest.new_sandbox_id("hot"), gwtest.new_sandbox_id("cold")
    tok = {}
    for sid in (cached, uncached):
        tok[sid] = gwtest.register_sandbox(own_redis, sid, ports={upstream.port: "private"})
    hdr = {cached: {"X-Lizard-Access-Token": tok[cached]}, uncached: {"X-Lizard-Access-Token": tok[uncached]}}
    chost, uhost = gw.host(upstream.port, cached), gw.host(upstream.port, uncached)
    warm(gw, chost, ctx, headers=hdr[cached])

    # traffic on the cached sandbox all along, over keep-alive connections; `gate` keeps it out of the moment
    # the test's control plane rewrites the records into the Redis that came back empty (a gateway that
    # reconnects first rightly hears "no such sandbox" from it: that is the test's restart, not the outage)
    seen, stop, gate = [], threading.Event(), threading.Lock()

    def traffic():
        conns = [GwConnection(gw, chost, ctx) for _ in range(4)]
        i = 0
        while not stop.is_set():
            with gate:
                try:
                    status, _, body = conns[i % 4].get("/echo", hdr[cached])
                    seen.append((status, error_code(body)))
                except Exception as e:  # noqa: BLE001
                    seen.append(("exception", repr(e)))
            i += 1
            time.sleep(0.01)
        for c in conns:
            c.close()

    th = threading.Thread(target=traffic)
    th.start()
    try:
        time.sleep(0.3)
        own_redis.kill()
        time.sleep(0.2)
        # uncached: 503 routing_unavailable with Retry-After, without waiting for a deadline
        for _ in range(4):
            c = GwConnection(gw, uhost, ctx)
            t0 = time.monotonic()
            status, headers, body = c.get("/echo", hdr[uncached])
            elapsed = time.monotonic() - t0
            c.close()
            assert (status, error_code(body)) == (503, "routing_unavailable"), body
            assert headers.get("retry-after", "").isdigit(), headers
            # generous: the point is that no request hangs on a dead Redis; a
            # loaded 2-core machine can add a second of scheduling to any request
            assert elapsed < 0.5 + 1.5, elapsed
        # cached: still served, also past cache_ttl_ms (stale, within stale_ttl_ms)
        time.sleep(1.5)
        assert statuses(gw, chost, ctx, headers=hdr[cached]) == {(200, None)}
        assert metric(gw, "lizard_route_cache_total", 'result="stale"') > 0

        # Redis comes back empty (no persistence): the control plane writes again
        with gate:
            own_redis.start()
            for sid in (cached, uncached):
                gwtest.register_sandbox(own_redis, sid, ports={upstream.port: "private"}, token=tok[sid])
        gwtest.wait_for(lambda: statuses(gw, uhost, ctx, headers=hdr[uncached]) == {(200, None)}, 10,
                        what="recovery without a restart")
        time.sleep(0.3)
    finally:
        stop.set()
        th.join(30)
    assert seen and all(s == (200, None) for s in seen), [s for s in seen if s != (200, None)][:5]
    # and changes are heard again: the subscription is back in every worker
    gwtest.register_sandbox(own_redis, cached, ports={}, token=tok[cached])
    assert statuses(gw, chost, ctx, headers=hdr[cached]) == {(404, "port_not_exposed")}


def test_stale_ttl_bounds_serving_during_an_outage(gw_factory, own_redis, upstream, ctx):
    # every worker's entry was confirmed between warm_from and confirmed (refetched when 300 ms old), so it is
    # served stale at least until warm_from + 3 s and at most until confirmed + 3 s
    gw = outage_gateway(gw_factory, own_redis, cache_ttl_ms=300, stale_ttl_ms=3000)
    sid = gwtest.new_sandbox_id("stl")
    host = gw.host(upstream.port, sid)
    gwtest.register_sandbox(own_redis, sid, ports={upstream.port: "public"})
    warm_from = time.monotonic()
    warm(gw, host, ctx)
    confirmed = time.monotonic()
    own_redis.kill()
    time.sleep(0.5)
    if time.monotonic() - warm_from < 2.0:  # statuses() itself may take most of the last second
        assert statuses(gw, host, ctx) == {(200, None)}
    time.sleep(max(0.0, confirmed + 3.3 - time.monotonic()))
    assert statuses(gw, host, ctx) == {(503, "routing_unavailable")}


def test_unresponsive_redis_no_request_waits_past_the_deadline(gw_factory, own_redis, upstream, ctx):
    gw = outage_gateway(gw_factory, own_redis, cache_ttl_ms=120000)
    cached, uncached = gwtest.new_sandbox_id("hot"), gwtest.new_sandbox_id("cold")
    for sid in (cached, uncached):
        gwtest.register_sandbox(own_redis, sid, ports={upstream.port: "public"})
    warm(gw, gw.host(upstream.port, cached), ctx)
    own_redis.pause()  # SIGSTOP: connections stay open, nothing answers
    try:
        c = GwConnection(gw, gw.host(upstream.port, uncached), ctx)
        t0 = time.monotonic()
        status, headers, body = c.get("/echo")
        elapsed = time.monotonic() - t0
        c.close()
        assert (status, error_code(body)) == (503, "routing_unavailable"), body
        # the deadline plus a generous allowance for a loaded machine (it would be
        # the whole pause, i.e. forever, without the deadline)
        assert elapsed < 0.5 + 1.5, "waited %.2f s with a 0.5 s lookup deadline" % elapsed
        assert statuses(gw, gw.host(upstream.port, cached), ctx) == {(200, None)}
    finally:
        own_redis.resume()
    gwtest.wait_for(lambda: statuses(gw, gw.host(upstream.port, uncached), ctx) == {(200, None)}, 10,
                    what="recovery after SIGCONT")


# --- lifecycle ----------------------------------------------------------------


def test_new_lifecycle_drops_pooled_connections(gw_factory, redis, upstream_pair, ctx):
    # a lookup deadline a loaded machine does not reach: the request after the change reads Redis
    gw = gw_factory({"workers": 1, "redis": {"lookup_timeout_ms": 5000}})
    a = upstream_pair[0]
    sid = gwtest.new_sandbox_id("lc")
    host = gw.host(a.port, sid)
    gwtest.register_sandbox(redis, sid, addr="127.0.0.2", ports={a.port: "public"}, lifecycle="lc-one")
    c = GwConnection(gw, host, ctx)
    for _ in range(3):
        assert c.get("/echo")[0] == 200
    gwtest.wait_for(lambda: established_to("127.0.0.2", a.port) == 1, 5, what="one pooled upstream connection")
    old_end = next(iter(local_ends_to("127.0.0.2", a.port)))
    # the VM restarted (same address, new lifecycle): the old pooled connection must go. The request waits
    # until the gateway has the publish: one that comes first is the old VM's, and is rightly cut by the
    # revocation (503 sandbox_not_running, seen on CI)
    evicted = metric(gw, "lizard_route_cache_invalidations_total")
    gwtest.register_sandbox(redis, sid, addr="127.0.0.2", ports={a.port: "public"}, lifecycle="lc-two")
    gwtest.wait_for(lambda: metric(gw, "lizard_route_cache_invalidations_total") > evicted, 10, what="the publish seen")
    status, _, body = c.get("/echo")
    assert status == 200, body
    c.close()
    # asserted on the old connection itself: a count of 1 also failed when
    # the new lifecycle's connection had closed too (CI, a loaded machine)
    gwtest.wait_for(lambda: old_end not in local_ends_to("127.0.0.2", a.port), 5,
                    what="the old lifecycle's connection %s closed" % old_end)
