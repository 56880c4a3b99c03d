"""Other people's text is data: hostile names, commands and output render as text in both dashboards. A
state-changing request without the launch's token, or from another origin (a script, or a real page served from
another port of this host), is refused and changes nothing; the same request with the token, from the page's own
origin, goes through (so the refusals are the guard's, not a broken route). The page forbids inline scripts."""
import http.server
import subprocess
import threading

from playwright.sync_api import expect

from tests.helpers import wait_for
from tests.stado.e2e.support import Agent, machine_status, stado, submit

from .conftest import WAIT_MS, screenshot
from .dashboard import JOBMAN, STADO

HOSTILE_NAME = "<script>alert(1)</script>"
HOSTILE_OUTPUT = "<img src=x onerror=alert(2)> \x1b[31mred\x1b[0m <b>bold</b>"


def _no_markup_ran(page):
    assert page.dialogs == []  # no alert() ran
    assert page.locator("img").count() == 0
    assert page.locator("b").count() == 0
    assert page.locator("script").count() == page.evaluate("document.querySelectorAll('head script').length")


def test_hostile_name_command_and_output_show_as_text_in_jobman(jobman, jobman_ui, page):
    job = jobman.run("printf", "%s\\n", HOSTILE_OUTPUT, opts=["--name", HOSTILE_NAME])
    dependent = jobman.run("true", opts=["--name", "after-it", "--after", HOSTILE_NAME])
    jobman.wait_finished(dependent)
    dash = jobman_ui()
    page.goto(dash.url)
    row = page.locator(f"tr[data-job-id='{job}']")
    expect(row.locator("a.name")).to_have_text(HOSTILE_NAME, timeout=WAIT_MS)
    expect(row.locator("td.command")).to_contain_text("<img src=x onerror=alert(2)>")
    page.click("#tabs a[data-tab=graph]")
    expect(page.locator(f"g.node[data-job-id='{job}'] title")).to_have_text(f"1 {HOSTILE_NAME}: succeeded",
                                                                           timeout=WAIT_MS)
    page.click("#tabs a[data-tab=jobs]")
    row.locator("a.name").click()
    expect(page.get_by_test_id("job-title")).to_have_text(f"job 1 {HOSTILE_NAME}", timeout=WAIT_MS)
    # the colour sequence becomes a span with a class (the escape itself is gone); the markup stays text
    expect(page.get_by_test_id("log")).to_have_text("<img src=x onerror=alert(2)> red <b>bold</b>\n", timeout=WAIT_MS)
    expect(page.locator("[data-testid=log] span.ansi-fg-1")).to_have_text("red")
    screenshot(page, "jobman-hostile")
    _no_markup_ran(page)


def test_hostile_command_and_output_show_as_text_in_stado(stado_env, stado_ui, page, tmp_path):
    job = submit(stado_env, f"printf '%s\\n' '{HOSTILE_OUTPUT}'; echo '{HOSTILE_NAME}'", "--name", "hostile")
    agent = Agent(stado_env, tmp_path)
    try:
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="hostile")
    finally:
        agent.stop()
    dash = stado_ui()
    page.goto(dash.url)
    expect(page.locator(f"tr[data-testid=recent-row][data-job-id='{job}'] td.command")).to_contain_text(
        HOSTILE_NAME, timeout=WAIT_MS)
    page.goto(f"{dash.base}/#/job/{job}")
    expect(page.get_by_test_id("output")).to_have_text(
        f"<img src=x onerror=alert(2)> red <b>bold</b>\n{HOSTILE_NAME}\n", timeout=WAIT_MS)
    expect(page.locator("[data-testid=output] span.ansi-fg-1")).to_have_text("red")
    _no_markup_ran(page)


