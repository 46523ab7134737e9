"""PROXY protocol listeners ("proxy_protocol": true): the client a load
balancer names in a v1 or v2 header is the client everywhere - the
sandbox's X-Forwarded-For, the access log's client, the per-client
connection limit - and a connection without a valid header is closed
without an answer, also when the header comes byte by byte.

The clients are raw sockets from this process standing in for the L4
balancer: they write the header and then HTTP, or the TLS handshake for a
TLS listener, on the same connection, as AWS NLB, GCP, Azure, HAProxy
`send-proxy-v2` and Kubernetes Services with PROXY protocol do."""

import ipaddress
import json
import os
import select
import socket
import ssl
import struct
import threading
import time

import pytest

import gwtest

TIMEOUT_MS = 1000  # limits.proxy_header_timeout_ms of this module's gateway
PER_CLIENT = 3  # limits.max_connections_per_client
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


@pytest.fixture(scope="module")
def ppgw(workdir, certs, redis):
    """A gateway with the base TLS and plain listeners, and two PROXY
    protocol listeners: TLS, and plain trusted (TLS ended by the balancer)."""
    g = gwtest.Gateway(os.path.join(workdir, "proxyproto"), certs, redis.port, name="gw-pp")
    g.pp_tls_port, g.pp_plain_port = gwtest.free_port(), gwtest.free_port()
    base = g.base_config()["listen"]
    g.overrides = {
        "listen": base + [
            {"address": "127.0.0.1:%d" % g.pp_tls_port, "tls": True, "proxy_protocol": True},
            {"address": "127.0.0.1:%d" % g.pp_plain_port, "tls": False, "trusted": True, "proxy_protocol": True},
        ],
        "limits": {"proxy_header_timeout_ms": TIMEOUT_MS, "max_connections_per_client": PER_CLIENT},
    }
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture(scope="module")
def sandbox(redis, upstream):
    sid = gwtest.new_sandbox_id("pp")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"}, project="proj-" + sid)
    return sid


def v1(src, dst="127.0.0.1", sport=40000, dport=443):
    fam = "TCP6" if ":" in src else "TCP4"
    return ("PROXY %s %s %s %d %d\r\n" % (fam, src, dst, sport, dport)).encode()


def tlv(t, value):
    return struct.pack("!BH", t, len(value)) + value


def v2(src=None, dst="127.0.0.1", sport=40000, dport=443, tlvs=b"", local=False):
    """A v2 header; local: the LOCAL command (a balancer's health check), no address."""
    if local:
        return V2_SIG + bytes([0x20, 0x00]) + struct.pack("!H", len(tlvs)) + tlvs
    a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    fam = 0x11 if a.version == 4 else 0x21
    block = a.packed + b.packed + struct.pack("!HH", sport, dport) + tlvs
    return V2_SIG + bytes([0x21, fam]) + struct.pack("!H", len(block)) + block


def request(host, path):
    return ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nX-Forwarded-For: 192.0.2.66\r\n\r\n"
            % (path, host)).encode()


def read_all(sock, timeout=20):
    sock.settimeout(timeout)
    out = b""
    while True:
        try:
            d = sock.recv(65536)
        except ConnectionResetError:
            break
        if not d:
            break
        out += d
    return out


