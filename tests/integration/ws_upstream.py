#!/usr/bin/python3
"""A real WebSocket upstream for the integration tests, built on Debian's
python3-websockets (run it with /usr/bin/python3): stands in for a sandbox's
program that speaks WebSocket. No compression, so the bytes on the wire are
the bytes of the messages.

    ws_upstream.py [--host 127.0.0.1] [--port 0]

Prints "listening <port>" on stdout once it accepts connections.

Every upgrade may carry ?id=<name>; what the upstream saw of that connection
is then available (straight from the upstream, not through the gateway) at
GET /_info?id=<name>: {"path", "headers": [[name, value], ...], "open": bool,
"close_code", "close_reason", "messages", "frames_<opcode>"} (frames received
by opcode, control frames included: "frames_ping", "frames_pong", ...).

WebSocket endpoints:
  /echo                 echoes every message (text stays text, binary stays
                        binary). The text message "fragmented:<n>" is answered
                        with one text message sent in n fragments
                        "part0", "part1", ... (opcode continuation frames).
  /close?code=&reason=  closes at once with that code and reason
  /flood?mib=<n>        sends n MiB of binary messages (64 KiB each) as fast as
                        the connection takes them, then "done" as text; /_info
                        has "sent", the bytes of messages handed to the socket
  /idle                 sends nothing, waits for the peer to close
Plain HTTP (not an upgrade):
  /_info?id=<name>      see above
  anything else         426
"""

import argparse
import asyncio
import http
import json
import sys
import urllib.parse

import websockets
import websockets.legacy.server

INFO = {}  # id -> dict, see the module doc


def _query(path):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))


async def process_request(path, headers):
    url = urllib.parse.urlsplit(path)
    if url.path == "/_info":
        info = INFO.get(_query(path).get("id", ""))
        body = json.dumps(info).encode()
        return (http.HTTPStatus.OK if info is not None else http.HTTPStatus.NOT_FOUND,
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body)
    if (headers.get("Upgrade") or "").lower() != "websocket":
        body = b"this upstream speaks WebSocket only\n"
        return (http.HTTPStatus.UPGRADE_REQUIRED, [("Content-Type", "text/plain"),
                                                   ("Content-Length", str(len(body)))], body)
    conn_id = _query(path).get("id")
    if conn_id:
        INFO[conn_id] = {"path": path, "headers": [[k, v] for k, v in headers.raw_items()], "open": True,
                         "close_code": None, "close_reason": None, "messages": 0}
    return None


class CountingProtocol(websockets.legacy.server.WebSocketServerProtocol):
    """Counts every frame received, by opcode, in the connection's INFO."""

    async def read_frame(self, max_size):
        frame = await super().read_frame(max_size)
        info = INFO.get(_query(getattr(self, "path", None) or "").get("id", ""))
        if info is not None:
            key = "frames_" + frame.opcode.name.lower()
            info[key] = info.get(key, 0) + 1
        return frame


async def handler(ws):
    path = ws.path
    url = urllib.parse.urlsplit(path)
    query = _query(path)
    info = INFO.get(query.get("id", ""), {"messages": 0})
    try:
        if url.path == "/echo":
            async for msg in ws:
                info["messages"] += 1
                if isinstance(msg, str) and msg.startswith("fragmented:"):
                    n = int(msg.split(":", 1)[1])
                    await ws.send(["part%d" % i for i in range(n)])
                else:
                    await ws.send(msg)
        elif url.path == "/close":
            await ws.close(int(query.get("code", "1000")), query.get("reason", ""))
        elif url.path == "/flood":
            block = b"\x5a" * 65536
            for _ in range(int(query.get("mib", "1")) * 16):
                await ws.send(block)
                info["sent"] = info.get("sent", 0) + len(block)
            await ws.send("done")
            await ws.wait_closed()
        else:  # /idle and the rest
            await ws.wait_closed()
    except websockets.ConnectionClosed:
        pass
    finally:
        await ws.wait_closed()
        info["open"] = False
        info["close_code"] = ws.close_code
        info["close_reason"] = ws.close_reason


async def serve(host, port):
    server = await websockets.serve(handler, host, port, process_request=process_request, compression=None,
                                    create_protocol=CountingProtocol,
                                    max_size=16 * 1024 * 1024, ping_interval=None, close_timeout=2)
    print("listening %d" % server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Future()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        asyncio.run(serve(args.host, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
