"""The sandbox app of tests/container/run: a real HTTP server on loopback.

    sandbox_app.py PORT MARKER_DIR

GET /        200 "hello from the sandbox\n"
GET /slow    200, 64 KiB at once, then nothing for 60 s (a request in flight
             when the gateway is stopped); touches MARKER_DIR/slow when it
             has sent its first bytes
"""

import http.server
import os
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", str(64 * 1024 * 2))
            self.end_headers()
            self.wfile.write(b"s" * 64 * 1024)
            self.wfile.flush()
            with open(os.path.join(sys.argv[2], "slow"), "w"):
                pass
            time.sleep(60)
            return
        body = b"hello from the sandbox\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
