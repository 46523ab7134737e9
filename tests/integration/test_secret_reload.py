"""Secret files reload by themselves (gateway/secret_watch.c): a mounted
Kubernetes Secret is updated by kubelet's atomic writer, which writes the new
files into a fresh `..<timestamp>` directory and swaps the `..data` symlink
with rename(2); nothing sends SIGHUP. The gateway watches the directories
and reloads as SIGHUP does: the new certificate is served and the new cookie
secrets are live without a signal; a bad file keeps the current ones.
Real gateway binary, real TLS clients, the same layout kubelet makes."""

import os
import shutil
import socket
import ssl
import time

import gwtest


class AtomicDir:
    """A directory laid out as kubelet's AtomicWriter lays out a Secret
    volume: ..data -> ..<ts>/, and each key a symlink ..data/<key>."""

    def __init__(self, path):
        self.path = path
        self.n = 0
        os.makedirs(path, exist_ok=True)

    def write(self, files, mode=0o440):
        self.n += 1
        ts = "..2026_12_01_00_00_%02d.%d" % (self.n, os.getpid())
        d = os.path.join(self.path, ts)
        os.makedirs(d)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(d, name), mode)
        old = os.readlink(os.path.join(self.path, "..data")) if os.path.islink(os.path.join(self.path, "..data")) else None
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(ts, tmp)
        os.rename(tmp, os.path.join(self.path, "..data"))  # the swap: one rename
        for name in files:
            link = os.path.join(self.path, name)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", name), link)
        if old is not None:
            shutil.rmtree(os.path.join(self.path, old))

    def file(self, name):
        return os.path.join(self.path, name)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def served_by(port, cafile):
    """True when the gateway's certificate verifies against cafile."""
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="3000-a.%s" % gwtest.DOMAIN):
                return True
    except ssl.SSLError:
        return False


def cookie_secrets(g):
    for line in g.admin_get("/metrics")[1].decode().splitlines():
        if line.startswith("lizard_cookie_secrets "):
            return int(line.split()[1])
    raise AssertionError("no lizard_cookie_secrets")


def test_symlink_swap_reloads_without_a_signal(workdir, redis):
    base = os.path.join(workdir, "secret-reload")
    first = gwtest.make_certs(os.path.join(base, "pki-one"))
    second = gwtest.make_certs(os.path.join(base, "pki-two"))
    tls = AtomicDir(os.path.join(base, "tls"))
    keys = AtomicDir(os.path.join(base, "keys"))
    tls.write({"tls.crt": read(first["cert"]), "tls.key": read(first["key"])})
    keys.write({"cookie-secrets": b"A" * 48 + b"\n"})
    g = gwtest.Gateway(os.path.join(workdir, "gw-secret-reload"), first, redis.port, name="gw-secret-reload", overrides={
        "tls": {"certificates": [{"cert": tls.file("tls.crt"), "key": tls.file("tls.key")}]},
        "auth": {"cookie_secrets_env": None, "cookie_secrets_file": keys.file("cookie-secrets")}})
    g.start()
    try:
        assert served_by(g.tls_port, first["ca"]) and not served_by(g.tls_port, second["ca"])
        assert cookie_secrets(g) == 1

        # kubelet's update of both Secrets; no SIGHUP
        tls.write({"tls.crt": read(second["cert"]), "tls.key": read(second["key"])})
        keys.write({"cookie-secrets": b"B" * 48 + b"\n" + b"A" * 48 + b"\n"})
        gwtest.wait_for(lambda: served_by(g.tls_port, second["ca"]), 10, what="the new certificate served")
        gwtest.wait_for(lambda: cookie_secrets(g) == 2, 10, what="the new cookie secrets live")
        assert not served_by(g.tls_port, first["ca"])

        # a bad update keeps the current ones (and says why)
        tls.write({"tls.crt": read(first["cert"]), "tls.key": b"not a key\n"})
        keys.write({"cookie-secrets": b"short\n"})
        gwtest.wait_for(lambda: gwtest.tail(g.log).count("reload failed") >= 2, 10, what="the failed reloads reported")
        assert served_by(g.tls_port, second["ca"]) and cookie_secrets(g) == 2
        assert g.alive()
        text = gwtest.tail(g.log)
        assert "secret file changed" in text
        assert ("B" * 48) not in text and ("A" * 48) not in text  # never a secret in the log
    finally:
        assert g.stop() == 0


def test_file_replaced_in_place_reloads(workdir, redis):
    """Outside Kubernetes: the file itself rewritten (or moved over) in a
    plain directory is picked up the same way."""
    base = os.path.join(workdir, "secret-replace")
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, "cookie-secrets")
    with open(path, "w") as f:
        f.write("C" * 48 + "\n")
    os.chmod(path, 0o600)
    certs = gwtest.make_certs(os.path.join(base, "pki"))
    g = gwtest.Gateway(os.path.join(workdir, "gw-secret-replace"), certs, redis.port, name="gw-secret-replace",
                       overrides={"auth": {"cookie_secrets_env": None, "cookie_secrets_file": path}})
    g.start()
    try:
        assert cookie_secrets(g) == 1
        tmp = path + ".new"
        with open(tmp, "w") as f:
            f.write("D" * 48 + "\n" + "C" * 48 + "\n" + "E" * 48 + "\n")
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
        gwtest.wait_for(lambda: cookie_secrets(g) == 3, 10, what="the replaced file reloaded")
        time.sleep(0.5)  # one change, one reload: no storm of reloads from its several events
        assert gwtest.tail(g.log).count("cookie secrets reloaded") == 1
    finally:
        assert g.stop() == 0