def parse(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    status, headers, _ = gwtest.parse_head(head + b"\r\n\r\n")
    return status, headers, body


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def tls_wrap(sock, certs, host):
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(sock, server_hostname=host)


def get(g, port, header, host, path, certs=None, pieces=1):
    """One request through a PROXY listener: the header (in `pieces` writes,
    each its own TCP segment), then the request, over TLS when certs. Returns
    (status, headers, body)."""
    s = connect(port)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    step = max(1, len(header) // pieces)
    for i in range(0, len(header), step):
        s.sendall(header[i:i + step])
        time.sleep(0.02)
    if certs is not None:
        s = tls_wrap(s, certs, host)
    s.sendall(request(host, path))
    raw = read_all(s)
    s.close()
    return parse(raw)


def echoed(body):
    """The X-Forwarded-For values the sandbox received."""
    return [v for k, v in json.loads(body)["headers"] if k.lower() == "x-forwarded-for"]


def log_line(g, path):
    return gwtest.access_log_line(g, path)


def metric(g, name, labels):
    status, body = g.admin_get("/metrics")
    assert status == 200
    want = "%s{%s}" % (name, labels)
    for ln in body.decode().splitlines():
        if ln.split(" ")[0] == want:
            return int(ln.split(" ")[1])
    raise AssertionError("no %s in /metrics" % want)


def pp_metric(g, result):
    return metric(g, "lizard_proxy_protocol_connections_total", 'result="%s"' % result)


def closed_without_answer(s, timeout=10):
    """The gateway closed `s` having written nothing: (True, b"") or (False, what it sent)."""
    raw = read_all(s, timeout)
    return raw == b"", raw


def test_v1_tcp4_plain_carried_address_everywhere(ppgw, sandbox, upstream):
    """v1 TCP4 on the plain (trusted) listener: the sandbox's X-Forwarded-For
    and the access log's client are the address in the header, not the
    socket's 127.0.0.1 nor what the client put in X-Forwarded-For."""
    host = ppgw.host(upstream.port, sandbox)
    path = "/echo/v1-tcp4-%s" % gwtest.new_sandbox_id()
    before = pp_metric(ppgw, "accepted")
    status, _, body = get(ppgw, ppgw.pp_plain_port, v1("203.0.113.7", sport=51234), host, path)
    assert status == 200, body
    assert echoed(body) == ["203.0.113.7"]
    assert log_line(ppgw, path)["client"] == "203.0.113.7"
    assert pp_metric(ppgw, "accepted") == before + 1


def test_v1_tcp6_tls(ppgw, sandbox, upstream, certs):
    """v1 TCP6, then the TLS handshake on the same connection."""
    host = ppgw.host(upstream.port, sandbox)
    path = "/echo/v1-tcp6-%s" % gwtest.new_sandbox_id()
    status, _, body = get(ppgw, ppgw.pp_tls_port, v1("2001:db8::7", dst="2001:db8::1"), host, path, certs=certs)
    assert status == 200, body
    assert echoed(body) == ["2001:db8::7"]
    assert log_line(ppgw, path)["client"] == "2001:db8::7"


def test_v2_with_tlvs_in_pieces(ppgw, sandbox, upstream, certs):
    """v2 TCP4 with the TLVs balancers add (AWS VPC endpoint id, ALPN,
    AUTHORITY, NOOP padding, CRC32C: skipped), written in 5 segments, then TLS;
    and v2 TCP6 on the plain listener."""
    host = ppgw.host(upstream.port, sandbox)
    tlvs = (tlv(0xEA, b"\x01vpce-0123456789abcdef0") + tlv(0x01, b"h2") + tlv(0x02, host.encode())
            + tlv(0x04, b"\x00" * 7) + tlv(0x03, b"\xde\xad\xbe\xef"))
    path = "/echo/v2-tlv-%s" % gwtest.new_sandbox_id()
    status, _, body = get(ppgw, ppgw.pp_tls_port, v2("198.51.100.9", tlvs=tlvs), host, path, certs=certs, pieces=5)
    assert status == 200, body
    assert echoed(body) == ["198.51.100.9"]
    assert log_line(ppgw, path)["client"] == "198.51.100.9"

    path = "/echo/v2-tcp6-%s" % gwtest.new_sandbox_id()
    status, _, body = get(ppgw, ppgw.pp_plain_port, v2("2001:db8:1::9", dst="2001:db8::1"), host, path)
    assert status == 200, body
    assert echoed(body) == ["2001:db8:1::9"]


def test_v2_local_and_v1_unknown_keep_the_socket_address(ppgw, sandbox, upstream, certs):
    """A balancer's own health check (v2 LOCAL, v1 UNKNOWN) carries no
    client: the connection is served with the TCP peer's address."""
    host = ppgw.host(upstream.port, sandbox)
    status, _, body = get(ppgw, ppgw.pp_tls_port, v2(local=True, tlvs=tlv(0x04, b"\x00\x00")), host,
                          "/echo/local", certs=certs)
    assert status == 200, body
    assert echoed(body) == ["127.0.0.1"]
    status, _, body = get(ppgw, ppgw.pp_plain_port, b"PROXY UNKNOWN\r\n", host, "/echo/unknown")
    assert status == 200, body
    assert echoed(body) == ["127.0.0.1"]


def test_without_a_valid_header_closed_without_answer(ppgw, sandbox, upstream, certs):
    """On a proxy_protocol listener: a plain request, a TLS ClientHello, a
    malformed header and a truncated one (the balancer gone mid-header) are
    closed, nothing written back; the next good connection is served."""
    host = ppgw.host(upstream.port, sandbox)
    invalid, closed = pp_metric(ppgw, "invalid"), pp_metric(ppgw, "closed")

    s = connect(ppgw.pp_plain_port)
    s.sendall(request(host, "/echo/no-header"))
    assert closed_without_answer(s) == (True, b"")
    s.close()

    # a real ClientHello from Python's TLS stack, without a header before it
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    ctx = ssl.create_default_context(cafile=certs["ca"])
    obj = ctx.wrap_bio(bio_in, bio_out, server_hostname=host)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    s = connect(ppgw.pp_tls_port)
    s.sendall(bio_out.read())
    assert closed_without_answer(s) == (True, b"")
    s.close()

    addresses = v2("203.0.113.1")[16:]
    cut_tlv = V2_SIG + bytes([0x21, 0x11]) + struct.pack("!H", len(addresses) + 2) + addresses + b"\x01\x00"
    for bad in (b"PROXY TCP4 300.1.2.3 127.0.0.1 1 2\r\n", b"PROXY TCP4 203.0.113.1 127.0.0.1 1\r\n", cut_tlv):
        s = connect(ppgw.pp_plain_port)
        s.sendall(bad + request(host, "/echo/bad"))
        assert closed_without_answer(s) == (True, b""), bad
        s.close()

    # truncated: the peer stops half-way and closes its side
    for part in (v1("203.0.113.2")[:20], v2("203.0.113.2")[:20]):
        s = connect(ppgw.pp_tls_port)
        s.sendall(part)
        s.shutdown(socket.SHUT_WR)
        assert closed_without_answer(s) == (True, b"")
        s.close()

    gwtest.wait_for(lambda: pp_metric(ppgw, "invalid") >= invalid + 5 and pp_metric(ppgw, "closed") >= closed + 2, 10,
                    what="the refusals counted")
    assert pp_metric(ppgw, "invalid") == invalid + 5
    assert pp_metric(ppgw, "closed") == closed + 2
    status, _, body = get(ppgw, ppgw.pp_plain_port, v1("203.0.113.3"), host, "/echo/after")
    assert status == 200 and echoed(body) == ["203.0.113.3"]


class GoodBalancer(threading.Thread):
    """Sequential requests through the PROXY listener with a full header, each one counted."""

    def __init__(self, g, host):
        super().__init__(daemon=True)
        self.g, self.host = g, host
        self.stop = threading.Event()
        self.ok, self.bad = 0, []

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                status, _, body = get(self.g, self.g.pp_plain_port, v1("203.0.113.%d" % (100 + n % 50)), self.host,
                                      "/echo/good")
                if status == 200 and echoed(body) == ["203.0.113.%d" % (100 + n % 50)]:
                    self.ok += 1
                else:
                    self.bad.append(status)
            except OSError as e:
                self.bad.append(repr(e))
            time.sleep(0.05)


def test_slow_header_closed_after_timeout_others_served(ppgw, sandbox, upstream):
    """A header sent one byte every 250 ms (its 45 bytes would take 11 s) is
    closed after limits.proxy_header_timeout_ms (1 s here) without an
    answer, while a well-behaved balancer connection on the same listener
    is served all along."""
    host = ppgw.host(upstream.port, sandbox)
    timeouts = pp_metric(ppgw, "timeout")
    good = GoodBalancer(ppgw, host)
    good.start()
    header = v1("203.0.113.44")
    s = connect(ppgw.pp_plain_port)
    sent = 0
    got = None
    try:
        for i in range(len(header)):
            if select.select([s], [], [], 0.25)[0]:
                got = read_all(s, 5)
                break
            try:
                s.sendall(header[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                got = b""
                break
            sent += 1
    finally:
        good.stop.set()
        good.join(30)
        s.close()
    # closed before the header was complete, having written nothing; counted as a timeout
    assert got == b"", got
    assert sent < len(header), "the slow header was never closed"
    assert pp_metric(ppgw, "timeout") == timeouts + 1
    assert good.bad == [] and good.ok >= 3, (good.ok, good.bad)
    print("slow header closed after %d of %d bytes; good client served %d times meanwhile" % (sent, len(header),
                                                                                                 good.ok))


def test_listener_without_the_option_answers_400(ppgw, sandbox, upstream):
    """A PROXY header sent to an ordinary plain listener is a malformed
    request, as before: 400."""
    host = ppgw.host(upstream.port, sandbox)
    s = connect(ppgw.plain_port)
    s.sendall(v1("203.0.113.5") + request(host, "/echo/x"))
    status, _, _ = parse(read_all(s))
    s.close()
    assert status == 400


def test_per_client_connection_limit_counts_the_carried_address(ppgw, sandbox, upstream):
    """limits.max_connections_per_client (3 here) counts the address in the
    header: a fourth connection naming 203.0.113.77 is closed once its
    header is read, while one naming another client over the same balancer
    address (127.0.0.1) is served."""
    host = ppgw.host(upstream.port, sandbox)
    refused = metric(ppgw, "lizard_refused_connections_total", 'limit="client"')
    accepted = pp_metric(ppgw, "accepted")
    held = []
    try:
        for _ in range(PER_CLIENT):
            s = connect(ppgw.pp_plain_port)
            s.sendall(v1("203.0.113.77"))
            held.append(s)
        # once their headers are read, each is an open connection of 203.0.113.77
        gwtest.wait_for(lambda: pp_metric(ppgw, "accepted") >= accepted + PER_CLIENT, 10, what="the headers read")
        s = connect(ppgw.pp_plain_port)
        s.sendall(v1("203.0.113.77") + request(host, "/echo/fourth"))
        assert closed_without_answer(s) == (True, b"")
        s.close()
        assert metric(ppgw, "lizard_refused_connections_total", 'limit="client"') == refused + 1
        status, _, body = get(ppgw, ppgw.pp_plain_port, v1("203.0.113.78"), host, "/echo/other")
        assert status == 200 and echoed(body) == ["203.0.113.78"]
    finally:
        for s in held:
            s.close()
    # given back at close: the address is served again
    gwtest.wait_for(lambda: get(ppgw, ppgw.pp_plain_port, v1("203.0.113.77"), host, "/echo/again")[0] == 200, 10,
                    what="203.0.113.77 served again")


def h2_get(port, header, host, path, certs):
    """One HTTP/2 GET through a PROXY listener: the header, then TLS with
    ALPN h2 on the same connection, then one stream (python3-h2). Returns
    (status, body)."""
    import h2.config
    import h2.connection
    import h2.events

    s = connect(port)
    s.sendall(header)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(s, server_hostname=host)
    assert s.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", path),
                          ("x-forwarded-for", "192.0.2.66")], end_stream=True)
    s.sendall(conn.data_to_send())
    status, body, done = None, b"", False
    s.settimeout(20)
    while not done:
        data = s.recv(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                body += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        s.sendall(conn.data_to_send())
    s.close()
    return status, body


def test_v2_then_http2_over_tls(ppgw, sandbox, upstream, certs):
    """HTTP/2 after a v2 header (with a TLV) on the TLS PROXY listener: the
    sandbox's X-Forwarded-For and the access log's client are the carried
    address (IPv4 and IPv6), not the socket's nor the client's own header."""
    host = ppgw.host(upstream.port, sandbox)
    for src, dst in (("198.51.100.21", "127.0.0.1"), ("2001:db8:2::21", "2001:db8::1")):
        path = "/echo/h2-v2-%s" % gwtest.new_sandbox_id()
        status, body = h2_get(ppgw.pp_tls_port, v2(src, dst=dst, tlvs=tlv(0x01, b"h2")), host, path, certs)
        assert status == 200, body
        assert echoed(body) == [src]
        rec = log_line(ppgw, path)
        assert rec["client"] == src
        assert rec["protocol"] == "HTTP/2", rec


def test_ingress_rules_see_the_carried_address(ppgw, redis, upstream, certs):
    """ingress_deny and ingress_allow are checked against the address the
    PROXY header carries, not the balancer's socket address (127.0.0.1):
    a carried address in ingress_deny is refused although the socket's is
    allowed, and a carried address in ingress_allow passes although the
    socket's is denied; over HTTP/1.1 and HTTP/2."""
    deny_carried, deny_socket = gwtest.new_sandbox_id("ppd"), gwtest.new_sandbox_id("pps")
    gwtest.register_sandbox(redis, deny_carried, ports={upstream.port: "public"},
                            extra={"ingress_allow": "127.0.0.0/8, 198.51.100.0/24, 2001:db8::/32",
                                   "ingress_deny": "198.51.100.66/32, 2001:db8:6::/48"})
    gwtest.register_sandbox(redis, deny_socket, ports={upstream.port: "public"},
                            extra={"ingress_allow": "203.0.113.0/24, 2001:db8:7::/48", "ingress_deny": "127.0.0.0/8"})
    h_dc, h_ds = ppgw.host(upstream.port, deny_carried), ppgw.host(upstream.port, deny_socket)

    def refused(status, body):
        return status == 403 and json.loads(body)["error"]["code"] == "ip_not_allowed"

    # the socket (127.0.0.1) is allowed, the carried address denied
    status, _, body = get(ppgw, ppgw.pp_plain_port, v1("198.51.100.66"), h_dc, "/echo/ingress-1")
    assert refused(status, body), (status, body)
    status, _, body = get(ppgw, ppgw.pp_tls_port, v2("2001:db8:6::1", dst="2001:db8::1"), h_dc, "/echo/ingress-2",
                          certs=certs)
    assert refused(status, body), (status, body)
    assert refused(*h2_get(ppgw.pp_tls_port, v2("198.51.100.66"), h_dc, "/echo/ingress-3", certs))
    # ... while another carried address of the allow list passes
    status, _, body = get(ppgw, ppgw.pp_plain_port, v1("198.51.100.67"), h_dc, "/echo/ingress-4")
    assert status == 200 and echoed(body) == ["198.51.100.67"], (status, body)

    # the socket (127.0.0.1) is denied, the carried address allowed
    status, _, body = get(ppgw, ppgw.pp_plain_port, v2("203.0.113.30"), h_ds, "/echo/ingress-5")
    assert status == 200 and echoed(body) == ["203.0.113.30"], (status, body)
    status, body = h2_get(ppgw.pp_tls_port, v2("2001:db8:7::30", dst="2001:db8::1"), h_ds, "/echo/ingress-6", certs)
    assert status == 200 and echoed(body) == ["2001:db8:7::30"], (status, body)
    # a carried address outside the allow list is refused, and so is the balancer's own health check
    # (v2 LOCAL: the socket's address, which is denied)
    status, _, body = get(ppgw, ppgw.pp_plain_port, v1("192.0.2.30"), h_ds, "/echo/ingress-7")
    assert refused(status, body), (status, body)
    status, _, body = get(ppgw, ppgw.pp_plain_port, v2(local=True), h_ds, "/echo/ingress-8")
    assert refused(status, body), (status, body)
    # a listener without PROXY protocol sees the socket: denied
    status, _, body = get(ppgw, ppgw.tls_port, b"", h_ds, "/echo/ingress-9", certs=certs)
    assert refused(status, body), (status, body)
