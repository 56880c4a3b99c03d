"""Scheduling without a central scheduler: dependencies, delays, retries, timeouts, groups, cancel,
wake-ups. Real supervisors, real SQLite; short windows where waiting is the point."""
import json
import sqlite3
import time

import pytest

from tests.helpers import kill_all, wait_for

FLOAT_SLACK = 1e-6  # a retry's delay runs from the recorded end; this absorbs only the rounding of end + delay

ANALYZE = """\
import pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
print(f"analysis attempt {n}")
sys.exit({codes}[n - 1] if n <= len({codes}) else 0)
"""


def attempts(jobman, job_id):
    with jobman.db() as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,))]


def write_analysis(tmp_path, codes):
    script = tmp_path / "analyze_data.py"
    script.write_text(ANALYZE.replace("{codes}", repr(codes)))
    return script


def test_a_pipeline_retries_until_the_third_attempt_succeeds(jobman, tmp_path):
    prepare = tmp_path / "prepare_data.py"
    prepare.write_text("import time; time.sleep(0.3); open('prepared', 'w').write('data')\n")
    analyze = write_analysis(tmp_path, [1, 1])
    prep_id = jobman.run("python", str(prepare), opts=["--name", "prepare_data", "--cwd", str(tmp_path)])
    analyze_id = jobman.run("python", str(analyze), str(tmp_path / "count"),
                            opts=["--after-success", "prepare_data", "--retries", "2", "--retryable-exit-code", "1",
                                  "--retry-delay", "1s"])
    assert jobman("wait", analyze_id).returncode == 0
    runs = attempts(jobman, analyze_id)
    assert [a["exit_code"] for a in runs] == [1, 1, 0]
    assert [a["outcome"] for a in runs] == ["failed", "failed", "succeeded"]
    for earlier, later in zip(runs, runs[1:]):
        assert later["started_at"] - earlier["ended_at"] >= 1.0 - FLOAT_SLACK
    prep_end = attempts(jobman, prep_id)[0]["ended_at"]
    assert runs[0]["started_at"] >= prep_end
    shown = jobman.show(analyze_id)
    assert shown["outcome"] == "succeeded" and shown["attempts"] == 3
    assert shown["dependencies"] == [{"job": prep_id, "handle": 1, "name": "prepare_data", "condition": "success",
                                      "state": "succeeded"}]
    assert "retry_scheduled" in [e["kind"] for e in shown["events"]]
    logs = jobman("logs", analyze_id, check=True).stdout
    assert "analysis attempt 1" in logs and "analysis attempt 3" in logs


def test_a_non_retryable_exit_code_fails_at_once(jobman, tmp_path):
    analyze = write_analysis(tmp_path, [2])
    job_id = jobman.run("python", str(analyze), str(tmp_path / "count"),
                        opts=["--retries", "2", "--retryable-exit-code", "1", "--retry-delay", "1s"])
    assert jobman("wait", job_id).returncode == 2
    assert [a["exit_code"] for a in attempts(jobman, job_id)] == [2]
    assert jobman.state(job_id)["outcome"] == "failed"


def test_retries_exhausted_and_exponential_backoff(jobman):
    job_id = jobman.run("sh", "-c", "exit 3", opts=["--retries", "2", "--retry-delay", "0.2s",
                                                    "--retry-backoff", "exponential"])
    assert jobman("wait", job_id).returncode == 3
    runs = attempts(jobman, job_id)
    assert len(runs) == 3
    # FLOAT_SLACK: a wall-clock float near 1.8e9 is exact to 2.4e-7 s, so end + delay rounds by up to half that
    assert runs[1]["started_at"] - runs[0]["ended_at"] >= 0.2 - FLOAT_SLACK
    assert runs[2]["started_at"] - runs[1]["ended_at"] >= 0.4 - FLOAT_SLACK


