"""restart (with dependents re-wired), signal (to the whole tree) and hold / release (issue 13)."""
import json

from tests.helpers import pids_with_env, wait_for


def test_restart_with_dependents_rewires_the_failed_part_of_the_dag(jobman, tmp_path):
    flag = tmp_path / "fixed"
    compile_ = jobman.run("sh", "-c", f"test -f {flag}", opts=["--name", "compile"])
    link = jobman.run("true", opts=["--name", "link", "--after-success", "compile"])
    package = jobman.run("true", opts=["--after-success", "link"])
    report = jobman.run("true", opts=["--after-failure", "compile"])  # ran, because compile failed
    other = jobman.run("true")
    jobman("wait", compile_, link, package, report, other)
    assert [jobman.state(j)["outcome"] for j in (compile_, link, package, report)] == \
        ["failed", "dependency_failed", "dependency_failed", "succeeded"]
    flag.write_text("")
    result = jobman("restart", "compile", "--with-dependents", "--json", check=True)
    restarted = json.loads(result.stdout)
    assert [r["restarts"] for r in restarted] == [compile_, link, package]  # in submission order, no others
    new = {r["restarts"]: r["id"] for r in restarted}
    assert jobman("wait", new[package]).returncode == 0
    assert jobman.show(new[link])["dependencies"][0]["job"] == new[compile_]
    assert jobman.show(new[package])["dependencies"][0]["job"] == new[link]
    shown = jobman.show(new[compile_])
    assert shown["spec"]["restart_of"] == compile_ and shown["name"] == "compile"
    assert shown["events"][0]["kind"] == "job_submitted" and shown["events"][0]["restart_of"] == compile_
    assert jobman.show("compile")["id"] == new[compile_]  # the name now means the new job
    assert f"restart of:  job 1 (id {compile_})" in jobman("show", new[compile_], check=True).stdout


def test_restart_alone_and_what_it_refuses(jobman):
    failed = jobman.run("sh", "-c", "exit 5")
    dependent = jobman.run("true", opts=["--after-success", failed])
    jobman("wait", failed, dependent)
    result = jobman("restart", failed, check=True)
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and f"restarting {failed}" in lines[0]
    assert jobman("wait", lines[0].split()[0]).returncode == 5
    assert jobman.count_jobs() == 3  # its dependent was not re-submitted without --with-dependents
    running = jobman.run("sleep", "30")
    refused = jobman("restart", running)
    assert refused.returncode == 2 and "restart takes a finished job" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and jobman.count_jobs() == 4
    jobman("cancel", running, check=True)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def test_signal_reaches_the_whole_tree_and_not_the_supervisor(jobman, tmp_path):
    ready = tmp_path / "ready"
    job_id = jobman.run("sh", "-c", f"trap 'echo got USR1; exit 0' USR1; sleep 30 & sleep 31 & touch {ready}; wait")
    wait_for(ready.exists, timeout=20, message="the job to be ready")
    # sh and both sleeps, once the sleeps have exec'd and touch has ended (it briefly makes a fourth process)
    wait_for(lambda: sorted(_comm(p) for p in pids_with_env("JOBMAN_JOB_ID", job_id)) == ["sh", "sleep", "sleep"],
             timeout=20, message="the tree to be sh and two sleeps")
    result = jobman("signal", job_id, "usr1", check=True)
    assert "sent SIGUSR1 to 3 process(es)" in result.stdout  # sh and both sleeps
    assert jobman("wait", job_id).returncode == 0  # its supervisor was not signalled: it recorded the end
    assert "got USR1" in jobman("logs", job_id, check=True).stdout
    assert any(e["kind"] == "signal_sent" and e["processes"] == 3 for e in jobman.show(job_id)["events"])
    wait_for(lambda: not pids_with_env("JOBMAN_JOB_ID", job_id), timeout=10, message="the tree to be gone")


def test_signal_by_number_and_its_errors(jobman):
    job_id = jobman.run("sleep", "30")
    wait_for(lambda: jobman.state(job_id)["phase"] == "running", timeout=20)
    assert jobman("signal", job_id, "NOSUCH").returncode == 2
    assert jobman("signal", job_id, "0").returncode == 2
    jobman("signal", job_id, "15", check=True)
    assert jobman("wait", job_id).returncode == 128 + 15
    finished = jobman("signal", job_id, "TERM")
    assert finished.returncode == 2 and "no running process" in finished.stderr
    assert len(finished.stderr.splitlines()) == 1


def test_hold_keeps_a_waiting_job_back_until_release(jobman):
    jobman("group", "set", "solo", "--limit", "0", check=True)
    held = jobman.run("true", opts=["--group", "solo"])
    later = jobman.run("true", opts=["--group", "solo"])
    result = jobman("hold", str(jobman.show(held)["handle"]), check=True)
    assert "held" in result.stdout
    wait_for(lambda: jobman.state(held)["waiting_for"] == "held", timeout=20, message="the supervisor to see it")
    assert jobman("hold", held, check=True).stdout.strip().endswith("already held")
    listed = {j["id"]: j for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert listed[held]["held"] and not listed[later]["held"]
    assert "held" in jobman("list", "--state", "held", check=True).stdout
    jobman("group", "set", "solo", "--limit", "1", check=True)
    jobman("wait", later, check=True)  # the later job went first: the held one left the line
    assert jobman.state(held)["phase"] == "waiting"
    jobman("release", held, check=True)
    jobman("wait", held, check=True)
    kinds = [e["kind"] for e in jobman.show(held)["events"]]
    assert kinds.index("held") < kinds.index("released") < kinds.index("attempt_started")
    refused = jobman("hold", held)
    assert refused.returncode == 2 and "only a job that has not started" in refused.stderr
    assert jobman("release", later, "nosuchjob").returncode == 2


def test_a_held_job_can_be_cancelled_and_is_then_no_longer_held(jobman):
    job_id = jobman.run("true", opts=["--delay", "1h"])
    jobman("hold", job_id, check=True)
    jobman("cancel", job_id, check=True)
    assert jobman("wait", job_id).returncode == 125
    assert not jobman.show(job_id)["held"]
    assert jobman("list", "--state", "held", check=True).stdout == "no jobs match\n"