def test_state_changes_need_the_token_and_this_origin(jobman, jobman_ui):
    job = jobman.run("echo", "later", opts=["--name", "later", "--delay", "1h"])
    wait_for(lambda: jobman.state(job)["phase"] == "waiting", message="waiting")
    dash = jobman_ui()
    cancel = {"action": "cancel", "jobs": [job]}
    mine = f"http://127.0.0.1:{dash.port}"
    refused = [
        dash.request("POST", "/api/actions", cancel, token=False),                             # no token
        dash.request("POST", "/api/actions", cancel, token=False, headers={"cookie": f"{dash.cookie_name}=guess"}),
        dash.request("POST", "/api/actions", cancel, headers={"origin": "http://evil.example"}),
        dash.request("POST", "/api/actions", cancel, headers={"origin": f"http://127.0.0.1:{dash.port + 1}"}),
        dash.request("POST", "/api/actions", cancel, headers={"referer": "http://evil.example/page"}),
        dash.request("POST", "/api/actions", cancel, headers={"origin": "null"}),
        dash.request("POST", "/api/actions", cancel, headers={"host": "evil.example", "origin": "http://evil.example"}),
    ]
    for status, answer, _ in refused:
        assert status == 403 and answer["error"].startswith("refused"), (status, answer)
    assert jobman.state(job)["phase"] == "waiting"  # nothing changed
    status, answer, _ = dash.request("GET", "/api/jobs", token=False)
    assert status == 403  # a job's data is private too
    status, _, headers = dash.request("GET", "/api/jobs")
    assert status == 200
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    status, answer, _ = dash.request("POST", "/api/actions", cancel, headers={"origin": mine})
    assert status == 200, answer  # the same request from the page's own origin, with the token, goes through
    assert jobman.state(job)["outcome"] == "cancelled"


class _EvilPage(http.server.BaseHTTPRequestHandler):
    """A page on another port of this host that tries the classic cross-site request: a form-like POST (no
    preflight) carrying whatever cookies the browser would send."""

    target = ""

    def do_GET(self):
        body = (f"<html><body><script>fetch({self.target!r} + '/api/actions', {{method: 'POST', mode: 'no-cors', "
                f"credentials: 'include', headers: {{'content-type': 'text/plain'}}, body: JSON.stringify("
                f"{{action: 'cancel', jobs: [{self.job!r}]}})}}).then(() => document.title = 'sent', "
                f"() => document.title = 'failed');</script></body></html>").encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_page_from_another_origin_cannot_act_even_with_the_cookie_in_the_browser(jobman, jobman_ui, page):
    job = jobman.run("echo", "later", opts=["--name", "later", "--delay", "1h"])
    wait_for(lambda: jobman.state(job)["phase"] == "waiting", message="waiting")
    dash = jobman_ui()
    page.goto(dash.url)  # the browser now holds the dashboard's cookie (cookies ignore ports: the evil page's too)
    expect(page.get_by_test_id("job-row")).to_have_count(1, timeout=WAIT_MS)
    handler = type("Evil", (_EvilPage,), {"target": dash.base, "job": job})
    evil = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        expect(page).to_have_title("sent", timeout=WAIT_MS)  # the request left the browser
    finally:
        evil.shutdown()
        evil.server_close()
    assert jobman.state(job)["phase"] == "waiting"


def test_stado_pause_needs_the_token(stado_env, stado_ui):
    dash = stado_ui()
    status, _, _ = dash.request("POST", "/api/queue", {"action": "pause"}, token=False)
    assert status == 403
    status, _, _ = dash.request("POST", "/api/queue", {"action": "pause"}, headers={"origin": "http://evil.example"})
    assert status == 403
    assert "PAUSED" not in stado(stado_env, "status").stdout
    status, answer, _ = dash.request("POST", "/api/queue", {"action": "pause", "reason": "test"})
    assert status == 200, answer
    assert "PAUSED" in stado(stado_env, "status").stdout


def test_bad_input_and_a_warning_off_loopback(jobman, jobman_ui, stado_env):
    for argv, env in (([JOBMAN, "ui"], jobman.env), ([STADO, "ui"], stado_env)):
        result = subprocess.run([*argv, "--port", "70000"], env=env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "port" in result.stderr
    dash = jobman_ui()
    taken = subprocess.run([JOBMAN, "ui", "--port", str(dash.port)], env=jobman.env, capture_output=True, text=True,
                           timeout=30)
    assert taken.returncode == 2 and "choose another --port" in taken.stderr, taken.stderr
    exposed = jobman_ui("--host", "0.0.0.0")
    status, _, _ = exposed.request("GET", "/api/jobs")
    assert status == 200
    assert exposed.stop() == 0
    assert "warning: listening on 0.0.0.0" in exposed.stderr


def test_ctrl_c_stops_the_server_while_a_page_holds_its_streams(jobman, jobman_ui, page):
    import signal

    job = jobman.run("sh", "-c", "echo running; exec sleep 300", opts=["--name", "sleeper"])
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{job}")
    expect(page.get_by_test_id("log")).to_have_text("running\n", timeout=WAIT_MS)  # the log stream is open
    assert dash.stop(signal.SIGINT) == 0
    assert "Traceback" not in dash.stderr
