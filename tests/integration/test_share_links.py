"""Share links (CONTRACT.md, "Share links"; issue 14): lzs1 tokens that open
one port of one sandbox until they expire, minted both by the gateway's own
`lizard-gateway sign-link` and by an independent Python implementation of
the contract's format (share_link_ref.py), so that the format, not only the
gateway's signer, is tested.

Real gateway (with auth.link_keys_file), real redis-server, the real
upstream.py, curl and python3-websockets as clients."""

import asyncio
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.parse

import pytest

import browser_helpers as bh
import gwtest
import share_link_ref as ref
from test_browser_revocation import _curl_stream, _read_events, echo, run, wait_closed, ws_connect

K1 = ("k1", b"k1-secret-" + b"x" * 40)
K2 = ("k2", b"k2-secret-" + b"y" * 40)
MAX_TTL = 3600
# the same bound as test_browser_revocation: generous, the machine is loaded; the point is the cause
CLOSE_BOUND_S = 5.0


def write_keys(path, keys):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(ref.keys_text(dict(keys)))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def log_text(g):
    with open(g.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def sighup_and_wait(g, marker):
    before = log_text(g).count(marker)
    g.proc.send_signal(signal.SIGHUP)
    gwtest.wait_for(lambda: log_text(g).count(marker) > before, 10, what="%r in the gateway's log" % marker)


@pytest.fixture(scope="module")
def link_gw(workdir, certs, redis):
    """A gateway with share-link keys from a file (k1 only at first)."""
    d = os.path.join(workdir, "share-links")
    os.makedirs(d, exist_ok=True)
    keys_file = os.path.join(d, "link-keys")
    write_keys(keys_file, [K1])
    g = gwtest.Gateway(d, certs, redis.port, name="gw-links",
                       overrides={"auth": {"link_keys_file": keys_file, "link_max_ttl_s": MAX_TTL}})
    g.keys_file = keys_file
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture
def lcurl(link_gw, curl_runner):
    def go(host, path="/echo", headers=None, **kw):
        url = "https://%s:%d%s" % (host, link_gw.tls_port, path)
        return curl_runner.request(url, resolve=["%s:%d:127.0.0.1" % (host, link_gw.tls_port)], headers=headers, **kw)

    return go


class Sbx:
    def __init__(self, redis, gw, port, extra_ports=(), epoch=None):
        self.id = gwtest.new_sandbox_id("lnk")
        ports = {port: "private"}
        for p in extra_ports:
            ports[p] = "private"
        self.token = gwtest.register_sandbox(redis, self.id, ports=ports,
                                             extra={"link_epoch": epoch} if epoch is not None else None)
        self.port = port
        self.host = gw.host(port, self.id)


def cli_mint(g, sandbox_id, port, ttl, epoch=None):
    """`lizard-gateway sign-link`: returns (url, token)."""
    args = [gwtest.gateway_binary(), "sign-link", "-c", g.config_path, "--sandbox", sandbox_id, "--port", str(port),
            "--ttl", str(ttl)]
    if epoch is not None:
        args += ["--epoch", str(epoch)]
    r = subprocess.run(args, capture_output=True, timeout=30, env=g.env())
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 2, lines
    return lines[0], lines[1]


def py_mint(sandbox_id, port, ttl=600, epoch=0, key=K1, exp=None):
    return ref.mint(key[0], key[1], sandbox_id, port, exp if exp is not None else int(time.time()) + ttl, epoch)


def refused(r, token, word):
    """A 403 invalid_token whose message says `word` and never echoes the token."""
    assert r.status == 403, r
    assert r.error_code() == "invalid_token", r
    msg = r.json()["error"]["message"]
    assert word in msg, "%r does not say %r" % (msg, word)
    assert token.encode() not in r.body and token.encode() not in r.raw_head, r
    return msg


def echoed(r):
    assert r.status == 200, r
    return r.json()


# ---------------------------------------------------------------------------


def test_sign_link_prints_url_and_token_in_the_contract_format(link_gw, redis, upstream, lcurl):
    s = Sbx(redis, link_gw, upstream.port)
    t0 = int(time.time())
    url, token = cli_mint(link_gw, s.id, s.port, 600, epoch=0)
    assert url == "https://%s:%d/?lizard_token=%s" % (s.host, link_gw.tls_port, token)
    f = ref.parse(token)
    assert f["sandbox"] == s.id and f["port"] == s.port and f["epoch"] == 0 and f["kid"] == "k1", f
    assert t0 + 600 <= f["exp"] <= int(time.time()) + 600, f
    # the independent implementation, given the same fields, mints the same bytes
    assert ref.mint("k1", K1[1], s.id, s.port, f["exp"], 0) == token
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: token}))


