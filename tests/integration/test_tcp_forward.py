"""`lizard-gateway tcp-forward` (CONTRACT.md, "Raw TCP ports"; issue 25):
the local client of a sandbox's tcp port, with real clients through it.

Real processes only: the gateway, a redis-server as the routing Redis and
another as the sandbox's tcp port (redis-cli through tcp-forward), Debian's
sshd on a loopback port with a throwaway host key and an authorized key made
here (ssh through tcp-forward), and tcp-forward itself; refusals come from
the gateway's own answers (401, 403, 502) and from TLS and TCP."""

import os
import signal
import socket
import subprocess
import time

import pytest

import gwtest

# generous: a loaded 2-core machine with the ASan build; the point is the outcome, not the time
CLIENT_TIMEOUT_S = 60


class Forward:
    """One tcp-forward process; its stderr is a file the test reads."""

    def __init__(self, workdir, url, token=None, ca=None, connect=None, name="fwd"):
        self.port = gwtest.free_port()
        self.log = os.path.join(workdir, "%s-%d.log" % (name, self.port))
        args = [gwtest.gateway_binary(), "tcp-forward", "--listen", "127.0.0.1:%d" % self.port, "--url", url]
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")
        if token is not None:
            env["SANDBOX_TOKEN"] = token
            args += ["--token-env", "SANDBOX_TOKEN"]
        if ca is not None:
            args += ["--ca", ca]
        if connect is not None:
            args += ["--connect", connect]
        self.args = args
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                         start_new_session=True)
        gwtest.wait_for(lambda: self.proc.poll() is None and "listening on" in self.text(), 15,
                        what="tcp-forward listening (%s)" % self.log)

    def text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_line(self, needle, timeout=15):
        return gwtest.wait_for(lambda: needle in self.text(), timeout, what="%r in tcp-forward's output:\n%s" % (
            needle, self.text()))

    def stop(self):
        return gwtest.stop_process(self.proc)


def assert_clean(fwd):
    for marker in gwtest.SANITIZER_MARKERS:
        assert marker not in fwd.text(), fwd.text()


@pytest.fixture
def forwards():
    started = []
    yield started
    for f in started:
        f.stop()
        assert_clean(f)


def tcp_url(gateway, port, sandbox_id):
    return "wss://%s/.lizard/tcp" % gateway.host(port, sandbox_id)


def forward_to(forwards, workdir, gateway, certs, port, sandbox_id, token):
    f = Forward(workdir, tcp_url(gateway, port, sandbox_id), token=token, ca=certs["ca"],
                connect="127.0.0.1:%d" % gateway.tls_port)
    forwards.append(f)
    return f


def tcp_sandbox(redis, port, visibility="private"):
    return gwtest.register_tcp_sandbox(redis, port, visibility, id_prefix="tf")


def redis_cli(port, *args, stdin=None):
    return subprocess.run(["redis-cli", "-p", str(port)] + list(args), input=stdin, capture_output=True,
                          timeout=CLIENT_TIMEOUT_S)


def test_redis_cli_set_get_and_2mb_value(workdir, gateway, certs, redis, sandbox_redis, forwards):
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    fwd = forward_to(forwards, workdir, gateway, certs, sandbox_redis.port, sid, token)

    r = redis_cli(fwd.port, "SET", "greeting", "hello through the tunnel")
    assert r.returncode == 0 and r.stdout.strip() == b"OK", (r, fwd.text())
    r = redis_cli(fwd.port, "GET", "greeting")
    assert r.stdout.strip() == b"hello through the tunnel", (r, fwd.text())
    # what redis-cli stored is in the sandbox's redis itself
    assert sandbox_redis.cmd("GET", "greeting") == b"hello through the tunnel"

    # 2 MB both ways: many frames up (redis-cli -x reads the value from stdin), many down
    value = os.urandom(1024 * 1024).hex().encode()
    assert len(value) == 2 * 1024 * 1024
    r = redis_cli(fwd.port, "-x", "SET", "big", stdin=value)
    assert r.stdout.strip() == b"OK", (r, fwd.text())
    assert sandbox_redis.cmd("STRLEN", "big") == len(value)
    r = redis_cli(fwd.port, "--raw", "GET", "big")
    assert r.stdout[: len(value)] == value and r.stdout[len(value):] == b"\n", (len(r.stdout), fwd.text())

    # each redis-cli ended its connection: one line per tunnel, closed by the local side (close 1000)
    fwd.wait_line("connection 4 from")
    assert fwd.text().count("closed by the local application") == 4, fwd.text()
    assert token not in fwd.text()



