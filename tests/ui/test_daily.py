"""The dashboards as a daily tool, in a real browser: every view is addressable (filters, search, page and the open
job in the address; reload and Back restore them), a server restart with a token file keeps the page working and
one without tells the page plainly (and a reload with the old token gets a readable page), notices are one per
message and go away, and stado tells a batch of jobs apart by name or by a tail of their ids."""
import os

from playwright.sync_api import expect

from tests.helpers import wait_for
from tests.stado.e2e.support import submit

from .conftest import WAIT_MS, screenshot
from .dashboard import JOBMAN, Dashboard


def test_filters_search_and_page_live_in_the_address(jobman, jobman_ui, page):
    ok = [jobman.run("true", opts=["--name", f"fine-{n}"]) for n in range(3)]
    bad = [jobman.run("false", opts=["--name", f"broken-{n}"]) for n in range(2)]
    for job in ok + bad:
        jobman.wait_finished(job)
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("job-row")).to_have_count(5, timeout=WAIT_MS)
    page.click("[data-state=failed]")
    expect(page.get_by_test_id("job-row")).to_have_count(2, timeout=WAIT_MS)
    assert "state=failed" in page.url
    page.get_by_test_id("search").fill("broken-1")
    page.get_by_test_id("search").press("Enter")
    expect(page.get_by_test_id("job-row")).to_have_count(1, timeout=WAIT_MS)
    assert "q=broken-1" in page.url

    page.reload()  # the address alone restores the view
    expect(page.get_by_test_id("job-row")).to_have_count(1, timeout=WAIT_MS)
    expect(page.get_by_test_id("search")).to_have_value("broken-1")
    expect(page.locator("[data-state=failed]")).to_have_class("chip on")
    page.go_back()
    expect(page.get_by_test_id("job-row")).to_have_count(2, timeout=WAIT_MS)
    expect(page.get_by_test_id("search")).to_have_value("")
    page.go_back()
    expect(page.get_by_test_id("job-row")).to_have_count(5, timeout=WAIT_MS)

    # the Graph tab keeps the filter; the open job is in the address too, and a shared link opens it
    page.go_forward()
    expect(page.get_by_test_id("job-row")).to_have_count(2, timeout=WAIT_MS)
    page.click("#tabs a[data-tab=graph]")
    expect(page.locator("g.node[data-state=failed]")).to_have_count(2, timeout=WAIT_MS)
    expect(page.locator("g.node[data-state=succeeded]")).to_have_count(0)
    other = page.context.new_page()
    other.goto(f"{dash.base}/#/job/{bad[0]}")
    expect(other.get_by_test_id("job-title")).to_have_text("job 4 broken-0", timeout=WAIT_MS)
    assert page.errors == []


def _restartable(jobman, port: int, token_file=None) -> Dashboard:
    env = dict(jobman.env)
    if token_file is not None:
        env["JOBMAN_UI_TOKEN_FILE"] = str(token_file)
    return Dashboard([JOBMAN, "ui", "--port", str(port)], env)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_restart_with_a_token_file_keeps_the_page_and_one_without_says_so(jobman, page, tmp_path):
    job = jobman.run("true", opts=["--name", "kept"])
    jobman.wait_finished(job)
    port, token_file = _free_port(), tmp_path / "ui-token"
    dash = _restartable(jobman, port, token_file)
    try:
        assert oct(os.stat(token_file).st_mode & 0o777) == "0o600"
        page.goto(dash.url)
        expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
        assert dash.stop() == 0
        expect(page.locator("#live")).to_contain_text("reconnecting", timeout=WAIT_MS)
        dash = _restartable(jobman, port, token_file)  # the same token: the page carries on by itself
        assert dash.url.endswith(token_file.read_text().strip())
        expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
        expect(page.get_by_test_id("job-row")).to_have_count(1)
        assert page.get_by_test_id("restarted").count() == 0
        old_url = dash.url
    finally:
        assert dash.stop() == 0

    dash = _restartable(jobman, port)  # no token file: a new token
    try:
        expect(page.get_by_test_id("restarted")).to_contain_text("open the URL it printed", timeout=WAIT_MS)
        expect(page.locator("#live")).to_contain_text("restarted")
        screenshot(page, "jobman-restarted")
        stale = page.context.new_page()
        stale.goto(old_url)  # the old printed URL: a readable page, not JSON
        expect(stale.locator("h1")).to_have_text("This dashboard did not accept the address")
        expect(stale.locator("body")).to_contain_text("open the URL it printed")
        page.reload()  # the open page's reload: its cookie is stale too; a readable page again
        expect(page.locator("h1")).to_have_text("This dashboard did not accept the address")
        assert "application/json" not in page.evaluate("document.contentType")
        stale.goto(dash.url)  # the new one works (and gives the context the new cookie)
        expect(stale.get_by_test_id("job-row")).to_have_count(1, timeout=WAIT_MS)
    finally:
        assert dash.stop() == 0


