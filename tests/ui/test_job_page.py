"""A job's page as a daily tool, in a real browser: its log is followed while the job runs without the pane being
drawn again (the same element, the reader's place and an opened section kept across refreshes), stderr in its
own tab, ANSI colours as classes, search, the follow toggle pausing when the reader scrolls up, the raw log to
download (with the token only), and the dependencies and dependents linked."""
from playwright.sync_api import expect

from tests.helpers import wait_for

from .conftest import WAIT_MS, screenshot


def _gated_printer(tmp_path, lines: int) -> str:
    """A shell script: `lines` numbered lines (one red, one bold), an error line on stderr, then a line each time
    the gate file appears and is removed again, until the stop file appears."""
    gate, stop = tmp_path / "gate", tmp_path / "stop"
    return (f"i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo line $i; done; printf '\\033[31mred alert\\033[0m "
            f"\\033[1mbold\\033[0m plain\\n'; echo 'trouble on stderr' >&2; n=0; "
            f"while [ ! -e {stop} ]; do if [ -e {gate} ]; then n=$((n+1)); echo more $n; rm {gate}; fi; "
            f"sleep 0.05; done; echo done")


def test_a_running_jobs_log_is_followed_without_losing_the_readers_place(jobman, jobman_ui, page, tmp_path):
    job = jobman.run("sh", "-c", _gated_printer(tmp_path, 400), opts=["--name", "printer", "--separate-stderr"])
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{job}")
    log = page.get_by_test_id("log")
    expect(log).to_contain_text("bold plain", timeout=WAIT_MS)
    expect(log.locator("span.ansi-fg-1")).to_have_text("red alert")
    expect(log.locator("span.ansi-bold")).to_have_text("bold")
    assert "\x1b" not in log.text_content() and "\u241b" not in log.text_content()
    expect(page.get_by_test_id("log-follow")).to_be_checked()
    wait_for(lambda: page.evaluate("(() => { const p = document.querySelector('[data-testid=log]'); "
                                   "return p.scrollTop + p.clientHeight >= p.scrollHeight - 4; })()"),
             message="the pane to follow its end")
    page.evaluate("document.querySelector('[data-testid=log]').marked = true")  # gone if the pane is drawn again
    page.locator("[data-testid=spec-section] > summary").click()  # an opened section must stay open

    # the reader scrolls up: following pauses, and new lines do not move the pane
    page.evaluate("document.querySelector('[data-testid=log]').scrollTop = 200")
    expect(page.get_by_test_id("log-follow")).not_to_be_checked(timeout=WAIT_MS)
    for n in (1, 2):
        (tmp_path / "gate").touch()
        expect(log).to_contain_text(f"more {n}", timeout=WAIT_MS)
    assert page.evaluate("document.querySelector('[data-testid=log]').scrollTop") == 200
    assert page.evaluate("document.querySelector('[data-testid=log]').marked") is True
    assert page.locator("[data-testid=spec-section]").get_attribute("open") is not None
    screenshot(page, "jobman-log-pane")

    # search within the log: every match counted, the first one shown
    page.get_by_test_id("log-search").fill("more")
    expect(page.get_by_test_id("log-matches")).to_have_text("1 of 2")
    page.get_by_test_id("log-search").press("Enter")
    expect(page.get_by_test_id("log-matches")).to_have_text("2 of 2")
    assert page.evaluate("CSS.highlights.get('log-search').size") == 2
    page.get_by_test_id("log-search").fill("")

    # following again: the pane goes to the end and stays there as lines come
    page.get_by_test_id("log-follow").check()
    (tmp_path / "gate").touch()
    expect(log).to_contain_text("more 3", timeout=WAIT_MS)
    wait_for(lambda: page.evaluate("(() => { const p = document.querySelector('[data-testid=log]'); "
                                   "return p.scrollTop + p.clientHeight >= p.scrollHeight - 4; })()"),
             message="the pane at its end again")

    # stderr in its own tab
    page.get_by_test_id("log-tab-stderr").click()
    expect(page.get_by_test_id("log-stderr")).to_have_text("trouble on stderr\n", timeout=WAIT_MS)
    expect(log).to_be_hidden()
    assert page.get_by_test_id("log-download").get_attribute("href").endswith("log.txt?stderr=1")
    page.get_by_test_id("log-tab-stdout").click()

    (tmp_path / "stop").touch()
    expect(page.get_by_test_id("state")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(log).to_have_attribute("data-ended", "1", timeout=WAIT_MS)
    assert page.evaluate("document.querySelector('[data-testid=log]').marked") is True

    # the raw log, as stored: the browser's cookie gets it, a request without the token does not
    href = page.get_by_test_id("log-download").get_attribute("href")
    raw = page.context.request.get(dash.base + href)
    assert raw.status == 200 and "attachment" in raw.headers["content-disposition"]
    assert raw.body().startswith(b"line 1\nline 2\n") and b"\x1b[31mred alert\x1b[0m" in raw.body()
    assert raw.body().endswith(b"more 3\ndone\n")
    status, answer, _ = dash.request("GET", href, token=False)
    assert status == 403 and "token" in answer["error"]
    assert page.errors == []


def test_a_job_page_links_its_dependencies_and_dependents(jobman, jobman_ui, page):
    first = jobman.run("true", opts=["--name", "extract"])
    middle = jobman.run("true", opts=["--name", "transform", "--after-success", "extract"])
    last = jobman.run("true", opts=["--name", "load", "--after", "transform"])
    jobman.wait_finished(last)
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{middle}")
    expect(page.get_by_test_id("dependencies").locator("a")).to_have_text("1 extract", timeout=WAIT_MS)
    expect(page.get_by_test_id("dependents").locator("a")).to_have_text("3 load")
    expect(page.get_by_test_id("dependents")).to_contain_text("after end")
    page.get_by_test_id("dependents").locator("a").click()
    expect(page.get_by_test_id("job-title")).to_have_text("job 3 load", timeout=WAIT_MS)
    expect(page.get_by_test_id("dependencies").locator("a")).to_have_text("2 transform", timeout=WAIT_MS)
    page.go_back()
    expect(page.get_by_test_id("job-title")).to_have_text("job 2 transform", timeout=WAIT_MS)
    assert first in page.get_by_test_id("dependencies").locator("a").get_attribute("href")
