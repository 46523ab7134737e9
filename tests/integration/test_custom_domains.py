"""Custom domains and ACME HTTP-01 (CONTRACT.md, "Custom domains"; issue 26),
the routing side, without a CA: a Host that is not under a preview domain
is looked up as lizard:domain:{<host>}; an `active` one is served exactly as
its preview host <port>-<sandbox>.<domain> (access rule, token, the
query-to-cookie 302 with a host-only cookie for the custom host, share
links, the warning page, metering), anything else is 404 unknown_host; a
publish of domain:<host> stops it within one round trip; a re-subscription
drops the cache. GET /.well-known/acme-challenge/<token> answers
lizard:acme:{<token>} on every listener, the plain one without its https
redirect.

Served over a trusted plain listener (a TLS-terminating load balancer in
front): the certificates are the TLS side's (test_acme_pebble.py). Real
gateway, real redis-server, upstream.py, curl."""

import http.client
import json
import os
import secrets
import socket
import time

import pytest

import browser_helpers as bh
import gwtest
import share_link_ref as ref

LINK_KEY = ("d1", b"custom-domain-link-key-" + b"d" * 32)


@pytest.fixture(scope="module")
def dgw(workdir, certs, redis):
    d = os.path.join(workdir, "custom-domains")
    os.makedirs(d, exist_ok=True)
    keys = os.path.join(d, "link-keys")
    with open(keys, "w") as f:
        f.write(ref.keys_text(dict([LINK_KEY])))
    os.chmod(keys, 0o600)
    g = gwtest.Gateway(d, certs, redis.port, name="gw-domains",
                       overrides={"auth": {"link_keys_file": keys, "public_warning": True},
                                  # "not served" remembered long enough that a loaded machine's slow curls stay
                                  # within it (the default is 1 s); publishes still end it at once
                                  "routing": {"negative_ttl_ms": 60000}})
    cfg = g.config()
    g.trusted_port = gwtest.free_port()
    # the base plain listener stays untrusted (it redirects), a third one is trusted
    cfg["listen"].append({"address": "127.0.0.1:%d" % g.trusted_port, "tls": False, "trusted": True})
    g.overrides["listen"] = cfg["listen"]
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


def new_host():
    return "app-%s.customer.example" % secrets.token_hex(4)


def write_domain(redis, host, sandbox, port, state="active", cert=None, publish=True):
    key = "lizard:domain:{%s}" % host
    redis.cmd("DEL", key)
    redis.cmd("HSET", key, "sandbox", sandbox, "port", str(port), "state", state, "cert", cert or host)
    if publish:
        redis.cmd("PUBLISH", "lizard:routes", "domain:" + host)


@pytest.fixture(scope="module")
def site(dgw, redis, upstream):
    """A sandbox with a private and a public port (both the upstream), each with its custom domain."""

    class S:
        pass

    s = S()
    s.id = gwtest.new_sandbox_id("cd")
    s.port = upstream.port
    s.token = gwtest.register_sandbox(redis, s.id, ports={s.port: "private"})
    s.host = new_host()
    write_domain(redis, s.host, s.id, s.port)
    s.pub_id = gwtest.new_sandbox_id("cdp")
    gwtest.register_sandbox(redis, s.pub_id, ports={s.port: "public"})
    s.pub_host = new_host()
    write_domain(redis, s.pub_host, s.pub_id, s.port)
    return s


def get(curl_runner, gw, host, path="/", port=None, headers=None, method=None, https=False):
    port = port or gw.trusted_port
    scheme = "https" if https else "http"
    return curl_runner.request("%s://%s:%d%s" % (scheme, host, port, path), resolve=["%s:%d:127.0.0.1" % (host, port)],
                               headers=headers, method=method)


def metric(gw, name, labels=""):
    status, body = gw.admin_get("/metrics")
    assert status == 200
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + ("{" + labels if labels else "")) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def fetches(gw):
    return metric(gw, "lizard_domain_cache_total", 'result="fetch"')


# --- routing -------------------------------------------------------------------