def test_sign_link_refuses_what_the_gateway_would(link_gw):
    base = [gwtest.gateway_binary(), "sign-link", "-c", link_gw.config_path, "--sandbox", "abc", "--port", "3000"]
    for extra, why in [(["--ttl", str(MAX_TTL + 1)], "auth.link_max_ttl_s"), (["--ttl", "0"], "--ttl"),
                       (["--ttl", "60", "--port", "0"], "--port"), (["--ttl", "60", "--sandbox", "ABC"], "--sandbox")]:
        r = subprocess.run(base + extra, capture_output=True, timeout=30, env=link_gw.env())
        assert r.returncode == 2 or r.returncode == 1, (extra, r)
        assert why in r.stderr.decode(), (extra, r.stderr)
        assert r.stdout == b"", r.stdout


@pytest.mark.parametrize("minter", ["sign-link", "python"])
def test_link_in_header_query_and_cookie(link_gw, redis, upstream, lcurl, minter):
    s = Sbx(redis, link_gw, upstream.port)
    token = cli_mint(link_gw, s.id, s.port, 600)[1] if minter == "sign-link" else py_mint(s.id, s.port, 600)
    # header
    e = echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: token}))
    assert all(k.lower() != bh.TOKEN_HEADER for k, _ in e["headers"])
    # query, not a navigation: accepted in place and removed
    e = echoed(lcurl(s.host, "/echo?a=1&lizard_token=%s&b=2" % token, headers={"Accept": "application/json"}))
    assert e["path"] == "/echo?a=1&b=2", e
    # query, a navigation: 302 + the cookie, which expires no later than the link
    t_before = int(time.time())  # the gateway's clock when it set max-age was this or later
    r = lcurl(s.host, "/echo?a=1&lizard_token=" + token, headers=bh.NAVIGATION)
    assert r.status == 302 and r.headers["location"] == "https://%s:%d/echo?a=1" % (s.host, link_gw.tls_port), r
    assert r.headers.get("cache-control") == "no-store" and r.headers.get("referrer-policy") == "no-referrer", r
    (c,) = bh.set_cookies(r)
    exp = ref.parse(token)["exp"]
    assert 0 < int(c.attrs["max-age"]) <= exp - t_before + 1, c
    # the gateway's own signed value, not the link (CONTRACT.md: the cookie is not the token)
    assert c.value.startswith("l1.%s.%d." % (s.id, s.port)) and token not in c.value and "lzs1" not in c.value, c
    assert "httponly" in c.attrs and "secure" in c.attrs and c.attrs["samesite"] == "Lax" and "domain" not in c.attrs, c
    # the cookie
    e = echoed(lcurl(s.host, headers={"Cookie": "app=1; %s=%s" % (bh.COOKIE_NAME, c.value)}))
    cookies = [v for k, v in e["headers"] if k.lower() == "cookie"]
    assert cookies == ["app=1"], cookies
    # the access log never holds the link
    with open(os.path.join(link_gw.workdir, "gw-links-access.log"), "rb") as f:
        assert token.encode() not in f.read()


