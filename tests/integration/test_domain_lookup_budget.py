"""What random host names may cost the Redis that routing depends on
(issue 36): a custom-domain look-up that has to read Redis (the certificate
at the handshake, the record for the Host) takes a token of its client
address (routing.domain_lookups_per_second_per_client and
routing.domain_lookup_burst_per_client) and one of the gateway
(routing.domain_lookups_per_second); past them a handshake fails with
unrecognized_name and a request gets 404 unknown_host, without a Redis call,
counted in lizard_domain_lookups_refused_total. Before, 3,000 handshakes with
random names from one client were 3,000 EVALs.

Each flood is measured alongside a well-behaved client from another address
that looks up names of its own (every handshake and request of it succeeds),
and Redis's own count of calls (INFO commandstats) before and after. The
client address at the handshake: the TCP peer (the flood connects from
127.0.0.2), or the one a PROXY protocol header names. Behind a trusted
listener: the balancer's X-Forwarded-For entry.

Real gateway, real redis-server, upstream.py, Python's ssl and http.client."""

import http.client
import os
import secrets
import socket
import ssl
import sys
import threading
import time

import pytest

import gwtest
from test_dynamic_certs import SEAL_ENV, custom_cert, http_on, metric

sys.path.insert(0, os.path.join(gwtest.REPO, "deploy"))
import lizard_seal  # noqa: E402

FLOOD_ADDR = "127.0.0.2"  # the flood's source address (all of 127/8 is this machine's)
RATE, BURST = 2, 40  # per client


def calls(redis, command):
    for line in redis.cmd("INFO", "commandstats").decode().splitlines():
        if line.startswith("cmdstat_%s:" % command):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def random_name():
    return "%s.flood.example" % secrets.token_hex(6)


def new_host():
    return "app-%s.budget.example" % secrets.token_hex(4)


def write_domain(redis, host, sandbox, port, cert=None, key_pem=None, chain=None):
    """The control plane's records: the domain, and its certificate when given."""
    if chain is not None:
        sealed = lizard_seal.seal(os.environ[SEAL_ENV], "c-" + host, key_pem)
        redis.cmd("HSET", "lizard:cert:{c-%s}" % host, "chain", chain.decode(), "key", sealed, "not_after",
                  str(int(time.time()) + 45 * 86400))
    redis.cmd("HSET", "lizard:domain:{%s}" % host, "sandbox", sandbox, "port", str(port), "state", "active",
              "cert", "c-" + host)


def proxy_v1(src):
    return ("PROXY TCP4 %s 127.0.0.1 40000 443\r\n" % src).encode()


class Client:
    """How a client reaches the gateway's TLS side: from its own source
    address, or through the PROXY protocol listener with a header naming it."""

    def __init__(self, g, ca, via, addr):
        self.g, self.ca, self.via, self.addr = g, ca, via, addr

    def connect(self, sni):
        if self.via == "source_address":
            sock = socket.create_connection(("127.0.0.1", self.g.tls_port), timeout=10,
                                            source_address=(self.addr, 0))
        else:
            sock = socket.create_connection(("127.0.0.1", self.g.pp_tls_port), timeout=10)
            sock.sendall(proxy_v1(self.addr))
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.set_alpn_protocols(["http/1.1"])
        try:
            return ctx.wrap_socket(sock, server_hostname=sni)
        except BaseException:
            sock.close()
            raise

    def handshake_error(self, sni):
        """None when the handshake succeeded, else what the client read."""
        try:
            self.connect(sni).close()
            return None
        except (ssl.SSLError, OSError) as e:
            return "%s" % e


def alongside(bystander, flood):
    """Runs bystander() in a thread while flood() runs here: (what flood
    returned, the seconds it took, what the bystander raised)."""
    errors = []

    def run():
        try:
            bystander()
        except Exception as e:  # reported by the test
            errors.append(repr(e))

    t = threading.Thread(target=run)
    t0 = time.monotonic()
    t.start()
    out = flood()
    t.join(60)
    return out, time.monotonic() - t0, errors