def test_active_domain_is_served_as_its_preview_host(dgw, curl_runner, site):
    r = get(curl_runner, dgw, site.host, "/echo?x=1", headers={"X-Lizard-Access-Token": site.token})
    assert r.status == 200, r
    echo = r.json()
    assert echo["path"] == "/echo?x=1"
    headers = {k.lower(): v for k, v in echo["headers"]}
    # the sandbox sees the host the browser used, and never the token
    assert headers["host"] == "%s:%d" % (site.host, dgw.trusted_port)
    assert headers["x-forwarded-host"] == "%s:%d" % (site.host, dgw.trusted_port)
    assert "x-lizard-access-token" not in headers
    # the port's access rule: private, so no credential is 401 and a wrong one 403, as on the preview host
    r = get(curl_runner, dgw, site.host, "/echo")
    assert (r.status, r.error_code()) == (401, "missing_token")
    assert r.json()["error"]["sandboxId"] == site.id
    r = get(curl_runner, dgw, site.host, "/echo", headers={"X-Lizard-Access-Token": "wrong"})
    assert (r.status, r.error_code()) == (403, "invalid_token")


def test_host_is_case_insensitive_with_trailing_dot(dgw, curl_runner, site):
    r = get(curl_runner, dgw, site.host.upper() + ".", "/echo", headers={"X-Lizard-Access-Token": site.token})
    assert r.status == 200, r


def test_not_active_or_unknown_is_unknown_host(dgw, curl_runner, redis, site):
    pending = new_host()
    write_domain(redis, pending, site.id, site.port, state="pending")
    r = get(curl_runner, dgw, pending, "/echo", headers={"X-Lizard-Access-Token": site.token})
    assert (r.status, r.error_code()) == (404, "unknown_host"), r
    r = get(curl_runner, dgw, new_host(), "/echo", headers={"X-Lizard-Access-Token": site.token})
    assert (r.status, r.error_code()) == (404, "unknown_host"), r
    # a record naming a port the sandbox does not expose: as on the preview host
    other = new_host()
    write_domain(redis, other, site.id, 1)
    r = get(curl_runner, dgw, other, "/echo", headers={"X-Lizard-Access-Token": site.token})
    assert (r.status, r.error_code()) == (404, "port_not_exposed"), r
    # a record with a malformed sandbox id is not served
    bad = new_host()
    write_domain(redis, bad, "NOT/AN-ID", site.port)
    r = get(curl_runner, dgw, bad, "/echo", headers={"X-Lizard-Access-Token": site.token})
    assert (r.status, r.error_code()) == (404, "unknown_host"), r


def test_unknown_host_is_read_once_then_negative_cached(dgw, curl_runner):
    host = new_host()
    before = fetches(dgw)
    for _ in range(6):
        r = get(curl_runner, dgw, host, "/")
        assert (r.status, r.error_code()) == (404, "unknown_host")
    # looked up (a name the control plane might have written), but one HGETALL per worker at most
    # (each worker has its cache), not one per request
    assert 1 <= fetches(dgw) - before <= dgw.config()["workers"], fetches(dgw) - before


def test_address_literal_is_never_looked_up(dgw, curl_runner):
    before = fetches(dgw)
    for authority in ("127.0.0.1:%d" % dgw.trusted_port, "[::1]:%d" % dgw.trusted_port, "a..b", "x_%s" % ("y" * 300)):
        with socket.create_connection(("127.0.0.1", dgw.trusted_port), timeout=10) as s:
            s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % authority).encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 404"), data[:200]
        assert b'"unknown_host"' in data
    assert fetches(dgw) == before
    # while a name is read (the counter counts)
    r = get(curl_runner, dgw, new_host(), "/")
    assert (r.status, r.error_code()) == (404, "unknown_host")
    assert fetches(dgw) == before + 1


def test_publish_of_domain_stops_it_within_one_round_trip(dgw, curl_runner, redis, site):
    host = new_host()
    write_domain(redis, host, site.id, site.port)
    tok = {"X-Lizard-Access-Token": site.token}
    for _ in range(4):  # every worker has it cached (cache_ttl_ms is 10 s)
        assert get(curl_runner, dgw, host, "/echo", headers=tok).status == 200
    redis.cmd("HSET", "lizard:domain:{%s}" % host, "state", "disabled")
    redis.cmd("PUBLISH", "lizard:routes", "domain:" + host.upper())
    for _ in range(4):
        r = get(curl_runner, dgw, host, "/echo", headers=tok)
        assert (r.status, r.error_code()) == (404, "unknown_host"), r
    # and a domain moved to another sandbox follows it at once
    write_domain(redis, host, site.pub_id, site.port)
    r = get(curl_runner, dgw, host, "/echo")
    assert r.status == 200, r


