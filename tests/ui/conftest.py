"""The dashboards' browser tests: the real `jobman ui` and `stado ui` commands as subprocesses, against real jobman
homes and a real stado agent on the local-directory store, driven in Debian's headless Chromium by Playwright's
Python package (never a browser of its own: `playwright install` cannot work here). No Chromium at
/usr/bin/chromium is a failure, not a skip: `make test` installs it (mk/ui-browser.mk).

Screenshots of the main views go to .cache/ui-screenshots/ (ignored by git): the test run's artifacts."""
import json
import os
import select
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import kill_all, pids_with_env
from tests.jobman.conftest import JOBMAN, Jobman

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".cache" / "ui-screenshots"
STADO = str(Path(JOBMAN).with_name("stado"))
WAIT_MS = 15_000  # a page's bound for what it must show (Playwright polls the condition until then)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (mk/ui-browser.mk)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh browser context (its own cookies) and page; every dialog the page opens is recorded (a script that
    ran from a job's name would open one) and dismissed."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.dialogs = []
    page.errors = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


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


@pytest.fixture
def jobman(tmp_path):
    jm = Jobman(tmp_path / "home")
    yield jm
    kill_all(jm.processes())


@pytest.fixture
def jobman_ui(jobman):
    """Start `jobman ui` on the test's home (call it once jobs exist, or before: the page follows)."""
    started = []

    def start(*args) -> Dashboard:
        dash = Dashboard([JOBMAN, "ui", *args], jobman.env)
        started.append(dash)
        return dash

    yield start
    for dash in started:
        assert dash.stop() == 0, dash.stderr


@pytest.fixture
def stado_env(tmp_path):
    from tests.stado.storekit import make_target

    return make_target("file", tmp_path).subprocess_env(tmp_path / "stado-env")


@pytest.fixture
def stado_ui(stado_env, tmp_path):
    started = []

    def start(*args) -> Dashboard:
        dash = Dashboard([STADO, "ui", *args], stado_env)
        started.append(dash)
        return dash

    yield start
    for dash in started:
        assert dash.stop() == 0, dash.stderr
    kill_all(pids_with_env("STADO_CONFIG", stado_env["STADO_CONFIG"]))
