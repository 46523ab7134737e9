"""Custom domains end to end with a real ACME server (CONTRACT.md, "Custom
domains"; issue 26): Debian's pebble on loopback validates HTTP-01 against
the gateway's plain listener (pebble's httpPort is that port; its DNS is
pebble-challtestsrv answering 127.0.0.1 for every name), the example issuer
(deploy/lizard-issuer.py, certbot in manual mode, hooks writing
lizard:acme:{<token>}) turns a `pending` domain into a sealed certificate
record and an `active` domain.

pebble runs with PEBBLE_VA_NOSLEEP=1 (no artificial validation delay) and
PEBBLE_WFE_NONCEREJECT=0 (by default it rejects 5% of good nonces to test
clients' retries; certbot retries once, and a second rejection would make
the test flaky). PEBBLE_VA_ALWAYS_VALID is NOT set: every challenge is
really fetched from the gateway. Real gateway, redis-server, pebble,
pebble-challtestsrv, certbot, upstream.py."""

import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

import gwtest

sys.path.insert(0, os.path.join(gwtest.REPO, "deploy"))
import lizard_seal  # noqa: E402

ISSUER = os.path.join(gwtest.REPO, "deploy", "lizard-issuer.py")
SEALED_KEY = secrets.token_hex(32)


def openssl(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True, capture_output=True, timeout=60)


def pebble_tls_cert(d, ca_dir):
    """A certificate for pebble's own HTTPS listener (127.0.0.1), signed by the test CA."""
    openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "pebble.key",
             "-out", "pebble.csr", "-subj", "/CN=127.0.0.1"], d)
    with open(os.path.join(d, "pebble.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(["x509", "-req", "-in", "pebble.csr", "-CA", os.path.join(ca_dir, "ca.pem"), "-CAkey",
             os.path.join(ca_dir, "ca.key"), "-CAcreateserial", "-out", "pebble.pem", "-days", "30", "-extfile",
             "pebble.ext"], d)
    return os.path.join(d, "pebble.pem"), os.path.join(d, "pebble.key")


class Proc:
    def __init__(self, args, log, env=None, cwd=None):
        self.log = log
        with open(log, "ab") as f:
            self.proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                         cwd=cwd, start_new_session=True)

    def stop(self):
        gwtest.stop_process(self.proc)


