"""The warning page of public ports (CONTRACT.md, "Public ports and the
warning page"; issue 14), with curl as the client: who gets the page (browser
navigations only), its headers, the consent POST and its CSRF token, the
consent cookie, and iframe mode. The same in headless Chromium is in
test_browser_warning.py.

Real gateway (auth.public_warning: true), real redis-server, upstream.py."""

import html
import os
import re
import time
import urllib.parse

import pytest

import browser_helpers as bh
import gwtest
import share_link_ref as ref
from test_browser_revocation import echo, run, ws_connect

CONSENT_COOKIE = "__Host-lizard_consent"
TTL = 7200
LINK_KEY = ("w1", b"warning-link-key-" + b"z" * 32)
FETCH = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Sec-Fetch-Site": "same-origin", "Accept": "*/*"}


@pytest.fixture(scope="module")
def warn_gw(workdir, certs, redis):
    d = os.path.join(workdir, "warning")
    os.makedirs(d, exist_ok=True)
    g = gwtest.Gateway(d, certs, redis.port, name="gw-warn",
                       overrides={"auth": {"public_warning": True, "public_warning_ttl_s": TTL,
                                           "link_keys_env": "LIZARD_LINK_KEYS"}})
    env = g.env

    def with_keys():
        e = env()
        e["LIZARD_LINK_KEYS"] = ref.keys_text(dict([LINK_KEY]))
        return e

    g.env = with_keys
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture
def wcurl(warn_gw, curl_runner):
    def go(host, path="/echo", headers=None, gw=None, **kw):
        g = gw or warn_gw
        url = "https://%s:%d%s" % (host, g.tls_port, path)
        return curl_runner.request(url, resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)], headers=headers, **kw)

    return go


@pytest.fixture
def public(warn_gw, redis, upstream):
    class S:
        pass

    s = S()
    s.id = gwtest.new_sandbox_id("pub")
    s.token = gwtest.register_sandbox(redis, s.id, ports={upstream.port: "public"})
    s.port = upstream.port
    s.host = warn_gw.host(upstream.port, s.id)
    return s


def is_page(r):
    return r.status == 200 and r.headers.get("content-type", "").startswith("text/html") and \
        b"/.lizard/consent" in r.body


def form_fields(r):
    text = r.body.decode()
    return {m.group(1): html.unescape(m.group(2))
            for m in re.finditer(r'<input type="hidden" name="(\w+)" value="([^"]*)">', text)}


def consent(wcurl, host, fields, extra_headers=None):
    body = urllib.parse.urlencode(fields)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin",
               "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    headers.update(extra_headers or {})
    return wcurl(host, "/.lizard/consent", headers=headers, data=body, method="POST")


def test_navigation_gets_the_page(warn_gw, public, wcurl, upstream):
    before = upstream.stats()["requests"]
    r = wcurl(public.host, "/echo?x=1", headers=bh.NAVIGATION)
    assert is_page(r), r
    text = r.body.decode()
    assert public.host in text
    assert "served by code running in a sandbox, not by the platform" in text
    assert "Do not enter passwords" in text
    assert "<script" not in text
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-robots-tag"] == "noindex"
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert form_fields(r)["return"] == "/echo?x=1"
    # one more: the /_stats request itself
    assert upstream.stats()["requests"] == before + 1, "the sandbox was reached"
    # HEAD too; without Fetch Metadata, an Accept preferring HTML
    assert wcurl(public.host, "/", headers=bh.NAVIGATION, extra_args=("-I",)).status == 200
    assert is_page(wcurl(public.host, "/", headers={"Accept": "text/html,*/*;q=0.8"}))
    # a browser asking for German gets German
    r = wcurl(public.host, "/", headers=dict(bh.NAVIGATION, **{"Accept-Language": "de-DE,de;q=0.9"}))
    assert '<html lang="de">' in r.body.decode() and "Weiter zur Vorschau" in r.body.decode()


@pytest.mark.parametrize("kind", ["fetch", "json", "post", "image", "iframe_outside_iframe_mode"])
def test_what_is_not_a_navigation_never_gets_the_page(public, wcurl, kind):
    headers, method, data = {
        "fetch": (FETCH, None, None),
        "json": ({"Accept": "application/json"}, None, None),
        "post": (bh.NAVIGATION, "POST", "a=1"),
        "image": ({"Sec-Fetch-Dest": "image", "Sec-Fetch-Mode": "no-cors", "Accept": "image/*"}, None, None),
        "iframe_outside_iframe_mode": ({"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Mode": "navigate",
                                        "Accept": "text/html"}, None, None),
    }[kind]
    r = wcurl(public.host, "/echo", headers=headers, method=method, data=data)
    assert r.status == 200 and r.json()["path"] == "/echo", r


def test_websocket_never_gets_the_page(warn_gw, public, certs):
    async def go():
        async with ws_connect(warn_gw, public.host, "/ws", certs["ca"],
                              {"Sec-Fetch-Dest": "websocket", "Accept": "text/html"}) as ws:
            await echo(ws, "no page for websockets")

    run(go())