def test_cached_domain_changes_without_publish_only_after_resubscription(dgw, curl_runner, redis, site):
    host = new_host()
    write_domain(redis, host, site.id, site.port)
    tok = {"X-Lizard-Access-Token": site.token}
    # one keep-alive connection, so one worker: its cache is the one that
    # holds the record (a new curl each time could reach another worker,
    # which never cached it and reads the deleted record)
    conn = http.client.HTTPConnection("127.0.0.1", dgw.trusted_port, timeout=20)

    def status_on_conn():
        conn.request("GET", "/echo", headers=dict(tok, Host=host))
        res = conn.getresponse()
        res.read()
        return res.status

    for _ in range(4):
        assert status_on_conn() == 200
    redis.cmd("DEL", "lizard:domain:{%s}" % host)  # no publish: the cache still serves it
    assert status_on_conn() == 200
    conn.close()
    flushes = metric(dgw, "lizard_route_cache_flushes_total")
    redis.cmd("CLIENT", "KILL", "TYPE", "pubsub")
    gwtest.wait_for(lambda: metric(dgw, "lizard_route_cache_flushes_total") >= flushes + dgw.config()["workers"], 15,
                    what="every worker re-subscribed")

    # the flush counter can reach its mark with one worker counted twice
    # while another is still re-subscribing (a loaded machine): wait for
    # four answers in a row from the re-read record (each curl a new
    # connection, so any worker), within a generous bound
    def four_unknown():
        for _ in range(4):
            r = get(curl_runner, dgw, host, "/echo", headers=tok)
            if (r.status, r.error_code()) != (404, "unknown_host"):
                assert r.status == 200, r  # still the cached record, never anything else
                return False
        return True

    gwtest.wait_for(four_unknown, 15, what="every worker dropped its cached domain")


def test_query_token_becomes_host_only_cookie_for_the_custom_host(dgw, curl_runner, site):
    r = get(curl_runner, dgw, site.host, "/page?a=1&lizard_token=%s" % site.token, headers=bh.NAVIGATION)
    assert r.status == 302, r
    # the load balancer in front terminates TLS: https on the port the client named
    assert r.headers["location"] == "https://%s:%d/page?a=1" % (site.host, dgw.trusted_port)
    (c,) = bh.set_cookies(r)
    assert "domain" not in c.attrs, c  # host-only: the custom host's alone
    assert c.attrs["path"] == "/" and "secure" in c.attrs and "httponly" in c.attrs
    assert r.headers["cache-control"] == "no-store"
    # the cookie opens the sandbox on that host
    r = get(curl_runner, dgw, site.host, "/echo", headers={"Cookie": "%s=%s" % (c.name, c.value)})
    assert r.status == 200, r
    headers = {k.lower(): v for k, v in r.json()["headers"]}
    assert "cookie" not in headers  # the gateway's cookie never reaches the sandbox


def test_share_link_on_the_custom_host(dgw, curl_runner, site):
    link = ref.mint(LINK_KEY[0], LINK_KEY[1], site.id, site.port, int(time.time()) + 600)
    r = get(curl_runner, dgw, site.host, "/echo", headers={"X-Lizard-Access-Token": link})
    assert r.status == 200, r
    r = get(curl_runner, dgw, site.host, "/?lizard_token=" + link, headers=bh.NAVIGATION)
    assert r.status == 302, r
    (c,) = bh.set_cookies(r)
    assert "domain" not in c.attrs
    assert get(curl_runner, dgw, site.host, "/echo", headers={"Cookie": "%s=%s" % (c.name, c.value)}).status == 200
    # a link for another port of the sandbox does not open this host
    other = ref.mint(LINK_KEY[0], LINK_KEY[1], site.id, site.port + 1, int(time.time()) + 600)
    r = get(curl_runner, dgw, site.host, "/echo", headers={"X-Lizard-Access-Token": other})
    assert (r.status, r.error_code()) == (403, "invalid_token"), r


def test_public_port_shows_the_warning_page_for_the_custom_host(dgw, curl_runner, site):
    r = get(curl_runner, dgw, site.pub_host, "/", headers=bh.NAVIGATION)
    assert r.status == 200, r
    assert r.headers["content-type"].startswith("text/html")
    assert site.pub_host.encode() in r.body  # the page names the host the browser opened
    assert b'"upstream": true' not in r.body
    # not a navigation: the sandbox
    r = get(curl_runner, dgw, site.pub_host, "/echo")
    assert r.status == 200 and r.json()["path"] == "/echo"