def test_a_token_file_that_holds_no_token_is_refused_in_one_line(jobman, tmp_path):
    import subprocess

    bad = tmp_path / "token"
    bad.write_text("short\n")
    done = subprocess.run([JOBMAN, "ui"], env={**jobman.env, "JOBMAN_UI_TOKEN_FILE": str(bad)},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "holds no usable token" in done.stderr


def test_notices_are_one_per_message_dismissable_and_go_away(jobman, jobman_ui, page):
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    for _ in range(3):
        page.evaluate("UI.notice('reading failed: disk full', 'error')")
    page.evaluate("UI.notice('saved')")
    notices = page.get_by_test_id("notice")
    expect(notices).to_have_count(2)
    expect(notices.first).to_contain_text("reading failed: disk full ×3")
    notices.first.locator("button.close").click()
    expect(notices).to_have_count(1)
    expect(notices).to_have_count(0, timeout=WAIT_MS)  # the other one went away by itself


def test_stado_tells_a_batch_apart(stado_env, stado_ui, page):
    batch = [submit(stado_env, f"echo {n}") for n in range(4)]
    named = submit(stado_env, "echo named", "--name", "the-named-one")
    dash = stado_ui()
    page.goto(dash.url)
    links = page.locator("[data-testid=queue-row] [data-testid=job-link]")
    expect(links).to_have_count(5, timeout=WAIT_MS)
    shown = {link.get_attribute("title"): link.text_content() for link in links.all()}
    assert set(shown) == set(batch) | {named}
    assert len(set(shown.values())) == 5  # every short form differs
    assert all(job.replace("-", "").endswith(shown[job]) for job in shown)  # the tail of its id
    page.locator(f"tr[data-job-id='{batch[0]}'] input[type=checkbox]").check()
    page.locator(f"tr[data-job-id='{named}'] input[type=checkbox]").check()
    page.click("button[data-action=cancel]")
    confirm = page.get_by_test_id("confirm")
    expect(confirm).to_contain_text("the-named-one (queued)")  # a name first
    expect(confirm).to_contain_text(f"{shown[batch[0]]} (queued)")  # else the tail
    expect(page.get_by_test_id("confirm-yes")).to_have_text("Cancel 2 jobs")
    expect(page.get_by_test_id("confirm-no")).to_have_text("Keep it")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("notice")).to_have_count(1, timeout=WAIT_MS)  # one summary for the two
    expect(page.get_by_test_id("notice")).to_contain_text("Cancel: 2 jobs")
    # the tail the page shows finds the job in the search box
    page.get_by_test_id("search").fill(shown[batch[1]])
    page.get_by_test_id("search").press("Enter")
    expect(page.get_by_test_id("queue-row")).to_have_count(1, timeout=WAIT_MS)
    wait_for(lambda: "q=" in page.url, message="the search in the address")
    assert page.errors == []


def test_a_change_redraws_only_its_row_and_an_idle_page_asks_nothing(jobman, jobman_ui, page):
    later = [jobman.run("true", opts=["--name", f"later-{n}", "--delay", "1h"]) for n in range(3)]
    for job in later:
        wait_for(lambda job=job: jobman.state(job)["phase"] == "waiting", message="waiting")
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("job-row")).to_have_count(3, timeout=WAIT_MS)
    expect(page.locator("#live")).to_have_text("live", timeout=WAIT_MS)
    page.evaluate("document.querySelectorAll('[data-testid=job-row]').forEach(r => r.marked = r.dataset.jobId)")
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    page.wait_for_timeout(1500)  # the stream's first event, on connecting, may still bring one fetch
    asked.clear()
    page.wait_for_timeout(4000)  # idle: no change, so no request (the event stream is already open)
    assert asked == []
    jobman("cancel", later[1], check=True)
    expect(page.locator(f"tr[data-job-id='{later[1]}'] [data-testid=state]")).to_have_text("cancelled",
                                                                                         timeout=WAIT_MS)
    marked = page.evaluate("[...document.querySelectorAll('[data-testid=job-row]')].map(r => r.marked || null)")
    assert marked == [later[2], None, later[0]]  # newest first: only the cancelled job's row was drawn again
    assert [u for u in asked if "/api/jobs" in u] and len(asked) <= 3


def test_stado_board_is_not_refetched_at_every_agent_pulse(stado_env, stado_ui, page, tmp_path):
    from tests.stado.e2e.support import Agent

    gate = tmp_path / "gate"
    job = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done", "--name", "runner")
    agent = Agent(stado_env, tmp_path)
    try:
        dash = stado_ui()
        page.goto(dash.url)
        expect(page.locator(f"tr[data-testid=running-row][data-job-id='{job}']")).to_have_count(1, timeout=WAIT_MS)
        boards = []
        page.on("request", lambda r: boards.append(r.url) if "/api/board" in r.url else None)
        page.wait_for_timeout(4000)  # the agent pulses and renews its lease meanwhile
        assert len(boards) <= 1, boards
        gate.touch()  # a real change: the job ends, the board is fetched and the job moves to the recent table
        expect(page.locator(f"tr[data-testid=recent-row][data-job-id='{job}']")).to_have_count(1, timeout=WAIT_MS)
    finally:
        agent.stop()