@pytest.fixture
def budget_gw(gw_factory):
    """Custom-domain certificates on, a small per-client budget, no gateway-wide one; a PROXY protocol TLS listener
    beside the base ones."""

    def make(routing, **more):
        g = gw_factory(start=False, name="gw-budget", overrides=dict({
            "tls": {"sealed_key_env": SEAL_ENV},
            "routing": dict({"negative_ttl_ms": 600000}, **routing)}, **more))
        g.pp_tls_port = gwtest.free_port()
        g.overrides["listen"] = g.base_config()["listen"] + [
            {"address": "127.0.0.1:%d" % g.pp_tls_port, "tls": True, "proxy_protocol": True}]
        g.trusted_port = gwtest.free_port()
        g.overrides["listen"].append({"address": "127.0.0.1:%d" % g.trusted_port, "tls": False, "trusted": True})
        return g.start()

    return make


@pytest.fixture
def public_sandbox(redis, upstream):
    sid = gwtest.new_sandbox_id("bud")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    return sid


@pytest.mark.parametrize("via", ["source_address", "proxy_protocol"])
def test_random_sni_flood_is_held_to_its_clients_budget(budget_gw, redis, certs, upstream, public_sandbox, via):
    g = budget_gw({"domain_lookups_per_second_per_client": RATE, "domain_lookup_burst_per_client": BURST,
                   "domain_lookups_per_second": 0})
    pki = os.path.dirname(certs["ca"])
    # the bystander's names: each is a certificate fetch (EVAL) and a record look-up (HGETALL), within its budget
    mine = []
    for _ in range(4):
        host = new_host()
        chain, key, serial = custom_cert(pki, host)
        write_domain(redis, host, public_sandbox, upstream.port, chain=chain, key_pem=key)
        mine.append((host, serial))
    flooder = Client(g, certs["ca"], via, FLOOD_ADDR if via == "source_address" else "198.51.100.7")
    bystander = Client(g, certs["ca"], via, "127.0.0.1" if via == "source_address" else "198.51.100.8")
    results, latencies = {}, []

    def well_behaved():
        for host, serial in mine:
            time.sleep(0.2)  # spread over the flood
            t0 = time.monotonic()
            with bystander.connect(host) as s:
                assert s.getpeercert()["serialNumber"].upper() == serial
                results[host] = http_on(s, host)
            latencies.append(time.monotonic() - t0)

    evals_before = calls(redis, "eval")
    flood, elapsed, errors = alongside(well_behaved, lambda: [flooder.handshake_error(random_name())
                                                              for _ in range(1000)])
    evals = calls(redis, "eval") - evals_before

    assert all(e is not None and "UNRECOGNIZED_NAME" in e.upper() for e in flood), [e for e in flood if not e][:3]
    # the flood read Redis at most its burst and its rate (the bystander's 4 fetches, and 5 for the loaded machine)
    bound = BURST + RATE * elapsed + len(mine) + 5
    print("flood: 1000 handshakes in %.1f s, %d EVALs (bound %.0f); bystander %d names, %s" %
          (elapsed, evals, bound, len(results), ["%.0f ms" % (1000 * x) for x in latencies]))
    assert evals <= bound, "random names read Redis %d times in %.1f s" % (evals, elapsed)
    refused = metric(g, "lizard_domain_lookups_refused_total", 'limit="client"')
    assert refused >= 1000 - (BURST + RATE * elapsed) - 5, refused
    assert metric(g, "lizard_dynamic_cert_refused_total", 'reason="rate_limited"') == refused
    assert metric(g, "lizard_domain_lookups_refused_total", 'limit="gateway"') == 0
    # the well-behaved client: every handshake and request served
    assert not errors, errors
    assert results == {host: "HTTP/1.1 200 OK" for host, _ in mine}, results


def trusted_get(g, host, client, path="/echo"):
    """A request on the trusted plain listener (a balancer in front) for `client` (X-Forwarded-For)."""
    conn = http.client.HTTPConnection("127.0.0.1", g.trusted_port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host, "X-Forwarded-For": client})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def host_flood(g, client_of, go_on):
    """Requests with random Host names on one keep-alive connection to the
    trusted listener, the i-th for client_of(i) (X-Forwarded-For), while
    go_on(requests so far, seconds so far): [(status, unknown_host)]."""
    conn = http.client.HTTPConnection("127.0.0.1", g.trusted_port, timeout=10)
    out, t0 = [], time.monotonic()
    while go_on(len(out), time.monotonic() - t0):
        conn.request("GET", "/", headers={"Host": random_name(), "X-Forwarded-For": client_of(len(out))})
        r = conn.getresponse()
        out.append((r.status, b"unknown_host" in r.read()))
    conn.close()
    return out


