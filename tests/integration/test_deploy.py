"""How operators deploy the gateway: Redis over a unix socket with a password
from the environment, a trusted plain listener behind a load balancer, and
several certificates chosen by SNI. Real redis-server, real curl, real TLS
clients."""

import json
import os
import socket
import ssl
import subprocess
import time

import pytest

import gwtest


class UnixRedis:
    """redis-server on a unix socket only, with requirepass."""

    def __init__(self, workdir, password):
        self.workdir = workdir
        self.password = password
        self.sock = os.path.join(workdir, "redis.sock")
        self.proc = None

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700", "--save", "",
             "--appendonly", "no", "--requirepass", self.password, "--dir", self.workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
        gwtest.wait_for(lambda: self.cli("PING").strip() == "PONG", 10, what="redis on %s" % self.sock)
        return self

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-s", self.sock, "--no-auth-warning", "-a", self.password] + list(args),
                           capture_output=True, text=True, timeout=10)
        return r.stdout

    def stop(self):
        gwtest.stop_process(self.proc)


@pytest.fixture
def unix_redis(workdir):
    r = UnixRedis(os.path.join(workdir, "unix-redis-%d" % gwtest.free_port()), "pw-" + os.urandom(8).hex())
    r.start()
    yield r
    r.stop()


def start_gateway(workdir, certs, overrides, name, env=None):
    g = gwtest.Gateway(os.path.join(workdir, name), certs, 1, overrides=overrides, name=name)
    base_env = g.env
    g.env = lambda: dict(base_env(), **(env or {}))
    return g.start()


def register_unix(r, sid, port, token):
    r.cli("HSET", "lizard:sbx:{%s}" % sid, "state", "running", "addr", "127.0.0.1", "lifecycle", "l1",
          "project", "p", "token_sha256", gwtest.sha256_hex(token), "port:%d" % port, "private")
    r.cli("PUBLISH", "lizard:routes", sid)


def test_redis_unix_socket_with_password_from_env(workdir, certs, unix_redis, upstream, curl):
    g = start_gateway(workdir, certs, {"redis": {"address": "unix:" + unix_redis.sock, "password_env": "GW_TEST_REDIS_PW"}},
                      "gw-unix", env={"GW_TEST_REDIS_PW": unix_redis.password})
    try:
        sid = gwtest.new_sandbox_id()
        register_unix(unix_redis, sid, upstream.port, "tok-unix")
        gwtest.wait_for(g.redis_connected, 10, what="/readyz: Redis up through a unix socket")
        r = curl(g.host(upstream.port, sid), "/echo", gw=g, headers={"X-Lizard-Access-Token": "tok-unix"})
        assert r.status == 200, r
        with open(g.log, "rb") as f:
            assert unix_redis.password.encode() not in f.read(), "the Redis password appeared in the gateway's log"
    finally:
        g.stop()


def test_wrong_redis_password_is_not_ready_and_503(workdir, certs, unix_redis, upstream, curl):
    g = start_gateway(workdir, certs, {"redis": {"address": "unix:" + unix_redis.sock, "password_env": "GW_TEST_REDIS_PW"}},
                      "gw-badpw", env={"GW_TEST_REDIS_PW": "not-the-password"})
    try:
        sid = gwtest.new_sandbox_id()
        register_unix(unix_redis, sid, upstream.port, "tok")
        time.sleep(0.5)
        assert not g.redis_connected() and g.admin_get("/readyz")[0] == 200  # Redis is reported, not a verdict
        r = curl(g.host(upstream.port, sid), "/echo", gw=g, headers={"X-Lizard-Access-Token": "tok"})
        assert r.status == 503 and r.error_code() == "routing_unavailable", r
        assert r.headers.get("retry-after"), r
        with open(g.log, "rb") as f:
            assert b"not-the-password" not in f.read()
    finally:
        g.stop()


def test_password_env_unset_is_a_config_error(workdir, certs):
    g = gwtest.Gateway(os.path.join(workdir, "gw-noenv"), certs, 1,
                       overrides={"redis": {"password_env": "GW_TEST_SURELY_UNSET"}}, name="gw-noenv")
    os.makedirs(g.workdir, exist_ok=True)
    path = g.write_config()
    env = dict(os.environ)
    env.pop("GW_TEST_SURELY_UNSET", None)
    r = subprocess.run([gwtest.gateway_binary(), "-c", path, "--check"], capture_output=True, text=True, env=env,
                       timeout=20)
    assert r.returncode != 0
    assert "redis.password_env" in r.stderr and "GW_TEST_SURELY_UNSET" in r.stderr, r.stderr


