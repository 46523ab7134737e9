# WebSocket over HTTP/2 client (RFC 8441) for tests/bench/run's section wsh2:
# opens N tunnels as extended CONNECT streams (:protocol websocket) on as few
# TLS+HTTP/2 connections as the server's SETTINGS_MAX_CONCURRENT_STREAMS
# allows (at most WS_H2_STREAMS, default 100, per connection), checks each
# stream got its 200, writes a JSON summary to OUT (the shape of
# ws_client.py's, plus "connections"), then holds them idle until SIGTERM
# (MODE hold) or closes them at once (MODE close).
# Usage: ws_h2_client.py HOST PORT HOST_HEADER N CONCURRENCY OUT MODE CAFILE
# (CONCURRENCY: connections being opened at a time). A server that does not
# offer SETTINGS_ENABLE_CONNECT_PROTOCOL gets no CONNECT: its tunnels count as
# failed ("no extended CONNECT").
import asyncio, json, os, signal, ssl, sys

import h2.config
import h2.connection
import h2.events
import h2.settings

host, port, host_header, n, concurrency, out, mode, cafile = sys.argv[1:9]
port, n, concurrency = int(port), int(n), int(concurrency)
PER_CONN = int(os.environ.get("WS_H2_STREAMS", "100"))
TLS = ssl.create_default_context(cafile=cafile)
TLS.set_alpn_protocols(["h2"])
HEADERS = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "https"), (":path", "/ws"),
           (":authority", host_header), ("sec-websocket-version", "13"), ("origin", "https://" + host_header)]
stats = {"tunnels": 0, "failed": {}, "dropped_while_held": 0, "connections": 0}
closing = False


def failed(why, count=1):
    stats["failed"][why] = stats["failed"].get(why, 0) + count


class Conn(asyncio.Protocol):
    """One HTTP/2 connection carrying `want` tunnels; `done` resolves once each
    has its answer (or the connection failed)."""

    def __init__(self, want, done):
        self.want, self.done = want, done
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8", validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.t, self.pending, self.up, self.opened = None, set(), set(), False

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.t.write(data)

    def connection_made(self, t):
        self.t = t
        self.h2.initiate_connection()
        self.flush()

    def open_streams(self, settings):
        self.opened = True
        if settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL) != 1:
            failed("no extended CONNECT", self.want)
            self.finish()
            return
        allowed = settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS, self.want)
        if allowed < self.want:
            failed("over the server's max_concurrent_streams", self.want - allowed)
            self.want = allowed
        for _ in range(self.want):
            sid = self.h2.get_next_available_stream_id()
            self.h2.send_headers(sid, HEADERS)
            self.pending.add(sid)
        self.flush()

    def finish(self):
        if not self.done.done():
            self.done.set_result(self)

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except Exception as e:  # a protocol error: the connection is lost to us
            failed("h2: " + type(e).__name__, len(self.pending))
            self.pending.clear()
            self.t.close()
            self.finish()
            return
        for ev in events:
            if isinstance(ev, h2.events.RemoteSettingsChanged) and not self.opened:
                self.open_streams({k: v.new_value for k, v in ev.changed_settings.items()})
            elif isinstance(ev, h2.events.ResponseReceived) and ev.stream_id in self.pending:
                self.pending.discard(ev.stream_id)
                status = dict(ev.headers).get(":status", "?")
                if status == "200":
                    self.up.add(ev.stream_id)
                else:
                    failed("status " + status)
                    self.h2.reset_stream(ev.stream_id)
            elif isinstance(ev, h2.events.DataReceived):
                # a keep-alive Ping of the proxy: taken, the window given back
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamReset, h2.events.StreamEnded)):
                if ev.stream_id in self.up:
                    self.up.discard(ev.stream_id)
                    if not closing:
                        stats["dropped_while_held"] += 1
                elif ev.stream_id in self.pending:
                    self.pending.discard(ev.stream_id)
                    failed("stream reset before 200")
        self.flush()
        if self.opened and not self.pending:
            self.finish()

    def connection_lost(self, exc):
        if self.up and not closing:
            stats["dropped_while_held"] += len(self.up)
        self.up.clear()
        if self.pending or not self.opened:
            failed("connection lost before 200", len(self.pending) if self.opened else self.want)
            self.pending.clear()
        self.finish()


async def open_conn(loop, sem, want, conns):
    async with sem:
        done = loop.create_future()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: Conn(want, done), host, port, ssl=TLS, server_hostname=host_header), 30)
            await asyncio.wait_for(done, 60)
        except asyncio.TimeoutError:
            failed("timeout", want)
            return
        except (OSError, ssl.SSLError) as e:
            failed(type(e).__name__, want)
            return
        conns.append(conn)


async def main():
    global closing
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    sem = asyncio.Semaphore(concurrency)
    conns = []
    wants = [PER_CONN] * (n // PER_CONN) + ([n % PER_CONN] if n % PER_CONN else [])
    await asyncio.gather(*(open_conn(loop, sem, w, conns) for w in wants))
    await asyncio.sleep(0.5)  # a tunnel the proxy drops at once counts as dropped
    stats["tunnels"] = sum(len(c.up) for c in conns)
    stats["connections"] = sum(1 for c in conns if c.up)
    with open(out + ".tmp", "w") as f:
        json.dump(stats, f)
    os.rename(out + ".tmp", out)
    if mode == "hold":
        await stop.wait()
    closing = True
    for c in conns:
        c.t.close()
    await asyncio.sleep(0.5)


asyncio.run(main())
