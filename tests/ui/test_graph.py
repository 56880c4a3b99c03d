"""The Graph of one pipeline: from a job's row, one click draws its connected component (walked on the server over
the dependency edges, whatever else the home holds: here 10,000 newer jobs), left to right, a sweep of same-shaped
siblings folded into one node that counts them by state, with zoom, pan and fit."""
import sqlite3
import time

from playwright.sync_api import expect

from .conftest import WAIT_MS, screenshot


def _pipeline(jobman) -> dict:
    """12 jobs: prepare, a sweep of 8 trainings after it, evaluate after all of them, report, publish."""
    ids = {"prepare": jobman.run("true", opts=["--name", "prepare"])}
    for n in range(8):
        ids[f"train-{n}"] = jobman.run("true", opts=["--name", f"train-{n}", "--after-success", "prepare"])
    after_all = [o for n in range(8) for o in ("--after-success", f"train-{n}")]
    ids["evaluate"] = jobman.run("true", opts=["--name", "evaluate", *after_all])
    ids["report"] = jobman.run("true", opts=["--name", "report", "--after", "evaluate"])
    ids["publish"] = jobman.run("true", opts=["--name", "publish", "--after-success", "report"])
    jobman.wait_finished(ids["publish"])
    return ids


def _newer_clones(home, like: str, count: int) -> None:
    """`count` copies of a finished job, all submitted after everything else (rows written in one transaction)."""
    from runkit.core.ids import uuid7

    conn = sqlite3.connect(home / "jobman.db", timeout=60)
    conn.execute("BEGIN IMMEDIATE")
    base = time.time() + 1
    handle = conn.execute("SELECT max(handle) FROM jobs").fetchone()[0]
    columns = [r[1] for r in conn.execute("PRAGMA table_info(job_state)")]
    picks = ", ".join("?" if c == "job_id" else c for c in columns)
    for n in range(count):
        at = base + n * 0.001
        new = uuid7(int(at * 1e9))
        conn.execute("INSERT INTO jobs (id, name, spec, group_name, priority, submitted_at, claim_window,"
                     " lease_duration, renew_interval, poll_interval, handle) SELECT ?, 'other-' || ?, spec,"
                     " group_name, priority, ?, claim_window, lease_duration, renew_interval, poll_interval, ?"
                     " FROM jobs WHERE id = ?", (new, n, at, handle + 1 + n, like))
        conn.execute(f"INSERT INTO job_state ({', '.join(columns)}) SELECT {picks} FROM job_state WHERE job_id = ?",
                     (new, like))
    conn.execute("UPDATE handle_sequence SET last = ?", (handle + count,))
    conn.execute("COMMIT")
    conn.close()


def test_the_graph_of_a_pipeline_under_10000_jobs_is_one_click_from_the_list(jobman, jobman_ui, page):
    ids = _pipeline(jobman)
    _newer_clones(jobman.home, ids["publish"], 10_000)
    dash = jobman_ui()
    page.goto(dash.url)
    expect(page.get_by_test_id("page-range")).to_have_text("1-100 of 10012", timeout=WAIT_MS)
    page.get_by_test_id("search").fill("report")
    page.get_by_test_id("search").press("Enter")
    row = page.locator(f"tr[data-job-id='{ids['report']}']")
    row.get_by_test_id("graph-link").click()  # the one click

    expect(page.get_by_test_id("pipeline-title")).to_have_text("Pipeline: 12 jobs", timeout=WAIT_MS)
    nodes = page.locator("g.node")
    expect(nodes).to_have_count(5)  # prepare, the sweep, evaluate, report, publish
    sweep = page.locator("g.node.sweep")
    expect(sweep).to_have_attribute("data-sweep", "8")
    expect(sweep.locator("title")).to_have_text("8 × train-*: 8 succeeded")
    expect(page.locator("g.edge")).to_have_count(4)
    # left to right: each stage to the right of the one before
    xs = [page.locator(f"g.node[data-job-id='{ids[n]}'] rect").bounding_box()["x"]
          for n in ("prepare", "evaluate", "report", "publish")]
    assert xs == sorted(xs) and sweep.locator("rect").first.bounding_box()["x"] > xs[0]
    screenshot(page, "jobman-pipeline")

    # zoom in, fit again, pan: the drawing moves, nothing is drawn again
    view = page.locator("[data-testid=graph] g.view")
    fitted = view.get_attribute("transform")
    page.get_by_test_id("graph-zoom-in").click()
    assert view.get_attribute("transform") != fitted
    page.get_by_test_id("graph-fit").click()
    assert view.get_attribute("transform") == fitted
    box = page.get_by_test_id("graph").bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + 120, box["y"] + 60)
    page.mouse.up()
    assert view.get_attribute("transform") != fitted

    page.locator(f"g.node[data-job-id='{ids['evaluate']}']").click()
    expect(page.get_by_test_id("job-title")).to_have_text("job 10 evaluate", timeout=WAIT_MS)
    page.get_by_test_id("job-graph").click()  # and back, from the job's page
    expect(page.get_by_test_id("pipeline-title")).to_have_text("Pipeline: 12 jobs", timeout=WAIT_MS)
    assert page.errors == []


def test_the_server_walks_only_the_pipeline(jobman, jobman_ui):
    ids = _pipeline(jobman)
    lone = jobman.run("true", opts=["--name", "lone"])
    jobman.wait_finished(lone)
    dash = jobman_ui()
    status, got, _ = dash.request("GET", f"/api/graph?job={ids['train-3']}")
    assert status == 200 and got["total"] == 12 and not got["cut"]
    names = sorted(n.get("name") for n in got["nodes"])
    assert names == ["evaluate", "prepare", "publish", "report", "train-*", "train-3"]  # the asked-for one kept
    assert dash.request("GET", f"/api/graph?job={lone}")[1]["total"] == 1
    status, got, _ = dash.request("GET", "/api/graph")
    assert status == 400 and "job=ID" in got["error"]
    assert dash.request("GET", "/api/graph?job=nosuchjob")[0] == 404