def test_credentials_skip_the_page(warn_gw, public, wcurl):
    # the access token (header), a share link (header), the gateway's cookie
    assert not is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, **{bh.TOKEN_HEADER: public.token})))
    link = ref.mint(LINK_KEY[0], LINK_KEY[1], public.id, public.port, int(time.time()) + 600)
    assert not is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, **{bh.TOKEN_HEADER: link})))
    # the query becomes the cookie, and the cookie skips the page from then on
    for credential in (public.token, link):
        r = wcurl(public.host, "/echo?lizard_token=" + credential, headers=bh.NAVIGATION)
        assert r.status == 302 and r.headers["location"] == "/echo", r
        (c,) = bh.set_cookies(r)
        r = wcurl(public.host, "/echo", headers=dict(bh.NAVIGATION, Cookie="%s=%s" % (bh.COOKIE_NAME, c.value)))
        assert r.status == 200 and r.json()["path"] == "/echo", r
    # a wrong credential does not: a phishing link cannot skip the page with ?lizard_token=x
    r = wcurl(public.host, "/echo?lizard_token=x", headers=bh.NAVIGATION)
    assert is_page(r) and form_fields(r)["return"] == "/echo", r
    assert is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, **{bh.TOKEN_HEADER: "wrong"})))
    assert is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, Cookie="%s=v1.x.1.2.abc" % CONSENT_COOKIE)))


def test_consent_sets_the_cookie_and_returns(warn_gw, public, wcurl, redis):
    page = wcurl(public.host, "/echo?a=1&b=%2F", headers=bh.NAVIGATION)
    fields = form_fields(page)
    assert set(fields) == {"csrf", "return"}, fields
    r = consent(wcurl, public.host, fields, {"Origin": "https://%s:%d" % (public.host, warn_gw.tls_port)})
    assert r.status == 303, r
    assert r.headers["location"] == "/echo?a=1&b=%2F"
    assert r.headers["cache-control"] == "no-store"
    (c,) = bh.set_cookies(r, CONSENT_COOKIE)
    assert c.attrs["max-age"] == str(TTL) and c.attrs["samesite"] == "Lax" and c.attrs["path"] == "/", c
    assert "httponly" in c.attrs and "secure" in c.attrs and "domain" not in c.attrs, c
    # with the consent cookie: the sandbox, which never sees that cookie
    r = wcurl(public.host, "/echo?a=1", headers=dict(bh.NAVIGATION, Cookie="app=2; %s=%s" % (CONSENT_COOKIE, c.value)))
    assert r.status == 200, r
    assert [v for k, v in r.json()["headers"] if k.lower() == "cookie"] == ["app=2"], r.json()["headers"]
    # the consent is this host's only: another port of the sandbox shows the page again
    other = gwtest.free_port()
    gwtest.register_sandbox(redis, public.id, ports={public.port: "public", other: "public"},
                            token=public.token)
    r = wcurl(warn_gw.host(other, public.id), "/", headers=dict(bh.NAVIGATION,
                                                                 Cookie="%s=%s" % (CONSENT_COOKIE, c.value)))
    assert is_page(r), r


@pytest.mark.parametrize("bad", ["missing", "altered", "other_host", "cross_site", "other_origin", "open_redirect"])
def test_consent_without_a_valid_csrf_token_is_refused(warn_gw, public, wcurl, redis, upstream, bad):
    fields = form_fields(wcurl(public.host, "/echo", headers=bh.NAVIGATION))
    extra = {}
    if bad == "missing":
        del fields["csrf"]
    elif bad == "altered":
        fields["csrf"] = bh.flip_char(fields["csrf"])
    elif bad == "other_host":
        other = gwtest.new_sandbox_id("pub")
        gwtest.register_sandbox(redis, other, ports={upstream.port: "public"})
        fields = form_fields(wcurl(warn_gw.host(upstream.port, other), "/echo", headers=bh.NAVIGATION))
    elif bad == "cross_site":
        extra = {"Sec-Fetch-Site": "cross-site"}
    elif bad == "other_origin":
        extra = {"Origin": "https://evil.example"}
    elif bad == "open_redirect":
        fields["return"] = "//evil.example/"
    r = consent(wcurl, public.host, fields, extra)
    if bad == "open_redirect":
        assert r.status == 400 or (r.status == 303 and r.headers["location"] == "/"), r
        return
    # a browser's form post: the error is the HTML page
    assert r.status == 403 and b"invalid_token" in r.body and b"Please confirm again" in r.body, r
    assert not bh.set_cookies(r, CONSENT_COOKIE), r


def test_consent_is_post_only(public, wcurl):
    r = wcurl(public.host, "/.lizard/consent", headers=bh.NAVIGATION)
    assert r.status == 405 and r.headers.get("allow") == "POST", r


def test_warning_off_by_default(gateway, curl, register_sandbox, upstream):
    sid = gwtest.new_sandbox_id("pub")
    register_sandbox(sid, ports={upstream.port: "public"})
    r = curl(gateway.host(upstream.port, sid), "/echo", headers=bh.NAVIGATION)
    assert r.status == 200 and r.json()["path"] == "/echo", r


def test_iframe_mode(gw_factory, redis, upstream, curl_runner):
    g = gw_factory({"auth": {"public_warning": True, "cookie_same_site": "none"}})
    sid = gwtest.new_sandbox_id("pub")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)

    def go(path, headers, **kw):
        return curl_runner.request("https://%s:%d%s" % (host, g.tls_port, path),
                                   resolve=["%s:%d:127.0.0.1" % (host, g.tls_port)], headers=headers, **kw)

    frame = {"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "cross-site",
             "Accept": "text/html"}
    r = go("/echo", frame)
    assert is_page(r), r
    assert "x-frame-options" not in r.headers, r
    assert "frame-ancestors" not in r.headers.get("content-security-policy", ""), r
    fields = form_fields(r)
    r = go("/.lizard/consent", {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"},
           data=urllib.parse.urlencode(fields), method="POST")
    assert r.status == 303, r
    (c,) = bh.set_cookies(r, CONSENT_COOKIE)
    assert c.attrs["samesite"] == "None" and "partitioned" in c.attrs, c
