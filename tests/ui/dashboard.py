"""A dashboard under test: `jobman ui` or `stado ui` as a subprocess, the URL it printed, requests made as a
script would, and a stop that must be clean. Kept apart from conftest.py so that bench/ui_bench.py uses it too."""
import json
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
JOBMAN, STADO = str(BIN / "jobman"), str(BIN / "stado")
CHROMIUM = "/usr/bin/chromium"  # Debian's (mk/ui-browser.mk): Playwright drives it by its path
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Dashboard:
    """A `jobman ui` or `stado ui` subprocess: the URL it printed, requests to it, and a stop that must be clean."""

    def __init__(self, argv: list[str], env: dict, timeout: float = 20.0):
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = self._printed_url(timeout)
        self.base = self.url.split("/?", 1)[0]
        self.token = self.url.split("token=", 1)[1]
        self.port = int(self.base.rsplit(":", 1)[1])

    def _printed_url(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if "http://" in line:
                    return line.split()[-1]
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        self.proc.wait()
        error = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        raise AssertionError(f"the dashboard printed no URL: {error}")

    def request(self, method: str, path: str, body=None, headers=None, token: bool = True):
        """(status, JSON answer) of a request made as a script would (urllib: no browser, no cookie)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"content-type": "application/json", **(headers or {})})
        if token:
            request.add_header("cookie", f"{self.cookie_name}={self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null"), response.headers
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null"), e.headers

    @property
    def cookie_name(self) -> str:
        return f"{Path(self.proc.args[0]).name}_ui_{self.port}"

    def stop(self, sig=signal.SIGTERM) -> int:
        """Stops it as Ctrl-C (SIGINT) or a service manager (SIGTERM) would; it must exit 0 within a few seconds
        even while a page holds its event streams open."""
        if self.proc.stdout.closed:  # stopped already
            return self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.stderr = self.proc.stderr.read()
            self.proc.stdout.close()
            self.proc.stderr.close()
