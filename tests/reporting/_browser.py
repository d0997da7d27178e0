"""A headless Chromium driven over the DevTools protocol, with only the stdlib.

Why not ``--dump-dom`` and stderr logging: Chromium's log format and verbosity
change between versions, so "no console error" proven by scanning stderr can pass
vacuously. The DevTools protocol reports console calls, uncaught exceptions,
browser-side errors (CSP violations, failed loads) and every network request as
structured events, and lets the test ask the live DOM what it shows. The tiny
websocket client below is enough for that and avoids a test dependency.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)


def find_chromium() -> str | None:
    explicit = os.environ.get("EVOMEMORY_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class WebSocket:
    """Client side of RFC 6455, text frames only: what the DevTools endpoint speaks."""

    def __init__(self, host: str, port: int, path: str, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the websocket handshake")
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {status.decode(errors='replace')}")
        self.buffer = rest

    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(max(65536, count - len(self.buffer)))
            if not chunk:
                raise ConnectionError("DevTools closed the websocket")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        length = len(payload)
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._read(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._read(8))
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


@dataclass
class PageLoad:
    """What happened while a page loaded, and questions asked of it afterwards."""

    url: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


class Browser:
    def __init__(self, ws: WebSocket, timeout: float) -> None:
        self.ws = ws
        self.timeout = timeout
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.receive())
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)
        raise TimeoutError(f"no DevTools answer to {method} within {self.timeout}s")

    def _wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method} did not arrive within {self.timeout}s")
            self.events.append(json.loads(self.ws.receive()))

    def load(self, path: Path, facts: dict[str, str], *, width: int = 1280, settle: float = 0.3) -> PageLoad:
        """Open ``path`` in a fresh tab, record errors and requests, evaluate ``facts`` (JS expressions)."""
        url = path.resolve().as_uri()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable", session=session)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            self.events.clear()
            self.call("Page.navigate", {"url": url}, session=session)
            self._wait_for("Page.loadEventFired", session)
            # Late console messages (timers, deferred errors) still get a chance to arrive.
            self.call("Runtime.evaluate", {"expression": f"new Promise(r => setTimeout(r, {int(settle * 1000)}))", "awaitPromise": True}, session=session)
            load = PageLoad(url)
            for name, expression in facts.items():
                # a fact may be a promise (the drill-down draws its pages asynchronously)
                result = self.call(
                    "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=session
                )
                if "exceptionDetails" in result:
                    raise RuntimeError(f"fact {name!r} raised: {result['exceptionDetails']}")
                load.facts[name] = result["result"].get("value")
            shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
            load.screenshot = base64.b64decode(shot["data"])
            for event in self.events:
                if event.get("sessionId") != session:
                    continue
                load.errors += _errors_of(event)
                if event.get("method") == "Network.requestWillBeSent":
                    load.requests.append(event["params"]["request"]["url"])
            return load
        finally:
            self.call("Target.closeTarget", {"targetId": target})


def _errors_of(event: dict[str, Any]) -> list[str]:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        return [f"uncaught: {details.get('exception', {}).get('description') or details.get('text')}"]
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
        texts = [str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])]
        return [f"console.{params['type']}: {' '.join(texts)}"]
    if method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
        entry = params["entry"]
        return [f"log {entry.get('source')}/{entry['level']}: {entry.get('text')} {entry.get('url', '')}".rstrip()]
    if method == "Network.loadingFailed":
        return [f"load failed: {params.get('errorText')}"]
    return []


@contextmanager
def launch(executable: str, timeout: float = 30.0) -> Iterator[Browser]:
    """One headless Chromium with a throwaway profile; killed and cleaned up on exit.

    Chromium runs in its own process group: its helper processes (zygote,
    renderer, crash handler) outlive the main one for a moment and keep writing to
    the profile, so the whole group is stopped before the profile is removed. A
    straggler's last write must not fail the test either (ignore_cleanup_errors).
    """
    with tempfile.TemporaryDirectory(prefix="evomemory-chromium-", ignore_cleanup_errors=True) as scratch:
        profile, log_path = Path(scratch) / "profile", Path(scratch) / "stderr.log"
        # stderr goes to a file: a pipe nobody reads can fill up and stall the browser.
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        ws: WebSocket | None = None
        try:
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
                if process.poll() is not None or time.monotonic() > deadline:
                    stderr = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"chromium did not open its DevTools port (exit {process.poll()}): {stderr}")
                time.sleep(0.05)
            port, path = port_file.read_text().splitlines()[:2]
            ws = WebSocket("127.0.0.1", int(port), path, timeout)
            yield Browser(ws, timeout)
        finally:
            if ws is not None:
                ws.close()
            _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to Chromium's process group, SIGKILL to whatever is left after 10 s."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