def test_dependency_outcomes_propagate(jobman):
    failing = jobman.run("sh", "-c", "exit 1", opts=["--name", "root"])
    child = jobman.run("true", opts=["--after-success", "root", "--name", "child"])
    grandchild = jobman.run("true", opts=["--after-success", "child"])
    on_failure = jobman.run("true", opts=["--after-failure", "root"])
    either = jobman.run("true", opts=["--after", "root"])
    never_on_success = jobman.run("true", opts=["--after-failure", "child"])
    jobman("wait", failing, child, grandchild, on_failure, either, never_on_success)
    assert jobman.state(child)["outcome"] == "dependency_failed"
    assert jobman.state(grandchild)["outcome"] == "dependency_failed"
    assert jobman.state(on_failure)["outcome"] == "succeeded"
    assert jobman.state(either)["outcome"] == "succeeded"
    # child ended dependency_failed, which is "any outcome but succeeded": --after-failure holds.
    assert jobman.state(never_on_success)["outcome"] == "succeeded"
    shown = jobman.show(child)
    assert shown["attempts"] == 0
    assert "dependency root (job 1) ended failed" in shown["detail"] and "--after-success" in shown["detail"]
    assert jobman("wait", child).returncode == 122


def test_after_runs_either_way_and_mixed_conditions(jobman):
    ok = jobman.run("true", opts=["--name", "ok"])
    bad = jobman.run("false", opts=["--name", "bad"])
    mixed = jobman.run("true", opts=["--after-success", "ok", "--after-failure", "bad", "--after", "ok"])
    assert jobman("wait", mixed).returncode == 0
    assert {d["job"] for d in jobman.show(mixed)["dependencies"]} == {ok, bad}


def test_selectors_resolve_at_submission(jobman, tmp_path):
    gate = tmp_path / "gate"
    first = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done", opts=["--name", "step"])
    dependent = jobman.run("true", opts=["--after-success", "step"])
    second = jobman.run("false", opts=["--name", "step"])  # a later job with the same name changes nothing
    jobman("wait", second)
    gate.touch()
    assert jobman("wait", dependent).returncode == 0
    assert jobman.show(dependent)["dependencies"][0]["job"] == first


def test_dag_of_100_jobs(jobman):
    """Fan-out to 10 layers of 10, each job depending on every job of the layer above (fan-in)."""
    root = jobman.run("true", opts=["--name", "root"])
    previous = [root]
    every = [root]
    for _ in range(9):
        current = []
        for _ in range(11):
            opts = []
            for dep in previous:
                opts += ["--after-success", dep]
            current.append(jobman.run("true", opts=opts))
        every += current
        previous = current
    assert len(every) == 100
    assert jobman("wait", "-q", *every, timeout=240).returncode == 0
    for job_id in every:
        assert jobman.state(job_id)["outcome"] == "succeeded"


def test_delay_and_not_before(jobman):
    before = time.time()
    delayed = jobman.run("true", opts=["--delay", "0.8s"])
    at = jobman.run("true", opts=["--not-before", f"@{before + 0.5}"])
    later = jobman.run("true", opts=["--not-before", "23:59:59" if time.localtime().tm_hour < 23 else "@9999999999"])
    jobman("wait", delayed, at, check=True)
    assert attempts(jobman, delayed)[0]["started_at"] >= before + 0.8
    assert attempts(jobman, at)[0]["started_at"] >= before + 0.5
    waits = [e for e in jobman.show(delayed)["events"] if e["kind"] == "waiting"]
    assert waits and waits[0]["waiting_for"] == "not_before"
    listed = wait_for(lambda: [j for j in json.loads(jobman("list", "--json").stdout)
                               if j["id"] == later and j["waiting_for"] == "not_before"])
    assert listed[0]["wait_detail"].startswith("not before ")
    assert "not before" in jobman("list", check=True).stdout
    jobman("cancel", later, check=True)


def test_list_says_until_when_a_retry_waits(jobman):
    before = time.time()
    job_id = jobman.run("false", opts=["--retries", "1", "--retry-delay", "1h"])
    state = wait_for(lambda: (s := jobman.state(job_id))["waiting_for"] == "retry" and s)
    until = time.strftime("%Y-%m-%d %H:%M", time.localtime(state["wait_until"]))
    assert state["wait_until"] >= before + 3600
    line = next(line for line in jobman("list", check=True).stdout.splitlines() if line.startswith("1 "))
    assert "retry 2 after attempt 1 failed" in line and f"not before {until}" in line, line
    assert f"not before {until}" in jobman("show", job_id, check=True).stdout
    jobman("cancel", job_id, check=True)


