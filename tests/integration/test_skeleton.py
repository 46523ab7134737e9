"""The walking skeleton, end to end: real curl over TLS (HTTP/1.1 and
HTTP/2) -> lizard-gateway -> real HTTP/1.1 upstream, routes in a real Redis.
Each test states one promise of ../../../shared/CONTRACT.md (the external
contract) and fails when the gateway breaks it."""

import json
import os
import re
import secrets
import subprocess
import time

import pytest

import gwtest

H1_H2 = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])


def upstream_headers(resp):
    """The [name, value] list the upstream's /echo saw, names lowercased."""
    assert resp.status == 200, resp
    return [(k.lower(), v) for k, v in resp.json()["headers"]]


def header_values(pairs, name):
    return [v for k, v in pairs if k == name]


def assert_error(resp, status, code, sandbox_id=None, port=None):
    """A gateway error: status, JSON body with the code, never cached."""
    assert resp.status == status, resp
    assert "no-store" in resp.headers.get("cache-control", ""), resp
    assert resp.headers.get("content-type", "").startswith("application/json"), resp
    body = resp.json()
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"].get("message"), str) and body["error"]["message"], body
    if sandbox_id is not None:
        assert body["error"].get("sandboxId") == sandbox_id, body
    if port is not None:
        assert body["error"].get("port") == port, body
    return body


@pytest.fixture
def public_sandbox(register_sandbox, upstream, gateway):
    sid = gwtest.new_sandbox_id("pub")
    register_sandbox(sid, ports={upstream.port: "public"})
    return sid, gateway.host(upstream.port, sid)


# --- the happy path --------------------------------------------------------


@H1_H2
def test_public_port_reaches_upstream(curl, public_sandbox, http2):
    sid, host = public_sandbox
    r = curl(host, "/echo?x=1", http2=http2)
    assert r.status == 200, r
    assert r.http_version == ("2" if http2 else "1.1"), "ALPN did not pick the expected protocol: %r" % r
    body = r.json()
    assert body["method"] == "GET"
    assert body["path"] == "/echo?x=1"
    assert body["http_version"] == "HTTP/1.1", "upstream requests are HTTP/1.1"


@H1_H2
def test_private_port_with_token_header(curl, sandbox, http2):
    r = curl(sandbox.host, "/echo", http2=http2, headers={"X-Lizard-Access-Token": sandbox.token})
    hdrs = upstream_headers(r)
    assert header_values(hdrs, "x-lizard-access-token") == [], "the token reached the sandbox: %r" % hdrs
    assert sandbox.token not in r.body.decode(), "the token reached the sandbox"


def test_upstream_status_and_body_pass_through(curl, public_sandbox):
    sid, host = public_sandbox
    r = curl(host, "/status/418")
    assert r.status == 418, r
    assert r.json() == {"status": 418}
    r = curl(host, "/no-such-page")
    assert r.status == 404 and r.json().get("upstream") is True, "an upstream 404 must pass unchanged: %r" % r
    r = curl(host, "/bytes/300000", http2=True)
    assert r.status == 200 and len(r.body) == 300000, r


def test_request_target_forwarded_as_sent(curl, public_sandbox):
    sid, host = public_sandbox
    target = "/echo/a%2Fb/c?q=%20x&y=1&y=2&empty="
    assert curl(host, target).json()["path"] == target


@H1_H2
def test_post_1mib_body_intact(curl, sandbox, http2):
    data = os.urandom(1 << 20)
    r = curl(sandbox.host, "/echo", http2=http2, method="POST", data=data,
             headers={"X-Lizard-Access-Token": sandbox.token, "Content-Type": "application/octet-stream"})
    body = r.json()
    assert r.status == 200
    assert body["method"] == "POST"
    assert body["body_length"] == len(data)
    assert body["body_sha256"] == gwtest.sha256_hex(data)


def test_host_is_case_insensitive(curl, register_sandbox, upstream, gateway):
    sid = gwtest.new_sandbox_id("case")
    register_sandbox(sid, ports={upstream.port: "public"})
    host = ("%d-%s.LIZARD.TEST" % (upstream.port, sid.upper()))
    r = curl(host, "/echo", headers={"Host": "%s:%d" % (host, gateway.tls_port)})
    assert r.status == 200, r


def test_host_header_preserved_by_default(curl, public_sandbox, gateway):
    sid, host = public_sandbox
    for http2 in (False, True):
        hdrs = upstream_headers(curl(host, "/echo", http2=http2))
        hosts = header_values(hdrs, "host")
        assert hosts in (["%s:%d" % (host, gateway.tls_port)], [host]), hosts


