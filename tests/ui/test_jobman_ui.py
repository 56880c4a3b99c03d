"""`jobman ui` in a real browser against real pipelines: the graph shows a failure, a click opens the failed job
and its log, a waiting job is cancelled from the page and turns `cancelled` without a reload, a running job's log
grows on its page while it prints, and the other views (timeline, groups, a lost job's processes)."""
import re

from playwright.sync_api import expect

from tests.helpers import wait_for

from .conftest import WAIT_MS, screenshot


def _pipeline(jobman) -> dict:
    """Six jobs: a chain with a fan-out, one failing branch (its dependent ends dependency_failed), a job that runs
    after the end of that one whatever happened, and one that waits an hour."""
    ids = {"prepare": jobman.run("sh", "-c", "echo preparing data", opts=["--name", "prepare"])}
    ids["train_a"] = jobman.run("sh", "-c", "echo training a", opts=["--name", "train_a", "--after-success", "prepare"])
    ids["train_b"] = jobman.run("sh", "-c", "echo 'diverged at step 7' >&2; echo boom; exit 3",
                                opts=["--name", "train_b", "--after-success", "prepare"])
    ids["evaluate"] = jobman.run("echo", "evaluating", opts=["--name", "evaluate", "--after-success", "train_a",
                                                            "--after-success", "train_b"])
    ids["report"] = jobman.run("echo", "report", opts=["--name", "report", "--after", "evaluate"])
    ids["nightly"] = jobman.run("echo", "later", opts=["--name", "nightly", "--delay", "1h"])
    for name in ("prepare", "train_a", "train_b", "evaluate", "report"):
        jobman.wait_finished(ids[name])
    assert jobman.state(ids["train_b"])["outcome"] == "failed"
    assert jobman.state(ids["evaluate"])["outcome"] == "dependency_failed"
    wait_for(lambda: jobman.state(ids["nightly"])["phase"] == "waiting", message="nightly to wait for its time")
    return ids


def test_pipeline_graph_failed_job_log_and_cancel_without_reload(jobman, jobman_ui, page):
    ids = _pipeline(jobman)
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("job-row")).to_have_count(6, timeout=WAIT_MS)
    assert "token" not in page.url  # traded for the cookie, gone from the address bar
    screenshot(page, "jobman-list")

    page.click("#tabs a[data-tab=graph]")
    failed = page.locator(f"g.node[data-job-id='{ids['train_b']}']")
    expect(failed).to_have_attribute("data-state", "failed", timeout=WAIT_MS)
    expect(page.locator(f"g.node[data-job-id='{ids['evaluate']}']")).to_have_attribute("data-state", "dependency_failed")
    expect(page.locator("g.edge")).to_have_count(5)  # prepare to both branches, both to evaluate, evaluate to report
    expect(page.locator("g.edge[data-condition=end] text")).to_have_text("after end")
    screenshot(page, "jobman-graph")

    failed.click()
    expect(page.get_by_test_id("job-title")).to_have_text("job 3 train_b", timeout=WAIT_MS)
    expect(page.get_by_test_id("log")).to_contain_text("boom", timeout=WAIT_MS)
    expect(page.get_by_test_id("log")).to_contain_text("diverged at step 7")
    expect(page.get_by_test_id("attempts")).to_contain_text("failed")
    screenshot(page, "jobman-job")

    page.click("#tabs a[data-tab=timeline]")
    expect(page.locator(f"g.trow[data-job-id='{ids['train_b']}'] rect.attempt")).to_have_attribute(
        "data-outcome", "failed", timeout=WAIT_MS)
    screenshot(page, "jobman-timeline")

    page.click("#tabs a[data-tab=jobs]")
    row = page.locator(f"tr[data-job-id='{ids['nightly']}']")
    expect(row.get_by_test_id("state")).to_have_text("waiting", timeout=WAIT_MS)
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    row.locator("input[type=checkbox]").check()
    page.click("button[data-action=cancel]")
    expect(page.get_by_test_id("confirm")).to_contain_text("nightly")
    page.get_by_test_id("confirm-yes").click()
    expect(row.get_by_test_id("state")).to_have_text("cancelled", timeout=WAIT_MS)
    assert page.evaluate("window.__sameDocument") is True
    assert jobman.state(ids["nightly"])["outcome"] == "cancelled"
    assert page.errors == []


