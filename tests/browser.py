"""A minimal headless-Chromium driver for the report tests: the DevTools protocol over
``--remote-debugging-pipe`` (fd 3 in, fd 4 out, NUL-separated JSON), standard library only.

Nothing is downloaded: it runs the Debian ``chromium`` package (``/usr/bin/chromium``, or
``$TRACELENS_CHROMIUM``). It records console messages, uncaught exceptions, log entries and
every network request the page makes, and can evaluate JavaScript and take screenshots.

As a script it renders a report to a PNG (used for ``docs/report.png``):
``python -m tests.browser report.html out.png [--width 1280] [--height 0] [--scale 1]``
(height 0 = the full page).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--disable-dev-shm-usage", "--remote-debugging-pipe",
    # Belt and braces: any host lookup fails, so a stray request can never leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND",
]


def find_chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    env = os.environ.get("TRACELENS_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for cand in ("/usr/bin/chromium", "/usr/lib/chromium/chromium", "chromium",
                 "chromium-browser"):
        path = shutil.which(cand) if "/" not in cand else (cand if Path(cand).exists() else None)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process and one page (tab) attached with a flat session."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900,
                 timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="tracelens-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4. Copies of the child's
        # pipe ends at fd >= 10 are moved to 3 and 4 in the child, so nothing collides.
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def move_fds() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(3, 4), preexec_fn=move_fds)
        os.close(hi_r)
        os.close(hi_w)
        self._stderr: list[bytes] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self._next_id = 0
        self._buf = b""
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.send("Target.attachToTarget", {
            "targetId": target["targetId"], "flatten": True}, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    # -- protocol ------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                err = b"".join(self._stderr[-20:]).decode(errors="replace")
                raise BrowserError(f"Chromium closed the pipe: {err}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: bool = True, timeout: float | None = None) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            ev = self._read_message(deadline)
            if "method" in ev:
                self.events.append(ev)
                if ev["method"] == method:
                    return ev

    # -- page ----------------------------------------------------------------------------------
    def open(self, url: str, ready_js: str | None = None, timeout: float | None = None) -> None:
        """Navigate and wait for the load event (and ``ready_js`` to be truthy, if given)."""
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)
        if ready_js:
            deadline = time.monotonic() + (timeout or self.timeout)
            while not self.evaluate(ready_js):
                if time.monotonic() > deadline:
                    raise BrowserError(f"page never became ready ({ready_js})")
                time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise BrowserError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions and error log entries so far."""
        out = []
        for ev in self.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning",
                                                                      "assert"):
                out.append(f"console.{p['type']}: "
                           + " ".join(str(a.get("value", a.get("description")))
                                      for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"exception: {d.get('exception', {}).get('description') or d}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error",
                                                                                "warning"):
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def requests(self) -> list[str]:
        """URLs of every request the page started (the document itself included)."""
        return [ev["params"]["request"]["url"] for ev in self.events
                if ev["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, full_page: bool = True, height: int | None = None,
                   scale: float = 1.0) -> None:
        params: dict[str, Any] = {"format": "png"}
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        h = size["height"] if full_page else (height or metrics["cssLayoutViewport"][
            "clientHeight"])
        if height:
            h = min(h, height)
        params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": h, "scale": scale}
        params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params, timeout=60)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)


def main() -> None:  # pragma: no cover - a helper for docs/report.png
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("png", type=Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=0, help="clip height (0: full page)")
    ap.add_argument("--scale", type=float, default=1.0, help="output scale (0.75: smaller PNG)")
    args = ap.parse_args()
    exe = find_chromium()
    if not exe:
        raise SystemExit("chromium not found (apt-get install chromium)")
    b = Browser(exe, width=args.width)
    try:
        b.open(args.report.resolve().as_uri(), "window.__tracelensReady === true")
        b.screenshot(args.png, full_page=True, height=args.height or None, scale=args.scale)
    finally:
        b.close()


if __name__ == "__main__":  # pragma: no cover
    main()
