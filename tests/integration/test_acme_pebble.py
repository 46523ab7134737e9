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

import base64
import json
import os
import secrets
import ssl
import subprocess
import time
import urllib.request

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import gwtest

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
    gw = gwtest.Gateway(d, certs, redis.port, name="gw-acme")
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
    v, nonce, ct = sealed.split(".")
    assert v == "v1"
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return AESGCM(bytes.fromhex(SEALED_KEY)).decrypt(base64.urlsafe_b64decode(pad(nonce)),
                                                     base64.urlsafe_b64decode(pad(ct)), name.encode())


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
    assert redis.cmd("KEYS", "lizard:acme:*") == []
    due = float(redis.cmd("ZSCORE", "lizard:issuer:renew", host))
    assert due == int(rec["not_after"]) - 30 * 86400
    # the domain now routes (through the plain listener's ACME-free path it is still a redirect target only;
    # the trusted path is covered in test_custom_domains.py)
    acme.host, acme.name, acme.sid, acme.token = host, name, sid, token


def test_due_renewal_is_issued_again(acme, redis):
    host, name = acme.host, acme.name
    before = redis.cmd("HGET", "lizard:cert:{%s}" % name, "chain")
    redis.cmd("ZADD", "lizard:issuer:renew", "0", host)  # due now
    gwtest.wait_for(lambda: redis.cmd("HGET", "lizard:cert:{%s}" % name, "chain") != before, 180, interval=0.5,
                    what="renewal")
    assert redis.cmd("HGET", "lizard:domain:{%s}" % host, "state") == b"active"
    assert float(redis.cmd("ZSCORE", "lizard:issuer:renew", host)) > time.time()