def test_random_host_flood_is_held_to_its_clients_budget(budget_gw, redis, upstream, public_sandbox):
    g = budget_gw({"domain_lookups_per_second_per_client": RATE, "domain_lookup_burst_per_client": BURST,
                   "domain_lookups_per_second": 0})
    mine = [new_host() for _ in range(8)]
    for host in mine:
        write_domain(redis, host, public_sandbox, upstream.port)
    statuses = {}

    def well_behaved():
        for host in mine:
            time.sleep(0.2)
            statuses[host] = trusted_get(g, host, "203.0.113.8")[0]

    before = calls(redis, "hgetall")
    flood, elapsed, errors = alongside(well_behaved, lambda: host_flood(g, lambda i: "203.0.113.7", lambda n, t: n < 1000))
    reads = calls(redis, "hgetall") - before

    assert set(flood) == {(404, True)}, set(flood)
    # the bystander's 8 names and its sandbox's record (once per worker), 5 for the loaded machine
    bound = BURST + RATE * elapsed + len(mine) + 2 + 5
    print("flood: 1000 requests in %.1f s, %d HGETALLs (bound %.0f)" % (elapsed, reads, bound))
    assert reads <= bound, "random hosts read Redis %d times in %.1f s" % (reads, elapsed)
    assert metric(g, "lizard_domain_lookups_refused_total", 'limit="client"') >= 1000 - (BURST + RATE * elapsed) - 5
    assert not errors, errors
    assert statuses == {host: 200 for host in mine}, statuses


def test_many_addresses_meet_the_gateways_budget(budget_gw, redis, upstream, public_sandbox):
    """Random names from many addresses (each with a full bucket of its own)
    are held to the gateway's rate; a domain the gateway already holds costs
    nothing, not even when its record is read again (its cache entry expires
    within the flood), so a well-behaved client of a served domain goes on
    being served. One worker: the domain is then known to the one worker that
    serves it (each worker caches its own)."""
    g = budget_gw({"domain_lookups_per_second_per_client": 1000, "domain_lookup_burst_per_client": 1000,
                   "domain_lookups_per_second": 5, "cache_ttl_ms": 1000}, workers=1)
    served = new_host()
    write_domain(redis, served, public_sandbox, upstream.port)
    assert trusted_get(g, served, "203.0.113.9")[0] == 200
    statuses, stop = [], threading.Event()

    def well_behaved():
        while not stop.is_set():
            statuses.append(trusted_get(g, served, "203.0.113.9")[0])

    def flood_then_stop():
        # at least 1000 names, and for at least 2.5 s: the served domain's entry expires twice meanwhile
        out = host_flood(g, lambda i: "10.%d.%d.1" % (i // 250, i % 250), lambda n, t: n < 1000 or t < 2.5)
        stop.set()
        return out

    before = calls(redis, "hgetall")
    flood, elapsed, errors = alongside(well_behaved, flood_then_stop)
    reads = calls(redis, "hgetall") - before

    assert not errors, errors
    assert set(flood) == {(404, True)}, set(flood)
    bound = 5 + 5 * elapsed + 5
    print("flood from %d addresses: %.1f s, %d HGETALLs (bound %.0f); bystander %d requests" %
          (len(flood), elapsed, reads, bound, len(statuses)))
    # the served domain read again each second (routing.cache_ttl_ms 1000), and its sandbox's record
    bound += 2 * elapsed + 2
    assert reads <= bound, "random hosts from many addresses read Redis %d times in %.1f s" % (reads, elapsed)
    assert metric(g, "lizard_domain_lookups_refused_total", 'limit="gateway"') >= len(flood) - bound
    assert len(statuses) >= 5 and set(statuses) == {200}, statuses
