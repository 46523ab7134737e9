"""The gateway's own redirects never leave the preview host (CONTRACT.md,
Forwarding; issue 20): the query-to-cookie 302 (access token and share link)
is an absolute https://<host>[:port]/... URL whatever the path looks like,
so `GET //evil.example/x?lizard_token=...` no longer sends the browser to
evil.example. HTTP/1.1 (raw bytes: curl would normalize the paths) and
HTTP/2 (python3-h2), a TLS listener on a port other than 443, and a trusted
plain listener behind a load balancer (https, the port the client named).
The consent 303 is in test_public_warning.py.

Real gateway, real redis-server, upstream.py."""

import socket
import time
import urllib.parse

import pytest

import browser_helpers as bh
import gwtest
import share_link_ref as ref

LINK_KEY = ("r1", b"redirect-link-key-" + b"r" * 32)
# the paths of the report, and their relatives: each is a path on the preview host
EVIL_PATHS = ["//evil.example/x", "/\\evil.example", "///evil.example", "/\\/evil.example", "//evil.example",
              "/\\\\evil.example/x?y=1", "//evil.example:443/x?y=1", "//user@evil.example/"]


@pytest.fixture(scope="module")
def rgw(workdir, certs, redis):
    import os
    d = os.path.join(workdir, "own-redirects")
    os.makedirs(d, exist_ok=True)
    keys = os.path.join(d, "link-keys")
    with open(keys, "w") as f:
        f.write(ref.keys_text(dict([LINK_KEY])))
    os.chmod(keys, 0o600)
    g = gwtest.Gateway(d, certs, redis.port, name="gw-redirects", overrides={"auth": {"link_keys_file": keys}})
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True  # a TLS-terminating load balancer in front of the plain listener
    g.overrides["listen"] = cfg["listen"]
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture(scope="module")
def sbx(rgw, redis, upstream):
    class S:
        pass

    s = S()
    s.id = gwtest.new_sandbox_id("rdr")
    s.token = gwtest.register_sandbox(redis, s.id, ports={upstream.port: "private"})
    s.port = upstream.port
    s.host = rgw.host(upstream.port, s.id)
    s.link = ref.mint(LINK_KEY[0], LINK_KEY[1], s.id, s.port, int(time.time()) + 3600)
    return s


def nav_head(path, authority):
    lines = ["GET %s HTTP/1.1" % path, "Host: %s" % authority, "Connection: close"]
    lines += ["%s: %s" % kv for kv in bh.NAVIGATION.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def h1_location(port, host, authority, path, ca, tls=True):
    """(status, Location) of a navigation to the raw `path` (not normalized)."""
    req = nav_head(path, authority)
    if tls:
        head, sock = bh.h1_raw(port, host, req, ca)
        sock.close()
    else:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(req)
            head = b""
            while b"\r\n\r\n" not in head:
                data = s.recv(65536)
                if not data:
                    break
                head += data
    status, headers, _ = gwtest.parse_head(head.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n")
    return status, headers.get("location")


def assert_stays(location, host, port_suffix, path):
    want = "https://%s%s%s" % (host, port_suffix, path)
    assert location == want, "Location %r, expected %r" % (location, want)
    # and a URL parser reads it as the preview host
    assert urllib.parse.urlsplit(location).hostname == host, location


@pytest.mark.parametrize("credential", ["token", "share_link"])
@pytest.mark.parametrize("path", EVIL_PATHS)
def test_query_to_cookie_302_stays_on_the_host_h1(rgw, sbx, certs, path, credential):
    cred = sbx.token if credential == "token" else sbx.link
    sep = "&" if "?" in path else "?"
    status, loc = h1_location(rgw.tls_port, sbx.host, "%s:%d" % (sbx.host, rgw.tls_port),
                              path + sep + "lizard_token=" + cred, certs["ca"])
    assert status == 302, (status, loc)
    assert_stays(loc, sbx.host, ":%d" % rgw.tls_port, path)


@pytest.mark.parametrize("path", EVIL_PATHS)
def test_query_to_cookie_302_stays_on_the_host_h2(rgw, sbx, certs, path):
    sep = "&" if "?" in path else "?"
    status, headers, _ = bh.h2_request(rgw.tls_port, "%s:%d" % (sbx.host, rgw.tls_port),
                                       path + sep + "lizard_token=" + sbx.link, list(bh.NAVIGATION.items()),
                                       certs["ca"])
    assert status == 302, (status, headers)
    assert_stays(dict(headers)["location"], sbx.host, ":%d" % rgw.tls_port, path)


def test_host_case_and_default_port(rgw, sbx, certs):
    # the host lowercased; :443 (and no port) is the default and left out
    status, loc = h1_location(rgw.tls_port, sbx.host, sbx.host.upper() + ":443", "/a?lizard_token=" + sbx.token,
                              certs["ca"])
    assert status == 302
    assert_stays(loc, sbx.host, "", "/a")


@pytest.mark.parametrize("authority,suffix", [("{h}", ""), ("{h}:443", ""), ("{h}:8443", ":8443")])
def test_trusted_plain_listener_redirects_to_https(rgw, sbx, certs, authority, suffix):
    """Behind a load balancer the browser is on https, on the port it named in
    Host (not the plain listener's own)."""
    status, loc = h1_location(rgw.plain_port, sbx.host, authority.format(h=sbx.host),
                              "//evil.example/x?lizard_token=" + sbx.token, certs["ca"], tls=False)
    assert status == 302, (status, loc)
    assert_stays(loc, sbx.host, suffix, "//evil.example/x")