def test_timeout_kills_and_is_timed_out(jobman):
    job_id = jobman.run("sleep", "30", opts=["--timeout", "0.5s", "--kill-after", "1s"])
    assert jobman("wait", job_id).returncode == 124
    state = jobman.state(job_id)
    assert state["outcome"] == "timed_out"
    run = attempts(jobman, job_id)[0]
    assert run["outcome"] == "timed_out" and run["signal"] == 15
    assert 0.5 <= run["ended_at"] - run["started_at"] < 5


def test_timeout_escalates_to_sigkill(jobman):
    job_id = jobman.run("sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30",
                        opts=["--timeout", "0.3s", "--kill-after", "0.5s"])
    assert jobman("wait", job_id).returncode == 124
    assert attempts(jobman, job_id)[0]["signal"] == 9


def test_retry_on_timeout(jobman, tmp_path):
    counter = tmp_path / "n"
    script = f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 2 ] || sleep 30"
    job_id = jobman.run("sh", "-c", script, opts=["--timeout", "0.5s", "--retries", "1", "--retry-on-timeout",
                                                  "--kill-after", "1s"])
    assert jobman("wait", job_id).returncode == 0
    assert [a["outcome"] for a in attempts(jobman, job_id)] == ["timed_out", "succeeded"]
    no_retry = jobman.run("sleep", "30", opts=["--timeout", "0.3s", "--retries", "3"])
    assert jobman("wait", no_retry).returncode == 124
    assert len(attempts(jobman, no_retry)) == 1


