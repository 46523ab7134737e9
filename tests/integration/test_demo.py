"""The newcomer's flow through deploy/demo.sh (on free ports, with the built
gateway, its state in a temporary directory): the start prints a preview URL
and a second app on a `host:<n> localhost` port; `demo.sh share-link` prints a
share link that opens the app; `demo.sh public` prints a public port whose
browser navigation gets the warning page; a restart keeps the newcomer's
config (`gateway.local.json`, merged) and the cookie secret, so a browser
session from before the restart still works."""

import json
import os
import subprocess
import urllib.parse

import pytest

import browser_helpers as bh
import gwtest

DEMO = os.path.join(gwtest.REPO, "deploy", "demo.sh")


@pytest.fixture
def demo(tmp_path):
    run_dir = str(tmp_path / "demo-run")
    os.makedirs(run_dir)
    ports = {k: gwtest.free_port() for k in ("DEMO_TLS_PORT", "DEMO_PLAIN_PORT", "DEMO_ADMIN_PORT", "DEMO_APP_PORT",
                                             "DEMO_APP2_PORT", "DEMO_REDIS_PORT")}
    env = dict(os.environ, DEMO_RUN=run_dir, DEMO_GATEWAY=gwtest.gateway_binary(), DEMO_NO_INSTALL="1",
               **{k: str(v) for k, v in ports.items()})
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")

    class Demo:
        pass

    d = Demo()
    d.run_dir, d.ports, d.env = run_dir, ports, env
    d.ca = os.path.join(run_dir, "ca.pem")
    d.curl = gwtest.Curl(str(tmp_path / "curl"), d.ca)

    def sh(*args, timeout=240):
        r = subprocess.run(["bash", DEMO] + list(args), env=env, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, "demo.sh %s failed: %s\n%s" % (" ".join(args), r.stdout, r.stderr)
        return r.stdout

    def get(url, headers=None):
        u = urllib.parse.urlsplit(url)
        return d.curl.request(url, headers=headers, resolve=["%s:%d:127.0.0.1" % (u.hostname, u.port)])

    d.sh, d.get = sh, get
    yield d
    subprocess.run(["bash", DEMO, "stop"], env=env, capture_output=True, timeout=60)


def urls_in(text):
    return [w for w in text.split() if w.startswith("https://")]


def test_demo_share_link_warning_page_second_app_and_restart(demo):
    tls, app, app2 = demo.ports["DEMO_TLS_PORT"], demo.ports["DEMO_APP_PORT"], demo.ports["DEMO_APP2_PORT"]
    # the newcomer's own setting, kept across restarts
    local = os.path.join(demo.run_dir, "gateway.local.json")
    with open(local, "w") as f:
        json.dump({"upstream": {"idle_timeout_ms": 7000}}, f)

    out = demo.sh()
    previews = [u for u in urls_in(out) if "lizard_token=" in u]
    main_url = "https://%d-demo.lizard.localhost:%d/?lizard_token=" % (app, tls)
    second_url = "https://%d-demo.lizard.localhost:%d/?lizard_token=" % (app2, tls)
    assert any(u.startswith(main_url) for u in previews), out
    assert any(u.startswith(second_url) for u in previews), "no URL of the second app: %s" % out
    token = previews[0].split("lizard_token=", 1)[1]
    with open(os.path.join(demo.run_dir, "gateway.json")) as f:
        assert json.load(f)["upstream"]["idle_timeout_ms"] == 7000

    # the second app sees itself at localhost:<n> (host:<n> localhost); the first the preview host
    who = demo.get("https://%d-demo.lizard.localhost:%d/api/whoami" % (app2, tls), {bh.TOKEN_HEADER: token})
    assert who.status == 200 and who.json()["host"] == "localhost:%d" % app2, who
    who = demo.get("https://%d-demo.lizard.localhost:%d/api/whoami" % (app, tls), {bh.TOKEN_HEADER: token})
    assert who.json()["host"].startswith("%d-demo.lizard.localhost" % app), who.json()
    hosts = demo.sh("hosts")
    assert hosts.startswith("127.0.0.1 ") and "%d-demo.lizard.localhost" % app2 in hosts, hosts

    # a share link: opens the app, without the access token
    link_out = demo.sh("share-link", "600")
    links = urls_in(link_out)
    assert len(links) == 1 and "lizard_token=lzs1." in links[0], link_out
    r = demo.get(links[0])
    assert r.status == 200 and b"Sandbox demo" in r.body, r
    assert token not in links[0]

    # a public port: a browser navigation gets the warning page, a fetch the app
    pub_out = demo.sh("public")
    pubs = urls_in(pub_out)
    assert pubs == ["https://%d-pub.lizard.localhost:%d/" % (app, tls)], pub_out
    page = demo.get(pubs[0], bh.NAVIGATION)
    assert page.status == 200 and b"/.lizard/consent" in page.body and b"Sandbox demo" not in page.body, page
    assert b"%d-pub.lizard.localhost" % app in page.body
    assert demo.get(pubs[0], {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}).body.count(b"Sandbox demo") == 1

    # a browser session: the navigation turns the token into the gateway's cookie
    nav = demo.get(main_url + token, bh.NAVIGATION)
    assert nav.status == 302, nav
    cookie = bh.set_cookies(nav)[0]

    # restart: the local config is kept, the session still works, and so does the share link
    demo.sh()
    with open(local) as f:
        assert json.load(f) == {"upstream": {"idle_timeout_ms": 7000}}
    with open(os.path.join(demo.run_dir, "gateway.json")) as f:
        assert json.load(f)["upstream"]["idle_timeout_ms"] == 7000
    again = demo.get("https://%d-demo.lizard.localhost:%d/" % (app, tls),
                     {"Cookie": "%s=%s" % (cookie.name, cookie.value)})
    assert again.status == 200 and b"Sandbox demo" in again.body, \
        "the browser session did not survive the restart (cookie secret changed?): %r" % again
    assert demo.get(links[0]).status == 200
