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

CONSENT_COOKIE = "__Host-Http-lizard_consent"
NONCE_COOKIE = "__Host-Http-lizard_warning"
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


def page_nonce(r):
    """The nonce cookie the page was sent with (its CSRF token is bound to it)."""
    (c,) = bh.set_cookies(r, NONCE_COOKIE)
    return c.value


def show_page(wcurl, host, path="/echo", headers=None):
    """(form fields, nonce) of the page a browser is shown for path."""
    r = wcurl(host, path, headers=dict(bh.NAVIGATION, **(headers or {})))
    assert is_page(r), r
    return form_fields(r), page_nonce(r)


def consent(wcurl, host, fields, nonce, extra_headers=None):
    body = urllib.parse.urlencode(fields)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin",
               "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    if nonce is not None:
        headers["Cookie"] = "%s=%s" % (NONCE_COOKIE, nonce)
    headers.update(extra_headers or {})
    return wcurl(host, "/.lizard/consent", headers=headers, data=body, method="POST")


def url_on(g, host, target):
    return "https://%s:%d%s" % (host, g.tls_port, target)


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
    # no window opened by the sandbox's own content can reach into the page and read its token
    assert r.headers["cross-origin-opener-policy"] == "same-origin"
    assert form_fields(r)["return"] == "/echo?x=1"
    # the nonce the token is bound to: no script may set it (__Host-Http-), it lives as long as the token
    (n,) = bh.set_cookies(r, NONCE_COOKIE)
    assert len(n.value) == 22 and n.attrs["max-age"] == "3600" and n.attrs["path"] == "/", n
    assert "httponly" in n.attrs and "secure" in n.attrs and "domain" not in n.attrs, n
    # one more: the /_stats request itself
    assert upstream.stats()["requests"] == before + 1, "the sandbox was reached"
    # HEAD too; without Fetch Metadata, an Accept preferring HTML
    assert wcurl(public.host, "/", headers=bh.NAVIGATION, extra_args=("-I",)).status == 200
    assert is_page(wcurl(public.host, "/", headers={"Accept": "text/html,*/*;q=0.8"}))
    # a browser asking for German gets German
    r = wcurl(public.host, "/", headers=dict(bh.NAVIGATION, **{"Accept-Language": "de-DE,de;q=0.9"}))
    assert '<html lang="de">' in r.body.decode() and "Weiter zur Vorschau" in r.body.decode()


@pytest.mark.parametrize("kind", ["fetch", "json", "post", "image", "iframe", "iframe_post"])
def test_what_is_not_a_navigation_never_gets_the_page(public, wcurl, kind):
    headers, method, data = {
        "fetch": (FETCH, None, None),
        "json": ({"Accept": "application/json"}, None, None),
        "post": (dict(FETCH, Origin="https://evil.example", **{"Sec-Fetch-Site": "cross-site"}), "POST", "a=1"),
        "image": ({"Sec-Fetch-Dest": "image", "Sec-Fetch-Mode": "no-cors", "Accept": "image/*"}, None, None),
        # the page is only ever for the top level, where the address bar names the host
        "iframe": ({"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "cross-site",
                    "Accept": "text/html"}, None, None),
        "iframe_post": ({"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "same-origin",
                         "Accept": "text/html"}, "POST", "a=1"),
    }[kind]
    r = wcurl(public.host, "/echo", headers=headers, method=method, data=data)
    assert r.status == 200 and r.json()["path"] == "/echo", r


@pytest.mark.parametrize("site", ["cross-site", "same-site", "same-origin", "no_fetch_metadata"])
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_navigations_of_any_method_get_the_page(warn_gw, public, wcurl, upstream, method, site):
    """An auto-submitted form of another site (or the sandbox's own form
    breaking out of a frame to the top) is a navigation like a GET: the page,
    not the sandbox; its Continue opens the URL with GET."""
    if site == "no_fetch_metadata":
        headers = {"Accept": "text/html,*/*;q=0.8", "Origin": "https://evil.example"}
    else:
        headers = dict(bh.NAVIGATION, **{"Sec-Fetch-Site": site})
        if site == "cross-site":
            headers["Origin"] = "https://evil.example"
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    before = upstream.stats()["requests"]
    r = wcurl(public.host, "/echo?form=1", headers=headers, data="a=1&b=2", method=method)
    assert is_page(r), r
    assert form_fields(r)["return"] == "/echo?form=1", r
    # one more: the /_stats request itself
    assert upstream.stats()["requests"] == before + 1, "the sandbox was reached"
    # with the consent (Lax: a same-site form carries it), the form reaches the sandbox
    if site in ("same-site", "same-origin"):
        fields, nonce = show_page(wcurl, public.host)
        (c,) = bh.set_cookies(consent(wcurl, public.host, fields, nonce), CONSENT_COOKIE)
        r = wcurl(public.host, "/echo?form=1", headers=dict(headers, Cookie="%s=%s; %s=%s" % (
            CONSENT_COOKIE, c.value, NONCE_COOKIE, nonce)), data="a=1&b=2", method=method)
        assert r.status == 200 and r.json()["method"] == method and r.json()["body_length"] == 7, r