def _max_overlap(runs) -> int:
    points = sorted([(r["started_at"], 1) for r in runs] + [(r["ended_at"], -1) for r in runs],
                    key=lambda p: (p[0], p[1]))
    current = best = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def test_group_limit_and_order(jobman, tmp_path):
    jobman("group", "set", "pair", "--limit", "0", check=True)
    ids = []
    for i in range(20):
        priority = 5 if i in (13, 17) else 0
        ids.append(jobman.run("sh", "-c", "sleep 0.15", opts=["--group", "pair", "--priority", str(priority)]))
    # Limit 0 pauses the group: nothing starts.
    wait_for(lambda: all(jobman.state(i)["waiting_for"] == "slot" for i in ids), timeout=30)
    assert all(not attempts(jobman, i) for i in ids)
    listed = {j["id"]: j for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert "group pair is paused" in listed[ids[0]]["wait_detail"]
    groups = json.loads(jobman("group", "list", "--json", check=True).stdout)
    assert {"name": "pair", "limit": 0, "paused": False, "running": 0, "waiting": 20} in groups
    # Raising the limit starts the waiting jobs, at most two at a time, in priority-then-submission order.
    jobman("group", "set", "pair", "--limit", "2", check=True)
    assert jobman("wait", "-q", *ids, timeout=120).returncode == 0
    runs = [attempts(jobman, i)[0] for i in ids]
    assert _max_overlap(runs) <= 2
    started = [i for _, i in sorted((r["started_at"], i) for r, i in zip(runs, ids))]
    expected = [ids[13], ids[17]] + [i for n, i in enumerate(ids) if n not in (13, 17)]
    assert set(started[:2]) == {ids[13], ids[17]}
    # Two slots admit two jobs at a time, so neighbours in line may start in either order; nothing
    # starts ahead of a job more than one place before it in line.
    assert all(abs(started.index(job) - n) <= 1 for n, job in enumerate(expected)), (started, expected)


def test_group_must_exist(jobman):
    result = jobman("run", "--print-id", "--group", "nosuch", "--", "true")
    assert result.returncode == 2
    assert "group 'nosuch' does not exist" in result.stderr and "jobman group set nosuch --limit N" in result.stderr
    assert jobman.count_jobs() == 0


def test_default_group_limit_is_cpu_count(jobman):
    import os

    jobman("wait", jobman.run("true"), check=True)
    groups = json.loads(jobman("group", "list", "--json", check=True).stdout)
    assert groups == [{"name": "default", "limit": os.cpu_count(), "paused": False, "running": 0, "waiting": 0}]


def test_cancel_waiting_and_running_jobs(jobman, tmp_path):
    running = jobman.run("sleep", "30", opts=["--name", "long"])
    dependent = jobman.run("true", opts=["--after-success", "long"])
    either = jobman.run("true", opts=["--after", "long"])
    delayed = jobman.run("true", opts=["--delay", "1h"])
    wait_for(lambda: jobman.state(running)["phase"] == "running")
    pid = attempts(jobman, running)[0]["pid"]
    result = jobman("cancel", running, delayed, "--json", check=True)
    outcomes = {r["id"]: r["outcome"] for r in json.loads(result.stdout)}
    assert outcomes == {running: "cancelled", delayed: "cancelled"}
    assert jobman("wait", dependent).returncode == 122
    assert jobman.state(dependent)["outcome"] == "dependency_failed"
    assert jobman("wait", either).returncode == 0
    assert jobman("wait", running).returncode == 125
    from tests.helpers import alive

    assert not alive(pid)
    again = jobman("cancel", running, check=True)
    assert "already finished: cancelled" in again.stdout


def test_doorbell_wakes_a_dependent_long_before_the_slow_poll(jobman, tmp_path):
    """With a 30 s fallback poll, the dependent must still start promptly: only the doorbell can do that."""
    gate = tmp_path / "gate"
    env = {"JOBMAN_POLL_INTERVAL": "30s", "JOBMAN_LEASE": "60s", "JOBMAN_RENEW_INTERVAL": "20s"}
    first = jobman("run", "--print-id", "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", env=env,
                   check=True).stdout.strip()
    second = jobman("run", "--print-id", "--after-success", first, "--", "true", env=env, check=True).stdout.strip()
    wait_for(lambda: jobman.state(second)["waiting_for"] == "dependencies")
    gate.touch()
    assert jobman("wait", second, timeout=20).returncode == 0
    gap = attempts(jobman, second)[0]["started_at"] - attempts(jobman, first)[0]["ended_at"]
    assert gap < 5.0


def test_idle_waiting_supervisors_write_only_the_lease_round_and_poll_slowly(jobman, tmp_path):
    """Two jobs wait. One supervisor holds the lease round: its only writes are the round's, one
    transaction per renewal interval that moves the time it last saw the covered supervisors alive (each job
    is covered once, then not written again). The other writes nothing at all and wakes only for its fallback
    poll. Both leases stay fresh all along."""
    trace = tmp_path / "queries.log"
    gate = tmp_path / "gate"
    blocker = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    env = {"JOBMAN_TEST_QUERY_LOG": str(trace), "JOBMAN_POLL_INTERVAL": "1s", "JOBMAN_LEASE": "5s",
           "JOBMAN_RENEW_INTERVAL": "0.5s"}
    waiters = [jobman("run", "--print-id", "--after-success", blocker, "--", "true", env=env, check=True).stdout.strip()
               for _ in range(2)]
    wait_for(lambda: all(jobman.state(w)["waiting_for"] == "dependencies" for w in waiters))
    holder_pid = wait_for(lambda: _round_holder_pid(jobman, waiters), timeout=30)
    member_pid = ({jobman.state(w)["supervisor_pid"] for w in waiters} - {holder_pid}).pop()
    # From the member's first poll after the round began on, both are in the line.
    began = float(_rounds(trace, holder_pid, 0.0)[0].split()[0])
    wait_for(lambda: any(float(line.split()[0]) > began and f" {member_pid} SELECT s.*" in line
                         for line in trace.read_text().splitlines()), timeout=30)
    # The window: eight whole rounds (3.2-4 s), counted rather than timed; the leases sampled meanwhile.
    start = float(_rounds(trace, holder_pid, time.time())[0].split()[0]) - 0.05
    freshest = []
    while len(rounds := _rounds(trace, holder_pid, start)) < 9:
        now = time.time()
        freshest.append(min(jobman.state(w)["lease_end"] for w in waiters) - now)
        time.sleep(0.1)
    end = float(rounds[8].split()[0]) - 0.05
    gate.touch()
    assert jobman("wait", *waiters).returncode == 0
    by_pid = {holder_pid: [], member_pid: []}
    for line in trace.read_text().splitlines():
        at, pid, sql = line.split(" ", 2)
        if start <= float(at) < end and int(pid) in by_pid:
            by_pid[int(pid)].append(sql)
    member = by_pid[member_pid]
    assert [s for s in member if not s.startswith("SELECT")] == []  # no write, no transaction
    assert 2 <= len([s for s in member if s.startswith("SELECT s.*")]) <= 5, member  # polls 1-1.5 s apart
    holder = by_pid[holder_pid]
    writes = [s for s in holder if not s.startswith("SELECT")]
    assert {s.split(" (")[0].split(" SET")[0] for s in writes} <= {
        "BEGIN IMMEDIATE", "INSERT INTO lease_round", "UPDATE job_state", "UPDATE lease_round", "COMMIT"}, writes
    assert writes.count("BEGIN IMMEDIATE") == 8, writes
    assert len([s for s in writes if s.startswith("UPDATE lease_round SET verified_at")]) == 8, writes
    # Each waiting job is covered once (both were before the window began): its row is not written again ...
    assert [s for s in writes if s.startswith("UPDATE job_state")] == [], writes
    assert freshest and min(freshest) > 0.3, freshest  # ... and never has less than a period (0.4-0.5 s) left


def _round_holder_pid(jobman, job_ids) -> int | None:
    with jobman.db() as conn:
        row = conn.execute("SELECT s.supervisor_pid FROM lease_round r JOIN job_state s"
                           " ON s.supervisor_id = r.supervisor_id").fetchone()
    return row[0] if row else None


def _rounds(trace, pid: int, since: float) -> list[str]:
    """The lease rounds one supervisor wrote after `since`, waiting until there is at least one."""
    return wait_for(lambda: [line for line in trace.read_text().splitlines() if float(line.split()[0]) > since
                             and line.split()[1] == str(pid) and "INSERT INTO lease_round" in line], timeout=30)


def _quiet(trace, seconds: float = 0.3) -> float:
    """Wait until no supervisor has asked the database anything for `seconds`; returns the time then."""
    def last_query() -> float:
        lines = trace.read_text().splitlines()
        return float(lines[-1].split()[0]) if lines else 0.0

    wait_for(lambda: time.time() - last_query() >= seconds, timeout=30)
    return time.time()


def _who_looked(trace, start: float, end: float) -> set[int]:
    """Supervisors (pids) that read their job's state between start and end."""
    looked = set()
    for line in trace.read_text().splitlines():
        at, pid, sql = line.split(" ", 2)
        if start <= float(at) < end and sql.startswith("SELECT s.*"):
            looked.add(int(pid))
    return looked


def test_a_freed_slot_wakes_the_next_in_line_only(jobman, tmp_path):
    """Twenty jobs wait for the one slot of a group; the holder ends. Only the job first in line (the
    higher priority) wakes and looks; the nineteen others sleep on (their fallback poll is far off)."""
    trace, gate, gate2 = tmp_path / "queries.log", tmp_path / "gate", tmp_path / "gate2"
    env = {"JOBMAN_TEST_QUERY_LOG": str(trace), "JOBMAN_POLL_INTERVAL": "60s", "JOBMAN_LEASE": "90s",
           "JOBMAN_RENEW_INTERVAL": "30s"}
    jobman("group", "set", "one", "--limit", "1", check=True)
    holder = jobman("run", "--print-id", "--group", "one", "--", *gated(gate), env=env, check=True).stdout.strip()
    wait_for(lambda: jobman.state(holder)["phase"] == "running")
    waiters = [jobman("run", "--print-id", "--group", "one", "--", "true", env=env, check=True).stdout.strip() for _ in range(18)]
    first = jobman("run", "--print-id", "--group", "one", "--priority", "5", "--", *gated(gate2), env=env,
                   check=True).stdout.strip()
    waiters.append(jobman("run", "--print-id", "--group", "one", "--", "true", env=env, check=True).stdout.strip())
    wait_for(lambda: all(jobman.state(w)["waiting_for"] == "slot" for w in waiters + [first]), timeout=30)
    start = _quiet(trace)  # every waiter has settled into its idle loop
    gate.touch()
    wait_for(lambda: jobman.state(first)["phase"] == "running", timeout=10)
    end = _quiet(trace)  # whoever was woken has looked
    assert _who_looked(trace, start, end) == {jobman.state(first)["supervisor_pid"]}
    assert all(jobman.state(w)["phase"] == "waiting" for w in waiters)
    gate2.touch()
    assert jobman("wait", "-q", *waiters, timeout=60).returncode == 0


def test_a_finished_dependency_wakes_its_dependents_only(jobman, tmp_path):
    trace, gate_a, gate_b = tmp_path / "queries.log", tmp_path / "a", tmp_path / "b"
    env = {"JOBMAN_TEST_QUERY_LOG": str(trace), "JOBMAN_POLL_INTERVAL": "60s", "JOBMAN_LEASE": "90s",
           "JOBMAN_RENEW_INTERVAL": "30s"}
    a = jobman("run", "--print-id", "--", *gated(gate_a), env=env, check=True).stdout.strip()
    b = jobman("run", "--print-id", "--", *gated(gate_b), env=env, check=True).stdout.strip()
    # The dependents of b wait first, so one of them holds the lease round throughout: a holder among the
    # dependents of a would hand the round on as its job starts, waking a waiter for that alone.
    after_b = [jobman("run", "--print-id", "--after", b, "--", "true", env=env, check=True).stdout.strip() for _ in range(5)]
    wait_for(lambda: _round_holder_pid(jobman, after_b), timeout=30)
    after_a = [jobman("run", "--print-id", "--after", a, "--", "true", env=env, check=True).stdout.strip() for _ in range(5)]
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "dependencies" for j in after_a + after_b), timeout=30)
    pids_b = {jobman.state(j)["supervisor_pid"] for j in after_b}
    assert _round_holder_pid(jobman, after_b) in pids_b
    start = _quiet(trace)
    gate_a.touch()
    assert jobman("wait", "-q", *after_a, timeout=30).returncode == 0
    end = _quiet(trace)
    assert not _who_looked(trace, start, end) & pids_b
    assert all(jobman.state(j)["phase"] == "waiting" for j in after_b)
    gate_b.touch()
    assert jobman("wait", "-q", *after_b, timeout=30).returncode == 0


