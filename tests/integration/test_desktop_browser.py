"""Desktops in a real browser (CONTRACT.md "Desktops"; issue 42): Debian's
headless Chromium (driven by playwright-core, browser/desktop.js) opens a
desktop port's preview URL, lands on the noVNC viewer the gateway serves,
and works Debian's TigerVNC Xvnc with an xterm on it.

- A full link: a screenshot shows the desktop (the root window's colour and
  the xterm), a click moves the X pointer, and a command typed in the viewer
  runs in the xterm (the file it creates appears).
- A view-only link: the screen updates (a new root colour shows up), and
  even with the viewer told to send input (view_only=false in its URL, as a
  user holding the link could do) the click and the keys change nothing on
  the X server: no file, the pointer and the focus where they were. The
  gateway's lizard_desktop_input_dropped_total having counted every event
  the viewer sent is the barrier after which the X server is checked.

Needs /usr/bin/chromium, node and playwright-core (as test_browser_e2e.py),
Xvnc, xterm, xdotool and python3-pil (tests/lib/deps.sh)."""

import json
import os
import select
import subprocess
import time

import pytest

import gwtest
import rfb_helpers as rfb
from test_browser_e2e import BROWSER_DIR, browser_env  # noqa: F401 (a fixture)
from test_desktop import desktop_gateway, link, metric

BLUE = (0x2A, 0x7F, 0xD4)
ORANGE = (0xE0, 0x70, 0x10)
# a generous bound on what the browser and the X server take to show or do
# something (the test fails only when it never happens)
PATIENCE = 90


@pytest.fixture(scope="module")
def desk_gw(workdir, certs, redis):
    yield from desktop_gateway(workdir, certs, redis, "desktop-browser")