def test_same_origin_form_without_fetch_metadata_reaches_the_sandbox(warn_gw, public, wcurl):
    # without Fetch Metadata nothing tells a frame from the top: only another site's Origin makes a form a page
    r = wcurl(public.host, "/echo", headers={"Accept": "text/html", "Origin": url_on(warn_gw, public.host, "")},
              data="a=1", method="POST")
    assert r.status == 200 and r.json()["method"] == "POST", r


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
        assert r.status == 302 and r.headers["location"] == url_on(warn_gw, public.host, "/echo"), r
        (c,) = bh.set_cookies(r)
        r = wcurl(public.host, "/echo", headers=dict(bh.NAVIGATION, Cookie="%s=%s" % (bh.COOKIE_NAME, c.value)))
        assert r.status == 200 and r.json()["path"] == "/echo", r
    # a wrong credential does not: a phishing link cannot skip the page with ?lizard_token=x
    r = wcurl(public.host, "/echo?lizard_token=x", headers=bh.NAVIGATION)
    assert is_page(r) and form_fields(r)["return"] == "/echo", r
    assert is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, **{bh.TOKEN_HEADER: "wrong"})))
    assert is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, Cookie="%s=v1.x.1.2.abc" % CONSENT_COOKIE)))
    # the consent cookie of before (issue 20) means nothing
    fields, nonce = show_page(wcurl, public.host)
    (c,) = bh.set_cookies(consent(wcurl, public.host, fields, nonce), CONSENT_COOKIE)
    assert is_page(wcurl(public.host, headers=dict(bh.NAVIGATION, Cookie="__Host-lizard_consent=%s" % c.value)))


def test_consent_sets_the_cookie_and_returns(warn_gw, public, wcurl, redis):
    fields, nonce = show_page(wcurl, public.host, "/echo?a=1&b=%2F")
    assert set(fields) == {"csrf", "return"}, fields
    r = consent(wcurl, public.host, fields, nonce, {"Origin": "https://%s:%d" % (public.host, warn_gw.tls_port)})
    assert r.status == 303, r
    # absolute, on this host (CONTRACT.md, Forwarding)
    assert r.headers["location"] == url_on(warn_gw, public.host, "/echo?a=1&b=%2F")
    assert r.headers["cache-control"] == "no-store"
    (c,) = bh.set_cookies(r, CONSENT_COOKIE)
    assert c.attrs["max-age"] == str(TTL) and c.attrs["samesite"] == "Lax" and c.attrs["path"] == "/", c
    assert "httponly" in c.attrs and "secure" in c.attrs and "domain" not in c.attrs, c
    # the nonce the consent is bound to, again: it now lives as long as the consent
    (n,) = bh.set_cookies(r, NONCE_COOKIE)
    assert n.value == nonce and n.attrs["max-age"] == str(TTL) and "httponly" in n.attrs, n
    # with the consent cookie: the sandbox, which never sees that cookie
    r = wcurl(public.host, "/echo?a=1", headers=dict(bh.NAVIGATION, Cookie="app=2; %s=%s; %s=%s; z=3" % (
        CONSENT_COOKIE, c.value, NONCE_COOKIE, nonce)))
    assert r.status == 200, r
    # nor the nonce: with it, the sandbox's server could fetch a token for this very browser
    assert [v for k, v in r.json()["headers"] if k.lower() == "cookie"] == ["app=2; z=3"], r.json()["headers"]
    # a fetch() (no page) does not forward them either
    r = wcurl(public.host, "/echo", headers=dict(FETCH, Cookie="%s=%s; %s=%s" % (NONCE_COOKIE, nonce, CONSENT_COOKIE,
                                                                               c.value)))
    assert r.status == 200 and not [v for k, v in r.json()["headers"] if k.lower() == "cookie"], r.json()["headers"]
    # the consent is this host's only: another port of the sandbox shows the page again
    other = gwtest.free_port()
    gwtest.register_sandbox(redis, public.id, ports={public.port: "public", other: "public"},
                            token=public.token)
    r = wcurl(warn_gw.host(other, public.id), "/", headers=dict(bh.NAVIGATION,
                                                                 Cookie="%s=%s" % (CONSENT_COOKIE, c.value)))
    assert is_page(r), r


