"""TLS session resumption, from outside with `openssl s_client`:

- a session made under one certificate never resumes under another (session
  IDs and tickets, TLS 1.2 and 1.3), while the same name resumes;
- tls.ticket_keys_file: gateways sharing the file resume each other's tickets,
  gateways with other keys do not; SIGHUP switches to a new file's keys while
  the old ones still listed keep decrypting; bad files are refused by --check
  and at start, and a bad file at SIGHUP keeps the current keys.
"""

import base64
import os
import re
import secrets
import signal
import subprocess

import pytest

import gwtest

OTHER_DOMAIN = "other.test"

# (label, s_client flags): how a client resumes
SESSION_ID_12 = ("TLS 1.2 session ID", ["-tls1_2", "-no_ticket"])
TICKET_12 = ("TLS 1.2 ticket", ["-tls1_2"])
TICKET_13 = ("TLS 1.3 ticket", ["-tls1_3"])
ALL_MODES = [SESSION_ID_12, TICKET_12, TICKET_13]
TICKET_MODES = [TICKET_12, TICKET_13]


class Handshake:
    def __init__(self, out):
        self.out = out
        m = re.search(r"^(New|Reused), (TLSv[0-9.]+)", out, re.M)
        self.reused = m is not None and m.group(1) == "Reused"
        self.version = m.group(2) if m else None
        m = re.search(r"^subject=.*?CN\s*=\s*([^,\n]+)", out, re.M)
        self.subject_cn = m.group(1).strip() if m else None
        self.verified = "Verify return code: 0 (ok)" in out


def s_client(port, servername, ca, flags, sess_out=None, sess_in=None):
    """One TLS connection that sends a request and reads until the gateway
    closes (so that TLS 1.3 tickets, sent after the handshake, arrive before
    -sess_out is written)."""
    args = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", servername, "-CAfile", ca,
            "-ign_eof"] + flags
    if sess_out:
        args += ["-sess_out", sess_out]
    if sess_in:
        args += ["-sess_in", sess_in]
    req = "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % servername
    r = subprocess.run(args, input=req.encode(), capture_output=True, timeout=30)
    out = r.stdout.decode("utf-8", "replace")
    h = Handshake(out)
    assert h.version is not None, "no handshake: %s\n%s" % (" ".join(args), r.stderr.decode("utf-8", "replace"))
    assert h.verified, out
    if sess_out:
        assert os.path.exists(sess_out) and os.path.getsize(sess_out) > 0, \
            "no session written (no ticket issued) by %s" % " ".join(args)
    return h


def ticket_key_name(sess_file):
    """The first 16 bytes of the session's ticket: the name of the key that
    encrypted it."""
    return ticket_bytes(sess_file)[:16]


def ticket_bytes(sess_file):
    """The session's ticket, as `openssl sess_id -text` shows it."""
    r = subprocess.run(["openssl", "sess_id", "-in", sess_file, "-noout", "-text"], capture_output=True, text=True,
                       timeout=20, check=True)
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "TLS session ticket:" in line)
    hexdump = ""
    for line in lines[start + 1:]:
        m = re.match(r"^\s*[0-9a-f]{4} - ((?:[0-9a-f]{2}[ -]){1,16})", line)
        if not m:
            break
        hexdump += m.group(1)
    return bytes.fromhex(re.sub(r"[ -]", "", hexdump))