@pytest.fixture(scope="module")
def desktop(workdir):
    """Xvnc with an xterm (a bash in its own directory) holding the X focus."""
    x = rfb.Xvnc(workdir).start()
    home = os.path.join(workdir, "xterm-home-%d" % x.port)
    os.makedirs(home, exist_ok=True)
    env = x.env()
    env.update({"HOME": home, "PS1": "$ "})
    term = subprocess.Popen(["xterm", "-geometry", "60x12+0+0", "-fa", "", "-e", "bash", "--norc", "--noprofile"], cwd=home,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wid = x.x("xdotool", "search", "--sync", "--onlyvisible", "--pid", str(term.pid), timeout=30).stdout.split()[0]
        x.x("xdotool", "windowfocus", "--sync", wid)
        x.home, x.wid = home, wid
        yield x
    finally:
        gwtest.stop_process(term)
        x.stop()


class Browser:
    """desktop.js: one JSON command a line, one JSON answer a line."""

    def __init__(self, env, tmp_path, name):
        cfg = {"executablePath": env["chromium"], "userDataDir": str(tmp_path / ("profile-" + name)),
               "resolverRules": "MAP *.%s 127.0.0.1" % gwtest.DOMAIN, "timeoutMs": PATIENCE * 1000}
        self.proc = subprocess.Popen([env["node"], os.path.join(BROWSER_DIR, "desktop.js"), json.dumps(cfg)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=BROWSER_DIR)
        assert self._answer(120).get("ready"), "desktop.js did not start"

    def _answer(self, timeout):
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(0, left))
            if not r:
                raise AssertionError("desktop.js said nothing within %d s; stderr: %s" % (timeout, self._stderr()))
            b = os.read(self.proc.stdout.fileno(), 1)
            if not b:
                raise AssertionError("desktop.js exited: %s" % self._stderr())
            line += b
        return json.loads(line)

    def _stderr(self):
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read().decode("utf-8", "replace")[-3000:]

    def do(self, cmd, **args):
        args["cmd"] = cmd
        self.proc.stdin.write((json.dumps(args) + "\n").encode())
        self.proc.stdin.flush()
        out = self._answer(PATIENCE * 2)
        assert out.get("ok"), out
        return out

    def close(self):
        try:
            self.proc.stdin.write(b'{"cmd": "quit"}\n')
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            gwtest.stop_process(self.proc)


def pixels_of(path, color, tolerance=6):
    """Pixels of the screenshot at path within tolerance of color."""
    from PIL import Image

    with Image.open(path) as im:
        data = im.convert("RGB").getdata()
        return sum(1 for p in data if all(abs(p[i] - color[i]) <= tolerance for i in range(3)))


def shot_until(browser, tmp_path, color, least):
    """Screenshots until one has at least `least` pixels of color; returns that count."""
    path = str(tmp_path / "shot.png")
    deadline = time.monotonic() + PATIENCE
    while True:
        browser.do("shot", path=path)
        n = pixels_of(path, color)
        if n >= least or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def wait_until(pred, what):
    gwtest.wait_for(pred, PATIENCE, interval=0.1, what=what)


def focus(x):
    return x.x("xdotool", "getwindowfocus").stdout.strip()


def open_viewer(browser, g, host, token):
    out = browser.do("open", url="https://%s:%d/?lizard_token=%s" % (host, g.tls_port, token))
    assert out["connected"], out
    assert out["url"].startswith("https://%s:%d/.lizard/viewer/" % (host, g.tls_port)), out
    assert "lizard_token" not in out["url"], out
    return out


# The root window's colour covers at least this many pixels of a screenshot
# (640x480 less the xterm, at any scale the viewer picks above 1/2).
ROOT_PIXELS = 20000


def test_full_link_shows_the_desktop_and_types_into_the_xterm(desk_gw, redis, desktop, browser_env, tmp_path):  # noqa: F811
    sid, _ = rfb.register_desktop(redis, desktop.port)
    host = desk_gw.host(desktop.port, sid)
    desktop.root_color("#%02x%02x%02x" % BLUE)
    b = Browser(browser_env, tmp_path, "full")
    try:
        out = open_viewer(b, desk_gw, host, link(sid, desktop.port))
        assert out["viewOnly"] == "false", out
        assert shot_until(b, tmp_path, BLUE, ROOT_PIXELS) >= ROOT_PIXELS, "the screenshot does not show the desktop"
        assert pixels_of(str(tmp_path / "shot.png"), (255, 255, 255), 0) >= 5000, "no xterm in the screenshot"
        assert metric(desk_gw, 'lizard_desktop_viewers{mode="full"}') >= 1

        desktop.x("xdotool", "mousemove", "--sync", "5", "5")
        before = desktop.pointer()
        b.do("click", x=300, y=200)
        wait_until(lambda: desktop.pointer() != before, "the click to move the X pointer")
        desktop.x("xdotool", "windowfocus", "--sync", desktop.wid)  # a click focuses nothing (no window manager); be sure
        marker = os.path.join(desktop.home, "typed-full")
        b.do("type", text="touch typed-full\n")
        wait_until(lambda: os.path.exists(marker), "the command typed in the viewer to run in the xterm")
    finally:
        b.close()


def test_view_only_link_updates_the_screen_and_changes_nothing(desk_gw, redis, desktop, browser_env,  # noqa: F811
                                                                tmp_path):
    sid, _ = rfb.register_desktop(redis, desktop.port)
    host = desk_gw.host(desktop.port, sid)
    desktop.root_color("#%02x%02x%02x" % BLUE)
    b = Browser(browser_env, tmp_path, "view")
    try:
        out = open_viewer(b, desk_gw, host, link(sid, desktop.port, view_only=True))
        assert out["viewOnly"] == "true", out
        assert shot_until(b, tmp_path, BLUE, ROOT_PIXELS) >= ROOT_PIXELS, "the screenshot does not show the desktop"
        desktop.root_color("#%02x%02x%02x" % ORANGE)
        assert shot_until(b, tmp_path, ORANGE, ROOT_PIXELS) >= ROOT_PIXELS, "the viewer did not show the screen's change"

        # the viewer told to send input anyway: its cookie is view-only, the gateway drops it
        out = b.do("open", url=out["url"].replace("view_only=true", "view_only=false"))
        assert out["connected"] and out["viewOnly"] == "false", out
        assert metric(desk_gw, 'lizard_desktop_viewers{mode="view_only"}') >= 1
        desktop.x("xdotool", "mousemove", "--sync", "5", "5")
        pointer, focused = desktop.pointer(), focus(desktop)
        assert focused == desktop.wid, "the xterm does not hold the focus"
        dropped = metric(desk_gw, "lizard_desktop_input_dropped_total")
        text = "touch typed-view\n"
        b.do("click", x=300, y=200)
        b.do("type", text=text)
        # a click is at least a press and a release, each key a down and an up: once the gateway has dropped as
        # many, the X server has had every chance to act on them
        want = dropped + 2 + 2 * len(text)
        wait_until(lambda: metric(desk_gw, "lizard_desktop_input_dropped_total") >= want, "the gateway to drop the input")
        # the X server's own keys after them: the xterm runs this line only if no key of the viewer's came first
        desktop.x("xdotool", "type", "--delay", "20", "touch probe\n")
        wait_until(lambda: os.path.exists(os.path.join(desktop.home, "probe")), "the xterm to run the probe")
        assert not os.path.exists(os.path.join(desktop.home, "typed-view")), "a key of a view-only viewer reached the xterm"
        assert desktop.pointer() == pointer, "a click of a view-only viewer moved the X pointer"
        assert focus(desktop) == focused
    finally:
        b.close()