def test_consent_is_bound_to_the_browsers_nonce(warn_gw, public, wcurl, upstream):
    """The consent cookie is not a bearer value (issue 36): one given in
    another browser (another nonce: the sandbox's own, say, planted by its
    script where the __Host-Http- prefix is unknown) does not pass the page;
    the browser it was given to passes. Consent cookies issued before were
    bound to the host alone: they show the page again (consent is given again
    with one click)."""
    fields, theirs = show_page(wcurl, public.host)
    (c,) = bh.set_cookies(consent(wcurl, public.host, fields, theirs), CONSENT_COOKIE)
    mine = show_page(wcurl, public.host)[1]  # the victim's browser, shown the page once: a nonce of its own
    assert mine != theirs

    def navigate(cookies):
        return wcurl(public.host, "/echo", headers=dict(bh.NAVIGATION, Cookie="; ".join(
            "%s=%s" % kv for kv in cookies.items())))

    before = upstream.stats()["requests"]
    assert is_page(navigate({CONSENT_COOKIE: c.value, NONCE_COOKIE: mine}))  # planted in another browser
    assert is_page(navigate({CONSENT_COOKIE: c.value}))  # without any nonce
    assert is_page(navigate({CONSENT_COOKIE: c.value, NONCE_COOKIE: mine[:-1] + "="}))
    assert upstream.stats()["requests"] == before + 1, "the sandbox was reached"  # the /_stats request itself
    r = navigate({CONSENT_COOKIE: c.value, NONCE_COOKIE: theirs})  # the browser it was given to
    assert r.status == 200 and r.json()["path"] == "/echo", r

    # what the binding is, from its definition (docs/public-ports.md, Public ports): the MAC covers
    # "consent:" + sha256(host "\n" nonce); before issue 36, "consent:" + sha256(host)
    def minted(binding_input):
        return bh.sign_cookie(warn_gw.cookie_secret, public.id, public.port, int(time.time()) + 600,
                              "consent:" + gwtest.sha256_hex(binding_input))

    r = navigate({CONSENT_COOKIE: minted(public.host + "\n" + mine), NONCE_COOKIE: mine})
    assert r.status == 200 and r.json()["path"] == "/echo", r
    for nonce in (mine, None):  # a consent of before: the page again, whatever the nonce
        cookies = {CONSENT_COOKIE: minted(public.host)}
        if nonce:
            cookies[NONCE_COOKIE] = nonce
        assert is_page(navigate(cookies))


@pytest.mark.parametrize("bad", ["missing", "altered", "other_host", "cross_site", "other_origin", "open_redirect",
                                 "no_nonce", "other_nonce", "bad_nonce", "token_of_another_browser", "framed"])
def test_consent_without_a_valid_csrf_token_is_refused(warn_gw, public, wcurl, redis, upstream, bad):
    fields, nonce = show_page(wcurl, public.host)
    extra = {}
    if bad == "no_nonce":
        nonce = None
    elif bad == "bad_nonce":
        nonce = nonce[:-1] + "="
    elif bad == "other_nonce":
        # the nonce another page fetch was given: this token was not made for it
        nonce = show_page(wcurl, public.host)[1]
    elif bad == "token_of_another_browser":
        # what a sandbox's server can do (issue 20): fetch the page itself and hand its token to the victim, whose
        # browser holds a nonce of its own
        fields = show_page(wcurl, public.host)[0]
    elif bad == "framed":
        extra = {"Sec-Fetch-Dest": "iframe"}
    elif bad == "missing":
        del fields["csrf"]
    elif bad == "altered":
        fields["csrf"] = bh.flip_char(fields["csrf"])
    elif bad == "other_host":
        other = gwtest.new_sandbox_id("pub")
        gwtest.register_sandbox(redis, other, ports={upstream.port: "public"})
        fields = show_page(wcurl, warn_gw.host(upstream.port, other))[0]
    elif bad == "cross_site":
        extra = {"Sec-Fetch-Site": "cross-site"}
    elif bad == "other_origin":
        extra = {"Origin": "https://evil.example"}
    elif bad == "open_redirect":
        fields["return"] = "//evil.example/"
    r = consent(wcurl, public.host, fields, nonce, extra)
    if bad == "open_redirect":
        assert r.status == 303 and r.headers["location"] == url_on(warn_gw, public.host, "/"), r
        return
    # a browser's form post: the error is the HTML page
    assert r.status == 403 and b"invalid_token" in r.body and b"Please confirm again" in r.body, r
    assert not bh.set_cookies(r, CONSENT_COOKIE), r


