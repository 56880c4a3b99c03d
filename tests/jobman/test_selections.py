"""The words that pick jobs (--all, --state, --group, --name beside the JOBs named), the same for every command that
acts on jobs; group pause and resume; a cancel's reason; what a restart prints and leaves on the old job; --array's
escape for a literal {}."""
import json
import re

from tests.helpers import wait_for


def _lines(result) -> list[str]:
    return result.stdout.splitlines()


def test_hold_release_priority_and_cancel_take_selectors_and_say_each_job(jobman):
    jobman("group", "set", "sel", "--limit", "1", check=True)
    jobman("group", "pause", "sel", check=True)
    ids = [jobman.run("true", opts=["--group", "sel", "--name", name]) for name in ("a-1", "a-2", "b-1")]
    handles = [str(jobman.handle(i)) for i in ids]
    wait_for(lambda: all(jobman.state(i)["waiting_for"] == "slot" for i in ids), timeout=30, message="in line")

    held = jobman("hold", "--group", "sel", "--name", "a-*", check=True)
    assert [line.split(":")[0] for line in _lines(held)] == [f"job {h}" for h in handles[:2]]
    assert all("held" in line for line in _lines(held))
    listed = json.loads(jobman("list", "--state", "held", "--json", check=True).stdout)
    assert sorted(v["id"] for v in listed) == sorted(ids[:2])
    released = jobman("release", "--all", check=True)  # --all: every held job, and only those
    assert len(_lines(released)) == 2 and all("released" in line for line in _lines(released))
    moved = jobman("priority", "--group", "sel", "5", check=True)
    assert len(_lines(moved)) == 3 and all(jobman.show(i)["priority"] == 5 for i in ids)
    moved_one = jobman("priority", handles[2], "7", "--json", check=True)
    assert [r["priority"] for r in json.loads(moved_one.stdout)] == [7]

    nothing = jobman("hold", "--state", "running")
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert nothing.stderr == ("jobman: error: no unheld job that has not started matches --state running "
                              "(see jobman list)\n")
    for bare in (["cancel"], ["hold"], ["release"], ["signal", "TERM"], ["priority", "3"], ["wait"], ["restart"]):
        refused = jobman(*bare)
        assert refused.returncode == 2 and "name the jobs, or select them with --all" in refused.stderr, bare
    assert jobman("cancel", "--group", "nosuch").returncode == 2

    cancelled = jobman("cancel", "--group", "sel", "--reason", "wrong input data", check=True)
    assert [line.split(":")[0] for line in _lines(cancelled)] == [f"job {h}" for h in handles]
    assert all(line.endswith("cancelled (reason: wrong input data)") for line in _lines(cancelled)), cancelled.stdout
    shown = jobman.show(ids[0])
    assert shown["state"] == "cancelled" and shown["cancel_reason"] == "wrong input data"
    assert "cancelled:   wrong input data" in jobman("show", ids[0], check=True).stdout
    assert {v["cancel_reason"] for v in json.loads(jobman("list", "--json", check=True).stdout)} == {"wrong input data"}
    assert "(reason: wrong input data)" in jobman("list", check=True).stdout
    waited = jobman("wait", "--group", "sel")
    assert waited.returncode == 125 and f"job {handles[0]} (a-1): cancelled (exit status 125; reason: wrong input " \
        "data)" in waited.stderr
    again = jobman("cancel", handles[0], check=True)  # a JOB named that has finished: said, not an error
    assert _lines(again) == [f"job {handles[0]}: already finished: cancelled"]
    assert jobman("cancel", "--all").returncode == 2  # nothing unfinished is left


def test_a_paused_group_keeps_its_limit_and_its_running_jobs(jobman, tmp_path):
    gate = tmp_path / "gate"
    jobman("group", "set", "g", "--limit", "2", check=True)
    running = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--group", "g"])
    wait_for(lambda: jobman.state(running)["phase"] == "running", timeout=30, message="running")
    paused = jobman("group", "pause", "g", check=True)
    assert paused.stdout == "group g: paused (limit 2, 1 running, 0 waiting)\n"
    assert jobman("group", "pause", "g", check=True).stdout.startswith("group g: already paused")
    later = jobman.run("true", opts=["--group", "g"])
    wait_for(lambda: jobman.state(later)["waiting_for"] == "slot", timeout=30, message="in line")
    [row] = [r for r in json.loads(jobman("group", "list", "--json", check=True).stdout) if r["name"] == "g"]
    assert (row["limit"], row["paused"], row["running"], row["waiting"]) == (2, True, 1, 1)
    table = jobman("group", "list", check=True).stdout.splitlines()
    assert table[0].split() == ["GROUP", "LIMIT", "STATE", "RUNNING", "WAITING"]
    assert [line.split() for line in table if line.startswith("g ")] == [["g", "2", "paused", "1", "1"]]
    assert "group g is paused (jobman group resume g)" in jobman.show(later)["wait_detail"]
    gate.touch()
    assert jobman("wait", running, timeout=60).returncode == 0  # a running job goes on
    jobman("reconcile", check=True)
    assert jobman.state(later)["phase"] == "waiting"  # its slot is free, and the paused group lends none
    resumed = jobman("group", "resume", "g", "--json", check=True)
    assert json.loads(resumed.stdout)["paused"] is False and json.loads(resumed.stdout)["limit"] == 2
    assert jobman("wait", later, timeout=60).returncode == 0
    assert jobman("group", "pause", "nosuch").returncode == 2