@H1_H2
def test_forwarded_headers_set_by_gateway(curl, public_sandbox, gateway, http2):
    sid, host = public_sandbox
    r = curl(host, "/echo", http2=http2, headers={
        "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "evil.example"})
    hdrs = upstream_headers(r)
    assert header_values(hdrs, "x-forwarded-for") == ["127.0.0.1"], hdrs
    assert header_values(hdrs, "x-forwarded-proto") == ["https"], hdrs
    fh = header_values(hdrs, "x-forwarded-host")
    assert len(fh) == 1 and fh[0].split(":")[0] == host, hdrs
    assert header_values(hdrs, "x-forwarded-port") == [str(gateway.tls_port)], hdrs


@H1_H2
def test_client_x_lizard_headers_not_forwarded(curl, sandbox, http2):
    r = curl(sandbox.host, "/echo", http2=http2, headers={
        "X-Lizard-Access-Token": sandbox.token, "X-Lizard-Foo": "bar", "X-LIZARD-Sandbox": "other", "X-Other": "kept"})
    hdrs = upstream_headers(r)
    assert [k for k, v in hdrs if k.startswith("x-lizard-")] == [], hdrs
    assert header_values(hdrs, "x-other") == ["kept"], hdrs


def test_upstream_connections_are_kept_alive(curl, public_sandbox, upstream, gateway):
    sid, host = public_sandbox
    curl(host, "/echo")  # warm the pool
    before = upstream.stats()["connections"]
    for _ in range(8):
        assert curl(host, "/echo").status == 200
    opened = upstream.stats()["connections"] - before
    workers = gateway.config()["workers"] or os.cpu_count()
    assert opened <= workers, "8 sequential requests opened %d upstream connections (no keep-alive pool?)" % opened


def test_secrets_never_logged(curl, sandbox, gateway):
    r = curl(sandbox.host, "/echo?lizard_token=" + sandbox.token, headers={"X-Lizard-Access-Token": sandbox.token})
    assert r.status == 200, r
    time.sleep(0.5)
    for path in (gateway.log, gateway.config()["log"]["access"]):
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                assert sandbox.token.encode() not in f.read(), "the token appears in %s" % path


# --- errors -----------------------------------------------------------------


@H1_H2
def test_missing_token_401(curl, sandbox, http2):
    assert_error(curl(sandbox.host, "/echo", http2=http2), 401, "missing_token", sandbox.id, sandbox.port)


@H1_H2
def test_wrong_token_403(curl, sandbox, http2):
    r = curl(sandbox.host, "/echo", http2=http2, headers={"X-Lizard-Access-Token": "not-" + sandbox.token})
    assert_error(r, 403, "invalid_token", sandbox.id, sandbox.port)


def test_unknown_sandbox_404(curl, gateway, upstream):
    sid = gwtest.new_sandbox_id("nobody")
    assert_error(curl(gateway.host(upstream.port, sid), "/"), 404, "sandbox_not_found", sid)


def test_port_not_exposed_404(curl, register_sandbox, gateway, upstream):
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    other = upstream.port + 1 if upstream.port < 65535 else upstream.port - 1
    r = curl(gateway.host(other, sid), "/", headers={"X-Lizard-Access-Token": token})
    assert_error(r, 404, "port_not_exposed", sid, other)


# `starting` is held until it runs (CONTRACT.md, "Waking a paused sandbox"): test_wake.py
@pytest.mark.parametrize("state", ["paused", "stopped"])
def test_not_running_503(curl, register_sandbox, gateway, upstream, state):
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, state=state, ports={upstream.port: "private"})
    r = curl(gateway.host(upstream.port, sid), "/echo", headers={"X-Lizard-Access-Token": token})
    assert_error(r, 503, "sandbox_not_running", sid)
    assert r.headers.get("retry-after", "").isdigit(), "503 sandbox_not_running needs Retry-After: %r" % r


# 192.0.2.1 is TEST-NET-1 (never routed); ::1 is loopback but outside the
# allowed 127.0.0.0/8: if the gateway connected, it would get port_not_open.
@pytest.mark.parametrize("addr", ["192.0.2.1", "::1"])
def test_addr_outside_allowed_networks_502(curl, register_sandbox, gateway, upstream, addr):
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, addr=addr, ports={upstream.port: "public"})
    r = curl(gateway.host(upstream.port, sid), "/echo")
    assert_error(r, 502, "upstream_forbidden", sid)


