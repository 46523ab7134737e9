"""TLS 1.3 by picotls, TLS 1.2 by OpenSSL, kTLS in /readyz (issue 41; docs/tls.md).

- a TLS 1.3 handshake is picotls's (one NewSessionTicket after it; OpenSSL's
  sends two, as LIZARD_TLS13_ENGINE=openssl shows), with ALPN h2 and
  http/1.1 both, an ECDSA and an RSA certificate; TLS 1.2 is OpenSSL's;
- a picotls connection outlives a certificate reload (SIGHUP) and keeps
  serving on the old certificate while new handshakes get the new one (the
  picotls context lives as long as a connection uses it: an ASan build
  sees a use after free otherwise);
- /readyz's "ktls" is what this kernel does with kTLS transmit, probed
  independently (ktls_probe.py), and the gateway logs its probe once.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess

import pytest

import gwtest
from ktls_probe import ktls_transmit


@pytest.fixture
def site(gateway, register_sandbox, upstream):
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    return gateway.host(upstream.port, sid)


def s_client(port, name, ca, flags):
    """One `openssl s_client -msg` connection that sends a request and reads
    until the gateway closes it (TLS 1.3 tickets come after the handshake)."""
    req = "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", name, "-CAfile", ca,
                        "-verify_return_error", "-msg", "-ign_eof"] + flags,
                       input=req, capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def tickets(out):
    return len(re.findall(r"<<< TLS 1.3, Handshake \[length [0-9a-f]+\], NewSessionTicket", out))


def negotiated(out):
    proto = re.search(r"^New, (TLSv[0-9.]+), Cipher is (\S+)", out, re.M)
    alpn = re.search(r"^ALPN protocol: (\S+)", out, re.M)
    return proto.group(1) if proto else None, alpn.group(1) if alpn else None


@pytest.mark.parametrize("alpn", ["h2", "http/1.1"])
def test_tls13_is_picotls_for_both_alpns(gateway, gw_factory, certs, site, alpn):
    out = s_client(gateway.tls_port, site, certs["ca"], ["-tls1_3", "-alpn", alpn])
    assert negotiated(out) == ("TLSv1.3", alpn), out
    assert "Verify return code: 0 (ok)" in out, out
    assert tickets(out) == 1, "picotls sends one ticket after a handshake:\n" + out
    if alpn == "http/1.1":
        assert "HTTP/1.1 200 OK" in out, out
    # the same handshake by OpenSSL (the measurement switch) sends two: the count tells the engines apart
    g = gw_factory({}, name="gw-openssl13", start=False)
    g.env = lambda env=g.env: dict(env(), LIZARD_TLS13_ENGINE="openssl")
    g.start()
    out = s_client(g.tls_port, site, certs["ca"], ["-tls1_3", "-alpn", alpn])
    assert negotiated(out) == ("TLSv1.3", alpn) and tickets(out) == 2, out


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "h2"])
def test_curl_over_tls13_and_tls12(gateway, curl, site, http2):
    for tls in (["--tlsv1.3"], ["--tlsv1.2", "--tls-max", "1.2"]):
        r = curl(site, "/", http2=http2, extra_args=tls)
        assert r.status == 200, r
        assert r.http_version == ("2" if http2 else "1.1"), r


def test_tls12_is_openssls(gateway, certs, site):
    out = s_client(gateway.tls_port, site, certs["ca"], ["-tls1_2", "-alpn", "h2"])
    assert negotiated(out) == ("TLSv1.2", "h2"), out
    # OpenSSL's TLS 1.2 server: a session ticket in the handshake, and the peer's ECDHE suite
    assert re.search(r"^New, TLSv1\.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256", out, re.M), out


def test_rsa_certificate_over_picotls(gw_factory, certs, tmp_path, register_sandbox, upstream):
    pki = str(tmp_path)
    ca_dir = os.path.dirname(certs["ca"])
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "rsa.key", "-out", "rsa.csr",
                    "-subj", "/CN=*.%s" % gwtest.DOMAIN], cwd=pki, check=True, capture_output=True)
    with open(os.path.join(pki, "rsa.ext"), "w") as f:
        f.write("subjectAltName=DNS:*.%s\nextendedKeyUsage=serverAuth\n" % gwtest.DOMAIN)
    subprocess.run(["openssl", "x509", "-req", "-in", "rsa.csr", "-CA", os.path.join(ca_dir, "ca.pem"), "-CAkey",
                    os.path.join(ca_dir, "ca.key"), "-CAcreateserial", "-out", "rsa.pem", "-days", "2", "-extfile",
                    "rsa.ext"], cwd=pki, check=True, capture_output=True)
    g = gw_factory({"tls": {"certificates": [{"cert": os.path.join(pki, "rsa.pem"), "key": os.path.join(pki, "rsa.key")}]}},
                   name="gw-rsa")
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    out = s_client(g.tls_port, g.host(upstream.port, sid), certs["ca"], ["-tls1_3"])
    assert negotiated(out)[0] == "TLSv1.3" and tickets(out) == 1, out
    assert "Verify return code: 0 (ok)" in out and "HTTP/1.1 200 OK" in out, out
    assert re.search(r"Peer signature type: RSA-PSS", out), out


def test_picotls_connection_outlives_a_certificate_reload(gw_factory, certs, tmp_path, register_sandbox, upstream):
    pki = str(tmp_path)
    cert, key = os.path.join(pki, "cert.pem"), os.path.join(pki, "key.pem")
    shutil.copy(certs["cert"], cert)
    shutil.copy(certs["key"], key)
    g = gw_factory({"tls": {"certificates": [{"cert": cert, "key": key}]}}, name="gw-reload13")
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3

    def connect():
        c = http.client.HTTPSConnection(host.split(":")[0], g.tls_port, context=ctx, timeout=10)
        c.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port)), server_hostname=host.split(":")[0])
        return c

    def get(c):
        c.request("GET", "/", headers={"Host": host})
        r = c.getresponse()
        r.read()
        return r.status

    def serial(c):
        return c.sock.getpeercert()["serialNumber"]

    old = connect()
    assert old.sock.version() == "TLSv1.3" and get(old) == 200
    before = serial(old)
    # a new certificate for the same names, then SIGHUP
    fresh = gwtest.make_certs(os.path.join(pki, "fresh"))
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    key, "-out", os.path.join(pki, "n.csr"), "-subj", "/CN=*.%s" % gwtest.DOMAIN],
                   check=True, capture_output=True)
    with open(os.path.join(pki, "n.ext"), "w") as f:
        f.write("subjectAltName=DNS:*.%s\nextendedKeyUsage=serverAuth\n" % gwtest.DOMAIN)
    ca_dir = os.path.dirname(certs["ca"])
    subprocess.run(["openssl", "x509", "-req", "-in", os.path.join(pki, "n.csr"), "-CA", os.path.join(ca_dir, "ca.pem"),
                    "-CAkey", os.path.join(ca_dir, "ca.key"), "-CAcreateserial", "-out", cert, "-days", "2",
                    "-extfile", os.path.join(pki, "n.ext")], check=True, capture_output=True)
    del fresh
    with open(g.log, "rb") as f:
        reloads = f.read().count(b"certificates reloaded")
    g.proc.send_signal(signal.SIGHUP)
    gwtest.wait_for(lambda: open(g.log, "rb").read().count(b"certificates reloaded") > reloads, 10,
                    what="the certificate reload")
    new = connect()
    assert get(new) == 200 and serial(new) != before
    # the connection made before the reload still serves, on its certificate's context
    for _ in range(3):
        assert get(old) == 200
    old.close()
    new.close()
    assert g.alive()


def test_readyz_reports_ktls_as_the_kernel_does(gateway):
    available, why = ktls_transmit()
    status, body = gateway.admin_get("/readyz")
    assert status == 200 and json.loads(body)["ktls"] is available, (body, why)
    with open(gateway.log, "rb") as f:
        lines = [ln for ln in f.read().decode().splitlines() if "kTLS transmit" in ln]
    assert len(lines) == 1, lines  # probed once per process, not per worker
    assert lines[0].startswith("lizard-gateway: kTLS transmit %s (" % ("available" if available else "not available")), \
        lines