@pytest.mark.parametrize("case,word", [
    ("expired", "expired"),
    ("beyond_max_ttl", "longer than"),
    ("other_port", "another port"),
    ("other_sandbox", "another sandbox"),
    ("unknown_kid", "key"),
    ("signature", "signature"),
    ("epoch", "revoked"),
])
@pytest.mark.parametrize("how", ["header", "query", "cookie"])
def test_link_refusals_say_why(link_gw, redis, upstream, lcurl, case, word, how):
    other_port = gwtest.free_port()
    s = Sbx(redis, link_gw, upstream.port, extra_ports=[other_port])
    now = int(time.time())
    token = {
        "expired": lambda: py_mint(s.id, s.port, exp=now - 5),
        "beyond_max_ttl": lambda: py_mint(s.id, s.port, exp=now + MAX_TTL + 600),
        "other_port": lambda: py_mint(s.id, other_port),
        "other_sandbox": lambda: py_mint("someoneelse", s.port),
        "unknown_kid": lambda: py_mint(s.id, s.port, key=("k9", K1[1])),
        "signature": lambda: bh.flip_char(py_mint(s.id, s.port)),
        "epoch": lambda: py_mint(s.id, s.port, epoch=1),
    }[case]()
    if how == "header":
        r = lcurl(s.host, headers={bh.TOKEN_HEADER: token, "Accept": "application/json"})
    elif how == "query":
        r = lcurl(s.host, "/echo?lizard_token=" + token, headers={"Accept": "application/json"})
    else:
        # a link is never a cookie (CONTRACT.md: the cookie is not the token), whatever it says
        r = lcurl(s.host, headers={"Cookie": "%s=%s" % (bh.COOKIE_NAME, token), "Accept": "application/json"})
        (c,) = bh.set_cookies(r)
        assert c.value == "" and c.attrs["max-age"] == "0", "a refused cookie is cleared: %r" % c
        word = "not valid"
    refused(r, token, word)


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def sign_as_sent(payload, key=K1):
    """A token for the encoded payload as given, signed correctly: what a
    control plane with a lax encoder would mint."""
    import base64
    import hashlib
    import hmac
    signed = ref.PREFIX + payload
    sig = base64.urlsafe_b64encode(hmac.new(key[1], signed.encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    return signed + "." + sig


def test_links_are_strict_base64url(link_gw, redis, upstream, lcurl):
    """CONTRACT.md (Share links): base64url without padding, strictly. A
    payload padded with '=', or spelled with the unused low bits of its last
    character set (it decodes to the same bytes), is refused even when signed
    as sent; so is a padded signature."""
    # an epoch that makes the payload's length not a multiple of 3, so that its last character has unused bits
    for epoch in (0, 10, 100):
        s = Sbx(redis, link_gw, upstream.port, epoch=epoch)
        good = py_mint(s.id, s.port, epoch=epoch)
        p = good[len(ref.PREFIX):].split(".")[0]
        if len(p) % 4:
            break
    assert len(p) % 4 in (2, 3), p
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: good}))
    unused = 4 if len(p) % 4 == 2 else 2  # low bits of the last character that carry nothing
    last = B64URL.index(p[-1])
    assert last % (1 << unused) == 0, p
    variants = {
        "padded": sign_as_sent(p + "=" * (4 - len(p) % 4)),
        "one pad": sign_as_sent(p + "="),
        "unused bits set": sign_as_sent(p[:-1] + B64URL[last | 1]),
        "all unused bits set": sign_as_sent(p[:-1] + B64URL[last | ((1 << unused) - 1)]),
        "padded signature": good + "=",
    }
    for name, token in variants.items():
        assert token != good
        r = lcurl(s.host, headers={bh.TOKEN_HEADER: token, "Accept": "application/json"})
        assert r.status == 403, "%s: %r" % (name, r)
        refused(r, token, "signature")
        # and in the query, where a navigation would turn it into the cookie
        r = lcurl(s.host, "/echo?lizard_token=" + urllib.parse.quote(token, safe=""), headers=bh.NAVIGATION)
        assert r.status == 403 and not bh.set_cookies(r), "%s: %r" % (name, r)


def test_a_link_opens_one_port_only(link_gw, redis, upstream, lcurl):
    other_port = gwtest.free_port()
    s = Sbx(redis, link_gw, upstream.port, extra_ports=[other_port])
    token = py_mint(s.id, s.port)
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: token}))
    # the cookie it became does not open the other port either
    r = lcurl(s.host, "/echo?lizard_token=" + token, headers=bh.NAVIGATION)
    (c,) = bh.set_cookies(r)
    other = link_gw.host(other_port, s.id)
    refused(lcurl(other, headers={bh.TOKEN_HEADER: token, "Accept": "application/json"}), token, "another port")
    r = lcurl(other, headers={"Cookie": "%s=%s" % (bh.COOKIE_NAME, c.value), "Accept": "application/json"})
    assert r.status == 403 and r.error_code() == "invalid_token", r