@H1_H2
def test_nothing_listening_502_port_not_open(curl, register_sandbox, gateway, http2):
    sid = gwtest.new_sandbox_id()
    port = gwtest.free_port()
    register_sandbox(sid, ports={port: "public"})
    t0 = time.monotonic()
    r = curl(gateway.host(port, sid), "/", http2=http2)
    assert_error(r, 502, "port_not_open", sid, port)
    assert time.monotonic() - t0 < 3, "a refused connection must be reported at once"


@pytest.mark.parametrize("navigate", [False, True], ids=["json", "html"])
def test_port_not_open_hints_at_0000(curl, register_sandbox, gateway, navigate):
    """The contract: say nothing listens, and hint at binding 0.0.0.0 (the
    usual mistake: a dev server bound to 127.0.0.1 inside the VM)."""
    sid = gwtest.new_sandbox_id()
    port = gwtest.free_port()
    register_sandbox(sid, ports={port: "public"})
    r = curl(gateway.host(port, sid), "/", headers={"Sec-Fetch-Mode": "navigate"} if navigate else None)
    assert r.status == 502, r
    text = r.body.decode() if navigate else r.json()["error"]["message"]
    assert "0.0.0.0" in text, "no hint at binding 0.0.0.0 in %r" % text


@pytest.mark.parametrize("host", ["3000-abc.example.com", "3000-abc.notlizard.test", "lizard.test.example.com"])
def test_host_under_other_domain_404(curl, host):
    r = curl(host, "/", extra_args=("-k",))
    assert_error(r, 404, "unknown_host")


@pytest.mark.parametrize("host", [
    "a.b.lizard.test",
    "03000-x.lizard.test",
    "3000-x_y.lizard.test",
    "0-abc.lizard.test",
    "65536-abc.lizard.test",
    "3000-.lizard.test",
    "-abc.lizard.test",
    "abc.lizard.test",
    "+3000-abc.lizard.test",
    "3000-%s.lizard.test" % ("a" * 57),
])
@H1_H2
def test_malformed_host_400(curl, gateway, host, http2):
    # curl will not connect to some of these names: connect to a valid one
    # and send the malformed one as Host / :authority.
    r = curl("3000-abc.lizard.test", "/", http2=http2, headers={"Host": "%s:%d" % (host, gateway.tls_port)})
    assert_error(r, 400, "bad_host")


def test_sandbox_id_of_56_chars_is_accepted(curl, register_sandbox, gateway, upstream):
    sid = "a" * 50 + secrets.token_hex(3)
    register_sandbox(sid, ports={upstream.port: "public"})
    assert curl(gateway.host(upstream.port, sid), "/echo").status == 200


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Mode": "navigate"},
    {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
], ids=["sec-fetch-mode", "accept"])
def test_browser_navigation_gets_html_error(curl, sandbox, headers):
    r = curl(sandbox.host, "/", headers=headers)
    assert r.status == 401, r
    assert r.headers.get("content-type", "").startswith("text/html"), r
    assert "no-store" in r.headers.get("cache-control", "")
    page = r.body.lower()
    assert b"<html" in page or b"<!doctype html" in page, r


def test_non_navigation_gets_json_error(curl, sandbox):
    r = curl(sandbox.host, "/", headers={"Sec-Fetch-Mode": "cors", "Accept": "*/*"})
    assert_error(r, 401, "missing_token")


def test_error_has_cors_headers_for_origin(curl, sandbox):
    origin = "https://app.example.com"
    r = curl(sandbox.host, "/", headers={"Origin": origin})
    assert_error(r, 401, "missing_token")
    assert r.headers.get("access-control-allow-origin") == origin, r
    assert "origin" in [v.strip().lower() for v in r.headers.get("vary", "").split(",")], r


def test_error_without_origin_has_no_acao(curl, sandbox):
    r = curl(sandbox.host, "/")
    assert_error(r, 401, "missing_token")
    assert "access-control-allow-origin" not in r.headers, r


# --- the control plane's changes take effect at once ------------------------


def test_publish_invalidates_cached_route(curl, register_sandbox, gateway, upstream):
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid)
    hdr = {"X-Lizard-Access-Token": token}
    assert curl(host, "/echo", headers=hdr).status == 200
    # rotate the token and unexpose nothing: the old token must stop working
    new_token = register_sandbox(sid, ports={upstream.port: "private"})
    assert_error(curl(host, "/echo", headers=hdr), 403, "invalid_token")
    assert curl(host, "/echo", headers={"X-Lizard-Access-Token": new_token}).status == 200
    # unexpose the port
    register_sandbox(sid, ports={}, token=new_token)
    assert_error(curl(host, "/echo", headers={"X-Lizard-Access-Token": new_token}), 404, "port_not_exposed")


