"""Operations: SIGHUP reloads cookie secrets from auth.cookie_secrets_file
(rotation without dropping connections), SIGTERM drains in-flight requests
and exits 0 within its bound, /readyz reports Redis and stays ready. Real gateway binary,
real redis-server, real upstream, real TLS clients (http.client, python3-h2)."""

import http.client
import json
import os
import resource
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

import gwtest
from ktls_probe import ktls_transmit

SECRET_A = "A" * 40 + "-first-secret"
SECRET_B = "B" * 40 + "-second-secret"
COOKIE = "__Host-lizard_access"
DRAIN_BOUND_S = 6.0  # DRAIN_MS in gateway/main.c
KTLS = ktls_transmit()[0]  # /readyz reports the kernel's kTLS transmit (tls/ktls.h)


# ---------------------------------------------------------------------------
# helpers


def write_secrets(path, text, mode=0o600):
    """Replaces the file as an operator's tooling would (write, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def log_text(g):
    with open(g.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def sighup_and_wait(g, marker):
    """SIGHUP, then waits for the n-th occurrence of `marker` in the log."""
    before = log_text(g).count(marker)
    g.proc.send_signal(signal.SIGHUP)
    gwtest.wait_for(lambda: log_text(g).count(marker) > before, 10, what="%r in the gateway's log" % marker)


class Conn(http.client.HTTPSConnection):
    """HTTP/1.1 keep-alive over TLS to 127.0.0.1 with SNI and Host = the
    preview host. Never reconnects on its own: `sock_id` tells whether the
    same TCP connection carried every request."""

    def __init__(self, port, host, ca, timeout=10):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["http/1.1"])
        super().__init__("127.0.0.1", port, context=ctx, timeout=timeout)
        self.preview_host = host

    def connect(self):
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.preview_host)

    def get(self, path, headers=None):
        if self.sock is None:
            self.connect()
        h = {"Host": self.preview_host}
        h.update(headers or {})
        self.request("GET", path, headers=h)
        r = self.getresponse()
        body = r.read()
        return r.status, r.getheaders(), body

    def local_port(self):
        return self.sock.getsockname()[1]


def set_cookies(headers):
    return [v for k, v in headers if k.lower() == "set-cookie"]


def cookie_value(headers):
    for v in set_cookies(headers):
        first = v.split(";", 1)[0]
        name, _, value = first.partition("=")
        if name.strip() == COOKIE and value:
            return value
    raise AssertionError("no %s cookie in %r" % (COOKIE, headers))


def issue_cookie(g, host, token, ca):
    """The query token on a GET becomes a cookie (302 + Set-Cookie)."""
    c = Conn(g.tls_port, host, ca)
    try:
        # a navigation, as a browser opening the link: only then does the token become a cookie
        status, headers, _ = c.get("/echo?lizard_token=" + token, headers={"Sec-Fetch-Mode": "navigate"})
        assert status == 302, (status, headers)
        return cookie_value(headers)
    finally:
        c.close()


def with_cookie(g, host, value, ca):
    c = Conn(g.tls_port, host, ca)
    try:
        return c.get("/echo", headers={"Cookie": "%s=%s" % (COOKIE, value)})
    finally:
        c.close()


def error_code(body):
    import json

    try:
        return json.loads(body)["error"]["code"]
    except Exception:  # noqa: BLE001
        return None


class H2Client:
    """One HTTP/2 connection (python3-h2) that stays open between requests."""

    def __init__(self, port, host, ca, timeout=10):
        import h2.config
        import h2.connection

        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        assert self.sock.selected_alpn_protocol() == "h2"
        self.host = host
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def get(self, path, headers=()):
        import h2.events

        sid = self.conn.get_next_available_stream_id()
        hl = [(":method", "GET"), (":scheme", "https"), (":authority", self.host), (":path", path)] + list(headers)
        self.conn.send_headers(sid, hl, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        status, body = None, b""
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the gateway closed the HTTP/2 connection")
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    body += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    out = self.conn.data_to_send()
                    if out:
                        self.sock.sendall(out)
                    return status, body
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)

    def close(self):
        self.sock.close()


def wait_exit(g, timeout):
    """Seconds until the process exited, and its exit code."""
    t0 = time.monotonic()
    try:
        rc = g.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None
    return time.monotonic() - t0, rc


def terminate_and_time(g, timeout=DRAIN_BOUND_S + 5):
    g.proc.send_signal(signal.SIGTERM)
    return wait_exit(g, timeout)


@pytest.fixture
def secrets_file(workdir):
    d = os.path.join(workdir, "ops-secrets-%d" % gwtest.free_port())
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "cookie-secrets")
    write_secrets(path, "# the first line signs\n%s\n" % SECRET_A)
    return path


def file_gateway(gw_factory, path, name, extra=None):
    over = {"auth": {"cookie_secrets_env": None, "cookie_secrets_file": path}}
    over.update(extra or {})
    return gw_factory(over, name=name)


# ---------------------------------------------------------------------------
# cookie secrets from a file, reloaded on SIGHUP


def test_cookie_secret_rotation_on_sighup(gw_factory, secrets_file, register_sandbox, upstream, certs):
    g = file_gateway(gw_factory, secrets_file, "gw-rotate")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)

    cookie_a = issue_cookie(g, host, token, certs["ca"])
    status, _, _ = with_cookie(g, host, cookie_a, certs["ca"])
    assert status == 200
    assert b"\nlizard_cookie_secrets 1\n" in g.admin_get("/metrics")[1]

    # rotation step 1: B signs, A still verifies
    write_secrets(secrets_file, "%s\n\n# previous one, still accepted\n%s\n" % (SECRET_B, SECRET_A))
    sighup_and_wait(g, "cookie secrets reloaded")
    assert b"\nlizard_cookie_secrets 2\n" in g.admin_get("/metrics")[1]
    status, _, _ = with_cookie(g, host, cookie_a, certs["ca"])
    assert status == 200, "a cookie signed with the previous secret must still work during rotation"
    cookie_b = issue_cookie(g, host, token, certs["ca"])
    assert cookie_b != cookie_a
    status, _, _ = with_cookie(g, host, cookie_b, certs["ca"])
    assert status == 200

    # rotation step 2: A is gone; its cookies are refused and cleared, B's work
    write_secrets(secrets_file, "%s\n" % SECRET_B)
    sighup_and_wait(g, "cookie secrets reloaded")
    status, headers, body = with_cookie(g, host, cookie_a, certs["ca"])
    assert status == 403 and error_code(body) == "invalid_token", (status, body)
    cleared = [v for v in set_cookies(headers) if v.startswith(COOKIE + "=") and "Max-Age=0" in v]
    assert cleared, "no clearing Set-Cookie in %r" % headers
    status, _, _ = with_cookie(g, host, cookie_b, certs["ca"])
    assert status == 200, "the cookie signed with B (so B signed after the first reload) must work"

    text = log_text(g)
    assert "cookie secrets reloaded from %s: 1 secret" % secrets_file in text
    assert "certificates reloaded" in text  # one line each
    for s in (SECRET_A, SECRET_B):
        assert s not in text, "a cookie secret appeared in the gateway's log"


def test_broken_secrets_file_keeps_the_current_set(gw_factory, secrets_file, register_sandbox, upstream, certs):
    g = file_gateway(gw_factory, secrets_file, "gw-broken")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    cookie_a = issue_cookie(g, host, token, certs["ca"])

    short = "too-short-secret-xyz"
    cases = [
        ("%s\n%s\n" % (SECRET_B, short), 0o600, "line 2: the secret is shorter than 32 bytes"),
        ("# nothing but a comment\n\n", 0o600, "holds no secret"),
        ("%s\n" % SECRET_B, 0o644, "readable or writable by others"),
    ]
    for text, mode, why in cases:
        write_secrets(secrets_file, text, mode)
        sighup_and_wait(g, "cookie secrets reload failed")
        assert "keeping the current 1: %s: %s" % (secrets_file, why) in log_text(g), log_text(g)[-600:]
        assert g.alive()
        # still A, and only A: the old cookie works, a new one equals A's signature
        status, _, _ = with_cookie(g, host, cookie_a, certs["ca"])
        assert status == 200, "a failed reload must keep the current secrets (%s)" % why

    os.unlink(secrets_file)
    sighup_and_wait(g, "cookie secrets reload failed")
    assert "No such file or directory" in log_text(g)
    status, _, _ = with_cookie(g, host, cookie_a, certs["ca"])
    assert status == 200

    text = log_text(g)
    for s in (SECRET_A, SECRET_B, short):
        assert s not in text, "a cookie secret appeared in the gateway's log"


def test_keep_alive_connections_survive_sighup(gw_factory, secrets_file, register_sandbox, upstream, certs):
    g = file_gateway(gw_factory, secrets_file, "gw-keepalive")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    cookie_a = issue_cookie(g, host, token, certs["ca"])

    c = Conn(g.tls_port, host, certs["ca"])
    h2c = H2Client(g.tls_port, host, certs["ca"])
    try:
        status, _, _ = c.get("/echo", headers={"Cookie": "%s=%s" % (COOKIE, cookie_a)})
        assert status == 200
        port_before = c.local_port()
        status, _ = h2c.get("/echo", [("cookie", "%s=%s" % (COOKIE, cookie_a))])
        assert status == 200

        write_secrets(secrets_file, "%s\n%s\n" % (SECRET_B, SECRET_A))
        sighup_and_wait(g, "cookie secrets reloaded")

        status, _, _ = c.get("/echo", headers={"Cookie": "%s=%s" % (COOKIE, cookie_a)})
        assert status == 200
        assert c.local_port() == port_before, "the HTTP/1.1 connection was replaced"
        status, _ = h2c.get("/echo", [("cookie", "%s=%s" % (COOKIE, cookie_a))])
        assert status == 200
        # and a request with the token header on the same connections
        status, _, _ = c.get("/echo", headers={"X-Lizard-Access-Token": token})
        assert status == 200 and c.local_port() == port_before
    finally:
        c.close()
        h2c.close()


def test_sighup_with_secrets_from_the_environment(gw_factory, register_sandbox, upstream, certs):
    g = gw_factory({}, name="gw-envsecrets")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    cookie = issue_cookie(g, host, token, certs["ca"])
    sighup_and_wait(g, "cookie secrets come from the environment: restart to change them")
    assert g.alive()
    status, _, _ = with_cookie(g, host, cookie, certs["ca"])
    assert status == 200
    assert g.cookie_secret not in log_text(g)


def check(g, cfg_overrides):
    cfg = g.config()
    cfg = gwtest.deep_merge(cfg, cfg_overrides)
    path = g.write_config(path=g.config_path + ".check.json", cfg=cfg)
    return subprocess.run([gwtest.gateway_binary(), "-c", path, "--check"], capture_output=True, text=True, env=g.env(),
                          timeout=20)


def test_check_validates_the_secrets_file(workdir, certs, redis, secrets_file):
    g = gwtest.Gateway(os.path.join(workdir, "gw-check-secrets"), certs, redis.port, name="gw-check-secrets")
    os.makedirs(g.workdir, exist_ok=True)

    r = check(g, {"auth": {"cookie_secrets_env": None, "cookie_secrets_file": secrets_file}})
    assert r.returncode == 0, r.stderr

    r = check(g, {"auth": {"cookie_secrets_file": secrets_file}})  # and cookie_secrets_env from the base
    assert r.returncode == 1
    assert "cookie_secrets_env" in r.stderr and "cookie_secrets_file" in r.stderr, r.stderr

    write_secrets(secrets_file, "%s\nshort-one\n" % SECRET_A)
    r = check(g, {"auth": {"cookie_secrets_env": None, "cookie_secrets_file": secrets_file}})
    assert r.returncode == 1
    assert r.stderr.startswith("config: auth.cookie_secrets_file: %s: line 2: the secret is shorter" % secrets_file), r.stderr
    assert SECRET_A not in r.stderr + r.stdout and "short-one" not in r.stderr + r.stdout

    write_secrets(secrets_file, "%s\n" % SECRET_A, mode=0o604)
    r = check(g, {"auth": {"cookie_secrets_env": None, "cookie_secrets_file": secrets_file}})
    assert r.returncode == 1 and "readable or writable by others" in r.stderr, r.stderr
    write_secrets(secrets_file, "%s\n" % SECRET_A, mode=0o640)  # group-readable is fine
    r = check(g, {"auth": {"cookie_secrets_env": None, "cookie_secrets_file": secrets_file}})
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# SIGTERM: drain, refuse new connections, exit 0 within the bound


def test_sigterm_lets_an_in_flight_request_finish(gw_factory, register_sandbox, upstream, certs):
    g = gw_factory({}, name="gw-drain")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    # the route is cached: the drain does not depend on a lookup
    c = Conn(g.tls_port, host, certs["ca"], timeout=20)
    assert c.get("/echo", headers={"X-Lizard-Access-Token": token})[0] == 200

    result = {}

    def slow():
        try:
            status, _, body = c.get("/slow-head/3000", headers={"X-Lizard-Access-Token": token})
            result["status"], result["body"] = status, body
        except Exception as e:  # noqa: BLE001
            result["error"] = e
        result["at"] = time.monotonic()

    t = threading.Thread(target=slow)
    t.start()
    gwtest.wait_for(lambda: b"lizard_in_flight_requests 1" in g.admin_get("/metrics")[1], 5, what="the slow request in flight")
    t_term = time.monotonic()
    g.proc.send_signal(signal.SIGTERM)

    # new connections are refused while the slow one drains (3 s: the listeners close within it on a loaded box)
    gwtest.wait_for(lambda: not gwtest.port_open(g.tls_port) and not gwtest.port_open(g.plain_port), 5,
                    what="the listeners to close")
    assert g.alive(), "exited before the in-flight request finished"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", g.tls_port), timeout=2).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", g.plain_port), timeout=2).close()

    elapsed, rc = wait_exit(g, DRAIN_BOUND_S + 5)
    t.join(5)
    c.close()
    assert "error" not in result, result
    assert result["status"] == 200 and b"slept_ms" in result["body"], result
    assert rc == 0, "exit code %s" % rc
    exit_after = time.monotonic() - t_term
    print("in-flight drain: request done %.2fs after SIGTERM, exit %.2fs after SIGTERM" % (result["at"] - t_term, exit_after))
    assert exit_after < DRAIN_BOUND_S, "exit took %.1fs: the drain waited for nothing after the request" % exit_after
    assert exit_after < result["at"] - t_term + 3.0
    assert "stopped" in log_text(g)


def test_sigterm_tells_open_connections_to_go_away(gw_factory, register_sandbox, upstream, certs):
    """While a slow request drains, a request on an already open HTTP/1.1
    keep-alive connection is answered with Connection: close, and an HTTP/2
    client is sent GOAWAY: the clients go to another gateway."""
    import h2.events

    g = gw_factory({}, name="gw-goaway")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    auth = {"X-Lizard-Access-Token": token}
    slow_conn, idle = Conn(g.tls_port, host, certs["ca"], timeout=20), Conn(g.tls_port, host, certs["ca"])
    h2c = H2Client(g.tls_port, host, certs["ca"])
    try:
        assert slow_conn.get("/echo", headers=auth)[0] == 200
        assert idle.get("/echo", headers=auth)[0] == 200
        assert h2c.get("/echo", [("x-lizard-access-token", token)])[0] == 200
        t = threading.Thread(target=lambda: slow_conn.get("/slow-head/5000", headers=auth))
        t.start()
        gwtest.wait_for(lambda: b"lizard_in_flight_requests 1" in g.admin_get("/metrics")[1], 5, what="slow request")
        g.proc.send_signal(signal.SIGTERM)
        gwtest.wait_for(lambda: not gwtest.port_open(g.tls_port), 5, what="the listeners to close")  # draining now

        status, headers, _ = idle.get("/echo", headers=auth)
        assert status == 200
        assert dict((k.lower(), v.lower()) for k, v in headers).get("connection") == "close", headers

        # frames until the GOAWAY (one read may end before it: a loaded machine, TLS records apart)
        h2c.sock.settimeout(10)
        events, deadline = [], time.monotonic() + 10
        while not any(isinstance(ev, h2.events.ConnectionTerminated) for ev in events) and time.monotonic() < deadline:
            data = h2c.sock.recv(65536)
            if not data:
                break
            events += h2c.conn.receive_data(data)
        assert any(isinstance(ev, h2.events.ConnectionTerminated) for ev in events), events
        assert t.is_alive(), "the GOAWAY came only once the drain was over, not when it began"
        t.join(10)
        elapsed, rc = wait_exit(g, DRAIN_BOUND_S + 5)
        assert rc == 0
    finally:
        slow_conn.close()
        idle.close()
        h2c.close()


def test_sigterm_with_idle_clients_exits_promptly(gw_factory, register_sandbox, upstream, certs):
    g = gw_factory({}, name="gw-idle")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)

    c = Conn(g.tls_port, host, certs["ca"])
    h2c = H2Client(g.tls_port, host, certs["ca"])
    try:
        assert c.get("/echo", headers={"X-Lizard-Access-Token": token})[0] == 200
        assert h2c.get("/echo", [("x-lizard-access-token", token)])[0] == 200
        # both connections now sit idle, kept alive
        elapsed, rc = terminate_and_time(g)
    finally:
        c.close()
        h2c.close()
    print("idle HTTP/1.1 keep-alive + idle HTTP/2 client: exit %.2fs after SIGTERM" % (elapsed or -1))
    assert rc == 0, "exit code %s" % rc
    assert elapsed < 3.0, "idle keep-alive connections held the process for %.1fs" % elapsed


def test_sigterm_with_an_open_websocket_exits_promptly(gw_factory, register_sandbox, upstream, certs):
    """A WebSocket tunnel is not a request in flight: it is closed at exit,
    not waited for until the bound."""
    g = gw_factory({}, name="gw-ws")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=10), server_hostname=host)
    try:
        sock.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                      "X-Lizard-Access-Token: %s\r\n\r\n" % (host, token)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, "closed before the 101"
            head += chunk
        assert head.startswith(b"HTTP/1.1 101"), head
        elapsed, rc = terminate_and_time(g)
        # the tunnel was closed by the exit (a timeout here would mean it was not)
        sock.settimeout(3)
        try:
            rest = sock.recv(4096)
        except (ConnectionResetError, ssl.SSLError):
            rest = b""
        assert rest == b"", rest
    finally:
        sock.close()
    print("open WebSocket tunnel: exit %.2fs after SIGTERM" % (elapsed or -1))
    assert rc == 0
    assert elapsed < 3.0, "an open WebSocket held the process for %.1fs" % elapsed


# ---------------------------------------------------------------------------
# /readyz reports Redis and stays 200 through an outage


def test_readyz_reports_redis_and_stays_ready(workdir, certs):
    """/readyz once answered 503 within 0.5 s of losing Redis: every pod left
    the Service at once and the whole edge went dark although cached routes
    still served. Now the body and lizard_redis_connected_workers report the
    outage and the status stays 200 (CONTRACT.md, Operations)."""
    own = gwtest.Redis(os.path.join(workdir, "ops-redis-%d" % gwtest.free_port()))
    own.start()
    g = gwtest.Gateway(os.path.join(workdir, "gw-readyz"), certs, own.port, name="gw-readyz")

    def connected_workers():
        for line in g.admin_get("/metrics")[1].decode().splitlines():
            if line.startswith("lizard_redis_connected_workers "):
                return int(line.split()[1])
        raise AssertionError("no lizard_redis_connected_workers")

    try:
        g.start()
        gwtest.wait_for(g.redis_connected, 10, what="/readyz reporting Redis up")
        status, body = g.admin_get("/readyz")
        assert status == 200 and json.loads(body) == {"ready": True, "redis": True, "certificates": True, "ktls": KTLS}, body

        own.kill()
        gwtest.wait_for(lambda: not g.redis_connected(), 10, what="/readyz reporting Redis down")
        status, body = g.admin_get("/readyz")
        assert status == 200 and json.loads(body) == {"ready": True, "redis": False, "certificates": True, "ktls": KTLS}, body
        # /readyz says down once one worker has lost Redis; the other may take its EOF a moment later
        gwtest.wait_for(lambda: connected_workers() == 0, 10, what="both workers counted disconnected")
        time.sleep(1.0)  # several reconnect attempts (reconnect_max_ms 500): still ready
        assert g.admin_get("/readyz")[0] == 200
        assert g.admin_get("/healthz")[0] == 200

        own.start()  # same port
        gwtest.wait_for(g.redis_connected, 10, what="/readyz reporting Redis up again")
        assert connected_workers() == int(os.environ.get("GW_WORKERS", "2"))
        assert g.alive()
    finally:
        rc = g.stop()
        own.stop()
    assert rc == 0


def open_files_limit(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return [int(x) if x.isdigit() else x for x in line.split()[3:5]]
    raise AssertionError("no open files line")


def test_open_files_soft_limit_raised_to_the_hard_one(gw_factory):
    """Started with the usual soft limit of 1024 open files (a shell, a
    container without LimitNOFILE), the gateway raises it to the hard limit
    itself, as HAProxy does, and says it at start; a limit below what the
    configured connection limits can use is said too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 1024:
        pytest.skip("the hard open files limit here is %r: nothing to raise to" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        g = gw_factory({"limits": {"max_client_connections_per_worker": 1000000}}, name=gwtest.new_sandbox_id("nofile"))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert open_files_limit(g.proc.pid) == [hard, hard]
    # the start line comes right after the listeners open
    gwtest.wait_for(lambda: "open files limit %d\n" % hard in log_text(g), 10, what="the start line")
    text = log_text(g)
    assert "open files limit %d is below" % hard in text, text
    assert "limits.max_client_connections_per_worker 1000000" in text and "raise LimitNOFILE" in text, text
