"""MCP and OAuth clients (CONTRACT.md, Authentication 4 and "OAuth discovery";
issue 38): Authorization: Bearer as the gateway's credential, the RFC 9728
discovery document and challenge, and the example authorization server of
deploy/oauth-as whose access tokens are share links.

Real components only: the MCP SDK from npm on both ends (tests/integration/
apps/mcp: an MCP server with the SDK's DNS-rebinding protection, behind a
private port with host:<n> = localhost; the SDK's client with only a Bearer,
or running the whole OAuth flow), the example authorization server built on
the SDK's mcpAuthRouter, a real gateway and redis-server, curl, the Python
upstream (upstream.py) for the header-level checks."""

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time

import pytest

import gwtest
import share_link_ref as ref

HERE = os.path.dirname(os.path.abspath(__file__))
APP_DIR = os.path.join(HERE, "apps", "mcp")
AS_DIR = os.path.join(gwtest.REPO, "deploy", "oauth-as")
KEY = ("k1", b"mcp-test-link-secret-" + b"z" * 32)
EPOCH = 3  # the record's link_epoch: the authorization server must read it to mint a link that works

IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.fixture(scope="module", autouse=True)
def npm_packages():
    """The MCP SDK from npm (tests/lib/deps.sh gw_deps_apps). Outside CI a missing one skips; in CI (CI=true) it fails."""
    missing = [d for d in (APP_DIR, AS_DIR) if not os.path.isdir(os.path.join(d, "node_modules", "@modelcontextprotocol"))]
    if missing or shutil.which("node") is None:
        msg = "node or the MCP SDK is missing in %s (tests/lib/deps.sh gw_deps_apps)" % missing
        if IN_CI:
            pytest.fail(msg + " - required in CI", pytrace=False)
        pytest.skip(msg)