def gated(gate) -> list[str]:
    return ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"]


def test_fifty_waiting_supervisors_never_see_a_locked_database(jobman, tmp_path):
    gate = tmp_path / "gate"
    jobman("group", "set", "wide", "--limit", "50", check=True)
    blocker = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done", opts=["--name", "gate"])
    env = {"JOBMAN_POLL_INTERVAL": "1s", "JOBMAN_LEASE": "2s", "JOBMAN_RENEW_INTERVAL": "0.5s"}
    ids = [jobman("run", "--print-id", "--after-success", "gate", "--group", "wide", "--", "true", env=env,
                  check=True).stdout.strip() for _ in range(50)]
    wait_for(lambda: all(jobman.state(i)["phase"] == "waiting" for i in ids), timeout=60)
    gate.touch()
    assert jobman("wait", "-q", blocker, *ids, timeout=180).returncode == 0
    logs = list((jobman.home / "logs").rglob("supervisor.log"))
    assert len(logs) == 51
    for log in logs:
        text = log.read_text()
        assert "Traceback" not in text and "supervisor error" not in text, text


def test_lost_slot_is_freed_when_the_target_is_gone(jobman):
    jobman("group", "set", "one", "--limit", "1", check=True)
    holder = jobman.run("sleep", "30", opts=["--group", "one"])
    wait_for(lambda: jobman.state(holder)["phase"] == "running")
    nxt = jobman.run("true", opts=["--group", "one"])
    wait_for(lambda: jobman.state(nxt)["waiting_for"] == "slot")
    target = attempts(jobman, holder)[0]["pid"]
    kill_all([jobman.state(holder)["supervisor_pid"], target])
    # Nobody runs a command: the waiting supervisor itself notices the dead holder once its lease expires.
    assert jobman("wait", nxt, timeout=30).returncode == 0
    assert jobman.state(holder)["outcome"] == "lost" and jobman.state(holder)["slot_held"] == 0


