"""restart (with dependents re-wired), signal (to the whole tree) and hold / release."""
import json
import os
import signal

from tests.helpers import kill_all, pids_with_env, wait_for


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
    assert lines == [str(jobman.handle(failed) + 2)] and result.stderr == ""  # the new job's handle, alone
    assert jobman.show(lines[0])["spec"]["restart_of"] == failed
    assert jobman("wait", lines[0]).returncode == 5
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


def test_a_sweep_lost_at_a_power_cut_comes_back_whole_with_one_command(jobman, tmp_path):
    """A pipeline in a group of one slot: `solo` runs, four prep jobs, a train job after each, and a report after
    every train job wait. Every process of the home is SIGKILLed at once (supervisors, lean waiters and the target:
    a power cut) and the leases run out: all ten are lost, and nothing could bring the pipeline back (restart took
    one job, skipped lost dependents, and a restarted dependent pointed at its lost dependency). `jobman list`
    says so in one line, with the command; `jobman restart --state lost` submits the nine that never started again,
    in submission order, their edges re-wired to one another, and each runs once, in dependency order; `solo`,
    which had started, only with --include-started. A second restart takes nothing twice."""
    gate, ledger = tmp_path / "gate", tmp_path / "ledger"

    def step(name: str) -> list[str]:
        return ["sh", "-c", f"echo {name} >> {ledger}; while [ ! -e {gate} ]; do sleep 0.02; done"]

    jobman("group", "set", "sweep", "--limit", "1", check=True)
    solo = jobman.run(*step("solo"), opts=["--name", "solo", "--group", "sweep"])
    wait_for(lambda: jobman.state(solo)["phase"] == "running", timeout=30)
    pipeline = []
    for i in range(4):
        pipeline.append(jobman.run(*step(f"prep{i}"), opts=["--name", f"prep{i}", "--group", "sweep"]))
        pipeline.append(jobman.run(*step(f"train{i}"), opts=["--name", f"train{i}", "--group", "sweep",
                                                             "--after-success", f"prep{i}"]))
    pipeline.append(jobman.run(*step("report"), opts=["--name", "report", "--group", "sweep",
                                                      *[f"--after-success=train{i}" for i in range(4)]]))
    wait_for(lambda: all(jobman.state(j)["phase"] == "waiting" for j in pipeline), timeout=30)
    wait_for(lambda: ledger.exists() and ledger.read_text() == "solo\n", timeout=10)
    everything = jobman.processes()
    assert len(everything) >= len(pipeline) + 2  # every supervisor, and solo's target
    for pid in everything:  # at once, as a power cut would
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # (one of the target's short sleeps, ended meanwhile)
    wait_for(lambda: not kill_all(jobman.processes()) and not jobman.processes(), timeout=10)
    wait_for(lambda: jobman("reconcile", check=True) and all(
        jobman.state(j)["outcome"] == "lost" for j in [solo, *pipeline]), timeout=20, message="all lost")
    assert not list((jobman.home / "bells").iterdir())  # their doorbells went with them

    listed = jobman("list", check=True)
    assert listed.stderr == ("jobman: 10 job(s) were lost (their supervisors died), 9 of them before they started: "
                             "`jobman restart --state lost` submits those again, their dependencies kept "
                             "(--include-started: also the 1 that had started, which may have done part of their "
                             "work)\n"), listed.stderr
    with jobman.db() as conn:  # what a reboot leaves: their supervisors ran under another boot (a test cannot reboot)
        conn.execute("UPDATE job_state SET supervisor_boot_id = 'an-earlier-boot' WHERE outcome = 'lost'")
    rebooted = jobman("list", check=True).stderr
    assert rebooted.startswith("jobman: 10 job(s) were lost when the machine restarted (their supervisors ran "
                               "before this boot), 9 of them before they started: `jobman restart --state lost`")
    assert rebooted.count("\n") == 1

    done = jobman("restart", "--state", "lost", check=True)
    handles = done.stdout.split()
    assert len(handles) == 9 and all(h.isdigit() for h in handles)
    assert "restarted 9 job(s)" in done.stderr and "left out 1 lost job(s) that had started" in done.stderr
    new = {jobman.show(h)["spec"]["restart_of"]: jobman.show(h)["id"] for h in handles}
    assert list(new) == pipeline  # in submission order
    for i in range(4):
        assert [d["job"] for d in jobman.show(new[pipeline[2 * i + 1]])["dependencies"]] == [new[pipeline[2 * i]]]
    assert [d["job"] for d in jobman.show(new[pipeline[-1]])["dependencies"]] == [new[pipeline[2 * i + 1]]
                                                                                for i in range(4)]
    after = jobman("list", check=True).stderr  # only solo is left to restart
    assert after.startswith("jobman: 1 job(s) were lost when the machine restarted") and "--include-started" in after
    again = jobman("restart", "--state", "lost", check=True)
    assert again.stdout == "" and "nothing to restart" in again.stderr  # nothing twice
    gate.touch()
    assert jobman("wait", *new.values(), timeout=120).returncode == 0
    lines = ledger.read_text().split()
    assert lines[0] == "solo" and sorted(lines[1:]) == sorted(["report", *[f"prep{i}" for i in range(4)],
                                                               *[f"train{i}" for i in range(4)]])  # each once
    assert lines[-1] == "report" and all(lines.index(f"prep{i}") < lines.index(f"train{i}") for i in range(4))
    with_started = jobman("restart", "--state", "lost", "--include-started", check=True)
    assert len(with_started.stdout.split()) == 1 and jobman.show(with_started.stdout.strip())["name"] == "solo"
    kill_all(jobman.processes())


