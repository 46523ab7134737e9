"""Fixtures for the gateway's integration tests.

Everything runs on 127.0.0.1 with free ports and temporary directories:
a test CA and a *.lizard.test certificate, our own redis-server, a real
HTTP/1.1 upstream (upstream.py), and the gateway binary from GW_BINARY
(default build/gateway/lizard-gateway). All processes are ended at the end of
the session, also when tests fail.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gwtest  # noqa: E402
import long_calls_bg  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    """The long calls' test last: it judges calls that ran in the background since the session's first
    test (long_calls_bg.py), by then mostly done."""
    items.sort(key=long_calls_bg.judged_by)  # stable: every other test keeps its place


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gw"))


@pytest.fixture(scope="session")
def certs(workdir):
    return gwtest.make_certs(os.path.join(workdir, "pki"))


@pytest.fixture(scope="session")
def redis(workdir):
    r = gwtest.Redis(os.path.join(workdir, "redis"))
    r.start()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def upstream(workdir):
    u = gwtest.Upstream(os.path.join(workdir, "upstream"))
    u.start()
    yield u
    u.stop()


@pytest.fixture(scope="session")
def gateway(workdir, certs, redis):
    """The shared gateway. Tests that change its config use gw_factory."""
    g = gwtest.Gateway(os.path.join(workdir, "gateway"), certs, redis.port)
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    if reports:
        pytest.fail("sanitizer reports from the gateway:\n" + "\n\n".join(reports), pytrace=False)
    if rc != 0:  # the contract: SIGTERM drains, flushes and exits 0
        why = "did not exit within 15 s of SIGTERM" if rc is None else "exited with %s on SIGTERM" % rc
        pytest.fail("the gateway %s; log:\n%s" % (why, gwtest.tail(g.log)), pytrace=False)


@pytest.fixture(autouse=True)
def gateway_guard(request):
    """After each test that used the shared gateway: it must still be alive
    and clean. A crash fails that test and the gateway is restarted, so the
    following tests still say something."""
    yield
    if "gateway" not in request.fixturenames:
        return
    g = request.getfixturevalue("gateway")
    if not g.alive():
        rc = g.proc.returncode if g.proc is not None else None
        log = gwtest.tail(g.log)
        g.stop()
        g.start()
        pytest.fail("the gateway died during this test (exit %s); log:\n%s" % (rc, log), pytrace=False)
    reports = g.collect_sanitizer_reports()
    new = [r for r in reports if r not in getattr(g, "_reported", [])]
    if new:
        g._reported = list(reports)
        pytest.fail("sanitizer report during this test:\n" + "\n\n".join(new), pytrace=False)


@pytest.fixture
def gw_factory(workdir, certs, redis):
    """gw_factory(overrides, name=...) starts an extra gateway with a config
    deep-merged from the base one; all are stopped after the test."""
    made = []

    def make(overrides=None, name=None, start=True):
        g = gwtest.Gateway(os.path.join(workdir, "extra"), certs, redis.port, overrides=overrides,
                           name=name or "gw-extra-%d" % len(made))
        made.append(g)
        if start:
            g.start()
        return g

    yield make
    failures = []
    for g in made:
        g.stop()
        failures += g.collect_sanitizer_reports()
    if failures:
        pytest.fail("sanitizer reports from an extra gateway:\n" + "\n\n".join(failures), pytrace=False)


@pytest.fixture(scope="session")
def curl_runner(workdir, certs):
    return gwtest.Curl(os.path.join(workdir, "curl"), certs["ca"])


@pytest.fixture
def curl(gateway, curl_runner):
    """curl(host, path, http2=False, headers=None, data=None, method=None,
    gw=None, plain=False, port=None) -> gwtest.Response, over TLS to the
    gateway with the test CA and --resolve host:port:127.0.0.1."""
    return gwtest.curl_through(curl_runner, gateway)


@pytest.fixture
def register_sandbox(redis):
    """register_sandbox(id, state="running", addr="127.0.0.1",
    ports={3000: "private"}, token=None, ...) -> token. HSET + PUBLISH."""

    def reg(sandbox_id, **kw):
        return gwtest.register_sandbox(redis, sandbox_id, **kw)

    reg.redis = redis  # for helpers that take the Redis (gwtest.register_tcp_sandbox)
    return reg


@pytest.fixture(scope="module")
def sandbox_redis(workdir, request):
    """A sandbox's raw TCP service (a proto:<n> = tcp port): a redis-server
    of its own, one per test module (test_tcp_tunnel.py, test_tcp_forward.py)."""
    r = gwtest.Redis(os.path.join(workdir, "sandbox-redis-" + request.module.__name__.rpartition(".")[2]))
    r.start()
    yield r
    r.stop()


@pytest.fixture
def sandbox(register_sandbox, upstream, gateway):
    """A running sandbox whose exposed ports are the upstream's real port:
    returns an object with id, token, port, host (private port)."""

    class Sbx:
        pass

    s = Sbx()
    s.id = gwtest.new_sandbox_id()
    s.port = upstream.port
    s.token = register_sandbox(s.id, ports={upstream.port: "private"})
    s.host = gateway.host(upstream.port, s.id)
    return s


@pytest.fixture(scope="session")
def long_calls_background(workdir, certs, curl_runner, tmp_path_factory):
    """The real programs' long calls, started once (long_calls_bg.Background)."""
    bg = long_calls_bg.Background(workdir, certs, curl_runner, tmp_path_factory.mktemp("long-calls"))
    yield bg
    bg.stop()


@pytest.fixture(scope="session", autouse=True)
def long_calls_start_first(request):
    """Starts the long calls at the session's first test when the session runs their test."""
    if any(long_calls_bg.judged_by(item) for item in request.session.items):
        request.getfixturevalue("long_calls_background")