def test_lost_slot_stays_held_while_the_target_lives(jobman):
    jobman("group", "set", "one", "--limit", "1", check=True)
    holder = jobman.run("sleep", "30", opts=["--group", "one"])
    wait_for(lambda: jobman.state(holder)["phase"] == "running")
    nxt = jobman.run("true", opts=["--group", "one"])
    target = wait_for(lambda: attempts(jobman, holder)[0]["pid"])  # (running is written before the target's pid)
    kill_all([jobman.state(holder)["supervisor_pid"]])
    wait_for(lambda: jobman("reconcile") and jobman.state(holder)["outcome"] == "lost", timeout=10)
    time.sleep(1.5)  # more than a lease: the group must stay honestly full
    assert jobman.state(nxt)["phase"] == "waiting" and jobman.state(holder)["slot_held"] == 1
    listed = {j["id"]: j for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert "still alive" in listed[holder]["wait_detail"]
    assert "group one is full" in listed[nxt]["wait_detail"]
    kill_all([target])
    assert jobman("wait", nxt, timeout=30).returncode == 0


@pytest.mark.parametrize("args, needle", [
    (["--delay", "-1s"], "--delay"),
    (["--delay", "soon"], "malformed duration"),
    (["--timeout", "0"], "--timeout must be greater than zero"),
    (["--retry-delay", "1x"], "malformed duration"),
    (["--retries", "-1"], "--retries must be between 0 and"),
    (["--retryable-exit-code", "256"], "between 0 and 255"),
    (["--retryable-exit-code", "-1"], "between 0 and 255"),
    (["--not-before", "tomorrowish"], "malformed time"),
    (["--after-success", "nothing-like-this"], "no job matches 'nothing-like-this'"),
    (["--group", "ghost"], "does not exist"),
    (["--retry-backoff", "sometimes"], "invalid choice"),
    (["--log-limit", "lots"], "malformed size"),
])
def test_bad_scheduling_input(jobman, args, needle):
    jobman.run("true")
    before = jobman.count_jobs()
    result = jobman("run", "--print-id", *args, "--", "true")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and needle in result.stderr
    assert jobman.count_jobs() == before


@pytest.mark.parametrize("limit", ["-1", "many"])
def test_bad_group_limit(jobman, limit):
    result = jobman("group", "set", "g", "--limit", limit)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_a_waiting_jobs_priority_can_change_and_it_keeps_its_place_within_the_new_one(jobman, tmp_path):
    """`jobman priority JOB N` (tsp -u, pueue's switch): the job moves to priority N in its group's line,
    in submission order within it."""
    gate = tmp_path / "gate"
    jobman("group", "set", "one", "--limit", "1", check=True)
    order = tmp_path / "order"
    blocker = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--group", "one"])
    wait_for(lambda: jobman.state(blocker)["phase"] == "running")
    jobs = [jobman.run("sh", "-c", f"echo {n} >> {order}", opts=["--group", "one", "--priority", str(p)])
            for n, p in ((1, 5), (2, 0), (3, 0), (4, 5))]
    changed = json.loads(jobman("priority", jobs[2], "5", "--json", check=True).stdout)
    assert changed == [{"id": jobs[2], "handle": 4, "priority": 5, "changed": True, "done": True,
                        "message": "priority 5"}]
    assert jobman.show(jobs[2])["priority"] == 5 and "priority_changed" in [e["kind"] for e in jobman.show(jobs[2])["events"]]
    refused = jobman("priority", blocker, "9")
    assert refused.returncode == 2 and "it is running" in refused.stderr
    assert jobman("priority", jobs[0], "x").returncode == 2
    gate.touch()
    assert jobman("wait", *jobs, timeout=60).returncode == 0
    # 1 and 4 (priority 5, submitted first and last) around 3 (moved to 5: submitted between them), then 2.
    assert order.read_text().split() == ["1", "3", "4", "2"]