def test_a_running_jobs_log_grows_on_its_page(jobman, jobman_ui, page, tmp_path):
    gate = tmp_path / "gate"
    job = jobman.run("sh", "-c", f"echo first line; while [ ! -e {gate} ]; do sleep 0.05; done; echo second line; "
                                 f"while [ ! -e {gate}.2 ]; do sleep 0.05; done; echo third line",
                     opts=["--name", "printer"])
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{job}")
    log = page.get_by_test_id("log")
    expect(log).to_have_text("first line\n", timeout=WAIT_MS)
    page.evaluate("window.__sameDocument = true")
    gate.touch()
    expect(log).to_have_text("first line\nsecond line\n", timeout=WAIT_MS)
    expect(page.get_by_test_id("state")).to_have_text("running")
    screenshot(page, "jobman-live-log")
    (tmp_path / "gate.2").touch()
    expect(log).to_have_text("first line\nsecond line\nthird line\n", timeout=WAIT_MS)
    expect(page.get_by_test_id("state")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(log).to_have_attribute("data-ended", "1", timeout=WAIT_MS)  # the stream ended with the job
    assert page.evaluate("window.__sameDocument") is True


def test_filters_search_paging_and_hold_release_of_a_selection(jobman, jobman_ui, page):
    jobman("group", "set", "slow", "--limit", "0", check=True)
    held = [jobman.run("echo", str(n), opts=["--name", f"batch-{n}", "--group", "slow"]) for n in range(3)]
    other = jobman.run("echo", "other", opts=["--name", "other"])
    jobman.wait_finished(other)
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("job-row")).to_have_count(4, timeout=WAIT_MS)
    page.get_by_test_id("search").fill("batch")
    page.get_by_test_id("search").press("Enter")
    expect(page.get_by_test_id("job-row")).to_have_count(3, timeout=WAIT_MS)
    page.select_option("[data-testid=page-size]", "50")
    page.locator("thead input[type=checkbox]").check()
    page.click("button[data-action=hold]")
    page.get_by_test_id("confirm-yes").click()
    for job in held:
        expect(page.locator(f"tr[data-job-id='{job}']").get_by_test_id("state")).to_have_text("held", timeout=WAIT_MS)
        assert jobman.state(job)["held_at"] is not None
    page.click("[data-state=held]")  # the state filter, on the server
    expect(page.get_by_test_id("page-range")).to_have_text("1-3 of 3", timeout=WAIT_MS)
    page.locator("thead input[type=checkbox]").check()
    page.click("button[data-action=release]")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("page-range")).to_have_text("0-0 of 0", timeout=WAIT_MS)
    assert all(jobman.state(job)["held_at"] is None for job in held)

    page.click("#tabs a[data-tab=groups]")
    expect(page.locator("tr[data-group=slow]")).to_contain_text("0 (paused)", timeout=WAIT_MS)
    jobman("group", "set", "slow", "--limit", "3", check=True)
    jobman("group", "pause", "slow", check=True)  # paused with its limit kept: the page says both
    expect(page.locator("tr[data-group=slow]")).to_contain_text("3 (paused)", timeout=WAIT_MS)
    screenshot(page, "jobman-groups")


def test_a_job_offers_only_the_actions_that_apply_and_the_library_still_refuses_others(jobman, jobman_ui, page):
    done = jobman.run("echo", "done", opts=["--name", "done"])
    jobman.wait_finished(done)
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{done}")
    expect(page.get_by_test_id("state")).to_have_text("succeeded", timeout=WAIT_MS)
    expect(page.locator("main button[data-action]")).to_have_count(1)  # a finished job: restart only
    # a request the page no longer offers is still refused by jobman hold's own one line, nothing changed
    status, answer, _ = dash.request("POST", "/api/actions", {"action": "hold", "jobs": [done]})
    assert status == 400 and re.search("cannot hold job .*: it is succeeded", answer["error"])
    page.click("button[data-action=restart]")
    expect(page.get_by_test_id("confirm")).to_contain_text("Don't restart")
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("notice").last).to_contain_text("restarted as job 2", timeout=WAIT_MS)
    wait_for(lambda: jobman.count_jobs() == 2, message="the restart's new job")
    # the two jobs link each other: "restarted as" on the old one's page (live), "a restart of" on the new one's
    expect(page.get_by_test_id("restarted-as")).to_have_text("restarted as job 2", timeout=WAIT_MS)
    page.get_by_test_id("restarted-as").locator("a").click()
    expect(page.get_by_test_id("restart-of")).to_have_text("job 1", timeout=WAIT_MS)


def test_a_lost_job_names_the_processes_it_left(jobman, jobman_ui, page, tmp_path):
    import os
    import signal

    job = jobman.run("sh", "-c", "echo started; exec sleep 300", opts=["--name", "orphan"])
    # its target runs (it has printed), so killing the supervisor leaves a process behind
    wait_for(lambda: jobman("logs", job).stdout == "started\n", message="the target to run")
    os.kill(jobman.state(job)["supervisor_pid"], signal.SIGKILL)
    dash = jobman_ui()
    page.goto(f"{dash.url}#/job/{job}")
    expect(page.get_by_test_id("state")).to_have_text("lost", timeout=WAIT_MS)
    expect(page.get_by_test_id("lost-processes")).to_contain_text("sleep 300", timeout=WAIT_MS)
    screenshot(page, "jobman-lost")
