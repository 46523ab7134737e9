"""Helpers of the browser-access tests (test_browser_access.py,
test_browser_e2e.py): parsing and forging the gateway's cookie, small
in-process HTTP servers that stand in for a sandbox's app, and a raw HTTP/2
client that sends cookies as separate header fields. Stdlib + python3-h2."""

import base64
import hashlib
import hmac
import json
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COOKIE_NAME = "__Host-lizard_access"
QUERY_PARAM = "lizard_token"
TOKEN_HEADER = "x-lizard-access-token"

# What a browser sends when it opens an address (a navigation): only then is
# ?lizard_token= turned into the gateway's cookie (302 + Set-Cookie).
NAVIGATION = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "none",
              "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


# ---------------------------------------------------------------------------
# The gateway's cookie (format documented in auth/cookie.c):
#   v1.<sandbox>.<port>.<expires>.<sig>
#   sig = base64url(HMAC-SHA256(secret, "v1.<sandbox>.<port>.<expires>\n<token_sha256>")), unpadded


class SetCookie:
    """One parsed Set-Cookie value."""

    def __init__(self, raw):
        self.raw = raw
        parts = [p.strip() for p in raw.split(";")]
        self.name, _, self.value = parts[0].partition("=")
        self.attrs = {}  # lowercase attribute name -> value ("" for flags)
        for p in parts[1:]:
            if not p:
                continue
            k, _, v = p.partition("=")
            self.attrs[k.strip().lower()] = v.strip()

    def __repr__(self):
        return "<SetCookie %r>" % self.raw


def set_cookies(resp, name=COOKIE_NAME):
    """The Set-Cookie headers of resp for cookie `name`."""
    return [c for c in (SetCookie(v) for v in resp.get_all("set-cookie")) if c.name == name]


def sign_cookie(secret, sandbox_id, port, expires, token_sha256):
    payload = "v1.%s.%d.%d" % (sandbox_id, port, expires)
    mac = hmac.new(secret.encode() if isinstance(secret, str) else secret,
                   ("%s\n%s" % (payload, token_sha256)).encode(), hashlib.sha256).digest()
    return payload + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def cookie_fields(value):
    """Splits a cookie value into (version, sandbox, port, expires, sig)."""
    parts = value.split(".")
    assert len(parts) == 5, "the cookie value is not v1.<sandbox>.<port>.<expires>.<sig>: %r" % value
    return parts


def replace_field(value, index, new):
    parts = value.split(".")
    parts[index] = new
    return ".".join(parts)


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def flip_char(s, i=-1):
    """s with the character at i changed to another base64url character that
    differs in its top bit (the last character of an unpadded 32-byte
    base64url carries only 4 significant bits: flipping a low bit there
    would give a non-canonical spelling of the same MAC)."""
    i = i % len(s)
    c = s[i]
    c = B64URL[B64URL.index(c) ^ 32] if c in B64URL else "A"
    return s[:i] + c + s[i + 1:]


# ---------------------------------------------------------------------------
# Locations


