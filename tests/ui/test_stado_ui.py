"""`stado ui` in a real browser against a real agent on the local-directory store: a job needing a capability no
agent has is shown unschedulable with its reason, the queue is paused from the page (and `stado status` says so),
a job is cancelled and another rerun from the page, and a job's page shows its output and artifacts."""
import json

from playwright.sync_api import expect

from tests.helpers import wait_for
from tests.stado.e2e.support import Agent, machine_status, stado, submit

from .conftest import WAIT_MS, screenshot


def test_unschedulable_job_and_pausing_the_queue_from_the_page(stado_env, stado_ui, page, tmp_path):
    done = [submit(stado_env, f"echo step {n}", "--name", f"step-{n}") for n in range(3)]
    gate = tmp_path / "gate"
    long = submit(stado_env, f"echo waiting; while [ ! -e {gate} ]; do sleep 0.05; done", "--name", "long-one")
    gpu = submit(stado_env, "python train.py --gpus 8", "--name", "needs-gpu", "--capabilities", "gpu")
    agent = Agent(stado_env, tmp_path, "--slots", "2")
    try:
        for job in done:
            wait_for(lambda job=job: machine_status(stado_env, job)["state"] == "completed", timeout=30,
                     message=f"{job} to complete")
        wait_for(lambda: machine_status(stado_env, long)["state"] == "running", timeout=30, message="long-one to run")
        dash = stado_ui()
        page.goto(dash.url)
        row = page.locator(f"tr[data-job-id='{gpu}']")
        expect(row.get_by_test_id("unschedulable")).to_contain_text("needs capabilities gpu", timeout=WAIT_MS)
        expect(page.locator(f"tr[data-testid=running-row][data-job-id='{long}']")).to_contain_text("local@testhost")
        expect(page.get_by_test_id("recent-row")).to_have_count(3)
        expect(page.get_by_test_id("agent-row")).to_contain_text("1/2", timeout=WAIT_MS)
        screenshot(page, "stado-main")

        page.evaluate("window.__sameDocument = true")
        page.get_by_test_id("pause-reason").fill("disk upgrade")
        page.click("button[data-action=pause]")
        page.get_by_test_id("confirm-yes").click()
        expect(page.get_by_test_id("paused")).to_contain_text("disk upgrade", timeout=WAIT_MS)
        assert "queue PAUSED" in stado(stado_env, "status").stdout
        assert json.loads(stado(stado_env, "status", "--json").stdout)["paused"]["reason"] == "disk upgrade"
        screenshot(page, "stado-paused")

        page.click("button[data-action=resume]")
        page.get_by_test_id("confirm-yes").click()
        expect(page.get_by_test_id("not-paused")).to_be_visible(timeout=WAIT_MS)
        assert json.loads(stado(stado_env, "status", "--json").stdout)["paused"] is None

        row.locator("input[type=checkbox]").check()
        page.click("button[data-action=cancel]")
        expect(page.get_by_test_id("confirm")).to_contain_text("needs-gpu")
        page.get_by_test_id("confirm-yes").click()
        expect(page.locator(f"tr[data-testid=recent-row][data-job-id='{gpu}']")).to_contain_text("cancelled",
                                                                                                 timeout=WAIT_MS)
        assert machine_status(stado_env, gpu)["state"] == "cancelled"
        assert page.evaluate("window.__sameDocument") is True
        gate.touch()
        wait_for(lambda: machine_status(stado_env, long)["state"] == "completed", timeout=30, message="long-one")
    finally:
        agent.stop()


def test_job_page_output_artifacts_and_rerun(stado_env, stado_ui, page, tmp_path):
    job = submit(stado_env, "echo result > out.txt && $STADO_BIN artifact put out.txt && echo produced",
                 "--name", "producer")
    agent = Agent(stado_env, tmp_path)
    try:
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="producer")
        dash = stado_ui()
        page.goto(f"{dash.url}#/job/{job}")
        expect(page.get_by_test_id("output")).to_contain_text("produced", timeout=WAIT_MS)
        manifest = json.loads(stado(stado_env, "status", job, "--json").stdout)
        artifacts = page.get_by_test_id("artifacts")
        expect(artifacts).to_contain_text("out.txt", timeout=WAIT_MS)
        import hashlib

        expect(artifacts).to_contain_text(hashlib.sha256(b"result\n").hexdigest())
        expect(page.get_by_test_id("spec")).to_contain_text("artifact put out.txt")
        # the artifact and the raw output to download, with the browser's cookie only
        link = page.get_by_test_id("artifact-link")
        expect(link).to_have_text("out.txt")
        got = page.context.request.get(dash.base + link.get_attribute("href"))
        assert got.status == 200 and got.body() == b"result\n" and "attachment" in got.headers["content-disposition"]
        raw = page.context.request.get(dash.base + page.get_by_test_id("output-download").get_attribute("href"))
        assert raw.status == 200 and raw.body().endswith(b"produced\n")
        assert dash.request("GET", link.get_attribute("href"), token=False)[0] == 403
        assert dash.request("GET", f"/api/job/{job}/artifact/..%2Fmanifest.json")[0] == 404  # listed names only
        expect(page.locator("main button[data-action]")).to_have_count(1)  # completed: rerun, not cancel
        assert manifest["state"] == "completed"
        screenshot(page, "stado-job")
        page.click("button[data-action=rerun]")
        page.get_by_test_id("confirm-yes").click()
        expect(page.get_by_test_id("notice")).to_contain_text("rerun as", timeout=WAIT_MS)
        wait_for(lambda: sum(j.get("rerun_of") == job for j in json.loads(
            stado(stado_env, "status", "--json", "--all").stdout)["jobs"]) == 1, message="the rerun")
    finally:
        agent.stop()


def test_a_running_job_past_its_promise_is_marked(stado_env, stado_ui, page, tmp_path):
    import signal

    gate = tmp_path / "gate"
    job = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done", "--name", "stalled")
    # A wide margin: the job's keeper would stop it a quarter of the margin past its promise (the page shows the
    # promise passed well before that).
    agent = Agent(stado_env, tmp_path, "--reap-margin", "120")
    try:
        wait_for(lambda: machine_status(stado_env, job)["state"] == "running", timeout=30, message="stalled to run")
        dash = stado_ui()
        page.goto(dash.url)
        promise = page.locator(f"tr[data-testid=running-row][data-job-id='{job}'] [data-testid=promise]")
        expect(promise).not_to_contain_text("passed", timeout=WAIT_MS)
        agent.proc.send_signal(signal.SIGSTOP)  # its renewals stop: the promise it made runs out
        expect(promise).to_contain_text("passed", timeout=WAIT_MS)
        expect(promise).to_have_class("bad")
        screenshot(page, "stado-past-promise")
        agent.proc.send_signal(signal.SIGCONT)
        expect(promise).not_to_contain_text("passed", timeout=WAIT_MS)  # it speaks again: renewed
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="stalled")
    finally:
        agent.stop()
