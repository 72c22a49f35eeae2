"""Open a local HTML file in real headless Chromium, offline, and report: console errors,
uncaught exceptions, log errors, network requests that left the machine, and the rendered charts
(per `.vega-embed` container: its SVG, its size and its count of data marks).

Standard library only: Chromium's DevTools protocol over --remote-debugging-pipe (JSON messages
ending in NUL on file descriptors 3 (to Chromium) and 4 (from Chromium)), so no websocket
client, no playwright, no chromedriver."""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = ("no Chromium found: apt-get install chromium-headless-shell (or set "
                "TOKCOLUMNAR_CHROMIUM=/path/to/binary)")


def find_chromium() -> str | None:
    """TOKCOLUMNAR_CHROMIUM, else the first of CANDIDATES on PATH."""
    env = os.environ.get("TOKCOLUMNAR_CHROMIUM")
    if env:
        return env
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


# what the page must show: per .vega-embed container, its svg and how many mark elements
PROBE = """(() => {
  const charts = [...document.querySelectorAll('.vega-embed')].map(el => {
    const svg = el.querySelector('svg.marks');
    const canvas = el.querySelector('canvas');
    const box = (svg || canvas) ? (svg || canvas).getBoundingClientRect() : {width: 0, height: 0};
    // data marks only: Vega puts them in <g class="mark-... role-mark ...">; axes, legends
    // and titles are role-axis-*, role-legend-*, role-title
    const marks = svg ? svg.querySelectorAll('g.role-mark > *').length : 0;
    return {id: el.id, svg: !!svg, canvas: !!canvas, width: box.width, height: box.height, marks};
  });
  return {rendered: document.body.dataset.chartsRendered || null,
          error: document.body.dataset.chartsError || null, charts};
})()"""


class Cdp:
    """A minimal DevTools client over the pipe."""

    def __init__(self, binary: str, profile: str) -> None:
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                 "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps", "--mute-audio",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 # nothing may leave the machine: every host name fails to resolve
                 "--host-resolver-rules=MAP * ~NOTFOUND", "about:blank"]
        # the child must see our pipe ends as its fds 3 and 4: bash moves them there (dash
        # refuses fds above 9 in n<&m; Popen closes fds 3 and 4 after a preexec_fn's dup2)
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', "bash",
             binary, *flags],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(to_chrome_r, from_chrome_w))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self._next += 1
        msg: dict = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for m in self._read(deadline):
                if m.get("id") == self._next:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self.events.append(m)

    def pump(self, seconds: float) -> None:
        """Collect events for a while."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.events.extend(self._read(deadline))

    def _read(self, deadline: float) -> list[dict]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from Chromium")
        ready, _, _ = select.select([self._r], [], [], min(left, 0.2))
        if not ready:
            return []
        chunk = os.read(self._r, 1 << 20)
        if not chunk:
            raise RuntimeError("Chromium closed the pipe: "
                               + self.proc.stderr.read().decode(errors="replace")[-2000:])
        self._buf += chunk
        *msgs, self._buf = self._buf.split(b"\0")
        return [json.loads(m) for m in msgs]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def check_page(path: str | Path, timeout: float = 60.0, screenshot: str | None = None,
               width: int = 1280) -> dict:
    """Load `path` and wait until the page sets `chartsRendered` or `chartsError` (or
    `timeout`); with `screenshot`, save a full-page PNG there."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    url = Path(path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="tc-chromium-") as profile:
        cdp = Cdp(binary, profile)
        try:
            target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            sid = cdp.send("Target.attachToTarget",
                           {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                cdp.send(f"{domain}.enable", session=sid)
            cdp.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900,
                     "deviceScaleFactor": 1, "mobile": False}, session=sid)
            cdp.send("Page.navigate", {"url": url}, session=sid)
            deadline = time.monotonic() + timeout
            state: dict = {}
            while time.monotonic() < deadline:
                state = cdp.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                 session=sid)["result"].get("value") or {}
                if state.get("rendered") or state.get("error"):
                    break
                cdp.pump(0.2)
            cdp.pump(0.3)  # late console messages
            if screenshot:
                metrics = cdp.send("Page.getLayoutMetrics", session=sid)["cssContentSize"]
                shot = cdp.send("Page.captureScreenshot", {
                                "format": "png", "captureBeyondViewport": True,
                                "clip": {"x": 0, "y": 0, "width": metrics["width"],
                                         "height": metrics["height"], "scale": 1}}, session=sid)
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        finally:
            cdp.close()
    errors = []
    requests = []
    for ev in cdp.events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console." + p["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            errors.append("exception: "
                          + d.get("exception", {}).get("description", d.get("text", "")))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append("log: " + p["entry"].get("text", ""))
        elif m == "Network.requestWillBeSent":
            requests.append(p.get("request", {}).get("url", ""))
    remote = [u for u in requests if not u.startswith(("file:", "data:", "about:", "blob:"))]
    return {"binary": binary, "errors": errors, "remote_requests": remote, **state}