def location_target(resp, host):
    """The request target (path + query, as sent) that a redirect points to.
    The gateway's own redirects are absolute https://<host>[:port] URLs
    (CONTRACT.md, Forwarding): a relative one is refused here."""
    loc = resp.headers.get("location")
    assert loc, "no Location in %r" % resp
    assert not loc.startswith("/"), "a relative Location: %r" % loc
    u = urllib.parse.urlsplit(loc)
    assert u.scheme == "https" and (u.hostname or "").lower() == host.lower(), "redirect to another place: %r" % loc
    rest = loc.split("//", 1)[1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


# ---------------------------------------------------------------------------
# In-process apps standing in for a sandbox's program


class RecordingApp:
    """A threaded HTTP/1.1 server on 127.0.0.1 that records each request
    (method, target, [(name, value)...]) and answers through `handler(app,
    req_handler)` -> (status, headers list, body bytes) or None (then the
    handler has written the answer itself)."""

    def __init__(self, handler):
        self.handler = handler
        self.requests = []
        self.lock = threading.Lock()
        app = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "lizard-test-app/1"

            def log_message(self, fmt, *args):
                pass

            def __getattr__(self, name):
                if name.startswith("do_"):
                    return self.dispatch
                raise AttributeError(name)

            def dispatch(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n > 0 else b""
                with app.lock:
                    app.requests.append({"method": self.command, "path": self.path,
                                         "headers": [(k.lower(), v) for k, v in self.headers.items()],
                                         "body": body})
                out = app.handler(app, self)
                if out is None:
                    return
                status, headers, payload = out
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

        class S(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = S(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def clear(self):
        with self.lock:
            del self.requests[:]


def assert_no_credentials(req, token, cookie_values=(), cookie_name=COOKIE_NAME):
    """req: one request a sandbox received (dict with path and headers).
    None of the gateway's three credentials may be in it."""
    path = req["path"]
    query = path.split("?", 1)[1] if "?" in path else ""
    names = [urllib.parse.unquote(p.split("=", 1)[0]) for p in query.split("&")]
    assert QUERY_PARAM not in names, "lizard_token reached the sandbox: %r" % path
    assert token not in path, "the token reached the sandbox in the target: %r" % path
    for k, v in req["headers"]:
        assert k != TOKEN_HEADER, "the token header reached the sandbox: %r" % req["headers"]
        assert token not in v, "the token reached the sandbox in header %s: %r" % (k, v)
        if k == "cookie":
            assert cookie_name not in v, "the gateway's cookie reached the sandbox: %r" % v
        for cv in cookie_values:
            if cv:
                assert cv not in v, "the gateway's cookie value reached the sandbox in %s: %r" % (k, v)


# ---------------------------------------------------------------------------
# Raw HTTP/2 client (python3-h2): cookies as separate fields, as browsers do


def h2_request(port, authority, path, headers, ca, method="GET", timeout=10):
    """One HTTP/2 request over TLS to 127.0.0.1:port with SNI and :authority
    `authority`; `headers` is a list of (name, value) sent in that order (so
    several `cookie` fields stay separate). Returns (status, [(name, value)],
    body)."""
    import h2.config
    import h2.connection
    import h2.events

    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    host = authority.split(":")[0]
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock = ctx.wrap_socket(raw, server_hostname=host)
    try:
        assert sock.selected_alpn_protocol() == "h2", "the gateway did not negotiate h2"
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        sid = conn.get_next_available_stream_id()
        hl = [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)]
        hl += [(k.lower(), v) for k, v in headers]
        conn.send_headers(sid, hl, end_stream=True)
        sock.sendall(conn.data_to_send())
        status, resp_headers, body = None, [], b""
        deadline = time.monotonic() + timeout
        done = False
        while not done:
            if time.monotonic() > deadline:
                raise TimeoutError("no HTTP/2 answer")
            data = sock.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    for k, v in ev.headers:
                        k = k.decode() if isinstance(k, bytes) else k
                        v = v.decode() if isinstance(v, bytes) else v
                        if k == ":status":
                            status = int(v)
                        else:
                            resp_headers.append((k, v))
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    done = True
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                    raise ConnectionError("stream reset by the gateway: %r" % ev)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
        return status, resp_headers, body
    finally:
        sock.close()


def h1_raw(port, host, request_bytes, ca, read_until=b"\r\n\r\n", timeout=10):
    """Sends raw bytes over TLS (ALPN http/1.1) and returns what arrives up to
    and including `read_until` (the response head) plus the socket."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock = ctx.wrap_socket(raw, server_hostname=host)
    sock.sendall(request_bytes)
    buf = b""
    deadline = time.monotonic() + timeout
    while read_until not in buf:
        if time.monotonic() > deadline:
            break
        data = sock.recv(65536)
        if not data:
            break
        buf += data
    return buf, sock


def ws_frame(payload, opcode=0x1):
    """A masked client WebSocket frame (payload < 126 bytes)."""
    mask = b"\x01\x02\x03\x04"
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + data


def json_body(b):
    return json.loads(b.decode() if isinstance(b, bytes) else b)