# --- listeners and operations ----------------------------------------------


@pytest.mark.parametrize("path", ["/", "/some/path?x=1&y=%2F"])
def test_plain_listener_redirects_to_https(curl, sandbox, path):
    r = curl(sandbox.host, path, plain=True)
    assert r.status in (301, 308), r
    loc = r.headers.get("location", "")
    assert loc.startswith("https://"), loc
    rest = loc[len("https://"):]
    authority, _, loc_path = rest.partition("/")
    assert authority.split(":")[0] == sandbox.host, loc
    assert "/" + loc_path == path, loc


def test_admin_healthz(gateway):
    status, _ = gateway.admin_get("/healthz")
    assert status == 200


def _run_gateway(*args, env=None, timeout=20):
    return subprocess.run([gwtest.gateway_binary()] + list(args), capture_output=True, timeout=timeout, env=env)


def test_check_accepts_good_config(gateway, tmp_path):
    path = gateway.write_config(str(tmp_path / "good.json"))
    r = _run_gateway("-c", path, "--check", env=gateway.env())
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("override,key", [
    ({"bogus_key": 1}, "bogus_key"),
    ({"routing": {"cache_ttl": 5}}, "cache_ttl"),
    ({"routing": {"cache_ttl_ms": "ten"}}, "routing.cache_ttl_ms"),
    ({"upstream": {"allowed_networks": ["10.0.0.0/33"]}}, "allowed_networks"),
    ({"domains": "lizard.test"}, "domains"),
], ids=["unknown-top", "unknown-nested", "wrong-type", "bad-cidr", "not-a-list"])
def test_check_rejects_bad_config_naming_key(gateway, tmp_path, override, key):
    path = gateway.write_config(str(tmp_path / "bad.json"), gwtest.deep_merge(gateway.config(), override))
    r = _run_gateway("-c", path, "--check", env=gateway.env())
    err = r.stderr.decode()
    assert r.returncode != 0, "--check accepted a bad config (%r)" % override
    assert key in err, "the message does not name %r: %s" % (key, err)


