"""Custom-domain certificates (issue 26), the parts test_dynamic_certs.py
leaves out: session resumption stays per certificate for certificates
fetched from Redis (openssl s_client -sess_out / -sess_in, as
test_tls_sessions.py does for the static ones), and tls.cert_fetch_timeout_ms
when Redis does not answer (a redis-server stopped with SIGSTOP: its socket
accepts, nothing replies)."""

import os
import signal

import pytest

import gwtest
from test_dynamic_certs import CUSTOM, custom_cert, handshake, metric, new_host, write_records
from test_tls_sessions import ALL_MODES, s_client


@pytest.fixture
def pki(certs):
    return os.path.dirname(certs["ca"])


@pytest.mark.parametrize("mode", ALL_MODES, ids=[m[0] for m in ALL_MODES])
def test_session_resumes_per_dynamic_certificate(gw_factory, redis, certs, pki, tmp_path, mode):
    """A session made on custom domain A resumes on A, and is a full
    handshake on custom domain B (another fetched certificate) and on the
    preview domain (the static one): the fetched SSL_CTX carries its
    certificate's session-id context."""
    _label, flags = mode
    g = gw_factory(CUSTOM, name="gw-dyn-sess")
    a, b = new_host(), new_host()
    for h in (a, b):
        chain, key, _ = custom_cert(pki, h)
        write_records(redis, h, "s-" + h, chain, key)
    preview = "3000-x." + gwtest.DOMAIN
    sess = str(tmp_path / "a.sess")

    first = s_client(g.tls_port, a, certs["ca"], flags, sess_out=sess)
    assert not first.reused and first.subject_cn == a, first.out
    again = s_client(g.tls_port, a, certs["ca"], flags, sess_in=sess)
    assert again.reused and again.subject_cn == a, "the same custom name must resume:\n" + again.out
    other = s_client(g.tls_port, b, certs["ca"], flags, sess_in=sess)
    assert not other.reused and other.subject_cn == b, "A's session resumed on B's certificate:\n" + other.out
    static = s_client(g.tls_port, preview, certs["ca"], flags, sess_in=sess)
    assert not static.reused and static.subject_cn == "*." + gwtest.DOMAIN, \
        "A's session resumed on the preview domain:\n" + static.out
    # and the other way: a preview session does not resume on A
    psess = str(tmp_path / "p.sess")
    s_client(g.tls_port, preview, certs["ca"], flags, sess_out=psess)
    back = s_client(g.tls_port, a, certs["ca"], flags, sess_in=psess)
    assert not back.reused and back.subject_cn == a, back.out


def log_text(g):
    with open(g.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def test_cert_fetch_timeout_when_redis_does_not_answer(gw_factory, workdir, certs, pki):
    own = gwtest.Redis(os.path.join(workdir, "redis-dyn-pause"))
    own.start()
    paused = False
    try:
        g = gw_factory(dict(CUSTOM, tls=dict(CUSTOM["tls"], cert_fetch_timeout_ms=500),
                            redis={"address": "127.0.0.1:%d" % own.port}), name="gw-dyn-fetch-timeout")
        cached, slow = new_host(), new_host()
        chain, key, serial = custom_cert(pki, cached)
        write_records(own, cached, "c-" + cached, chain, key)
        chain2, key2, serial2 = custom_cert(pki, slow)
        write_records(own, slow, "c-" + slow, chain2, key2)
        assert handshake(g.tls_port, cached, certs["ca"]).serial == serial
        before = metric(g, "lizard_dynamic_cert_fetch_errors_total", 'reason="timeout"')

        own.pause()
        paused = True
        # the client waits 10 s: a handshake that hung on Redis would end in a socket timeout, not in
        # unrecognized_name (the bound is generous for a loaded 2-core machine; the timeout is 0.5 s)
        r = handshake(g.tls_port, slow, certs["ca"])
        assert r.unrecognized, r
        assert metric(g, "lizard_dynamic_cert_fetch_errors_total", 'reason="timeout"') == before + 1
        assert "tls: no certificate for %s (timeout): unrecognized_name" % slow in log_text(g)
        for _ in range(3):  # the cached one keeps serving
            assert handshake(g.tls_port, cached, certs["ca"]).serial == serial

        own.resume()
        paused = False
        # a timeout is not remembered as "no such name": once Redis answers, the name works
        got = gwtest.wait_for(lambda: (lambda r: r if r.serial else None)(handshake(g.tls_port, slow, certs["ca"])),
                              20, what="the certificate of %s once Redis answers again" % slow)
        assert got.serial == serial2 and got.cn == slow, got
    finally:
        if paused:
            os.kill(own.proc.pid, signal.SIGCONT)
        own.stop()
