"""The public-port warning page and share links in headless Chromium (issue
14): a navigation to a public port shows the page, a fetch() from it is not
interrupted, Continue (pressed with the keyboard; the page has no script)
lands on the original URL with the consent cookie set, and the app's links,
fetch() and WebSocket then work; a URL with a credential skips the page; a
share link opens a private port exactly as the access token does. Issue
20: the two ways another site skipped the page (an auto-submitted POST form;
the sandbox's own page in a frame, posting a token its server fetched to the
top) end on the page.

Same setup as test_browser_e2e.py (Chromium, node, playwright-core)."""

import html
import http.client
import json
import re
import socket
import ssl
import urllib.parse

import pytest  # noqa: F401 - fixtures below come from test_browser_e2e

import browser_helpers as bh
import gwtest
import share_link_ref as ref
from test_browser_e2e import (app, assert_app_got_websocket, assert_app_saw_no_credentials,  # noqa: F401
                              assert_walkthrough, browser_env, gateway_cookie, parent_site, run_browser)

CONSENT_COOKIE = "__Host-Http-lizard_consent"
LINK_KEY = ("b1", b"browser-link-key-" + b"q" * 32)


@pytest.fixture
def warn_gw(gw_factory, tmp_path):
    keys = tmp_path / "link-keys"
    keys.write_text(ref.keys_text(dict([LINK_KEY])))
    keys.chmod(0o600)
    return gw_factory({"auth": {"public_warning": True, "link_keys_file": str(keys)}}, name="gw-browser-warn")


def test_browser_warning_then_continue(browser_env, tmp_path, app, parent_site, redis, warn_gw):  # noqa: F811
    sid = gwtest.new_sandbox_id("pubw")
    gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
    host = warn_gw.host(app.port, sid)
    base = "https://%s:%d" % (host, warn_gw.tls_port)
    out = run_browser(browser_env, tmp_path, "warning", base + "/?ref=e2e", host,
                      parent_url="http://127.0.0.1:%d/blank.html" % parent_site.port,
                      fetchUrl=base + "/api/data?via=prefetch")
    assert not out.get("error"), "browser run failed: %s\nresponses: %s" % (out.get("error"), out.get("responses"))
    # the page: shown on the navigation, names the host, no script
    assert out["warning_url"] == base + "/?ref=e2e", out
    assert "not by the platform" in out["warning_text"] and host in out["warning_text"], out["warning_text"]
    assert out["warning_lang"] == "en" and out["warning_scripts"] == 0, out
    assert out["button_text"] == "Continue to the preview", out
    # a fetch() (from a page of another origin, before any consent) is not a navigation: the app answered it
    assert out["prefetch"]["status"] == 200, out["prefetch"]
    assert json.loads(out["prefetch"]["body"])["ok"] is True, out["prefetch"]
    # Continue: a POST, then 303 to the original URL, which is the app
    consent = [r for r in out["responses"] if r["url"] == base + "/.lizard/consent"]
    assert len(consent) == 1 and consent[0]["status"] == 303 and consent[0]["location"] == base + "/?ref=e2e", consent
    assert out["landed_url"] == base + "/?ref=e2e" and out["landed_title"] == "home", out
    # then the app works: a link, a fetch(), a WebSocket, none interrupted
    assert out["after_click_url"] == base + "/page2?from=home&n=1" and out["after_click_title"] == "page two", out
    assert out["fetch"]["status"] == 200, out["fetch"]
    assert out["websocket"].get("echo") == "echo: hello over websocket", out["websocket"]
    assert_app_got_websocket(app)
    cs = [c for c in out["cookies"] if c["name"] == CONSENT_COOKIE]
    assert len(cs) == 1, out["cookies"]
    c = cs[0]
    assert c["httpOnly"] and c["secure"] and c["sameSite"] == "Lax" and c["domain"] == host, c
    # the app never saw the page's form or the consent cookie
    for req in app.snapshot():
        assert not req["path"].startswith("/.lizard/"), req
        for k, v in req["headers"]:
            assert not (k == "cookie" and CONSENT_COOKIE in v), req