def test_check_rejects_invalid_json(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"listen": [')
    r = _run_gateway("-c", str(p), "--check")
    assert r.returncode != 0 and r.stderr.strip(), r


def test_example_config_passes_check(tmp_path):
    """deploy/gateway.example.json as shipped passes `lizard-gateway --check`
    (docs/configuration.md documents every key of it): only the paths a build
    machine lacks are moved, its certificate to a test one for lizard.app and
    its journal's directory (systemd's StateDirectory) to tmp_path; without
    the secret it names, --check refuses it, naming the variable."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "deploy", "gateway.example.json")) as f:
        text = f.read()
    certs = gwtest.make_certs(str(tmp_path / "certs"), domain="lizard.app")
    moves = {"/etc/lizard/wildcard.pem": certs["cert"], "/etc/lizard/wildcard.key": certs["key"],
             "/var/lib/lizard-gateway/": str(tmp_path) + "/"}
    for old, new in moves.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "gateway.json"
    path.write_text(text)
    env = dict(os.environ, REDIS_PASSWORD="example-redis-password",
               LIZARD_COOKIE_SECRETS=secrets.token_hex(16) + "," + secrets.token_hex(16))
    r = _run_gateway("-c", str(path), "--check", env=env)
    assert r.returncode == 0, r.stderr.decode()
    del env["LIZARD_COOKIE_SECRETS"]
    r = _run_gateway("-c", str(path), "--check", env=env)
    assert r.returncode != 0 and b"LIZARD_COOKIE_SECRETS" in r.stderr, r


def test_version_and_help():
    r = _run_gateway("--version")
    assert r.returncode == 0 and r.stdout.strip(), r
    # libh2o is the vendored h2o master: h2o's own version and the pinned
    # commit (third_party/h2o-master/UPSTREAM, the commit abbreviated to at
    # least 12 hex digits), then the number of our patches
    # (third_party/h2o-master/patches/series)
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    h2o = os.path.join(root, "third_party", "h2o-master")
    with open(os.path.join(h2o, "UPSTREAM")) as f:
        upstream = dict(ln.rstrip("\n").split(" ", 1) for ln in f if ln.strip() and not ln.startswith("#"))
    with open(os.path.join(h2o, "patches", "series")) as f:
        patches = len([ln for ln in (x.split("#")[0].strip() for x in f) if ln])
    m = re.search(rb"\(libh2o (\S+) ([0-9a-f]{12,40})\+lizard\.(\d+), OpenSSL ", r.stdout)
    assert m, r.stdout
    assert m.group(1).decode() == upstream["version"].split()[0], (m.group(1), upstream["version"])
    assert upstream["commit"].startswith(m.group(2).decode()) and len(upstream["commit"]) == 40, (m.group(2), upstream)
    assert int(m.group(3)) == patches > 0, (m.group(3), patches)
    r = _run_gateway("--help")
    assert r.returncode == 0 and b"-c" in (r.stdout + r.stderr), r
    # --help points to the manual, and the pages it names exist
    named = [p.decode() for p in set(re.findall(rb"docs/[a-z-]+\.md", r.stdout))]
    assert b"docs/" in r.stdout and named, r.stdout
    for page in named:
        assert os.path.exists(os.path.join(root, page)), page


def test_h2o_is_linked_statically():
    """The gateway carries its own patched libh2o: no libh2o shared object is
    loaded at run time (Debian's would be an unpatched 2.2.5)."""
    out = subprocess.run(["ldd", gwtest.gateway_binary()], capture_output=True, check=True).stdout
    assert b"libh2o" not in out, out


def test_second_gateway_with_overrides(gw_factory, curl, register_sandbox, upstream):
    """The harness itself: an extra gateway with its own config works."""
    g = gw_factory({"routing": {"cache_ttl_ms": 1000}})
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    assert curl(g.host(upstream.port, sid), "/echo", gw=g).status == 200


# --- Redis trouble (last: they disturb the shared Redis) ---------------------


def wait_routing_recovered(curl, register_sandbox, gateway, upstream, timeout=30, streak=8):
    ok = [0]

    def fresh_lookup_ok():
        sid = gwtest.new_sandbox_id("rec")
        register_sandbox(sid, ports={upstream.port: "public"})
        ok[0] = ok[0] + 1 if curl(gateway.host(upstream.port, sid), "/echo").status == 200 else 0
        return ok[0] >= streak

    gwtest.wait_for(fresh_lookup_ok, timeout, interval=0.02, what="%d route lookups in a row to succeed" % streak)


def test_redis_stopped_gives_routing_unavailable(curl, redis, register_sandbox, gateway, upstream):
    lookup_ms = gateway.config()["redis"]["lookup_timeout_ms"]
    sid = gwtest.new_sandbox_id("stall")
    redis.pause()
    try:
        t0 = time.monotonic()
        r = curl(gateway.host(upstream.port, sid), "/echo", timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        redis.resume()
    assert_error(r, 503, "routing_unavailable")
    assert elapsed < lookup_ms / 1000.0 + 2.5, "took %.1fs, lookup timeout is %d ms" % (elapsed, lookup_ms)
    # and it works again once Redis answers, in every worker: new lookups
    # (fresh ids) succeed several times in a row. (A few tens of ms of fast
    # 503s right after SIGCONT, while a worker's client reconnects, are fine.)
    wait_routing_recovered(curl, register_sandbox, gateway, upstream)


def test_redis_restart_recovers(curl, redis, register_sandbox, gateway, upstream):
    wait_routing_recovered(curl, register_sandbox, gateway, upstream)
    redis.kill()
    try:
        down = curl(gateway.host(upstream.port, gwtest.new_sandbox_id("down")), "/echo", timeout=30)
        assert_error(down, 503, "routing_unavailable")
    finally:
        redis.start()  # same port, empty (no persistence)
    wait_routing_recovered(curl, register_sandbox, gateway, upstream, timeout=45)
    sid2 = gwtest.new_sandbox_id("after")
    register_sandbox(sid2, ports={upstream.port: "public"})
    host2 = gateway.host(upstream.port, sid2)
    assert curl(host2, "/echo").status == 200
    # the subscription is back too (well before the 10 s cache TTL): a
    # publish takes effect at once
    def unexposed():
        register_sandbox(sid2, ports={})
        return curl(host2, "/echo").status == 404
    gwtest.wait_for(unexposed, 5, interval=0.2, what="pub/sub resubscribed after the Redis restart")
    assert_error(curl(host2, "/echo"), 404, "port_not_exposed")
