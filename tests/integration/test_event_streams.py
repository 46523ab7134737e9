"""Long-lived server-sent event streams (docs/proxying.md, Long-lived streams): a
`text/event-stream` response silent for longer than upstream.idle_timeout_ms
is not cut (it was cut at exactly that timeout, HTTP/2 with a stream reset);
upstream.event_stream_idle_timeout_ms, off by default, ends a silent stream
cleanly (HTTP/1.1 last chunk, HTTP/2 END_STREAM), which EventSource
reconnects from. Other bodies keep upstream.idle_timeout_ms."""

import subprocess

import pytest

import gwtest

H1_H2 = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])

# The gaps between events are three idle timeouts long, so a gateway that
# applied upstream.idle_timeout_ms to the stream would cut it at the first gap.
IDLE_MS = 400
GAP_MS = 3 * IDLE_MS


def stream(gw, host, path, http2):
    """curl the stream to its end: (exit code, body, stderr)."""
    url = "https://%s:%d%s" % (host, gw.tls_port, path)
    args = ["curl", "-sS", "-N", "--max-time", "60", "--cacert", gw.certs["ca"], "--noproxy", "*",
            "--resolve", "%s:%d:127.0.0.1" % (host, gw.tls_port), "--http2" if http2 else "--http1.1",
            "-H", "Accept: text/event-stream", url]
    r = subprocess.run(args, capture_output=True, timeout=90)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def events(body):
    return [b for b in body.split("\n\n") if b.strip()]


@pytest.fixture
def sse_gw(gw_factory, register_sandbox, upstream):
    def make(extra=None):
        over = {"upstream": dict({"idle_timeout_ms": IDLE_MS}, **(extra or {}))}
        g = gw_factory(over)
        sid = gwtest.new_sandbox_id("sse")
        register_sandbox(sid, ports={upstream.port: "public"})
        return g, g.host(upstream.port, sid)

    return make


@H1_H2
def test_silent_event_stream_outlives_idle_timeout(sse_gw, http2):
    g, host = sse_gw()
    rc, body, err = stream(g, host, "/sse?n=3&interval_ms=%d" % GAP_MS, http2)
    assert rc == 0, "the stream was cut (curl exit %d: %s), after %d events" % (rc, err.strip(), len(events(body)))
    got = events(body)
    assert len(got) == 3 and got[-1].startswith("id: 2\n"), got


@H1_H2
def test_other_bodies_keep_the_idle_timeout(sse_gw, http2):
    """The control: a chunked text body with the same gaps is still cut."""
    g, host = sse_gw()
    rc, body, _ = stream(g, host, "/chunked?pieces=3&delay_ms=%d" % GAP_MS, http2)
    assert rc != 0, "a plain body silent past upstream.idle_timeout_ms must be cut (got %r)" % body
    assert body.count("piece") == 1, body


@H1_H2
def test_event_stream_idle_timeout_ends_the_stream_cleanly(sse_gw, http2):
    g, host = sse_gw({"event_stream_idle_timeout_ms": IDLE_MS})
    rc, body, err = stream(g, host, "/sse?n=3&interval_ms=%d" % GAP_MS, http2)
    assert rc == 0, "a clean end, not a cut (curl exit %d: %s)" % (rc, err.strip())
    got = events(body)
    assert len(got) == 1 and got[0].startswith("id: 0\n"), got