@pytest.mark.parametrize("credential", ["token", "share_link"])
def test_browser_url_with_a_credential_skips_the_warning(browser_env, tmp_path, app, redis, warn_gw, credential):  # noqa: F811
    sid = gwtest.new_sandbox_id("pubt")
    token = gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
    if credential == "share_link":
        import time
        token = ref.mint(LINK_KEY[0], LINK_KEY[1], sid, app.port, int(time.time()) + 600)
    host = warn_gw.host(app.port, sid)
    base = "https://%s:%d" % (host, warn_gw.tls_port)
    out = run_browser(browser_env, tmp_path, "top", base + "/?lizard_token=%s&ref=e2e" % token, host)
    assert_walkthrough(out, base, token)
    assert not [r for r in out["responses"] if "/.lizard/" in r["url"]], out["responses"]
    assert_app_saw_no_credentials(app, token)


def test_browser_share_link_on_a_private_port(browser_env, tmp_path, app, redis, warn_gw):  # noqa: F811
    """A share link minted by the independent implementation opens a private
    port in a browser like the access token: 302 to the same URL without it,
    the cookie, then links, fetch() and a WebSocket."""
    import time
    sid = gwtest.new_sandbox_id("lnkb")
    gwtest.register_sandbox(redis, sid, ports={app.port: "private"})
    link = ref.mint(LINK_KEY[0], LINK_KEY[1], sid, app.port, int(time.time()) + 600)
    host = warn_gw.host(app.port, sid)
    base = "https://%s:%d" % (host, warn_gw.tls_port)
    out = run_browser(browser_env, tmp_path, "top", base + "/?lizard_token=%s&ref=e2e" % link, host)
    assert_walkthrough(out, base, link)
    (c,) = gateway_cookie(out)
    assert c["httpOnly"] and c["secure"] and c["sameSite"] == "Lax" and c["domain"] == host, c
    assert_app_saw_no_credentials(app, link)
    assert_app_got_websocket(app)


# --- issue 20: the page skipped from another site ---------------------------