def test_access_token_still_works_beside_links(link_gw, redis, upstream, lcurl):
    s = Sbx(redis, link_gw, upstream.port)
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: s.token}))
    r = lcurl(s.host, headers={bh.TOKEN_HEADER: "lzs1.not-a-link", "Accept": "application/json"})
    refused(r, "lzs1.not-a-link", "signature")


def test_epoch_bump_revokes_link_and_its_cookie_within_one_publish(link_gw, redis, upstream, lcurl):
    s = Sbx(redis, link_gw, upstream.port, epoch=4)
    token = py_mint(s.id, s.port, epoch=4)
    r = lcurl(s.host, "/echo?lizard_token=" + token, headers=bh.NAVIGATION)
    (c,) = bh.set_cookies(r)
    cookie = {"Cookie": "%s=%s" % (bh.COOKIE_NAME, c.value), "Accept": "application/json"}
    header = {bh.TOKEN_HEADER: token, "Accept": "application/json"}
    echoed(lcurl(s.host, headers=cookie))
    # every worker caches the record: 16 requests on 16 connections (the
    # kernel spreads them over the workers' SO_REUSEPORT sockets), as in
    # test_cache.py, so that the unpublished write below is not seen by any
    for _ in range(16):
        echoed(lcurl(s.host, headers=header))
    redis.cmd("HSET", "lizard:sbx:{%s}" % s.id, "link_epoch", "5")
    # written, not published: the cached record still says 4
    echoed(lcurl(s.host, headers=header))
    redis.cmd("PUBLISH", "lizard:routes", s.id)
    refused(lcurl(s.host, headers=header), token, "revoked")
    refused(lcurl(s.host, headers=cookie), token, "revoked")
    # the sandbox's access token is not touched by a link revocation
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: s.token}))
    # a link of the new epoch works
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: py_mint(s.id, s.port, epoch=5)}))


def test_rotated_kid_stays_valid_until_retired(link_gw, redis, upstream, lcurl):
    s = Sbx(redis, link_gw, upstream.port)
    old = py_mint(s.id, s.port, key=K1)
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: old}))
    k2_link = py_mint(s.id, s.port, key=K2)
    refused(lcurl(s.host, headers={bh.TOKEN_HEADER: k2_link, "Accept": "application/json"}), k2_link, "key")
    try:
        # rotation: k2 first (sign-link signs with it), k1 still verifies
        write_keys(link_gw.keys_file, [K2, K1])
        sighup_and_wait(link_gw, "share link keys reloaded")
        new = py_mint(s.id, s.port, key=K2)
        echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: new}))
        echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: old}))
        assert ref.parse(cli_mint(link_gw, s.id, s.port, 60)[1])["kid"] == "k2"
        # a bad file keeps the current keys
        with open(link_gw.keys_file, "w") as f:
            f.write("k3:short\n")
        sighup_and_wait(link_gw, "share link keys reload failed")
        echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: old}))
        # k1 retired
        write_keys(link_gw.keys_file, [K2])
        sighup_and_wait(link_gw, "share link keys reloaded")
        refused(lcurl(s.host, headers={bh.TOKEN_HEADER: old, "Accept": "application/json"}), old, "key")
        echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: new}))
    finally:
        write_keys(link_gw.keys_file, [K1])
        sighup_and_wait(link_gw, "share link keys reloaded")


