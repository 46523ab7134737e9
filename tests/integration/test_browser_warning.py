"""The public-port warning page and share links in headless Chromium (issue
14): a navigation to a public port shows the page, a fetch() from it is not
interrupted, Continue (pressed with the keyboard; the page has no script)
lands on the original URL with the consent cookie set, and the app's links,
fetch() and WebSocket then work; a URL with a credential skips the page; a
share link opens a private port exactly as the access token does.

Same setup as test_browser_e2e.py (Chromium, node, playwright-core)."""

import json

import pytest  # noqa: F401 - fixtures below come from test_browser_e2e

import gwtest
import share_link_ref as ref
from test_browser_e2e import (app, assert_app_got_websocket, assert_app_saw_no_credentials,  # noqa: F401
                              assert_walkthrough, browser_env, gateway_cookie, parent_site, run_browser)

CONSENT_COOKIE = "__Host-lizard_consent"
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
    assert len(consent) == 1 and consent[0]["status"] == 303 and consent[0]["location"] == "/?ref=e2e", consent
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
