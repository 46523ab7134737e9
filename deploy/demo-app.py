#!/usr/bin/env python3
"""The demo sandbox app: what a program inside a sandbox would serve.

    demo-app.py [--host 127.0.0.1] [--port 3000]

/           a page with a link to /page2 and a button that calls /api/time
/page2      a second page
/api/time   JSON with the server time
/api/whoami JSON with the Host and Origin the app received: with
            `host:<n> localhost` (the demo's second app) it sees
            localhost:<n>, with the default the preview host
"""

import argparse
import html
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INDEX = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sandbox demo</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;line-height:1.5}
button{font-size:1rem;padding:.4rem 1rem}pre{background:#f4f4f4;padding:.6rem}</style></head>
<body>
<h1>Hello from sandbox demo</h1>
<p>This page is served by <code>deploy/demo-app.py</code> on 127.0.0.1:3000,
through lizard-gateway.</p>
<p>This app received <code>Host: {host}</code>.</p>
<p><a href="/page2">Go to page 2</a></p>
<p><button id="time">What time is it in the sandbox?</button></p>
<pre id="out">(press the button: it calls fetch('/api/time'))</pre>
<script>
document.getElementById('time').addEventListener('click', async () => {
  const out = document.getElementById('out');
  try {
    const r = await fetch('/api/time');
    out.textContent = r.status + ' ' + JSON.stringify(await r.json(), null, 2);
  } catch (e) {
    out.textContent = 'error: ' + e;
  }
});
</script>
</body></html>
"""

PAGE2 = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sandbox demo, page 2</title></head>
<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto">
<h1>Page 2</h1>
<p>Still in the sandbox: the gateway's cookie carried the access to this page.</p>
<p><a href="/">Back</a></p>
</body></html>
"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sandbox-demo/1"

    def send(self, status, ctype, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/":
            self.send(200, "text/html; charset=utf-8", INDEX.replace("{host}", html.escape(self.headers.get("Host", ""))))
        elif path == "/page2":
            self.send(200, "text/html; charset=utf-8", PAGE2)
        elif path == "/api/time":
            now = time.time()
            self.send(200, "application/json", json.dumps({
                "unix": now,
                "iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                "from": "sandbox demo",
            }))
        elif path == "/api/whoami":
            self.send(200, "application/json", json.dumps({
                "host": self.headers.get("Host"),
                "origin": self.headers.get("Origin"),
                "x_forwarded_host": self.headers.get("X-Forwarded-Host"),
            }))
        else:
            self.send(404, "text/plain; charset=utf-8", "not found in the demo app\n")

    do_HEAD = do_GET

    def log_message(self, fmt, *args):
        sys.stderr.write("demo-app: %s %s\n" % (self.address_string(), fmt % args))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    args = ap.parse_args()
    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    print("demo app on http://%s:%d/" % (args.host, args.port), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
