"""The SNI peek (gateway/sni_peek.c, issue 40): with custom-domain
certificates on, a TLS listener reads the ClientHello before h2o sees the
socket, fetches a custom domain's certificate on a miss, then hands the
socket over with the ClientHello still to be read. Bounded: a ClientHello
over 16 KiB is closed at once, one that never arrives whole is closed at the
handshake timeout, and a slowloris of partial ClientHellos holds no worker
while a well-behaved client (another address) is measured alongside. Works
behind a PROXY header sent in the same segment as the ClientHello.
"""

import os
import socket
import ssl
import threading
import time

import gwtest
from test_dynamic_certs import CUSTOM, client_ctx, custom_cert, metric, new_host, pki, write_records  # noqa: F401 (pki: a fixture)

HANDSHAKE_TIMEOUT_S = 10  # h2o's handshake timeout (H2O_DEFAULT_HANDSHAKE_TIMEOUT), the peek's bound


def handshake_with_prefix(port, host, ca, prefix=b"", source=None, timeout=10):
    """A TLS handshake over memory BIOs whose first write is `prefix` and the whole ClientHello in one segment:
    the served certificate's serial, or raises."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_ctx(ca).wrap_bio(inc, out, server_hostname=host)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                    source_address=(source, 0) if source else None)
    with sock:
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        sock.sendall(prefix + out.read())
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pending = out.read()
                if pending:
                    sock.sendall(pending)
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed during the handshake")
                inc.write(chunk)
        pending = out.read()
        if pending:
            sock.sendall(pending)
        return obj.getpeercert()["serialNumber"].upper()


def client_hello_of(host, ca):
    """The ClientHello a default client sends for `host` (memory BIOs, nothing sent)."""
    out = ssl.MemoryBIO()
    obj = client_ctx(ca).wrap_bio(ssl.MemoryBIO(), out, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def closed_by_peer(sock, within):
    """True when the gateway closes `sock` (EOF or reset) within `within` seconds without sending a byte."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_oversized_client_hello_is_closed_at_once(gw_factory, certs):
    g = gw_factory(CUSTOM, name="gw-peek-large")
    with socket.create_connection(("127.0.0.1", g.tls_port), timeout=5) as s:
        # a handshake record whose ClientHello declares 64 KiB (the bound is 16 KiB): refused at its 9th byte
        s.sendall(b"\x16\x03\x01\x40\x00" + b"\x01\x01\x00\x00" + b"\x03\x03" + b"\x00" * 100)
        assert closed_by_peer(s, 5), "an oversized ClientHello was not closed"
    assert metric(g, "lizard_tls_client_hellos_total", 'result="too_large"') == 1
    # bytes that are no ClientHello go to h2o's handshake as before (it fails them)
    with socket.create_connection(("127.0.0.1", g.tls_port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except (ConnectionResetError, socket.timeout):
            pass
    gwtest.wait_for(lambda: metric(g, "lizard_tls_client_hellos_total", 'result="other"') == 1, 5,
                    what="the plain request counted as other")


def test_custom_domain_behind_proxy_header_in_one_segment(gw_factory, certs, redis, pki):
    g = gw_factory(dict(CUSTOM), name="gw-peek-pp", start=False)  # a copy: the listeners are changed below
    pp_port = gwtest.free_port()
    g.overrides["listen"] = g.base_config()["listen"] + [
        {"address": "127.0.0.1:%d" % pp_port, "tls": True, "proxy_protocol": True}]
    g.start()
    host = new_host()
    chain, key, serial = custom_cert(pki, host)
    write_records(redis, host, "pp-" + host, chain, key)
    header = b"PROXY TCP4 192.0.2.7 127.0.0.1 40000 443\r\n"
    # the first fetches the certificate (the peek waits), the second is served from the cache
    assert handshake_with_prefix(pp_port, host, certs["ca"], header) == serial
    assert handshake_with_prefix(pp_port, host, certs["ca"], header) == serial
    assert metric(g, "lizard_dynamic_cert_cache_total", 'result="miss"') == 1
    assert metric(g, "lizard_tls_client_hellos_total", 'result="read"') == 2
    assert metric(g, "lizard_proxy_protocol_connections_total", 'result="accepted"') == 2


def test_slowloris_of_partial_client_hellos_holds_no_worker(gw_factory, certs, redis, pki):
    attackers = 200
    # one worker: a peek that held it would stall the bystander; the per-address limit above the attack, so that
    # only the peek's own bound can end it
    g = gw_factory(dict(CUSTOM, workers=1, limits={"max_connections_per_client": 1000}), name="gw-peek-slow")
    host = new_host()
    chain, key, serial = custom_cert(pki, host)
    write_records(redis, host, "s-" + host, chain, key)
    hello = client_hello_of(host, certs["ca"])
    assert len(hello) > 200

    latencies, errors, stop = [], [], threading.Event()

    def bystander():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                got = handshake_with_prefix(g.tls_port, host, certs["ca"], source="127.0.0.2")
                if got != serial:
                    errors.append(got)
            except Exception as e:  # reported below
                errors.append(repr(e))
            latencies.append(time.monotonic() - t0)

    socks = []
    try:
        for _ in range(attackers):
            s = socket.create_connection(("127.0.0.1", g.tls_port), timeout=5)
            s.sendall(hello[:100])  # a valid beginning, never finished
            socks.append(s)
        t = threading.Thread(target=bystander)
        t.start()
        t0 = time.monotonic()
        # a byte more now and then, as a slowloris does, while the bystander handshakes
        sent = 100
        while time.monotonic() - t0 < HANDSHAKE_TIMEOUT_S - 3:
            time.sleep(1)
            for s in socks:
                try:
                    s.send(hello[sent:sent + 1])
                except OSError:
                    pass
            sent += 1
        # generous: the handshake timeout plus a loaded machine's slack
        gwtest.wait_for(lambda: metric(g, "lizard_tls_client_hellos_total", 'result="timeout"') == attackers,
                        HANDSHAKE_TIMEOUT_S + 20, what="every partial ClientHello closed at the handshake timeout")
        stop.set()
        t.join(30)
        assert all(closed_by_peer(s, 5) for s in socks), "a partial ClientHello stayed open"
    finally:
        stop.set()
        for s in socks:
            s.close()
    assert not errors, errors[:3]
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * .99))]
    print("slowloris: %d partial ClientHellos held for %d s; bystander %d handshakes, median %.1f ms, p99 %.1f ms" %
          (attackers, HANDSHAKE_TIMEOUT_S, len(latencies), 1000 * latencies[len(latencies) // 2], 1000 * p99))
    # generous (a loaded 2-core machine): the point is that the bystander keeps getting handshakes throughout
    assert len(latencies) >= 20 and latencies[len(latencies) // 2] < 1.0
    assert metric(g, "lizard_tls_client_hellos_total", 'result="read"') == len(latencies)