def start_node(script, args, env, log, cwd):
    logf = open(log, "ab")
    proc = subprocess.Popen(["node", script] + args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=logf,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    logf.close()
    line = proc.stdout.readline().decode()
    if not line.startswith("listening "):
        gwtest.stop_process(proc)
        raise RuntimeError("%s did not start: %r %s" % (script, line, gwtest.tail(log)))
    return proc, int(line.split()[1])


@pytest.fixture(scope="module")
def env_dir(workdir):
    d = os.path.join(workdir, "mcp")
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def auth_server(env_dir, redis):
    """deploy/oauth-as with the gateway's link keys, reading link_epoch from our Redis."""
    port = gwtest.free_port()
    env = dict(os.environ, LIZARD_AS_ISSUER="http://127.0.0.1:%d" % port, LIZARD_AS_LISTEN="127.0.0.1:%d" % port,
               LIZARD_LINK_KEYS=ref.keys_text(dict([KEY])), LIZARD_DOMAINS=gwtest.DOMAIN, LIZARD_LINK_TTL_S="600",
               LIZARD_REDIS="127.0.0.1:%d" % redis.port)
    proc, _ = start_node(os.path.join(AS_DIR, "server.mjs"), [], env, os.path.join(env_dir, "oauth-as.log"), AS_DIR)
    yield "http://127.0.0.1:%d" % port
    gwtest.stop_process(proc)


@pytest.fixture(scope="module")
def mcp_gw(env_dir, certs, redis, auth_server):
    keys = os.path.join(env_dir, "link-keys")
    with open(keys, "w") as f:
        f.write(ref.keys_text(dict([KEY])))
    os.chmod(keys, 0o600)
    g = gwtest.Gateway(env_dir, certs, redis.port, name="gw-mcp",
                       overrides={"auth": {"link_keys_file": keys, "link_max_ttl_s": 3600,
                                           "oauth_authorization_servers": [auth_server]}})
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture(scope="module")
def mcp_app(env_dir):
    """The SDK's MCP server; its log says what Authorization each request carried into the app."""
    log = os.path.join(env_dir, "mcp-app-requests.jsonl")
    port = gwtest.free_port()
    proc, port = start_node(os.path.join(APP_DIR, "server.mjs"), ["--port", str(port), "--log", log], dict(os.environ),
                            os.path.join(env_dir, "mcp-app.log"), APP_DIR)
    proc.port, proc.request_log = port, log
    yield proc
    gwtest.stop_process(proc)


@pytest.fixture
def mcp_sandbox(redis, mcp_app, mcp_gw):
    sid = gwtest.new_sandbox_id("mcp")
    token = gwtest.register_sandbox(redis, sid, ports={mcp_app.port: "private"},
                                    extra={"host:%d" % mcp_app.port: "localhost", "link_epoch": EPOCH})
    return sid, token, "https://%s:%d/mcp" % (mcp_gw.host(mcp_app.port, sid), mcp_gw.tls_port)


def app_requests(app, since):
    with open(app.request_log) as f:
        return [json.loads(line) for line in f.readlines()[since:]]


def app_request_count(app):
    if not os.path.exists(app.request_log):
        return 0
    with open(app.request_log) as f:
        return len(f.readlines())


def run_client(certs, *args):
    env = dict(os.environ, NODE_EXTRA_CA_CERTS=certs["ca"])
    r = subprocess.run(["node", os.path.join(APP_DIR, "client.mjs")] + list(args), cwd=APP_DIR, env=env,
                       capture_output=True, timeout=60)
    out = r.stdout.decode().strip().splitlines()
    seen = json.loads(out[-1]) if out else {}
    assert r.returncode == 0, "client failed: %s\n%s" % (seen.get("error"), r.stderr.decode()[-3000:])
    return seen


def assert_mcp_worked(seen):
    assert seen["session"] is True
    assert seen["tools"] == ["echo", "notify"]
    assert seen["echo"] == "hello through the gateway"
    # sent outside any request: delivered on the session's GET stream, through the gateway
    assert seen["notification"] == "from the GET stream"
    assert any(q["method"] == "GET" and q["status"] == 200 for q in seen["requests"]), seen["requests"]


def gateway_logs(g):
    with open(g.log, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    with open(g.config()["log"]["access"], "rb") as f:
        return text + f.read().decode("utf-8", "replace")


@pytest.mark.parametrize("credential", ["access_token", "share_link"])
def test_sdk_client_with_only_a_bearer(mcp_gw, mcp_app, mcp_sandbox, certs, credential):
    """The SDK's client, whose only credential is Authorization: Bearer: the
    whole session works (tools/list, tools/call, the GET notification
    stream) and the Bearer never reaches the app."""
    sid, token, url = mcp_sandbox
    if credential == "share_link":
        token = ref.mint(KEY[0], KEY[1], sid, mcp_app.port, int(time.time()) + 600, EPOCH)
    before = app_request_count(mcp_app)
    seen = run_client(certs, "--url", url, "--bearer", token)
    assert_mcp_worked(seen)
    reached = app_requests(mcp_app, before)
    assert {q["method"] for q in reached} >= {"POST", "GET", "DELETE"}, reached
    assert all(q["authorization"] is None for q in reached), reached
    # nothing of it in a log
    gwtest.access_log_line(mcp_gw, "/mcp")
    assert token not in gateway_logs(mcp_gw)


def test_sdk_client_through_oauth_discovery(mcp_gw, mcp_app, mcp_sandbox, certs, auth_server):
    """No credential at all: 401 -> the resource metadata named in the
    challenge -> the example authorization server (registration,
    authorization, token) -> Bearer <share link> -> tools/call."""
    sid, token, url = mcp_sandbox
    before = app_request_count(mcp_app)
    seen = run_client(certs, "--url", url, "--oauth")
    assert seen.get("unauthorized_first") is True, seen
    first = seen["requests"][0]
    assert first["status"] == 401
    assert first["www_authenticate"].startswith(
        'Bearer resource_metadata="https://%s:%d/.well-known/oauth-protected-resource"'
        % (mcp_gw.host(mcp_app.port, sid), mcp_gw.tls_port)), first
    assert "Lizard-Token" in first["www_authenticate"]
    urls = [q["url"] for q in seen["requests"]]
    assert any(u.endswith("/.well-known/oauth-protected-resource") for u in urls), urls
    assert any(u.startswith(auth_server + "/.well-known/oauth-authorization-server") for u in urls), urls
    assert any(u.startswith(auth_server + "/token") for u in urls), urls
    assert seen["authorization_status"] == 302
    assert seen["token_is_share_link"] is True
    assert_mcp_worked(seen)
    assert all(q["authorization"] is None for q in app_requests(mcp_app, before))


def test_discovery_document_and_challenges(mcp_gw, mcp_app, mcp_sandbox, curl_runner, auth_server):
    sid, token, url = mcp_sandbox
    host = mcp_gw.host(mcp_app.port, sid)

    def get(path, headers=None):
        u = "https://%s:%d%s" % (host, mcp_gw.tls_port, path)
        return curl_runner.request(u, resolve=["%s:%d:127.0.0.1" % (host, mcp_gw.tls_port)], headers=headers)

    before = app_request_count(mcp_app)
    r = get("/.well-known/oauth-protected-resource")
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"resource": "https://%s:%d/" % (host, mcp_gw.tls_port), "authorization_servers": [auth_server],
                        "bearer_methods_supported": ["header"]}
    assert app_request_count(mcp_app) == before  # answered by the gateway
    # a program's 401: the Bearer challenge first (clients that read one joined value look at its first scheme)
    r = get("/mcp", headers={"Accept": "application/json, text/event-stream"})
    assert r.status == 401 and r.error_code() == "missing_token"
    assert r.get_all("www-authenticate") == [
        'Bearer resource_metadata="https://%s:%d/.well-known/oauth-protected-resource"' % (host, mcp_gw.tls_port),
        "Lizard-Token"]
    # a person's: no OAuth challenge, the page
    r = get("/mcp", headers={"Sec-Fetch-Mode": "navigate", "Accept": "text/html"})
    assert r.status == 401 and r.get_all("www-authenticate") == ["Lizard-Token"]


def test_discovery_is_the_apps_on_public_ports_and_off_without_servers(mcp_gw, gateway, redis, upstream, curl_runner):
    sid = gwtest.new_sandbox_id("mcp")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    host = mcp_gw.host(upstream.port, sid)
    r = curl_runner.request("https://%s:%d/.well-known/oauth-protected-resource" % (host, mcp_gw.tls_port),
                            resolve=["%s:%d:127.0.0.1" % (host, mcp_gw.tls_port)])
    assert r.status == 404 and r.json()["upstream"] is True  # the app's answer
    # the shared gateway has no auth.oauth_authorization_servers: today's 401, and the path is a private one's
    sid2 = gwtest.new_sandbox_id("mcp")
    gwtest.register_sandbox(redis, sid2, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid2)
    r = curl_runner.request("https://%s:%d/.well-known/oauth-protected-resource" % (host, gateway.tls_port),
                            resolve=["%s:%d:127.0.0.1" % (host, gateway.tls_port)])
    assert r.status == 401 and r.get_all("www-authenticate") == ["Lizard-Token"]


@pytest.fixture
def echo_sandbox(redis, upstream, mcp_gw, curl_runner):
    """A private port on the Python upstream (/echo shows what reached the app), and a cookie of the gateway's for it."""
    sid = gwtest.new_sandbox_id("bear")
    token = gwtest.register_sandbox(redis, sid, ports={upstream.port: "private", upstream.port + 1: "private"},
                                    extra={"link_epoch": EPOCH})
    host = mcp_gw.host(upstream.port, sid)

    def get(path="/echo", headers=None, header_args=()):
        u = "https://%s:%d%s" % (host, mcp_gw.tls_port, path)
        return curl_runner.request(u, resolve=["%s:%d:127.0.0.1" % (host, mcp_gw.tls_port)], headers=headers,
                                   extra_args=header_args)

    r = get("/?lizard_token=" + token, headers={"Sec-Fetch-Mode": "navigate"})
    assert r.status == 302
    cookie = r.headers["set-cookie"].split(";")[0]
    return sid, token, get, cookie, upstream.port


def authorizations(r):
    return [v for k, v in r.json()["headers"] if k.lower() == "authorization"]


def test_the_apps_own_bearer_reaches_it_unchanged(echo_sandbox):
    sid, token, get, cookie, port = echo_sandbox
    r = get(headers={"Cookie": cookie, "Authorization": "Bearer app-jwt.eyJzdWIiOiJ1In0.sig"})
    assert r.status == 200, r
    assert authorizations(r) == ["Bearer app-jwt.eyJzdWIiOiJ1In0.sig"]
    # with the gateway's Bearer instead, nothing of it reaches the app
    r = get(headers={"Authorization": "Bearer " + token})
    assert r.status == 200 and authorizations(r) == []
    link = ref.mint(KEY[0], KEY[1], sid, port, int(time.time()) + 600, EPOCH)
    r = get(headers={"Authorization": "bearer  " + link})
    assert r.status == 200 and authorizations(r) == []


def test_a_bearer_that_is_neither_is_no_credential(echo_sandbox):
    sid, token, get, cookie, port = echo_sandbox
    r = get(headers={"Authorization": "Bearer " + secrets.token_urlsafe(24)})
    assert r.status == 401 and r.error_code() == "missing_token"
    other_port = ref.mint(KEY[0], KEY[1], sid, port + 1, int(time.time()) + 600, EPOCH)
    r = get(headers={"Authorization": "Bearer " + other_port})
    assert r.status == 403 and r.error_code() == "invalid_token"
    assert "another port" in r.json()["error"]["message"]
    revoked = ref.mint(KEY[0], KEY[1], sid, port, int(time.time()) + 600, EPOCH - 1)
    r = get(headers={"Authorization": "Bearer " + revoked})
    assert r.status == 403 and "revoked" in r.json()["error"]["message"]


def test_bad_authorization_input(echo_sandbox, mcp_gw):
    sid, token, get, cookie, port = echo_sandbox
    # a Bearer with no value: not a credential; beside a cookie it is the app's, as sent
    for value in ("Bearer", "Bearer    "):
        r = get(header_args=["-H", "Authorization: " + value])
        assert r.status == 401 and r.error_code() == "missing_token", value
    r = get(headers={"Cookie": cookie}, header_args=["-H", "Authorization: Bearer"])
    assert r.status == 200 and authorizations(r) == ["Bearer"]
    # two Authorization fields: neither is a credential (which one would count is ambiguous) ...
    two = ["-H", "Authorization: Bearer " + token, "-H", "Authorization: Bearer " + token]
    r = get(header_args=two)
    assert r.status == 401 and r.error_code() == "missing_token"
    # ... and the gateway's are still never forwarded; the app's own passes
    r = get(headers={"Cookie": cookie}, header_args=["-H", "Authorization: Bearer " + token, "-H", "Authorization: Basic YXBwOmFwcA=="])
    assert r.status == 200 and authorizations(r) == ["Basic YXBwOmFwcA=="]
    # a 10 KB Bearer of the app's: passed on, not a credential
    big = "x" * 10240
    r = get(headers={"Cookie": cookie, "Authorization": "Bearer " + big})
    assert r.status == 200 and authorizations(r) == ["Bearer " + big]
    assert token not in gateway_logs(mcp_gw)


def metric(g, name):
    status, body = g.admin_get("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return 0


def test_mcp_headers_in_the_access_log_and_metrics(echo_sandbox, mcp_gw):
    sid, token, get, cookie, port = echo_sandbox
    calls = metric(mcp_gw, 'lizard_mcp_requests_total{method="tools/call"}')
    other = metric(mcp_gw, 'lizard_mcp_requests_total{method="other"}')
    session = "session-" + secrets.token_hex(8)
    path = "/echo/" + secrets.token_hex(4)
    r = get(path, headers={"Cookie": cookie, "Mcp-Method": "tools/call", "Mcp-Name": 'say "hi" \\ now',
                           "Mcp-Session-Id": session})
    assert r.status == 200
    line = gwtest.access_log_line(mcp_gw, path)
    assert line["mcp_method"] == "tools/call"
    assert line["mcp_name"] == 'say "hi" \\ now'
    assert line["mcp_session"] == hashlib.sha256(session.encode()).hexdigest()[:16]
    # a 10 KB Mcp-Method: forwarded as sent, cut in the log, counted as other
    path = "/echo/" + secrets.token_hex(4)
    r = get(path, headers={"Cookie": cookie, "Mcp-Method": "m" * 10240})
    assert r.status == 200
    assert [v for k, v in r.json()["headers"] if k.lower() == "mcp-method"] == ["m" * 10240]
    assert gwtest.access_log_line(mcp_gw, path)["mcp_method"] == "m" * 64
    gwtest.wait_for(lambda: metric(mcp_gw, 'lizard_mcp_requests_total{method="tools/call"}') == calls + 1, 10,
                    what="tools/call counted")
    gwtest.wait_for(lambda: metric(mcp_gw, 'lizard_mcp_requests_total{method="other"}') == other + 1, 10,
                    what="other counted")
    # a request without the headers: none of the fields
    path = "/echo/" + secrets.token_hex(4)
    get(path, headers={"Cookie": cookie})
    assert not any(k.startswith("mcp_") for k in gwtest.access_log_line(mcp_gw, path))