def test_signal_wait_and_prune_take_selectors(jobman):
    jobman("group", "set", "s", "--limit", "4", check=True)
    ids = [jobman.run("sleep", "60", opts=["--group", "s", "--name", f"sl-{n}"]) for n in (1, 2)]
    other = jobman.run("true", opts=["--name", "other"])
    wait_for(lambda: all(jobman.state(i)["phase"] == "running" for i in ids), timeout=30, message="running")
    assert jobman("signal", other, ids[0], "TERM").returncode in (2,)  # a JOB named that runs nothing: refused
    assert all(jobman.state(i)["phase"] == "running" for i in ids)  # ... and nothing was sent
    sent = jobman("signal", "--group", "s", "TERM", check=True)
    assert len(_lines(sent)) == 2 and all(re.search(r"sent SIGTERM to \d+ process", line) for line in _lines(sent))
    assert jobman("wait", "--group", "s", timeout=60).returncode == 143
    assert jobman("wait", "--name", "sl-*").returncode == 143  # the same, asked again
    assert jobman("wait", "--state", "succeeded").returncode == 0
    pruned = jobman("prune", "--name", "sl-*", check=True)
    assert _lines(pruned) == [f"job {jobman_handle}: removed" for jobman_handle in (1, 2)] + [
        "removed 2 finished job(s)"]
    assert jobman("prune", "--name", "sl-*").returncode == 2  # nothing left that matches
    assert json.loads(jobman("prune", "--all", "--json", check=True).stdout) == [other]
    assert jobman("wait", "--all").returncode == 2  # nothing left to wait for


def test_restart_prints_handles_only_and_the_old_job_names_its_restart(jobman):
    old = jobman.run("sh", "-c", "exit 3", opts=["--name", "flaky"])
    assert jobman("wait", old).returncode == 3
    done = jobman("restart", old, check=True)
    assert re.fullmatch(r"\d+\n", done.stdout) and done.stderr == ""  # n=$(jobman restart 7); jobman wait $n
    new_handle = done.stdout.strip()
    assert jobman("wait", new_handle).returncode == 3
    new = jobman.show(new_handle)
    shown = jobman.show(old)
    assert shown["restarted_as"] == [{"id": new["id"], "handle": int(new_handle)}]
    assert f"restarted as: job {new_handle}" in jobman("show", old, check=True).stdout
    listed = {v["id"]: v for v in json.loads(jobman("list", "--json", check=True).stdout)}
    assert listed[old]["restarted_as"][0]["id"] == new["id"] and listed[new["id"]]["restarted_as"] == []
    hidden = json.loads(jobman("list", "--hide-restarted", "--json", check=True).stdout)
    assert [v["id"] for v in hidden] == [new["id"]]
    assert not jobman.in_table(jobman("list", "--hide-restarted", check=True).stdout, old)
    again = jobman("restart", "--all", check=True)  # every finished job not restarted yet: the new one
    assert len(again.stdout.split()) == 1 and jobman.show(again.stdout.strip())["spec"]["restart_of"] == new["id"]


def test_array_takes_double_braces_for_a_literal_pair(jobman):
    done = jobman("run", "--array", "1-2", "--name", "esc-{}-{{}}", "--print-id", "--",
                  "python3", "-c", "d = {{}}; print(len(d), {}, '{{}}')", check=True)
    ids = done.stdout.split()
    assert [jobman.show(i)["name"] for i in ids] == ["esc-1-{}", "esc-2-{}"]
    assert jobman("wait", *ids, timeout=60).returncode == 0
    assert [jobman("logs", i, check=True).stdout for i in ids] == ["0 1 {}\n", "0 2 {}\n"]
