#!/usr/bin/python3
"""An example of the control plane's side of custom domains (CONTRACT.md,
"Custom domains"; docs/custom-domains.md, "Custom domains"): issues and renews the
certificates the gateways serve, with a standard ACME client (Debian's
certbot, manual mode) answering HTTP-01 through the gateways themselves.

Input (what the control plane writes):

  HSET <prefix>domain:{<host>} sandbox <id> port <n> state pending cert <name>
  XADD <prefix>issue * host <host>

The stream is read with a consumer group (several issuers share the work; a
crash leaves the entry pending, read again at the next start). For each
entry whose domain hash is `pending` (first issuance) or `active` (a
renewal asked for by hand), the issuer:

  1. runs `certbot certonly --manual --preferred-challenges http` for <host>
     against --server; certbot calls this script back as its auth hook,
     which SETs <prefix>acme:{<token>} to the key authorization (EX 3600):
     the CA's GET http://<host>/.well-known/acme-challenge/<token> reaches
     any gateway (the customer's CNAME points at the fleet), which answers it
     from Redis; the cleanup hook DELetes it;
  2. seals the private key for the gateways with deploy/lizard_seal.py
     (AES-256-GCM under the 64 hex digits of $<--sealed-key-env>, the
     record's name as associated data: v1.<base64url nonce>.<base64url
     ciphertext+tag>);
  3. HSETs <prefix>cert:{<name>} chain <PEM, leaf first> key <sealed>
     not_after <unix s>, PUBLISHes cert:<name> on <prefix>routes;
  4. sets the domain `active`, PUBLISHes domain:<host>;
  5. ZADDs <prefix>issuer:renew <not_after - --renew-before-days> <host>,
     and XACKs.

A failed first issuance sets the domain `failed` with an `error` field (a
short reason for the customer, e.g. the CNAME does not point at us) and is
retried only when the control plane XADDs again. Renewal: every --tick
seconds the hosts of <prefix>issuer:renew that are due are issued again
(the old certificate keeps serving meanwhile); a failed renewal is retried
after --retry-s, the domain stays active.

Debian's python3 and python3-cryptography (certbot's own dependency); Redis
through deploy/lizard_stream.py (the RESP client and consumer loop it shares
with resume-consumer.py). Usage:

    lizard-issuer.py --server https://acme-v02.api.letsencrypt.org/directory --email ops@example.com
                     [--redis 127.0.0.1:6379 | unix:/path] [--prefix lizard:] [--state-dir /var/lib/lizard-issuer]
                     [--sealed-key-env LIZARD_SEALED_KEY] [--renew-before-days 30] [--ca-bundle FILE]

Prints "ready" on stdout once its group exists; one line per issuance on
stderr. SIGTERM/SIGINT stop it between issuances.
"""

import argparse
import calendar
import os
import shutil
import subprocess
import sys
import time

from cryptography import x509

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lizard_seal import seal  # noqa: E402  (deploy/lizard_seal.py: the one sealing of the project)
from lizard_stream import Resp, add_redis_args, as_dict, consume, password_of  # noqa: E402  (deploy/lizard_stream.py)


def log(msg):
    print("lizard-issuer: %s" % msg, file=sys.stderr, flush=True)


# --- certbot's hooks -----------------------------------------------------------


def hook(args, password):
    """certbot --manual-auth-hook / --manual-cleanup-hook: CERTBOT_TOKEN, CERTBOT_VALIDATION."""
    token = os.environ["CERTBOT_TOKEN"]
    key = "%sacme:{%s}" % (args.prefix, token)
    r = Resp(args.redis, password)
    try:
        if args.command == "hook-auth":
            r.cmd("SET", key, os.environ["CERTBOT_VALIDATION"], "EX", "3600")
        else:
            r.cmd("DEL", key)
    finally:
        r.close()


# --- issuing -------------------------------------------------------------------


def certbot(args, host, name):
    """Runs certbot for one host; returns (chain PEM, key PEM) or raises RuntimeError with its last lines."""
    me = [sys.executable, os.path.abspath(__file__), "--redis", args.redis, "--prefix", args.prefix,
          "--password-env", args.password_env]
    base = os.path.join(args.state_dir, "certbot")
    cmd = ["certbot", "certonly", "--non-interactive", "--agree-tos", "--server", args.server,
           "--config-dir", os.path.join(base, "config"), "--work-dir", os.path.join(base, "work"),
           "--logs-dir", os.path.join(base, "logs"), "--manual", "--preferred-challenges", "http",
           "--manual-auth-hook", " ".join(me + ["hook-auth"]), "--manual-cleanup-hook", " ".join(me + ["hook-cleanup"]),
           "--cert-name", name, "-d", host, "--key-type", "ecdsa", "--force-renewal"]
    cmd += ["--email", args.email] if args.email else ["--register-unsafely-without-email"]
    env = dict(os.environ)
    if args.ca_bundle:
        env["REQUESTS_CA_BUNDLE"] = args.ca_bundle  # the ACME server's own TLS certificate (a test CA)
    r = subprocess.run(cmd, env=env, capture_output=True, timeout=args.timeout)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(" / ".join(lines[-4:]) or "certbot exited %d" % r.returncode)
    live = os.path.join(base, "config", "live", name)
    with open(os.path.join(live, "fullchain.pem"), "rb") as f:
        chain = f.read()
    with open(os.path.join(live, "privkey.pem"), "rb") as f:
        key = f.read()
    return chain, key