def gateway_metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for ln in body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.rpartition(" ")[2])
    return 0.0


def local_client(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S)
    return s


def recv_until(s, needle):
    buf = b""
    while needle not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf


def test_idle_tunnel_answers_the_gateways_pings(workdir, gw_factory, certs, redis, sandbox_redis, forwards):
    """At a 300 ms Ping interval and a 5 s idle timeout, an idle redis
    connection through tcp-forward outlives the timeout: tcp-forward answers
    each Ping with a Pong (the gateway closes a tunnel that does not). 5 s,
    not less: a Pong timeout is any stall of tcp-forward that long."""
    g = gw_factory({"upstream": {"websocket_ping_interval_ms": 300, "websocket_idle_timeout_ms": 5000}})
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    fwd = forward_to(forwards, workdir, g, certs, sandbox_redis.port, sid, token)
    s = local_client(fwd.port)
    s.sendall(b"PING\r\n")
    assert recv_until(s, b"\r\n") == b"+PONG\r\n"
    pings_before = gateway_metric(g, "lizard_websocket_pings_total")
    # idle past the idle timeout (5 s) with margin: at least 3 Pings come and are answered
    gwtest.wait_for(lambda: gateway_metric(g, "lizard_websocket_pings_total") >= pings_before + 3, 30,
                    what="3 Pings from the gateway")
    time.sleep(5.5)
    s.sendall(b"PING\r\n")
    assert recv_until(s, b"\r\n") == b"+PONG\r\n", fwd.text()
    assert gateway_metric(g, "lizard_websocket_pong_timeouts_total") == 0
    s.close()
    fwd.wait_line("closed by the local application")


def test_sandbox_closing_ends_the_local_connection(workdir, gateway, certs, redis, sandbox_redis, forwards):
    """redis QUIT: the sandbox's FIN comes as close 1000, and the local
    connection ends after the last bytes (+OK)."""
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    fwd = forward_to(forwards, workdir, gateway, certs, sandbox_redis.port, sid, token)
    s = local_client(fwd.port)
    s.sendall(b"QUIT\r\n")
    assert recv_until(s, b"never") == b"+OK\r\n"  # then EOF
    fwd.wait_line("closed: the sandbox's server ended the connection")
    s.close()


def test_revocation_closes_with_4403_and_a_clear_line(workdir, gateway, certs, redis, sandbox_redis, forwards):
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    fwd = forward_to(forwards, workdir, gateway, certs, sandbox_redis.port, sid, token)
    s = local_client(fwd.port)
    s.sendall(b"PING\r\n")
    assert recv_until(s, b"\r\n") == b"+PONG\r\n"
    redis.cmd("HSET", "lizard:sbx:{%s}" % sid, "token_sha256", gwtest.sha256_hex("rotated"))
    redis.cmd("PUBLISH", "lizard:routes", sid)
    assert recv_until(s, b"never") == b""  # the local connection ends
    fwd.wait_line("access to the sandbox was revoked (close 4403)")
    s.close()


