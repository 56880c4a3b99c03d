"""Layout and feedback in a real browser: a 153-character name and a name with a right-to-left override do not
wreck the table (an ellipsis and the whole name as its title; bidi controls escaped as the CLI escapes them), the
table holds at 800 px, a refresh never moves the keyboard focus, the system's dark scheme is honoured, cancelling
a page of jobs gives one summary notice, and a group's limit is set from the page with its slot holders linked."""
import json

from playwright.sync_api import expect

from tests.helpers import wait_for

from .conftest import WAIT_MS, screenshot

LONG = "a-very-long-experiment-name-" + "x" * 110 + "-with-suffix-01"  # 153 characters
TRICKY = "invoice\u202egpj.exe"  # shows as "invoiceexe.jpg" if the override is obeyed


def test_long_and_bidi_names_at_800_px_in_the_dark_and_focus_kept(jobman, jobman_ui, browser, tmp_path):
    assert len(LONG) == 153
    long = jobman.run("true", opts=["--name", LONG])
    tricky = jobman.run("true", opts=["--name", TRICKY])
    jobman.wait_finished(tricky)
    dash = jobman_ui()
    context = browser.new_context(viewport={"width": 800, "height": 700}, color_scheme="dark")
    page = context.new_page()
    try:
        page.goto(dash.url)
        name = page.locator(f"tr[data-job-id='{long}'] a.name")
        expect(name).to_have_attribute("title", LONG, timeout=WAIT_MS)
        cell = page.locator(f"tr[data-job-id='{long}'] td.name-cell")
        assert cell.evaluate("c => c.scrollWidth > c.clientWidth")  # cut, with an ellipsis
        assert cell.evaluate("c => getComputedStyle(c).textOverflow") == "ellipsis"
        assert page.evaluate("document.documentElement.scrollWidth") <= 800  # the page holds at 800 px
        expect(page.locator(f"tr[data-job-id='{tricky}'] a.name")).to_have_text("invoice\\u202egpj.exe")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(18, 21, 28)"
        screenshot(page, "jobman-800px-dark")

        box = page.locator(f"tr[data-job-id='{tricky}'] input[type=checkbox]")
        box.focus()
        focused = "(() => { const a = document.activeElement; return [a.type, a.closest('tr')?.dataset.jobId]; })()"
        assert page.evaluate(focused) == ["checkbox", tricky]
        another = jobman.run("true", opts=["--name", "another"])  # a change: the page refreshes
        expect(page.locator(f"tr[data-job-id='{another}']")).to_have_count(1, timeout=WAIT_MS)
        jobman.wait_finished(another)
        expect(page.locator(f"tr[data-job-id='{another}'] [data-testid=state]")).to_have_text("succeeded",
                                                                                          timeout=WAIT_MS)
        assert page.evaluate(focused) == ["checkbox", tricky]  # the same control of the same row still has it
    finally:
        context.close()


def test_cancelling_a_page_of_jobs_gives_one_notice(jobman, jobman_ui, page):
    jobman("group", "set", "parked", "--limit", "0", check=True)
    jobs = [jobman.run("true", opts=["--name", f"parked-{n}", "--group", "parked"]) for n in range(25)]
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("job-row")).to_have_count(25, timeout=WAIT_MS)
    page.get_by_test_id("select-page").check()
    page.click("button[data-action=cancel]")
    expect(page.get_by_test_id("confirm-yes")).to_have_text("Cancel job (25)")
    expect(page.get_by_test_id("confirm-no")).to_have_text("Keep running")
    expect(page.get_by_test_id("confirm")).to_contain_text("and 13 more")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("notice")).to_have_count(1, timeout=WAIT_MS)
    expect(page.get_by_test_id("notice")).to_contain_text("Cancel: 25 jobs")
    wait_for(lambda: all(jobman.state(j)["outcome"] == "cancelled" for j in jobs), message="all 25 cancelled")


def test_a_groups_limit_is_set_from_the_page_and_its_holders_are_links(jobman, jobman_ui, page, tmp_path):
    gate = tmp_path / "gate"
    jobman("group", "set", "gpu", "--limit", "1", check=True)
    holder = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done", opts=["--name", "holder",
                                                                                          "--group", "gpu"])
    queued = jobman.run("true", opts=["--name", "queued", "--group", "gpu"])
    wait_for(lambda: jobman.state(holder)["phase"] == "running", message="the holder to run")
    dash = jobman_ui()
    page.goto(f"{dash.url}#/groups")
    row = page.locator("tr[data-group=gpu]")
    expect(row.get_by_test_id("holder")).to_have_text("1 holder", timeout=WAIT_MS)
    row.get_by_test_id("group-limit").fill("2")
    row.locator("button[data-action=set-limit]").click()
    expect(page.get_by_test_id("notice")).to_contain_text("group gpu: limit 2", timeout=WAIT_MS)
    groups = {g["name"]: g for g in json.loads(jobman("group", "list", "--json", check=True).stdout)}
    assert groups["gpu"]["limit"] == 2
    jobman.wait_finished(queued)  # the new slot let it start
    row.get_by_test_id("group-limit").fill("-1")
    row.get_by_test_id("group-limit").press("Enter")
    expect(page.get_by_test_id("notice").last).to_contain_text("bad limit -1", timeout=WAIT_MS)
    screenshot(page, "jobman-groups-limit")
    row.get_by_test_id("group-graph").click()  # the pipelines of the group's jobs: two lone jobs here
    expect(page.get_by_test_id("pipeline-title")).to_have_text("Group gpu: 2 jobs", timeout=WAIT_MS)
    expect(page.locator("g.node")).to_have_count(2)
    page.go_back()
    expect(row.get_by_test_id("holder")).to_have_text("1 holder", timeout=WAIT_MS)  # the other one ended
    row.get_by_test_id("holder").click()
    expect(page.get_by_test_id("job-title")).to_have_text("job 1 holder", timeout=WAIT_MS)
    gate.touch()
    jobman.wait_finished(holder)