def not_after(chain):
    leaf = x509.load_pem_x509_certificate(chain)
    return calendar.timegm(leaf.not_valid_after.utctimetuple())


def issue(args, password, sealed_key, host):
    """Steps 1-5 for one host; returns True when the certificate was written."""
    r = Resp(args.redis, password)
    try:
        dkey = "%sdomain:{%s}" % (args.prefix, host)
        domain = as_dict(r.cmd("HGETALL", dkey))
        state = domain.get("state")
        if state not in ("pending", "active"):
            log("%s: state is %s, nothing to issue" % (host, state or "gone"))
            return False
        name = domain.get("cert") or host
        log("%s: issuing certificate %s (%s)" % (host, name, "renewal" if state == "active" else "first"))
        try:
            chain, key = certbot(args, host, name)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("%s: failed: %s" % (host, e))
            if state == "pending":
                r.cmd("HSET", dkey, "state", "failed", "error", str(e)[:500])
                r.cmd("PUBLISH", args.prefix + "routes", "domain:" + host)
            else:
                r.cmd("ZADD", args.prefix + "issuer:renew", str(int(time.time()) + args.retry_s), host)
            return False
        expires = not_after(chain)
        routes = args.prefix + "routes"
        r.cmd("HSET", "%scert:{%s}" % (args.prefix, name), "chain", chain, "key", seal(sealed_key, name, key),
              "not_after", str(expires))
        r.cmd("PUBLISH", routes, "cert:" + name)
        r.cmd("HSET", dkey, "state", "active")
        r.cmd("HDEL", dkey, "error")
        r.cmd("PUBLISH", routes, "domain:" + host)
        r.cmd("ZADD", args.prefix + "issuer:renew", str(expires - args.renew_before_days * 86400), host)
        log("%s: certificate %s written, valid until %d" % (host, name, expires))
        return True
    finally:
        r.close()


def renew_due(args, password, sealed_key, r):
    """The hosts whose renewal time has come, one at a time."""
    for host in r.cmd("ZRANGEBYSCORE", args.prefix + "issuer:renew", "-inf", str(int(time.time())), "LIMIT", "0", "16"):
        host = host.decode()
        # taken off first: a second issuer replica does not renew it too (ZREM answers 1 to one of them)
        if r.cmd("ZREM", args.prefix + "issuer:renew", host) == 1:
            issue(args, password, sealed_key, host)


def serve(args, password):
    sealed_key = os.environ.get(args.sealed_key_env, "")
    seal(sealed_key, "check", b"")  # a bad key is an error at start, not at the first issuance
    if shutil.which("certbot") is None:
        raise SystemExit("lizard-issuer: certbot is not installed (apt-get install certbot)")
    os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
    next_tick = [0.0]

    def tick(r):
        if time.time() >= next_tick[0]:
            renew_due(args, password, sealed_key, r)
            next_tick[0] = time.time() + args.tick

    def handle(entry_id, fields):
        host = fields.get("host", "").strip().lower().rstrip(".")
        if host:
            issue(args, password, sealed_key, host)

    # "0": requests written before the first issuer ever ran are served too
    consume(args, args.prefix + "issue", "0", handle, count=16, ack=True, between=tick)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="?", default="serve", choices=["serve", "hook-auth", "hook-cleanup"])
    add_redis_args(ap, "issuer")
    ap.add_argument("--server", default="https://acme-v02.api.letsencrypt.org/directory", help="the ACME directory URL")
    ap.add_argument("--email", default=None, help="the ACME account's contact")
    ap.add_argument("--ca-bundle", default=None, help="CA file for the ACME server's TLS certificate (tests)")
    ap.add_argument("--state-dir", default="/var/lib/lizard-issuer", help="certbot's account and certificates")
    ap.add_argument("--sealed-key-env", default="LIZARD_SEALED_KEY", help="variable holding the 64 hex digit key")
    ap.add_argument("--renew-before-days", type=int, default=30)
    ap.add_argument("--retry-s", type=int, default=3600, help="a failed renewal is tried again after this")
    ap.add_argument("--tick", type=float, default=60.0, help="seconds between looks at the renewal set")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one certbot run may take")
    args = ap.parse_args()
    password = password_of(args)
    if args.command == "serve":
        serve(args, password)
    else:
        hook(args, password)


if __name__ == "__main__":
    main()