def test_egress_is_metered_under_the_sandbox(dgw, curl_runner, redis, site):
    key = "lizard:egress:{%s}" % site.id
    before = int(redis.cmd("GET", key) or 0)
    r = get(curl_runner, dgw, site.host, "/bytes/50000", headers={"X-Lizard-Access-Token": site.token})
    assert r.status == 200 and len(r.body) == 50000
    gwtest.wait_for(lambda: int(redis.cmd("GET", key) or 0) >= before + 50000, 15, what="egress billed")


def test_plain_listener_redirects_active_custom_domains_to_https(dgw, curl_runner, redis, site):
    r = get(curl_runner, dgw, site.host.upper(), "/page?a=1", port=dgw.plain_port)
    assert r.status == 308, r
    assert r.headers["location"] == "https://%s:%d/page?a=1" % (site.host, dgw.tls_port)
    # not active, or unknown: no redirect to reflect
    pending = new_host()
    write_domain(redis, pending, site.id, site.port, state="pending")
    for host in (pending, new_host()):
        r = get(curl_runner, dgw, host, "/", port=dgw.plain_port)
        assert (r.status, r.error_code()) == (404, "unknown_host"), r


# --- ACME HTTP-01 --------------------------------------------------------------


def acme_get(curl_runner, gw, host, token, port, https=False, method=None):
    return get(curl_runner, gw, host, "/.well-known/acme-challenge/" + token, port=port, https=https, method=method)


def test_acme_challenge_answered_on_every_listener_without_redirect(dgw, curl_runner, redis, site):
    token = secrets.token_urlsafe(32)
    value = token + "." + secrets.token_urlsafe(32)
    redis.cmd("SET", "lizard:acme:{%s}" % token, value, "EX", "300")
    # the plain listener redirects preview hosts to https, but not a challenge, whatever the host
    for host in (new_host(), site.host, dgw.host(3000, "abc")):
        r = acme_get(curl_runner, dgw, host, token, dgw.plain_port)
        assert r.status == 200, r
        assert r.body == value.encode()
        assert r.headers["content-type"] == "text/plain"
    r = acme_get(curl_runner, dgw, site.host, token, dgw.trusted_port)
    assert r.status == 200 and r.body == value.encode()
    r = acme_get(curl_runner, dgw, dgw.host(3000, "abc"), token, dgw.tls_port, https=True)
    assert r.status == 200 and r.body == value.encode()


def test_acme_unknown_token_is_404_and_nothing_is_proxied(dgw, curl_runner, upstream, site):
    before = upstream.stats()
    r = acme_get(curl_runner, dgw, site.host, secrets.token_urlsafe(32), dgw.plain_port)
    assert r.status == 404, r
    # even on a served custom host, with its token: the challenge path is the gateway's
    for path in ("", "/", "/x/y", "/" + secrets.token_urlsafe(8) + "?q=1"):
        r = get(curl_runner, dgw, site.host, "/.well-known/acme-challenge" + path, port=dgw.trusted_port,
                headers={"X-Lizard-Access-Token": site.token})
        assert r.status == 404, (path, r)
    r = acme_get(curl_runner, dgw, site.host, "tok", dgw.trusted_port, method="POST")
    assert r.status == 405 and r.headers["allow"] == "GET, HEAD"
    assert upstream.stats()["requests"] == before["requests"] + 1  # only the stats request itself


def test_acme_invalid_token_is_refused_without_a_redis_read(dgw, curl_runner, redis):
    # keys that exist: were the token looked up, these would be answered
    for token in ("a.b", "a" * 129, "x%2Fy", "a:b", "a~b", "a=b"):
        redis.cmd("SET", "lizard:acme:{%s}" % token, "leaked", "EX", "300")
    stats = redis.cmd("INFO", "commandstats")
    gets = [line for line in stats.decode().splitlines() if line.startswith("cmdstat_get:")]
    for token in ("a.b", "a" * 129, "x%2Fy", "a:b", "a~b", "a=b"):
        r = acme_get(curl_runner, dgw, new_host(), token, dgw.plain_port)
        assert r.status == 404, (token, r)
        assert b"leaked" not in r.body
    after = [line for line in redis.cmd("INFO", "commandstats").decode().splitlines() if line.startswith("cmdstat_get:")]
    assert after == gets  # no GET reached Redis (nothing else in this module sends GET meanwhile)
    # while a valid token is read
    token = secrets.token_urlsafe(32)
    redis.cmd("SET", "lizard:acme:{%s}" % token, "ok." + token, "EX", "300")
    r = acme_get(curl_runner, dgw, new_host(), token, dgw.plain_port)
    assert (r.status, r.body) == (200, ("ok." + token).encode())