@pytest.fixture(scope="module")
def acme(workdir, certs, redis):
    d = os.path.join(workdir, "acme-pebble")
    os.makedirs(d, exist_ok=True)
    procs = []

    class A:
        pass

    a = A()
    a.dir = d
    gw = gwtest.Gateway(d, certs, redis.port, name="gw-acme", overrides={"tls": {"sealed_key_env": "LIZARD_SEALED_KEY"}})
    gw.env_extra = {"LIZARD_SEALED_KEY": SEALED_KEY}
    a.gw = gw
    env_of = gw.env
    gw.env = lambda: dict(env_of(), **gw.env_extra)
    gw.start()

    dns_port, chall_mgmt = gwtest.free_port(), gwtest.free_port()
    procs.append(Proc(["pebble-challtestsrv", "-dns01", "127.0.0.1:%d" % dns_port, "-http01", "", "-https01", "",
                       "-tlsalpn01", "", "-management", "127.0.0.1:%d" % chall_mgmt,
                       "-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""], os.path.join(d, "challtestsrv.log")))
    cert, key = pebble_tls_cert(d, os.path.dirname(certs["ca"]))
    a.acme_port, a.mgmt_port = gwtest.free_port(), gwtest.free_port()
    with open(os.path.join(d, "pebble.json"), "w") as f:
        json.dump({"pebble": {"listenAddress": "127.0.0.1:%d" % a.acme_port,
                              "managementListenAddress": "127.0.0.1:%d" % a.mgmt_port,
                              "certificate": cert, "privateKey": key,
                              "httpPort": gw.plain_port,  # HTTP-01 goes to the gateway's plain listener
                              "tlsPort": gwtest.free_port(), "ocspResponderURL": "",
                              "externalAccountBindingRequired": False}}, f)
    env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
    procs.append(Proc(["pebble", "-config", os.path.join(d, "pebble.json"), "-dnsserver", "127.0.0.1:%d" % dns_port],
                      os.path.join(d, "pebble.log"), env=env))
    gwtest.wait_for(lambda: gwtest.port_open(a.acme_port) and gwtest.port_open(a.mgmt_port)
                    and gwtest.port_open(chall_mgmt), 30, what="pebble and its DNS")
    a.tls_ca = certs["ca"]

    ienv = dict(os.environ, LIZARD_SEALED_KEY=SEALED_KEY)
    ilog = os.path.join(d, "issuer.log")
    with open(ilog, "ab") as f:
        issuer = subprocess.Popen([gwtest.PYTHON, ISSUER, "--redis", "127.0.0.1:%d" % redis.port,
                                   "--server", "https://127.0.0.1:%d/dir" % a.acme_port, "--ca-bundle", certs["ca"],
                                   "--state-dir", os.path.join(d, "issuer"), "--tick", "0.5", "--timeout", "120"],
                                  stdout=subprocess.PIPE, stderr=f, stdin=subprocess.DEVNULL, env=ienv,
                                  start_new_session=True)
    assert issuer.stdout.readline().strip() == b"ready", gwtest.tail(ilog)
    a.issuer_log = ilog
    yield a
    gwtest.stop_process(issuer)
    for p in procs:
        p.stop()
    rc = gw.stop()
    reports = gw.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(gw.log)


def pebble_root(a):
    ctx = ssl.create_default_context(cafile=a.tls_ca)
    with urllib.request.urlopen("https://127.0.0.1:%d/roots/0" % a.mgmt_port, context=ctx, timeout=10) as r:
        return r.read()


def unseal(sealed, name):
    return lizard_seal.unseal(SEALED_KEY, name, sealed)


def hgetall(redis, key):
    flat = redis.cmd("HGETALL", key) or []
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def test_pending_domain_is_issued_over_http01_and_activated(acme, redis, upstream):
    sid = gwtest.new_sandbox_id("acm")
    token = gwtest.register_sandbox(redis, sid, ports={upstream.port: "private"})
    host = "shop-%s.customer.example" % secrets.token_hex(3)
    name = "crt-" + secrets.token_hex(4)
    redis.cmd("HSET", "lizard:domain:{%s}" % host, "sandbox", sid, "port", str(upstream.port), "state", "pending",
              "cert", name)
    before_keys = set(redis.cmd("KEYS", "lizard:acme:*"))  # other modules' challenges share this Redis
    redis.cmd("XADD", "lizard:issue", "*", "host", host)

    def state():
        return (redis.cmd("HGET", "lizard:domain:{%s}" % host, "state") or b"").decode()

    # generous: certbot starts a Python interpreter, registers an account and polls the order on a loaded machine
    gwtest.wait_for(lambda: state() in ("active", "failed"), 180, interval=0.5, what="issuance")
    assert state() == "active", (redis.cmd("HGET", "lizard:domain:{%s}" % host, "error"), gwtest.tail(acme.issuer_log))

    rec = hgetall(redis, "lizard:cert:{%s}" % name)
    assert set(rec) == {"chain", "key", "not_after"}
    chain = rec["chain"]
    leaf = x509.load_pem_x509_certificate(chain)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert sans == [host]
    assert int(rec["not_after"]) == int(leaf.not_valid_after.replace(tzinfo=__import__("datetime").timezone.utc)
                                        .timestamp())
    # the chain is the CA's: it verifies against pebble's root
    d = acme.dir
    with open(os.path.join(d, "root.pem"), "wb") as f:
        f.write(pebble_root(acme))
    with open(os.path.join(d, "chain.pem"), "wb") as f:
        f.write(chain)
    v = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "root.pem"), "-untrusted",
                        os.path.join(d, "chain.pem"), os.path.join(d, "chain.pem")], capture_output=True, timeout=30)
    assert v.returncode == 0, v.stderr
    # the key is sealed (no PEM in Redis), unseals with the record's name only, and is the leaf's
    assert b"PRIVATE KEY" not in rec["key"]
    pem = unseal(rec["key"].decode(), name)
    pub = serialization.load_pem_private_key(pem, None).public_key()
    assert pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == \
        leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    with pytest.raises(Exception):
        unseal(rec["key"].decode(), name + "x")
    # the challenge keys were cleaned up, and the renewal is scheduled 30 days before expiry
    assert set(redis.cmd("KEYS", "lizard:acme:*")) - before_keys == set()
    due = float(redis.cmd("ZSCORE", "lizard:issuer:renew", host))
    assert due == int(rec["not_after"]) - 30 * 86400
    acme.host, acme.name, acme.sid, acme.token = host, name, sid, token


# --- served by the gateway (the TLS side: tls/dyncert.c) ------------------------


