"""list / show / logs / wait, human and --json, against real jobs."""
import json
import signal
import subprocess

from tests.helpers import wait_for
from tests.jobman.conftest import JOBMAN


def test_list_show_and_json(jobman):
    ok = jobman.run("sh", "-c", "echo out; echo err >&2", opts=["--name", "greeter", "--env", "API_TOKEN=hunter2"])
    bad = jobman.run("sh", "-c", "exit 7")
    jobman("wait", ok, bad)
    listed = json.loads(jobman("list", "--json", check=True).stdout)
    assert [j["id"] for j in listed] == [bad, ok]  # newest first
    assert listed[0]["state"] == "failed" and listed[0]["exit_code"] == 7
    assert listed[1]["state"] == "succeeded" and listed[1]["name"] == "greeter"
    table = jobman("ls", check=True).stdout
    assert "greeter" in table and "failed (7)" in table and "succeeded" in table
    shown = jobman.show("greeter")
    assert shown["id"] == ok and shown["command"] == ["sh", "-c", "echo out; echo err >&2"]
    assert shown["spec"]["env"]["API_TOKEN"] == "****"  # secret-looking values are masked
    assert shown["spec"]["env_overrides"] == {"API_TOKEN": "****"}
    assert [a["outcome"] for a in shown["attempts_detail"]] == ["succeeded"]
    assert shown["events"][0]["kind"] == "job_submitted"
    human = jobman("show", ok, check=True).stdout
    assert "succeeded" in human and "hunter2" not in human and "attempts:" in human


def test_logs_and_tail(jobman):
    job_id = jobman.run("sh", "-c", "for i in 1 2 3 4 5; do echo line$i; done; echo oops >&2")
    jobman("wait", job_id, check=True)
    assert jobman("logs", job_id, check=True).stdout == "line1\nline2\nline3\nline4\nline5\noops\n"
    assert jobman("logs", job_id, "--tail", "2", check=True).stdout == "line5\noops\n"
    as_json = json.loads(jobman("logs", job_id, "--json", check=True).stdout)
    assert as_json["state"] == "succeeded"
    assert as_json["attempts"][0]["attempt"] == 1 and as_json["attempts"][0]["text"].startswith("line1\n")


def test_logs_of_a_job_that_has_not_started(jobman):
    job_id = jobman.run("true", opts=["--delay", "1h"])
    # The reason is the supervisor's to record; until it has looked, the job is only "starting".
    wait_for(lambda: jobman.state(job_id)["phase"] == "waiting", timeout=20)
    result = jobman("logs", job_id)
    assert result.returncode == 0 and result.stdout == ""
    assert "has not started" in result.stderr and "not before" in result.stderr
    jobman("cancel", job_id, check=True)


def test_logs_follow_streams_until_the_end_and_mirrors_the_exit(jobman):
    job_id = jobman.run("sh", "-c", "echo first; sleep 0.5; echo second; exit 4")
    result = jobman("logs", "--follow", job_id)
    assert result.stdout == "first\nsecond\n"
    assert result.returncode == 4


def test_wait_mirrors_exit_code_and_signal(jobman):
    ok = jobman.run("true")
    code = jobman.run("sh", "-c", "exit 9")
    killed = jobman.run("sh", "-c", "kill -TERM $$")
    assert jobman("wait", ok).returncode == 0
    assert jobman("wait", code).returncode == 9
    assert jobman("wait", killed).returncode == 128 + signal.SIGTERM
    # Several jobs: 0 only if all succeeded, else the first (in argument order) that did not.
    assert jobman("wait", ok, killed, code).returncode == 128 + signal.SIGTERM
    assert jobman("wait", ok, code, killed).returncode == 9
    result = json.loads(jobman("wait", "--json", ok, code).stdout)
    assert result["exit_status"] == 9 and [j["state"] for j in result["jobs"]] == ["succeeded", "failed"]
    assert json.loads(jobman("show", "--json", killed).stdout)["signal"] == "SIGTERM"


def test_wait_timeout(jobman):
    job_id = jobman.run("sleep", "30")
    result = jobman("wait", "--timeout", "0.3s", job_id)
    assert result.returncode == 120 and "timed out" in result.stderr  # not 124: that is a job's own timed_out
    jobman("cancel", job_id, check=True)


def test_spawn_failure_is_recorded(jobman, tmp_path):
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    job_id = jobman.run(str(script))
    assert jobman("wait", job_id).returncode == 127
    shown = jobman.show(job_id)
    assert shown["outcome"] == "failed" and "cannot start" in shown["detail"]
    assert shown["attempts_detail"][0]["outcome"] == "spawn_failed"
    assert "Permission denied" in jobman("logs", job_id, check=True).stdout


def test_help_explains(jobman):
    top = subprocess.run([JOBMAN, "--help"], capture_output=True, text=True)
    assert top.returncode == 0 and "run [OPTIONS] -- COMMAND" in top.stdout and "124 timed_out" in top.stdout
    run_help = jobman("run", "--print-id", "--help")
    assert run_help.returncode == 0 and "--after-success" in run_help.stdout and "--retry-delay" in run_help.stdout


def test_reconcile_with_nothing_to_do(jobman):
    result = jobman("reconcile", check=True)
    assert result.stdout == "nothing to reconcile\n"
    assert json.loads(jobman("reconcile", "--json", check=True).stdout) == []


def test_a_corrupt_record_is_reported_and_hides_nothing_else(jobman):
    good = jobman.run("true", opts=["--name", "good"])
    bad = jobman.run("true", opts=["--name", "bad"])
    jobman("wait", good, bad, check=True)
    with jobman.db() as conn:
        conn.execute("UPDATE jobs SET spec = '{not json' WHERE id = ?", (bad,))
    listed = {j["id"]: j for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert listed[good]["state"] == "succeeded" and "corrupt" not in listed[good]
    assert "unreadable" in listed[bad]["corrupt"]
    assert "unreadable" in jobman("list", check=True).stdout
    shown = jobman("show", bad)
    assert shown.returncode == 2 and "unreadable" in shown.stderr and len(shown.stderr.splitlines()) == 1
    assert jobman.show(good)["outcome"] == "succeeded"



def test_show_and_list_give_the_same_record(jobman):
    """`show --json` gave `"started_at": null` for a job that ran, while `list --json` had it."""
    job = jobman.run("true")
    jobman("wait", job, check=True)
    listed = next(j for j in json.loads(jobman("list", "--json", check=True).stdout) if j["id"] == job)
    shown = jobman.show(job)
    assert shown["started_at"] is not None
    assert {k: shown[k] for k in listed if k != "detail"} == {k: listed[k] for k in listed if k != "detail"}
