"""The dashboards' browser tests: the real `jobman ui` and `stado ui` commands as subprocesses, against real jobman
homes and a real stado agent on the local-directory store, driven in Debian's headless Chromium by Playwright's
Python package (never a browser of its own: `playwright install` cannot work here). No Chromium at
/usr/bin/chromium is a failure, not a skip: `make test` installs it (mk/ui-browser.mk).

Screenshots of the main views go to .cache/ui-screenshots/ (ignored by git): the test run's artifacts."""
import os
from pathlib import Path

import pytest

from tests.helpers import kill_all, pids_with_env, pids_with_marker
from tests.jobman.conftest import Jobman

from .dashboard import CHROMIUM, CHROMIUM_ARGS, JOBMAN, STADO, Dashboard

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".cache" / "ui-screenshots"
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
    kill_all(pids_with_env("STADO_CONFIG", stado_env["STADO_CONFIG"]) + pids_with_marker(str(tmp_path)))