def make_leaf(pki, name, domain):
    """A certificate for *.<domain> signed by the test CA (pki/ca.pem)."""
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=*.%s" % domain],
                   cwd=pki, check=True, capture_output=True, timeout=60)
    with open(os.path.join(pki, name + ".ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.%s\n" % domain)
    subprocess.run(["openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", name + ".pem", "-days", "30", "-extfile", name + ".ext"],
                   cwd=pki, check=True, capture_output=True, timeout=60)
    return {"cert": os.path.join(pki, name + ".pem"), "key": os.path.join(pki, name + ".key")}


def new_key(size=80):
    raw = secrets.token_bytes(size)
    return raw, base64.b64encode(raw).decode()


def write_keys(path, lines, mode=0o600):
    """Replaces the file as operators' tooling would (write, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def log_text(g):
    with open(g.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def sighup_and_wait(g, marker):
    before = log_text(g).count(marker)
    g.proc.send_signal(signal.SIGHUP)
    gwtest.wait_for(lambda: log_text(g).count(marker) > before, 10, what="%r in the gateway's log" % marker)


@pytest.fixture
def tmpdir_(tmp_path):
    return str(tmp_path)


@pytest.fixture
def two_cert_gateway(gw_factory, certs):
    other = make_leaf(os.path.dirname(certs["ca"]), "other", OTHER_DOMAIN)
    return gw_factory({"domains": [gwtest.DOMAIN, OTHER_DOMAIN],
                       "tls": {"certificates": [{"cert": certs["cert"], "key": certs["key"]}, other]}},
                      name="gw-two-certs")


# ---------------------------------------------------------------------------
# issue 9: no resumption across certificates


@pytest.mark.parametrize("mode", ALL_MODES, ids=[m[0] for m in ALL_MODES])
def test_session_does_not_cross_certificates(two_cert_gateway, certs, tmpdir_, mode):
    g, ca = two_cert_gateway, certs["ca"]
    label, flags = mode
    lizard_name, other_name = "3000-sbx1.%s" % gwtest.DOMAIN, "3000-sbx1.%s" % OTHER_DOMAIN
    sess_lizard, sess_other = os.path.join(tmpdir_, "lizard.pem"), os.path.join(tmpdir_, "other.pem")

    h = s_client(g.tls_port, lizard_name, ca, flags, sess_out=sess_lizard)
    assert not h.reused and h.subject_cn == "*." + gwtest.DOMAIN
    h = s_client(g.tls_port, other_name, ca, flags, sess_out=sess_other)
    assert not h.reused and h.subject_cn == "*." + OTHER_DOMAIN

    # the same name (and another name of the same certificate) resumes
    assert s_client(g.tls_port, lizard_name, ca, flags, sess_in=sess_lizard).reused, label
    assert s_client(g.tls_port, "8080-sbx2." + gwtest.DOMAIN, ca, flags, sess_in=sess_lizard).reused, label
    assert s_client(g.tls_port, other_name, ca, flags, sess_in=sess_other).reused, label

    # another certificate's name does not, either way; the right certificate is served
    h = s_client(g.tls_port, other_name, ca, flags, sess_in=sess_lizard)
    assert not h.reused, "%s: a session of *.%s resumed under %s" % (label, gwtest.DOMAIN, other_name)
    assert h.subject_cn == "*." + OTHER_DOMAIN
    h = s_client(g.tls_port, lizard_name, ca, flags, sess_in=sess_other)
    assert not h.reused, "%s: a session of *.%s resumed under %s" % (label, OTHER_DOMAIN, lizard_name)
    assert h.subject_cn == "*." + gwtest.DOMAIN
    # an unknown name gets the default (first) certificate, and no foreign session
    h = s_client(g.tls_port, "unknown.example", ca, flags, sess_in=sess_other)
    assert not h.reused and h.subject_cn == "*." + gwtest.DOMAIN


# ---------------------------------------------------------------------------
# issue 28: the TLS 1.3 suite is the server's choice, AES-128-GCM first (Mozilla's
# order), ChaCha20 for a client that lists it first


@pytest.mark.parametrize("offer,expected", [
    ("TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
    ("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"),
    ("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
])
def test_tls13_suite_is_the_servers_choice(gw_factory, certs, offer, expected):
    g = gw_factory({}, name="gw-suites")
    h = s_client(g.tls_port, "3000-sbx1.%s" % gwtest.DOMAIN, certs["ca"], ["-tls1_3", "-ciphersuites", offer])
    m = re.search(r"^New, TLSv1\.3, Cipher is (\S+)", h.out, re.M)
    assert m is not None and m.group(1) == expected, h.out


# issue 28: a TLS 1.3 resumption hands the client a fresh ticket. TLS 1.3
# clients use a ticket once (RFC 8446, appendix C.4: OpenSSL's own client, so
# wrk; BoringSSL, so Chromium): when a resumption issued none, the client's
# next connection was a full handshake, every other reconnect (wrk with
# Connection: close resumed 25 of 50 against nginx's 49). TLS 1.2 tickets
# under the current key are kept, as before.


def test_tls13_resumption_issues_a_fresh_ticket(gw_factory, certs, tmpdir_):
    g = gw_factory({}, name="gw-renew")
    name, ca = "3000-sbx1.%s" % gwtest.DOMAIN, certs["ca"]
    sess = [os.path.join(tmpdir_, "renew-%d.pem" % i) for i in range(4)]
    assert not s_client(g.tls_port, name, ca, ["-tls1_3"], sess_out=sess[0]).reused
    for i in (1, 2):
        h = s_client(g.tls_port, name, ca, ["-tls1_3"], sess_in=sess[i - 1], sess_out=sess[i])
        assert h.reused, h.out
        assert ticket_bytes(sess[i]) != ticket_bytes(sess[i - 1]), \
            "resumption %d issued no ticket: a client that uses each ticket once has none left" % i
    # the fresh tickets are the current key's and resume in turn
    assert ticket_key_name(sess[2]) == ticket_key_name(sess[0])
    assert s_client(g.tls_port, name, ca, ["-tls1_3"], sess_in=sess[2]).reused
    # TLS 1.2: a resumption with the current key keeps its ticket
    assert not s_client(g.tls_port, name, ca, ["-tls1_2"], sess_out=sess[3]).reused
    before = ticket_bytes(sess[3])
    assert s_client(g.tls_port, name, ca, ["-tls1_2"], sess_in=sess[3], sess_out=sess[3]).reused
    assert ticket_bytes(sess[3]) == before


# ---------------------------------------------------------------------------
# issue 12: fleet ticket keys


@pytest.mark.parametrize("mode", TICKET_MODES, ids=[m[0] for m in TICKET_MODES])
def test_ticket_resumes_on_another_gateway_with_the_same_keys(gw_factory, certs, tmpdir_, mode):
    label, flags = mode
    ca, name = certs["ca"], "3000-sbx1." + gwtest.DOMAIN
    k1, k2, k3 = new_key(80), new_key(48), new_key(80)
    fleet, other = os.path.join(tmpdir_, "fleet.keys"), os.path.join(tmpdir_, "other.keys")
    write_keys(fleet, ["# fleet ticket keys: the first encrypts", k1[1], k2[1]])
    write_keys(other, [k3[1]])

    a = gw_factory({"tls": {"ticket_keys_file": fleet}}, name="gw-fleet-a")
    b = gw_factory({"tls": {"ticket_keys_file": fleet}}, name="gw-fleet-b")
    c = gw_factory({"tls": {"ticket_keys_file": other}}, name="gw-fleet-c")
    d = gw_factory(name="gw-fleet-random")  # no file: per-process random keys

    sess = os.path.join(tmpdir_, "a.pem")
    assert not s_client(a.tls_port, name, ca, flags, sess_out=sess).reused
    assert ticket_key_name(sess) == k1[0][:16], "the first key of the file must encrypt"
    assert s_client(b.tls_port, name, ca, flags, sess_in=sess).reused, "%s: gateway B did not resume A's ticket" % label
    assert not s_client(c.tls_port, name, ca, flags, sess_in=sess).reused, "%s: resumed with other keys" % label
    assert not s_client(d.tls_port, name, ca, flags, sess_in=sess).reused, "%s: resumed with random keys" % label

    # random keys belong to one process
    sess_d = os.path.join(tmpdir_, "d.pem")
    s_client(d.tls_port, name, ca, flags, sess_out=sess_d)
    assert s_client(d.tls_port, name, ca, flags, sess_in=sess_d).reused
    assert not s_client(a.tls_port, name, ca, flags, sess_in=sess_d).reused
    e = gw_factory(name="gw-fleet-random-2")
    assert not s_client(e.tls_port, name, ca, flags, sess_in=sess_d).reused


def test_ticket_keys_rotation_on_sighup(gw_factory, certs, tmpdir_):
    ca, name = certs["ca"], "3000-sbx1." + gwtest.DOMAIN
    path = os.path.join(tmpdir_, "rotate.keys")
    old, new = new_key(80), new_key(80)
    write_keys(path, [old[1]])
    # b reads its own copy: it reloads a changed file by itself (inotify, docs/operations.md Operations), and here it
    # stands for a gateway whose file has not been rotated yet
    path_b = os.path.join(tmpdir_, "rotate-b.keys")
    write_keys(path_b, [old[1]])
    a = gw_factory({"tls": {"ticket_keys_file": path}}, name="gw-rotate-a")
    b = gw_factory({"tls": {"ticket_keys_file": path_b}}, name="gw-rotate-b")

    sessions_old = {}
    for label, flags in TICKET_MODES:
        f = os.path.join(tmpdir_, "old-%s.pem" % flags[0])
        s_client(a.tls_port, name, ca, flags, sess_out=f)
        assert ticket_key_name(f) == old[0][:16]
        sessions_old[label] = f

    # step 1: the new key first, the old one still listed
    write_keys(path, [new[1], old[1]])
    sighup_and_wait(a, "ticket keys reloaded from %s: 2 keys" % path)
    for label, flags in TICKET_MODES:
        f = os.path.join(tmpdir_, "new-%s.pem" % flags[0])
        s_client(a.tls_port, name, ca, flags, sess_out=f)
        assert ticket_key_name(f) == new[0][:16], "%s: new tickets must come from the new key" % label
        assert s_client(a.tls_port, name, ca, flags, sess_in=sessions_old[label]).reused, \
            "%s: a ticket of the old key, still listed, must resume" % label
        # b has not been told yet: it knows only the old key
        assert not s_client(b.tls_port, name, ca, flags, sess_in=f).reused
        assert s_client(b.tls_port, name, ca, flags, sess_in=sessions_old[label]).reused

    # a bad file at SIGHUP: logged, and the current keys stay
    write_keys(path, ["# half-written", new[1][:40]])
    sighup_and_wait(a, "ticket keys reload failed")
    text = log_text(a)
    assert "ticket keys reload failed, keeping the current 2: tls: ticket keys: %s: line 2: " % path in text, text
    for label, flags in TICKET_MODES:
        assert s_client(a.tls_port, name, ca, flags, sess_in=sessions_old[label]).reused, label

    # step 2: the old key is gone
    write_keys(path, [new[1]])
    sighup_and_wait(a, "ticket keys reloaded from %s: 1 key" % path)
    for label, flags in TICKET_MODES:
        assert not s_client(a.tls_port, name, ca, flags, sess_in=sessions_old[label]).reused, \
            "%s: a ticket of a removed key resumed" % label
        f = os.path.join(tmpdir_, "new-%s.pem" % flags[0])
        assert s_client(a.tls_port, name, ca, flags, sess_in=f).reused, label

    text = log_text(a)
    assert "certificates reloaded" in text
    for key in (old[1], new[1], new[1][:40]):
        assert key not in text, "a ticket key appeared in the gateway's log"


def run_gateway(cfg_path, *extra):
    return subprocess.run([gwtest.gateway_binary(), "-c", cfg_path] + list(extra), capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, LIZARD_COOKIE_SECRETS=secrets.token_hex(32)))


def test_bad_ticket_keys_file_refused(gw_factory, certs, tmpdir_):
    key = new_key(80)
    cases = [
        ("missing.keys", None, 0o600, "No such file or directory"),
        ("short.keys", [base64.b64encode(secrets.token_bytes(47)).decode()], 0o600,
         "line 1: the key is 47 bytes long, expected 48 or 80"),
        ("notbase64.keys", [key[1], "not a key!"], 0o600, "line 2: not a base64 key of 48 or 80 bytes"),
        ("empty.keys", ["# nothing yet"], 0o600, "holds no key"),
        ("open.keys", [key[1]], 0o644, "readable or writable by others (mode 0644)"),
    ]
    for file, lines, mode, why in cases:
        path = os.path.join(tmpdir_, file)
        if lines is not None:
            write_keys(path, lines, mode)
        g = gw_factory({"tls": {"ticket_keys_file": path}}, name="gw-bad-" + file, start=False)
        cfg = g.write_config()
        expected = "config: tls.ticket_keys_file: %s: %s" % (path, why)
        r = run_gateway(cfg, "--check")
        assert r.returncode == 1 and expected in r.stderr, (file, r.returncode, r.stdout, r.stderr)
        assert key[1] not in r.stderr and key[1] not in r.stdout
        # and the start refuses it the same way, before binding anything
        r = run_gateway(cfg)
        assert r.returncode == 1 and expected in r.stderr, (file, r.returncode, r.stderr)

    good = os.path.join(tmpdir_, "good.keys")
    write_keys(good, [key[1]], 0o640)
    g = gw_factory({"tls": {"ticket_keys_file": good}}, name="gw-good-check", start=False)
    r = run_gateway(g.write_config(), "--check")
    assert r.returncode == 0, r.stderr


def test_nginx_binary_key_file(gw_factory, certs, tmpdir_):
    """nginx's ssl_session_ticket_key file (80 raw bytes) works as is."""
    ca, name = certs["ca"], "3000-sbx1." + gwtest.DOMAIN
    raw = b"\x00" + secrets.token_bytes(79)  # a NUL: never mistaken for text
    path = os.path.join(tmpdir_, "nginx.key")
    with open(path, "wb") as f:
        f.write(raw)
    os.chmod(path, 0o600)
    a = gw_factory({"tls": {"ticket_keys_file": path}}, name="gw-nginx-a")
    b = gw_factory({"tls": {"ticket_keys_file": path}}, name="gw-nginx-b")
    for label, flags in TICKET_MODES:
        sess = os.path.join(tmpdir_, "nginx-%s.pem" % flags[0])
        s_client(a.tls_port, name, ca, flags, sess_out=sess)
        assert ticket_key_name(sess) == raw[:16]
        assert s_client(b.tls_port, name, ca, flags, sess_in=sess).reused, label