class _ToLoopback(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 with the SNI and Host of `host` (the preview host)."""

    def connect(self):
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _gateway_request(gw, host, ca, method, target, headers, body=None):
    conn = _ToLoopback(host, gw.tls_port, context=ssl.create_default_context(cafile=ca), timeout=10)
    try:
        conn.request(method, target, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        conn.close()


def _cookies_set(headers):
    """{name: value} of the Set-Cookie headers of a response."""
    out = {}
    for k, v in headers:
        if k.lower() == "set-cookie":
            c = bh.SetCookie(v)
            out[c.name] = c.value
    return out


def _page_as_anyone(gw, host, ca):
    """What a sandbox's server gets by fetching the page itself: the form's
    fields and the cookies it was sent with."""
    status, headers, body = _gateway_request(gw, host, ca, "GET", "/", dict(bh.NAVIGATION))
    fields = {m.group(1): html.unescape(m.group(2))
              for m in re.finditer(r'<input type="hidden" name="(\w+)" value="([^"]*)">', body.decode())}
    assert status == 200 and "csrf" in fields, (status, body[:300])
    return fields, _cookies_set(headers)


def _evil_handler(app, h):
    """The sandbox's app of an attacker, on a public port. /phish is what it
    wants at the top level; /framed is its page for a frame in another site:
    its server fetches the warning page (and goes through a consent of its
    own), the page plants every cookie it was given with a script, and its
    button posts the fetched token to /.lizard/consent with target=_top."""
    path = h.path.split("?", 1)[0]
    if path == "/phish":
        return 200, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")], (
            b"<!doctype html><title>phish</title><h1 id=title>Log in to the platform</h1>")
    if path == "/framed":
        g, host, ca = app.gw, app.host, app.ca
        fields, cookies = _page_as_anyone(g, host, ca)
        cookie_header = "; ".join("%s=%s" % kv for kv in cookies.items())
        status, headers, _ = _gateway_request(
            g, host, ca, "POST", "/.lizard/consent",
            {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie_header,
             "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document",
             "Origin": "https://%s:%d" % (host, g.tls_port)}, urllib.parse.urlencode(fields))
        app.own_consent_status = status
        plant = dict(_cookies_set(headers))  # the consent the attacker got for itself
        fields, cookies = _page_as_anyone(g, host, ca)  # a fresh token, and the cookies it came with
        plant.update(cookies)
        app.planted = sorted(plant)
        script = "".join("document.cookie=%s;" % json.dumps("%s=%s; Path=/; Secure; SameSite=None" % kv)
                         for kv in plant.items())
        page = ("<!doctype html><html><head><meta charset=utf-8><title>framed</title></head><body>"
                "<script>%s</script>"
                "<form method=post action=\"/.lizard/consent\" target=_top>"
                "<input type=hidden name=csrf value=\"%s\"><input type=hidden name=return value=\"/phish\">"
                "<button id=go type=submit>Play the game</button></form></body></html>"
                % (script, html.escape(fields["csrf"])))
        return 200, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")], page.encode()
    return 404, [("Content-Type", "text/plain")], b"not here"


@pytest.fixture
def evil(warn_gw, redis, certs):
    a = bh.RecordingApp(_evil_handler)
    a.start()
    a.sid = gwtest.new_sandbox_id("evil")
    gwtest.register_sandbox(redis, a.sid, ports={a.port: "public"})
    a.gw, a.host, a.ca = warn_gw, warn_gw.host(a.port, a.sid), certs["ca"]
    a.base = "https://%s:%d" % (a.host, warn_gw.tls_port)
    yield a
    a.stop()


@pytest.fixture
def attacker_site():
    """Another site (http://127.0.0.1:PORT, not under the preview domain): serves .page at /."""

    def handler(app, h):
        return 200, [("Content-Type", "text/html; charset=utf-8")], app.page.encode()

    a = bh.RecordingApp(handler)
    a.page = ""
    a.start()
    yield a
    a.stop()


def _assert_on_the_page(text, where):
    assert "not by the platform" in text and "Continue to the preview" in text, "%s is not the warning page: %r" % (
        where, text[:300])


def test_browser_cross_site_form_post_gets_the_page(browser_env, tmp_path, warn_gw, evil, attacker_site):  # noqa: F811
    """No click: a page of another site auto-submits a POST form to the
    public port. Before issue 20 only GET got the page, so the sandbox's
    /phish loaded at the top level."""
    attacker_site.page = ("<!doctype html><title>free prizes</title><body>"
                          "<form id=f method=post action=\"%s/phish?from=attacker\"><input name=a value=1></form>"
                          "<script>addEventListener('load', () => setTimeout(() => f.submit(), 50))</script>"
                          % evil.base)
    out = run_browser(browser_env, tmp_path, "attack", evil.base + "/phish", evil.host,
                      parent_url="http://127.0.0.1:%d/" % attacker_site.port)
    assert not out.get("error"), "browser run failed: %s\nresponses: %s" % (out.get("error"), out.get("responses"))
    assert out["landed_url"] == evil.base + "/phish?from=attacker", out["landed_url"]
    assert out["landed_title"] != "phish", "the sandbox's page loaded at the top level without the warning"
    _assert_on_the_page(out["landed_text"], "the page after the cross-site POST")
    # the sandbox never saw the POST
    assert not [r for r in evil.snapshot() if r["path"].startswith("/phish")], evil.snapshot()


def test_browser_framed_sandbox_cannot_give_consent(browser_env, tmp_path, warn_gw, evil, attacker_site):  # noqa: F811
    """One click: a page of another site frames the sandbox (a frame does not
    get the page), whose own page plants the cookies its server was given
    and posts a token its server fetched to /.lizard/consent, target=_top.
    Before issue 20 the token was bound only to the host: one click set the
    consent cookie and /phish was at the top level."""
    attacker_site.page = ("<!doctype html><title>a game</title><body><h1>Play!</h1>"
                          "<iframe width=600 height=300 src=\"%s/framed\"></iframe></body>" % evil.base)
    out = run_browser(browser_env, tmp_path, "attack", evil.base + "/phish", evil.host,
                      parent_url="http://127.0.0.1:%d/" % attacker_site.port, clickInFrame=True)
    assert not out.get("error"), "browser run failed: %s\nresponses: %s" % (out.get("error"), out.get("responses"))
    assert out["frame_title"] == "framed", out
    # the attacker's own consent worked (the page is not broken), and it tried to plant what it got
    assert evil.own_consent_status == 303, evil.own_consent_status
    assert [n for n in evil.planted if "lizard_consent" in n], evil.planted
    # the click's POST was refused: no consent
    posts = [r for r in out["responses"] if r["url"] == evil.base + "/.lizard/consent"]
    assert len(posts) == 1 and posts[0]["status"] == 403, posts
    assert not posts[0]["set_cookie"], posts
    assert out["landed_title"] != "phish" and "Please confirm again" in out["landed_text"], out["landed_text"][:300]
    # no script could plant the page's cookies, and the next visit still gets the page
    assert not [c for c in out["cookies"] if "lizard_consent" in c["name"]], out["cookies"]
    assert out["revisit_title"] != "phish", "the sandbox's page loaded without the warning"
    _assert_on_the_page(out["revisit_text"], "the next visit")
    assert not [r for r in evil.snapshot() if r["path"].startswith("/phish")], evil.snapshot()


# --- issue 36: the consent cookie is bound to the browser ---------------------


def test_browser_consent_given_in_another_browser_does_not_pass(browser_env, tmp_path, warn_gw, app, redis,  # noqa: F811
                                                                certs):
    """A consent cookie is worth something only in the browser it was given
    to (its nonce cookie): one given to another browser (here: the sandbox's
    server went through the page and the consent itself), put into this
    browser's cookie jar as a planted cookie would be, still shows the page;
    this browser's own Continue then works, and its consent lasts."""
    sid = gwtest.new_sandbox_id("pubp")
    gwtest.register_sandbox(redis, sid, ports={app.port: "public"})
    host = warn_gw.host(app.port, sid)
    base = "https://%s:%d" % (host, warn_gw.tls_port)
    fields, cookies = _page_as_anyone(warn_gw, host, certs["ca"])
    status, headers, _ = _gateway_request(
        warn_gw, host, certs["ca"], "POST", "/.lizard/consent",
        {"Content-Type": "application/x-www-form-urlencoded",
         "Cookie": "; ".join("%s=%s" % kv for kv in cookies.items()), "Sec-Fetch-Site": "same-origin",
         "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, urllib.parse.urlencode(fields))
    assert status == 303, status
    elsewhere = _cookies_set(headers)[CONSENT_COOKIE]
    plant = [{"name": CONSENT_COOKIE, "value": elsewhere, "url": base + "/", "secure": True, "httpOnly": True,
              "sameSite": "Lax"}]
    out = run_browser(browser_env, tmp_path, "planted", base + "/?ref=e2e", host, plant=plant)
    assert not out.get("error"), "browser run failed: %s\nresponses: %s" % (out.get("error"), out.get("responses"))
    _assert_on_the_page(out["first_text"], "the first visit")
    assert out["planted"] == [CONSENT_COOKIE], out["planted"]  # the browser holds the other browser's consent
    assert out["with_planted_title"] != "app home", "the consent of another browser passed the page"
    _assert_on_the_page(out["with_planted_text"], "the visit with the planted consent")
    # this browser's Continue: its own consent, then the app, also on the next visit
    assert out["landed_url"] == base + "/?ref=e2e" and out["landed_title"] == "app home", out
    assert out["revisit_title"] == "app home", out["revisit_text"][:300]
    # one consent POST: this browser's own
    posts = [r for r in out["responses"] if r["url"] == base + "/.lizard/consent"]
    assert len(posts) == 1 and posts[0]["status"] == 303, posts