def test_restart_takes_several_jobs_and_selectors_and_dependents_lost_before_they_started(jobman, tmp_path):
    """Several JOBs and selectors in one restart; --with-dependents takes the dependents that were lost before
    they started (they never ran because of it), which it used to skip."""
    gate = tmp_path / "gate"
    first = jobman.run("sh", "-c", "exit 3", opts=["--name", "first"])
    second = jobman.run("sh", "-c", "exit 4", opts=["--name", "second"])
    jobman("wait", first, second)
    blocker = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--name", "blocker"])
    waiter = jobman.run("true", opts=["--name", "waiter", "--after-success", "blocker"])
    wait_for(lambda: jobman.state(waiter)["waiting_for"] == "dependencies", timeout=30)
    kill_all([jobman.state(blocker)["supervisor_pid"], jobman.state(waiter)["supervisor_pid"]])
    wait_for(lambda: jobman("reconcile", check=True) and jobman.state(waiter)["outcome"] == "lost"
             and jobman.state(blocker)["outcome"] == "lost", timeout=20)
    kill_all(jobman.processes())  # the blocker's target, left alive by its supervisor's death
    gate.touch()
    both = json.loads(jobman("restart", first, "second", "--json", check=True).stdout)
    assert [r["restarts"] for r in both] == [first, second]
    chain = json.loads(jobman("restart", "blocker", "--with-dependents", "--json", check=True).stdout)
    assert [r["restarts"] for r in chain] == [blocker, waiter]
    assert jobman.show(chain[1]["id"])["dependencies"][0]["job"] == chain[0]["id"]
    assert jobman("wait", chain[1]["id"], timeout=60).returncode == 0
    by_name = json.loads(jobman("restart", "--name", "fir*", "--state", "failed", "--json", check=True).stdout)
    assert [r["name"] for r in by_name] == ["first"]  # the restart of the first, failed again: not the original
    assert jobman.show(by_name[0]["id"])["spec"]["restart_of"] == both[0]["id"]
    nothing = jobman("restart")
    assert nothing.returncode == 2 and "name the jobs, or select them" in nothing.stderr