def test_issued_certificate_is_served_for_the_custom_host(acme, redis, tmp_path):
    """curl with only pebble's root trusted, over the gateway's TLS listener with
    SNI = the custom host: the handshake presents the issued certificate, and the
    token reaches the sandbox."""
    host, gw = acme.host, acme.gw
    root = os.path.join(acme.dir, "root.pem")
    curl = gwtest.Curl(str(tmp_path / "curl"), root)
    url = "https://%s:%d" % (host, gw.tls_port)
    r = curl.request(url + "/echo", resolve=["%s:%d:127.0.0.1" % (host, gw.tls_port)],
                     headers={"X-Lizard-Access-Token": acme.token})
    assert r.status == 200, r
    headers = {k.lower(): v for k, v in r.json()["headers"]}
    assert headers["x-forwarded-host"] == "%s:%d" % (host, gw.tls_port)
    assert "x-lizard-access-token" not in headers
    # the test CA of the preview certificate is not what signed it: the default certificate is not served
    with pytest.raises(gwtest.CurlError):
        gwtest.Curl(str(tmp_path / "curl2"), acme.tls_ca).request(url + "/echo",
                                                                  resolve=["%s:%d:127.0.0.1" % (host, gw.tls_port)])


def test_chromium_opens_the_custom_host_with_lizard_token(acme, tmp_path):
    """Chromium trusting only pebble's root (an NSS database under $HOME, no
    certificate error ignored) opens https://<custom host>/?lizard_token=: the
    302 sets the gateway's cookie for that host alone (host-only), and the
    redirected page is the sandbox's."""
    import test_browser_e2e as be  # its Chromium driver (browser/e2e.js) and NSS helper

    if not os.access(be.CHROMIUM, os.X_OK):
        pytest.fail("%s is missing (apt-get install chromium)" % be.CHROMIUM, pytrace=False)
    env = {"node": shutil.which("node"), "chromium": be.CHROMIUM}
    host, gw = acme.host, acme.gw
    home = str(tmp_path / "home")
    be._nssdb_trusting(home, os.path.join(acme.dir, "root.pem"))
    url = "https://%s:%d/?lizard_token=%s" % (host, gw.tls_port, acme.token)
    out = be.run_browser(env, tmp_path, "load", None, None, urls=[url], resolverRules="MAP %s 127.0.0.1" % host,
                         browserEnv={"HOME": home})
    assert not out.get("error"), out
    (load,) = out["loads"]
    assert not load.get("error"), load
    assert load["landed_url"] == "https://%s:%d/" % (host, gw.tls_port), load
    assert '"upstream": true' in load["text"], load
    cookies = [c for c in out["cookies"] if c["name"] == "__Host-lizard_access"]
    assert len(cookies) == 1, out["cookies"]
    # host-only: the cookie's domain is the host itself, without a leading dot
    assert cookies[0]["domain"] == host and cookies[0]["secure"] and cookies[0]["httpOnly"], cookies
    redirects = [r for r in out["responses"] if r["status"] == 302]
    assert redirects and "domain=" not in (redirects[0]["set_cookie"] or "").lower(), out["responses"]


def test_due_renewal_is_issued_again(acme, redis):
    host, name = acme.host, acme.name
    before = redis.cmd("HGET", "lizard:cert:{%s}" % name, "chain")
    redis.cmd("ZADD", "lizard:issuer:renew", "0", host)  # due now
    gwtest.wait_for(lambda: redis.cmd("HGET", "lizard:cert:{%s}" % name, "chain") != before, 180, interval=0.5,
                    what="renewal")
    assert redis.cmd("HGET", "lizard:domain:{%s}" % host, "state") == b"active"
    assert float(redis.cmd("ZSCORE", "lizard:issuer:renew", host)) > time.time()
    # the publish of cert:<name> makes new handshakes present the renewed certificate
    new_leaf = x509.load_pem_x509_certificate(redis.cmd("HGET", "lizard:cert:{%s}" % name, "chain"))
    gwtest.wait_for(lambda: served_serial(acme, host) == new_leaf.serial_number, 15, what="renewed certificate served")


def served_serial(a, host):
    ctx = ssl.create_default_context(cafile=os.path.join(a.dir, "root.pem"))
    import socket

    with socket.create_connection(("127.0.0.1", a.gw.tls_port), timeout=10) as sock:
        with ctx.wrap_socket(sock, server_hostname=host) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number