@pytest.mark.parametrize("how", ["header", "query", "cookie"])
def test_websocket_with_a_link_and_its_revocation(link_gw, redis, upstream, certs, lcurl, how):
    """A WebSocket upgrade carries the link (header, query or the cookie);
    bumping link_epoch and publishing closes it, while a tunnel opened with
    the access token stays open."""
    s = Sbx(redis, link_gw, upstream.port)
    token = py_mint(s.id, s.port)
    path, headers = "/ws", {}
    if how == "header":
        headers = {bh.TOKEN_HEADER: token}
    elif how == "query":
        path = "/ws?lizard_token=" + token
    else:
        r = lcurl(s.host, "/?lizard_token=" + token, headers=bh.NAVIGATION)
        (c,) = bh.set_cookies(r)
        headers = {"Cookie": "%s=%s" % (bh.COOKIE_NAME, c.value)}

    async def go():
        async with ws_connect(link_gw, s.host, path, certs["ca"], headers) as a, \
                ws_connect(link_gw, s.host, "/ws", certs["ca"], {bh.TOKEN_HEADER: s.token}) as b:
            await echo(a, "over the link")
            await echo(b, "over the token")
            redis.cmd("HSET", "lizard:sbx:{%s}" % s.id, "link_epoch", "1")
            assert await wait_closed(a, 0.5) is None, "closed before the publish"
            redis.cmd("PUBLISH", "lizard:routes", s.id)
            assert await wait_closed(a, CLOSE_BOUND_S) is not None, "the link's tunnel survived the epoch bump"
            await echo(b, "the token's tunnel is untouched")

    run(go())


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_streaming_response_with_a_link_cut_by_epoch_bump(link_gw, redis, upstream, http2):
    """A server-sent event stream opened with a share link ends after the
    link_epoch bump is published; one opened with the access token goes on."""
    s = Sbx(redis, link_gw, upstream.port)
    path = "/sse?n=600&interval_ms=50"
    a = _curl_stream(link_gw, s.host, path, {bh.TOKEN_HEADER: py_mint(s.id, s.port)}, http2)
    b = _curl_stream(link_gw, s.host, path, {bh.TOKEN_HEADER: s.token}, http2)
    try:
        _read_events(a, 2, 15)
        _read_events(b, 2, 15)
        redis.cmd("HSET", "lizard:sbx:{%s}" % s.id, "link_epoch", "1")
        _read_events(a, 3, 5)  # unpublished: still streaming
        redis.cmd("PUBLISH", "lizard:routes", s.id)
        try:
            rc = a.wait(timeout=CLOSE_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail("the link's stream still runs %.0f s after the publish" % CLOSE_BOUND_S)
        assert rc != 0, "the stream ended as if complete: %s" % a.stderr.read()
        assert b.poll() is None, "the token's stream ended too"
        _read_events(b, 3, 5)
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()


def test_sign_link_without_epoch_reads_the_current_one_from_redis(link_gw, redis, upstream, lcurl):
    """After a revocation (link_epoch bumped), a link minted without --epoch
    carries the new epoch and opens the port; stderr says where the epoch
    came from."""
    s = Sbx(redis, link_gw, upstream.port)
    redis.cmd("HINCRBY", "lizard:sbx:{%s}" % s.id, "link_epoch", "1")
    redis.cmd("HINCRBY", "lizard:sbx:{%s}" % s.id, "link_epoch", "1")
    redis.cmd("PUBLISH", "lizard:routes", s.id)
    args = [gwtest.gateway_binary(), "sign-link", "-c", link_gw.config_path, "--sandbox", s.id, "--port", str(s.port),
            "--ttl", "600"]
    r = subprocess.run(args, capture_output=True, timeout=30, env=link_gw.env())
    assert r.returncode == 0, r.stderr.decode()
    assert "link_epoch 2 (read from Redis)" in r.stderr.decode(), r.stderr
    token = r.stdout.decode().splitlines()[1]
    assert ref.parse(token)["epoch"] == 2
    echoed(lcurl(s.host, headers={bh.TOKEN_HEADER: token}))
    # --epoch still wins, and says so
    r = subprocess.run(args + ["--epoch", "0"], capture_output=True, timeout=30, env=link_gw.env())
    assert r.returncode == 0 and "link_epoch 0 (from --epoch)" in r.stderr.decode(), r.stderr
    stale = r.stdout.decode().splitlines()[1]
    refused(lcurl(s.host, headers={bh.TOKEN_HEADER: stale}), stale, "revoked")


def test_sign_link_without_epoch_and_without_redis_says_so(link_gw, tmp_path):
    cfg = json.load(open(link_gw.config_path))
    cfg["redis"]["address"] = "127.0.0.1:%d" % gwtest.free_port()  # nothing listens there
    path = str(tmp_path / "gw.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([gwtest.gateway_binary(), "sign-link", "-c", path, "--sandbox", "abc", "--port", "3000", "--ttl",
                        "60"], capture_output=True, timeout=30, env=link_gw.env())
    assert r.returncode == 1 and r.stdout == b"", r
    assert "cannot read the sandbox's link_epoch from Redis" in r.stderr.decode() and "--epoch" in r.stderr.decode(), \
        r.stderr