def start_sshd(d):
    """Debian's sshd on a free loopback port, as this user: a throwaway host
    key, one authorized key, no PAM. Returns (Popen, port, client key)."""
    os.makedirs(d, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(d, name)], check=True,
                       timeout=30)
    with open(os.path.join(d, "client_key.pub")) as src, open(os.path.join(d, "authorized_keys"), "w") as dst:
        dst.write(src.read())
    port = gwtest.free_port()
    cfg = os.path.join(d, "sshd_config")
    with open(cfg, "w") as f:
        f.write("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nPidFile %s\nUsePAM no\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\n"
                % (port, os.path.join(d, "host_key"), os.path.join(d, "authorized_keys"), os.path.join(d, "sshd.pid")))
    if os.geteuid() == 0:
        # as root sshd wants its privilege separation directory, which the
        # service's unit creates (RuntimeDirectory=sshd); as another user it does not
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(os.path.join(d, "sshd.log"), "ab")
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", cfg], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    gwtest.wait_for(lambda: proc.poll() is None and gwtest.port_open(port), 15,
                    what="sshd on port %d: %s" % (port, gwtest.tail(os.path.join(d, "sshd.log"))))
    return proc, port, os.path.join(d, "client_key")


def test_ssh_command_through_tcp_forward(workdir, gateway, certs, redis, forwards):
    d = os.path.join(workdir, "tcp-forward-sshd")
    sshd, ssh_port, key = start_sshd(d)
    try:
        sid, token = tcp_sandbox(redis, ssh_port)
        fwd = forward_to(forwards, workdir, gateway, certs, ssh_port, sid, token)
        user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        r = subprocess.run(["ssh", "-F", "/dev/null", "-p", str(fwd.port), "-i", key, "-o", "StrictHostKeyChecking=no",
                            "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                            "%s@127.0.0.1" % user, "echo hello from $((6 * 7))"],
                           capture_output=True, timeout=CLIENT_TIMEOUT_S)
        assert r.returncode == 0 and r.stdout == b"hello from 42\n", (r, fwd.text(), gwtest.tail(
            os.path.join(d, "sshd.log")))
    finally:
        gwtest.stop_process(sshd)


def test_missing_token_is_a_clear_401(workdir, gateway, certs, redis, sandbox_redis, forwards):
    sid, _ = tcp_sandbox(redis, sandbox_redis.port)
    fwd = forward_to(forwards, workdir, gateway, certs, sandbox_redis.port, sid, token=None)
    r = redis_cli(fwd.port, "PING")
    assert b"PONG" not in r.stdout
    line = fwd.wait_line("401 missing_token")
    text = fwd.text()
    assert "port %d of sandbox %s is private and no token was sent" % (sandbox_redis.port, sid) in text, text
    assert "--token-env" in text
    assert fwd.proc.poll() is None  # one refused tunnel; the listener stays for the next
    assert line


def test_invalid_token_is_a_clear_403(workdir, gateway, certs, redis, sandbox_redis, forwards):
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    wrong = "not-" + token
    fwd = forward_to(forwards, workdir, gateway, certs, sandbox_redis.port, sid, token=wrong)
    r = redis_cli(fwd.port, "PING")
    assert b"PONG" not in r.stdout
    fwd.wait_line("403 invalid_token")
    text = fwd.text()
    assert "the token in $SANDBOX_TOKEN is not the access token of sandbox %s" % sid in text, text
    assert wrong not in text and token not in text


def test_nothing_listening_is_a_clear_502(workdir, gateway, certs, redis, forwards):
    closed_port = gwtest.free_port()  # nothing listens there
    sid, token = tcp_sandbox(redis, closed_port)
    fwd = forward_to(forwards, workdir, gateway, certs, closed_port, sid, token)
    r = redis_cli(fwd.port, "PING")
    assert b"PONG" not in r.stdout
    fwd.wait_line("502 port_not_open")
    assert "nothing is listening on port %d in sandbox %s" % (closed_port, sid) in fwd.text(), fwd.text()


def test_unknown_sandbox_is_a_clear_404(workdir, gateway, certs, forwards):
    sid = gwtest.new_sandbox_id("tfnone")
    fwd = forward_to(forwards, workdir, gateway, certs, 5432, sid, token="whatever")
    redis_cli(fwd.port, "PING")
    fwd.wait_line("404 sandbox_not_found")
    assert "sandbox %s does not exist" % sid in fwd.text(), fwd.text()


def test_untrusted_certificate_without_ca(workdir, gateway, certs, redis, sandbox_redis, forwards):
    """Without --ca the system trust store is used, which does not hold the test CA."""
    sid, token = tcp_sandbox(redis, sandbox_redis.port)
    f = Forward(workdir, tcp_url(gateway, sandbox_redis.port, sid), token=token,
                connect="127.0.0.1:%d" % gateway.tls_port)
    forwards.append(f)
    redis_cli(f.port, "PING")
    f.wait_line("is not trusted")
    assert "TLS: the certificate of %s is not trusted" % gateway.host(sandbox_redis.port, sid) in f.text(), f.text()
    assert "--ca FILE" in f.text()


def test_certificate_for_another_host(workdir, gateway, certs, forwards):
    """The certificate is checked against the URL's host, also when --connect dials elsewhere."""
    f = Forward(workdir, "wss://5432-abc.elsewhere.test/.lizard/tcp", ca=certs["ca"],
                connect="127.0.0.1:%d" % gateway.tls_port)
    forwards.append(f)
    redis_cli(f.port, "PING")
    f.wait_line("certificate is not valid for 5432-abc.elsewhere.test")


def test_refused_connection_to_the_gateway(workdir, certs, forwards):
    nobody = gwtest.free_port()
    f = Forward(workdir, "wss://5432-abc.lizard.test/.lizard/tcp", ca=certs["ca"], connect="127.0.0.1:%d" % nobody)
    forwards.append(f)
    redis_cli(f.port, "PING")
    f.wait_line("cannot connect to the gateway at 127.0.0.1:%d (--connect): Connection refused" % nobody)


@pytest.mark.parametrize("args,message", [
    (["--url", "ws://5432-abc.lizard.test/.lizard/tcp"], "ws:// is refused"),
    (["--url", "https://5432-abc.lizard.test/"], "the URL must start with wss://"),
    (["--url", "wss://5432-abc.lizard.test/.lizard/tcp?lizard_token=s3cret"], "the token does not go in the URL"),
    (["--url", "wss://5432-abc.lizard.test:99999/.lizard/tcp"], "port is not a number"),
    (["--url", "wss://5432-abc.lizard.test/.lizard/tcp", "--token-env", "TCP_FORWARD_UNSET_VAR"],
     "the environment variable TCP_FORWARD_UNSET_VAR is not set"),
    (["--url", "wss://5432-abc.lizard.test/.lizard/tcp", "--ca", "/nonexistent/ca.pem"], "--ca /nonexistent/ca.pem"),
])
def test_bad_arguments_exit_non_zero_with_one_line(args, message):
    listen = ["--listen", "127.0.0.1:%d" % gwtest.free_port()]
    env = dict(os.environ)
    env.pop("TCP_FORWARD_UNSET_VAR", None)
    r = subprocess.run([gwtest.gateway_binary(), "tcp-forward"] + listen + args, capture_output=True, timeout=30,
                       env=env)
    err = r.stderr.decode()
    assert r.returncode in (1, 2) and message in err, (r.returncode, err)
    assert len(err.strip().splitlines()) == 1
    assert "s3cret" not in err


def test_sigterm_and_sigint_stop_listening_and_exit_0(workdir, certs):
    for sig in (signal.SIGTERM, signal.SIGINT):
        f = Forward(workdir, "wss://5432-abc.lizard.test/.lizard/tcp", ca=certs["ca"])
        assert gwtest.port_open(f.port)
        f.proc.send_signal(sig)
        assert f.proc.wait(timeout=15) == 0, f.text()
        assert not gwtest.port_open(f.port)
        assert "stopped listening" in f.text()
        assert_clean(f)
