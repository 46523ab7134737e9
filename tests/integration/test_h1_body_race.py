"""A chunked request body that breaks after it started streaming to the app,
while the app answers. h2o answers a broken chunk with its own 400 when the
handler has not started a response, and the gateway's handler may start one
at any moment: two responses would abort the process (h2o_start_response's
assertion). The race is staged for certain: the gateway is stopped
(SIGSTOP) while the client's broken chunk and then the app's answer reach
its sockets, so that one epoll_wait returns both.

What holds (measured 2026-12-05): h2o's loop runs the sockets it connected
(the app's) before the ones it accepted, and the 400's write completes and
closes the client's connection in the same pass; the app's answer is read
first and answered (a small one whole: the broken chunk then only closes
the connection), or the 400 goes out and the connection closes before
anything else runs. Either way exactly one response, the
app's request cancelled, the gateway alive."""

import os
import signal
import socket
import ssl
import threading
import time

import gwtest

IO_TIMEOUT_S = 15
FIRST_CHUNK = b"5\r\nhello\r\n"


class HoldingApp:
    """An HTTP/1.1 app: reads a request head and its first chunk, says so,
    answers 200 when told, then reads until the gateway closes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.got_first = threading.Event()
        self.answer = threading.Event()
        self.answered = threading.Event()
        self.closed_by_gateway = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        with c:
            c.settimeout(IO_TIMEOUT_S * 4)
            buf = b""
            try:
                while FIRST_CHUNK not in buf.partition(b"\r\n\r\n")[2]:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                self.got_first.set()
                self.answer.wait(IO_TIMEOUT_S * 4)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                self.answered.set()
                while c.recv(65536):
                    pass
                self.closed_by_gateway.set()
            except OSError:
                self.closed_by_gateway.set()

    def stop(self):
        self.sock.close()


def read_until_closed(s):
    data = b""
    s.settimeout(IO_TIMEOUT_S)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (ConnectionResetError, ssl.SSLError):
        return data


def test_broken_chunk_while_the_app_answers_closes_unanswered(gw_factory, register_sandbox, certs):
    g = gw_factory()
    app = HoldingApp()
    sid = gwtest.new_sandbox_id("hr")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = g.host(app.port, sid)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    raw = socket.create_connection(("127.0.0.1", g.tls_port), timeout=IO_TIMEOUT_S)
    s = ctx.wrap_socket(raw, server_hostname=host)
    try:
        s.sendall(("POST /race HTTP/1.1\r\nHost: %s\r\nX-Lizard-Access-Token: %s\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" % (host, token)).encode() + FIRST_CHUNK)
        assert app.got_first.wait(IO_TIMEOUT_S * 2), "the app never got the first chunk"
        # the gateway gives h2o the go-ahead for the next chunk once the app's
        # socket took this one: give it a moment to come back to the loop
        time.sleep(0.5)
        os.kill(g.proc.pid, signal.SIGSTOP)
        try:
            s.sendall(b"zz\r\n")  # not a chunk size
            app.answer.set()
            assert app.answered.wait(IO_TIMEOUT_S), "the app could not answer"
            time.sleep(0.2)  # loopback: both are in the gateway's receive queues
        finally:
            os.kill(g.proc.pid, signal.SIGCONT)
        data = read_until_closed(s)
    finally:
        s.close()
        app.stop()
    # the gateway answers the next question (its process alive, not aborted)
    try:
        status = g.admin_get("/healthz")[0]
    except OSError as e:
        status = repr(e)
    assert status == 200 and g.alive(), "the gateway died:\n%s" % gwtest.tail(g.log)
    # one response: h2o's 400, or the app's 200 (whole, or cut by the broken body)
    assert data.count(b"HTTP/1.1 ") == 1, data[:600]
    assert data.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 400 ")), data[:600]
    if data.startswith(b"HTTP/1.1 400 "):
        assert data.endswith(b"broken chunked-encoding"), data[:600]
    assert app.closed_by_gateway.wait(IO_TIMEOUT_S), "the app's request was not cancelled"
