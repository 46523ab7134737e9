#!/usr/bin/python3
"""A real Flask application (Debian's python3-flask, run with
/usr/bin/python3) behind the gateway, for the host-mode tests: it builds its
absolute URLs, cookies and CORS answers from the request the way framework
code does, so what it answers shows which address it believes it is served
at.

    flask_app.py --port N [--domain lizard.test]

Prints "listening <port>" on stdout once it accepts connections. Endpoints:
  /echo            JSON: {"host", "origin", "referer", "headers": [[name, value], ...]}
  /go              302 to url_for("landing", _external=True) (an absolute URL from Host)
  /landing         "landed"
  /moved           201 with Content-Location and Refresh on the app's own absolute URL
  /cookies         Set-Cookie: a host-only one, Domain=localhost, Domain=127.0.0.1,
                   Domain=<domain>, Domain=.<domain>, Domain=<parent of domain>,
                   and the gateway's own names (__Host-lizard_access, __Host-lizard_consent)
  /cors            Access-Control-Allow-Origin: the request's Origin when it is the
                   app's own origin (http://<Host>), as an app allowing itself does
  /upload          POST/PUT: reads request.stream in 64 KiB reads and appends its progress to
                   the --events file as JSON lines ({"id": X-Upload-Id, "event": "first_byte" |
                   "done", "bytes", "sha256"}); answers {"bytes", "sha256"}
"""

import argparse
import hashlib
import json
import sys

from flask import Flask, jsonify, make_response, redirect, request, url_for

app = Flask(__name__)
DOMAIN = "lizard.test"
EVENTS = None


def upload_event(**kw):
    if EVENTS is not None:
        with open(EVENTS, "a") as f:
            f.write(json.dumps(kw) + "\n")


@app.route("/echo", methods=["GET", "POST"])
def echo():
    return jsonify({"host": request.headers.get("Host"), "origin": request.headers.get("Origin"),
                    "referer": request.headers.get("Referer"), "headers": [[k, v] for k, v in request.headers.items()]})


@app.route("/go")
def go():
    return redirect(url_for("landing", _external=True, x="1"))


@app.route("/landing")
def landing():
    return "landed"


@app.route("/moved", methods=["GET", "POST"])
def moved():
    r = make_response("made", 201)
    r.headers["Content-Location"] = url_for("landing", _external=True)
    r.headers["Refresh"] = "0; url=" + url_for("landing", _external=True)
    return r


@app.route("/cookies")
def cookies():
    r = make_response("cookies")
    parent = DOMAIN.split(".", 1)[1] if "." in DOMAIN else DOMAIN
    r.set_cookie("plain", "1")
    # werkzeug refuses domain="localhost" in set_cookie; Express, Django and
    # Rails apps configured with it send this header
    r.headers.add("Set-Cookie", "loc=2; Domain=localhost; Path=/")
    r.headers.add("Set-Cookie", "ip=3; Domain=127.0.0.1; Path=/")
    r.headers.add("Set-Cookie", "preview=4; Domain=%s; Path=/" % DOMAIN)
    r.headers.add("Set-Cookie", "dotted=5; Path=/; domain=.%s; HttpOnly" % DOMAIN.upper())
    r.headers.add("Set-Cookie", "parent=6; Domain=%s" % parent)
    r.headers.add("Set-Cookie", "__Host-lizard_access=forged; Path=/; Secure; HttpOnly")
    r.headers.add("Set-Cookie", "__Host-lizard_consent=forged; Path=/; Secure")
    return r


@app.route("/cors", methods=["GET", "OPTIONS"])
def cors():
    r = make_response("cors")
    origin = request.headers.get("Origin")
    if origin is not None and origin == "http://" + request.headers.get("Host", ""):
        r.headers["Access-Control-Allow-Origin"] = origin
        r.headers["Vary"] = "Origin"
    return r


@app.route("/upload", methods=["POST", "PUT"])
def upload():
    uid, h, n = request.headers.get("X-Upload-Id", ""), hashlib.sha256(), 0
    while True:
        piece = request.stream.read(65536)
        if not piece:
            break
        if n == 0:
            upload_event(id=uid, event="first_byte", bytes=len(piece))
        h.update(piece)
        n += len(piece)
    upload_event(id=uid, event="done", bytes=n, sha256=h.hexdigest())
    return jsonify({"bytes": n, "sha256": h.hexdigest()})


def main():
    global DOMAIN, EVENTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--domain", default=DOMAIN)
    ap.add_argument("--events", default=None)
    args = ap.parse_args()
    DOMAIN = args.domain
    EVENTS = args.events
    from werkzeug.serving import make_server

    srv = make_server(args.host, args.port, app, threaded=True)
    print("listening %d" % srv.server_port, flush=True)
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