def test_trusted_plain_listener_serves_instead_of_redirecting(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({}, name="gw-trusted")
    # the factory's config has one plain listener; make it trusted and restart
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True
    g.overrides = {"listen": cfg["listen"]}
    g.restart()
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    r = curl(g.host(upstream.port, sid), "/echo", gw=g, plain=True)
    assert r.status == 200, r
    assert r.json()["method"] == "GET"
    fwd = {k.lower(): v for k, v in r.json()["headers"]}
    assert fwd.get("x-forwarded-proto") == "http"
    # each listener reports its own port (the gateway knows it without asking the socket)
    assert fwd.get("x-forwarded-port") == str(g.plain_port)

    # a localhost port sees where the browser is, as the contract says: the preview origin is https
    # behind the TLS-terminating balancer too, so X-Forwarded-Proto is https there, not this hop's http
    lid = gwtest.new_sandbox_id("lh")
    register_sandbox(lid, ports={upstream.port: "public"}, extra={"host:%d" % upstream.port: "localhost"})
    r = curl(g.host(upstream.port, lid), "/echo", gw=g, plain=True)
    assert r.status == 200, r
    fwd = {k.lower(): v for k, v in r.json()["headers"]}
    assert fwd.get("host") == "localhost:%d" % upstream.port, fwd
    assert fwd.get("x-forwarded-proto") == "https", fwd


def tls_peer(port, server_name, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s, server_hostname=server_name) as t:
            return t.getpeercert(), t.selected_alpn_protocol(), t.version()


def test_sni_picks_the_matching_certificate(workdir, certs, redis):
    other = gwtest.make_certs(os.path.join(workdir, "pki-other"), domain="other.test")
    g = gwtest.Gateway(os.path.join(workdir, "gw-sni"), certs, redis.port, name="gw-sni", overrides={
        "domains": ["lizard.test", "other.test"],
        "tls": {"certificates": [{"cert": certs["cert"], "key": certs["key"]},
                                 {"cert": other["cert"], "key": other["key"]}]}})
    g.start()
    try:
        # each name verifies against its own CA with hostname checking on:
        # the wrong certificate would fail the handshake
        cert, alpn, _ = tls_peer(g.tls_port, "3000-a.lizard.test", certs["ca"])
        assert ("DNS", "*.lizard.test") in cert["subjectAltName"]
        assert alpn == "h2"
        cert, alpn, _ = tls_peer(g.tls_port, "3000-a.other.test", other["ca"])
        assert ("DNS", "*.other.test") in cert["subjectAltName"]
        with pytest.raises(ssl.SSLCertVerificationError):
            tls_peer(g.tls_port, "3000-a.other.test", certs["ca"])
        # http/1.1 is offered too
        ctx = ssl.create_default_context(cafile=certs["ca"])
        ctx.set_alpn_protocols(["http/1.1"])
        with socket.create_connection(("127.0.0.1", g.tls_port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="3000-a.lizard.test") as t:
                assert t.selected_alpn_protocol() == "http/1.1"
    finally:
        g.stop()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_below_1_2_is_refused(gateway, certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except ssl.SSLError:
        pass
    with socket.create_connection(("127.0.0.1", gateway.tls_port), timeout=5) as s:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            with ctx.wrap_socket(s, server_hostname="3000-a.lizard.test"):
                pass


def test_sighup_reloads_certificates(workdir, certs, redis):
    d = os.path.join(workdir, "gw-reload-pki")
    first = gwtest.make_certs(os.path.join(d, "one"))
    live_cert, live_key = os.path.join(d, "live.pem"), os.path.join(d, "live.key")
    for src, dst in ((first["cert"], live_cert), (first["key"], live_key)):
        with open(src, "rb") as a, open(dst, "wb") as b:
            b.write(a.read())
    g = gwtest.Gateway(os.path.join(workdir, "gw-reload"), certs, redis.port, name="gw-reload",
                       overrides={"tls": {"certificates": [{"cert": live_cert, "key": live_key}]}})
    g.start()
    try:
        tls_peer(g.tls_port, "3000-a.lizard.test", first["ca"])
        second = gwtest.make_certs(os.path.join(d, "two"))
        for src, dst in ((second["cert"], live_cert), (second["key"], live_key)):
            with open(src, "rb") as a, open(dst, "wb") as b:
                b.write(a.read())
        g.proc.send_signal(1)  # SIGHUP
        gwtest.wait_for(lambda: _verifies(g.tls_port, second["ca"]), 10, what="the reloaded certificate")
        assert g.alive()
        # a broken file keeps the current certificate
        with open(live_key, "wb") as f:
            f.write(b"not a key\n")
        g.proc.send_signal(1)
        time.sleep(0.5)
        assert g.alive() and _verifies(g.tls_port, second["ca"])
    finally:
        g.stop()


def _verifies(port, cafile):
    try:
        tls_peer(port, "3000-a.lizard.test", cafile)
        return True
    except ssl.SSLError:
        return False


def test_trusted_listener_one_client_address_everywhere(gw_factory, curl, register_sandbox, upstream):
    """Behind a trusted plain listener the client is the last X-Forwarded-For
    entry (the one the balancer appended): the same address is the sandbox's
    X-Forwarded-For, the access log's client and what ingress rules check
    (CONTRACT.md, Forwarding: the same address for limits, ingress_allow /
    ingress_deny and the access log)."""
    g = gw_factory({}, name="gw-trusted-client")
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True
    g.overrides = {"listen": cfg["listen"]}
    g.restart()
    sid, denied = gwtest.new_sandbox_id(), gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"}, extra={"ingress_allow": "203.0.113.0/24"})
    register_sandbox(denied, ports={upstream.port: "public"}, extra={"ingress_deny": "203.0.113.9/32"})
    path = "/echo/trusted-" + sid
    xff = {"X-Forwarded-For": "192.0.2.1, 203.0.113.9"}
    r = curl(g.host(upstream.port, sid), path, gw=g, plain=True, headers=xff)
    assert r.status == 200, r
    fwd = [v for k, v in r.json()["headers"] if k.lower() == "x-forwarded-for"]
    assert fwd == ["203.0.113.9"], fwd

    def logged():
        with open(g.config()["log"]["access"]) as f:
            return [json.loads(ln) for ln in f if ln.strip() and json.loads(ln).get("path") == path]

    gwtest.wait_for(lambda: logged(), 10, what="the access log line")
    assert logged()[0]["client"] == "203.0.113.9", logged()
    r = curl(g.host(upstream.port, denied), "/echo", gw=g, plain=True, headers=xff)
    assert r.status == 403 and r.error_code() == "ip_not_allowed", r