def test_consent_is_post_only(public, wcurl):
    r = wcurl(public.host, "/.lizard/consent", headers=bh.NAVIGATION)
    assert r.status == 405 and r.headers.get("allow") == "POST", r


def test_consent_only_for_a_public_exposed_port(warn_gw, public, wcurl, redis, upstream):
    """/.lizard/consent is the page's only on a host whose port is public and
    exposed (issue 23): elsewhere it is a path like any other, after the same
    checks (the port, the credential)."""
    fields, nonce = show_page(wcurl, public.host)
    priv = gwtest.new_sandbox_id("prv")
    token = gwtest.register_sandbox(redis, priv, ports={upstream.port: "private"})
    phost = warn_gw.host(upstream.port, priv)
    # a private port: no credential, 401; with one, the sandbox's own path (as upstream.py answers it)
    r = consent(wcurl, phost, fields, nonce)
    # (a form post is a navigation: the errors are HTML pages)
    assert r.status == 401 and b"missing_token" in r.body, r
    assert not bh.set_cookies(r, CONSENT_COOKIE), r
    r = consent(wcurl, phost, fields, nonce, {bh.TOKEN_HEADER: token})
    assert r.status == 404 and r.json() == {"path": "/.lizard/consent", "upstream": True}, r
    # a port that is not exposed, a sandbox that does not exist
    r = consent(wcurl, warn_gw.host(gwtest.free_port(), public.id), fields, nonce)
    assert r.status == 404 and b"port_not_exposed" in r.body, r
    r = consent(wcurl, warn_gw.host(upstream.port, gwtest.new_sandbox_id("none")), fields, nonce)
    assert r.status == 404 and b"sandbox_not_found" in r.body, r
    # the public port itself still takes it
    assert consent(wcurl, public.host, fields, nonce).status == 303


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
    # a frame gets the sandbox: the page is for the top level only (CONTRACT.md)
    r = go("/echo", frame)
    assert r.status == 200 and r.json()["path"] == "/echo", r
    # the top level gets it, and may frame it (a browser without Fetch Metadata shows it in the frame)
    r = go("/echo", bh.NAVIGATION)
    assert is_page(r), r
    assert "x-frame-options" not in r.headers, r
    assert "frame-ancestors" not in r.headers.get("content-security-policy", ""), r
    assert r.headers["cross-origin-opener-policy"] == "same-origin", r
    fields = form_fields(r)
    (n,) = bh.set_cookies(r, NONCE_COOKIE)
    assert n.attrs["samesite"] == "None" and "partitioned" in n.attrs, n
    r = go("/.lizard/consent", {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin",
                                "Cookie": "%s=%s" % (NONCE_COOKIE, n.value)},
           data=urllib.parse.urlencode(fields), method="POST")
    assert r.status == 303, r
    (c,) = bh.set_cookies(r, CONSENT_COOKIE)
    assert c.attrs["samesite"] == "None" and "partitioned" in c.attrs, c


def test_public_tcp_port_is_not_http_port_not_the_page(warn_gw, public, wcurl, redis, upstream):
    """A public proto:<n> = tcp port (CONTRACT.md, Raw TCP ports: any request
    but its tunnel is 400 not_http_port) shows no warning page: a browser
    navigation, and the consent form posted to it, are not_http_port (the
    page would promise a site that a TCP service never serves)."""
    fields, nonce = show_page(wcurl, public.host)
    sid = gwtest.new_sandbox_id("ptcp")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"}, extra={"proto:%d" % upstream.port: "tcp"})
    host = warn_gw.host(upstream.port, sid)
    r = wcurl(host, "/", headers=bh.NAVIGATION)
    assert r.status == 400 and b"not_http_port" in r.body and not is_page(r), r
    r = consent(wcurl, host, fields, nonce)
    assert r.status == 400 and b"not_http_port" in r.body, r
    assert not bh.set_cookies(r, CONSENT_COOKIE), r
    r = wcurl(host, "/", headers=FETCH)
    assert r.status == 400 and r.error_code() == "not_http_port", r
