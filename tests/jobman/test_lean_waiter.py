"""The lean waiting form: a waiting supervisor execs into bash blocked on its doorbell and back
into Python when rung or at its timer, as the same process. Everything that holds for a waiting job holds
in that form: it wakes, takes a slot and runs; it is cancelled, held and released; the lease round verifies
it and renews its lease, a killed one is found lost and a stopped one is left alone; no ring is lost while
it changes form; `jobman show` names it; the handoff's windows and restart --with-dependents end as before."""
import json
import os
import signal
import sqlite3
import time

import pytest

from tests.helpers import alive, wait_for

# The round renews every 0.3 s; the lean waiters' own timers (their fallback polls) are 60-90 s away, so
# only a ring (or the round's holder) can wake one within a test.
WINDOWS = {"JOBMAN_LEASE": "1.5s", "JOBMAN_RENEW_INTERVAL": "0.3s", "JOBMAN_POLL_INTERVAL": "60s"}
# ... and for the tests of a lost ring: a round so slow that its holder never rings a waiter meanwhile.
SLOW_ROUND = {"JOBMAN_LEASE": "90s", "JOBMAN_RENEW_INTERVAL": "30s", "JOBMAN_POLL_INTERVAL": "60s"}


def argv0(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0]
    except OSError:
        return None


def environ_of(pid: int) -> dict:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(item.split("=", 1) for item in f.read().decode().split("\0") if item)


def is_lean(pid: int) -> bool:
    return argv0(pid) == b"jobman-wait"


def start_time(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


def uss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean", "Private_Dirty")))


def round_holder(jobman) -> str | None:
    with jobman.db() as conn:
        row = conn.execute("SELECT s.job_id FROM lease_round r JOIN job_state s ON s.supervisor_id = r.supervisor_id"
                           " WHERE r.expires_at > ?", (time.time(),)).fetchone()
    return row[0] if row else None


def paused_waiters(jobman, count: int, env=WINDOWS, group: str = "paused") -> tuple[str, list[str]]:
    """`count` jobs waiting in a paused group: (the round's holder, the others, each in its lean form)."""
    jobman("group", "set", group, "--limit", "0", check=True)
    ids = [jobman("run", "--print-id", "--group", group, "--", "true", env=env, check=True).stdout.strip() for _ in range(count)]
    holder = wait_for(lambda: round_holder(jobman), timeout=20, message="a holder of the lease round")
    others = [j for j in ids if j != holder]
    wait_for(lambda: all(is_lean(jobman.state(j)["supervisor_pid"]) for j in others), timeout=20,
             message="the other waiters to turn lean")
    return holder, others


def state_without_reconciling(jobman, job_id: str) -> dict:
    """The job's row straight from SQLite (a jobman command would run a reconcile pass of its own)."""
    return jobman.state(job_id)


def test_a_lean_waiter_is_the_same_process_costs_little_and_wakes_takes_a_slot_and_runs(jobman, tmp_path):
    holder, lean = paused_waiters(jobman, 3)
    job = lean[0]
    state = jobman.state(job)
    pid = state["supervisor_pid"]
    # exec kept what identity and the lease round check: the pid, the start time, the session.
    assert start_time(pid) == state["supervisor_start_time"] and os.getsid(pid) == pid
    assert os.readlink(f"/proc/{pid}/exe") == "/usr/bin/bash"
    assert environ_of(pid)["LC_ALL"] == "C" and environ_of(pid)["JOBMAN_HOME"] == jobman.env["JOBMAN_HOME"]
    assert uss_kib(pid) < 512, uss_kib(pid)  # At most 0.5 MiB (a Python supervisor is ~4.4 MiB)
    holder_pid = jobman.state(holder)["supervisor_pid"]
    assert not is_lean(holder_pid) and uss_kib(holder_pid) > 2048  # the round's holder stays in Python
    out = tmp_path / "ran"
    late = jobman.run("sh", "-c", f"echo $PPID > {out}", opts=["--group", "paused"], env=WINDOWS)
    wait_for(lambda: is_lean(jobman.state(late)["supervisor_pid"]), timeout=20)
    late_pid = jobman.state(late)["supervisor_pid"]
    jobman("group", "set", "paused", "--limit", "1", check=True)  # one slot: the line drains one by one
    assert jobman("wait", "-q", holder, *lean, late, timeout=60).returncode == 0
    # The job ran under the supervisor that claimed it: the same pid parented its target.
    assert int(out.read_text()) == late_pid
    assert jobman.state(late)["supervisor_pid"] == late_pid
    assert "Traceback" not in (jobman.home / "logs" / late / "supervisor.log").read_text()


def test_the_round_verifies_lean_waiters_and_keeps_their_leases_fresh(jobman):
    holder, lean = paused_waiters(jobman, 4)
    deadline = time.time() + 3  # ten rounds; no lean waiter wakes meanwhile
    while time.time() < deadline:
        now = time.time()
        # 1.5 s, renewed at a 0.24-0.3 s round once less than 0.6 s is left: never less than a period
        assert min(jobman.state(j)["lease_end"] for j in lean) - now > 0.2
        assert all(is_lean(jobman.state(j)["supervisor_pid"]) for j in lean)
        time.sleep(0.1)
    jobman("group", "set", "paused", "--limit", "4", check=True)
    assert jobman("wait", "-q", holder, *lean, timeout=60).returncode == 0


def test_a_lean_waiter_is_cancelled(jobman):
    holder, lean = paused_waiters(jobman, 3)
    job = lean[0]
    pid = jobman.state(job)["supervisor_pid"]
    jobman("cancel", job, check=True)
    state = jobman.wait_finished(job, timeout=10)
    assert state["outcome"] == "cancelled" and state["detail"] == "cancelled before it ran"
    wait_for(lambda: not alive(pid), timeout=10, message="the supervisor to exit")
    jobman("group", "set", "paused", "--limit", "2", check=True)
    assert jobman("wait", "-q", holder, lean[1], timeout=60).returncode == 0


def test_a_lean_waiter_is_held_and_released(jobman):
    holder, lean = paused_waiters(jobman, 3)
    job, other = lean
    jobman("hold", job, check=True)
    wait_for(lambda: jobman.state(job)["waiting_for"] == "held", timeout=10)
    wait_for(lambda: is_lean(jobman.state(job)["supervisor_pid"]), timeout=10)  # held, it waits lean again
    jobman("group", "set", "paused", "--limit", "3", check=True)
    assert jobman("wait", "-q", holder, other, timeout=60).returncode == 0
    assert jobman.state(job)["phase"] == "waiting"  # held: not started although a slot is free
    jobman("release", job, check=True)
    assert jobman("wait", job, timeout=30).returncode == 0


def test_a_killed_lean_waiter_is_found_lost_by_the_round_and_a_stopped_one_is_left_alone(jobman):
    holder, lean = paused_waiters(jobman, 4)
    killed, stopped, other = lean
    os.kill(jobman.state(killed)["supervisor_pid"], signal.SIGKILL)
    stopped_pid = jobman.state(stopped)["supervisor_pid"]
    os.kill(stopped_pid, signal.SIGSTOP)
    try:
        # No command runs meanwhile: the holder of the round sees the killed one end, and once its lease has
        # run out, runs the reconcile pass that finds it lost. The stopped one lives: its lease is kept.
        lost = wait_for(lambda: (s := state_without_reconciling(jobman, killed))["phase"] == "finished" and s,
                        timeout=15)
        assert lost["outcome"] == "lost"
        assert jobman.state(stopped)["lease_end"] > time.time() + 0.25
        assert jobman("reconcile", check=True).returncode == 0
        assert jobman.state(stopped)["phase"] == "waiting"
        shown = jobman.show(stopped)["supervisor"]
        assert shown["alive"] and shown["stopped"]
    finally:
        os.kill(stopped_pid, signal.SIGCONT)
    wait_for(lambda: jobman.state(stopped)["lease_end"] > time.time() + 0.5, timeout=10)
    assert is_lean(stopped_pid)
    jobman("group", "set", "paused", "--limit", "3", check=True)
    assert jobman("wait", "-q", holder, stopped, other, timeout=60).returncode == 0


def test_show_names_the_waiting_supervisor_and_its_form(jobman):
    holder, lean = paused_waiters(jobman, 2)
    shown = jobman.show(lean[0])["supervisor"]
    assert shown["form"] == "lean" and shown["alive"] and not shown["holds_lease_round"]
    assert shown["pid"] == jobman.state(lean[0])["supervisor_pid"]
    text = jobman("show", lean[0], check=True).stdout
    assert f"pid {shown['pid']} (alive, waiting in its lean form (bash on its doorbell))" in text
    by_holder = jobman.show(holder)["supervisor"]
    assert by_holder["form"] == "python" and by_holder["holds_lease_round"]
    assert "(alive, holds the lease round)" in jobman("show", holder, check=True).stdout
    jobman("group", "set", "paused", "--limit", "2", check=True)
    assert jobman("wait", "-q", holder, *lean, timeout=60).returncode == 0
    assert jobman.show(lean[0])["supervisor"]["form"] is None  # gone with its job


@pytest.mark.parametrize("point", ["supervisor:before_lean", "supervisor:after_wake"])
def test_a_ring_while_the_waiter_changes_form_is_not_lost(jobman, tmp_path, point):
    """The supervisor is held exactly where it changes form (Python about to exec into bash; back in Python
    before it has read anything) while the job is cancelled, which rings its doorbell once. The round is
    too slow to ring it again and its own timer is a minute away: only that ring can end the job."""
    holder, _ = paused_waiters(jobman, 1, env=SLOW_ROUND)
    marker = tmp_path / "marker"
    env = {**SLOW_ROUND, "JOBMAN_TEST_FAULT": point, "JOBMAN_TEST_MARKER": str(marker)}
    if point == "supervisor:after_wake":
        job = jobman("run", "--print-id", "--group", "paused", "--", "true", env=env, check=True).stdout.strip()
        wait_for(lambda: is_lean(jobman.state(job)["supervisor_pid"]), timeout=20)
        with open(jobman.home / "bells" / f"{job}.fifo", "wb", buffering=0) as bell:
            bell.write(b"!")  # a ring that asks nothing: it comes back to Python and stops there
    else:
        job = jobman("run", "--print-id", "--group", "paused", "--", "true", env=env, check=True).stdout.strip()
    wait_for(marker.exists, timeout=20, message=f"the supervisor to reach {point}")
    pid = jobman.state(job)["supervisor_pid"]
    assert not is_lean(pid)
    if point == "supervisor:after_wake":  # back from bash (in the C locale) with its own environment (but
        # for PWD, which bash sets to the directory it runs in, /, and `_`, which it drops: neither is jobman's)
        expected = {k: v for k, v in {**jobman.env, **env}.items() if k not in ("PWD", "_")}
        assert {k: v for k, v in environ_of(pid).items() if k not in ("PWD", "_")} == expected
    jobman("cancel", job, check=True)
    marker.unlink()
    state = jobman.wait_finished(job, timeout=10)
    assert state["outcome"] == "cancelled"
    jobman("cancel", holder, check=True)


def test_a_time_gate_wakes_a_lean_waiter_on_time(jobman):
    holder, _ = paused_waiters(jobman, 1)
    not_before = round(time.time() + 3, 3)  # the time the option carries, not one a rounding away from it
    job = jobman.run("true", opts=["--not-before", f"@{not_before:.3f}"], env=WINDOWS)
    wait_for(lambda: is_lean(jobman.state(job)["supervisor_pid"]), timeout=10)
    assert jobman.state(job)["waiting_for"] == "not_before"
    assert jobman("wait", job, timeout=30).returncode == 0
    with jobman.db() as conn:
        started = conn.execute("SELECT started_at FROM attempts WHERE job_id = ?", (job,)).fetchone()[0]
    assert not_before <= started < not_before + 1.0, started - not_before
    jobman("cancel", holder, check=True)


def test_a_retry_delay_is_waited_lean(jobman, tmp_path):
    holder, _ = paused_waiters(jobman, 1)
    flag = tmp_path / "second"
    job = jobman.run("sh", "-c", f"test -e {flag} || {{ touch {flag}; exit 1; }}",
                     opts=["--retries", "1", "--retry-delay", "2s"], env=WINDOWS)
    wait_for(lambda: jobman.state(job)["waiting_for"] == "retry", timeout=10)
    wait_for(lambda: is_lean(jobman.state(job)["supervisor_pid"]), timeout=10)
    assert jobman("wait", job, timeout=30).returncode == 0
    with jobman.db() as conn:
        (first_end,), (second_start,) = conn.execute(
            "SELECT ended_at FROM attempts WHERE job_id = ? AND number = 1 UNION ALL"
            " SELECT started_at FROM attempts WHERE job_id = ? AND number = 2", (job, job)).fetchall()
    assert 2.0 <= second_start - first_end < 3.0
    jobman("cancel", holder, check=True)


def test_restart_with_dependents_waits_lean_and_runs(jobman, tmp_path):
    flag, gate = tmp_path / "fixed", tmp_path / "gate"
    compile_ = jobman.run("sh", "-c", f"test -f {flag} && while [ ! -e {gate} ]; do sleep 0.02; done",
                          opts=["--name", "compile"], env=WINDOWS)
    link = jobman.run("true", opts=["--name", "link", "--after-success", "compile"], env=WINDOWS)
    package = jobman.run("true", opts=["--after-success", "link"], env=WINDOWS)
    jobman("wait", compile_, link, package)
    assert jobman.state(package)["outcome"] == "dependency_failed"
    holder, _ = paused_waiters(jobman, 1)  # holds the round, so that the dependents wait lean
    flag.write_text("")
    restarted = {r["restarts"]: r["id"] for r in json.loads(
        jobman("restart", "compile", "--with-dependents", "--json", env=WINDOWS, check=True).stdout)}
    wait_for(lambda: all(is_lean(jobman.state(restarted[j])["supervisor_pid"]) for j in (link, package)),
             timeout=20, message="the re-wired dependents to wait lean")
    gate.touch()
    assert jobman("wait", restarted[package], timeout=30).returncode == 0
    assert jobman.state(restarted[link])["outcome"] == "succeeded"
    jobman("cancel", holder, check=True)


@pytest.mark.parametrize("point", ["supervisor:bad_ack", "cli:after_ack"])
def test_the_handoffs_windows_end_as_before_for_a_job_that_waits_lean(jobman, point):
    """An acknowledgement lost (the CLI reconciles it from the database) or a CLI killed once it has read
    it: either way the supervisor owns the job, waits lean, and runs it once the group opens."""
    holder, _ = paused_waiters(jobman, 1)
    result = jobman("run", "--print-id", "--group", "paused", "--", "true", env={**WINDOWS, "JOBMAN_TEST_FAULT": point})
    with jobman.db() as conn:
        job = conn.execute("SELECT id FROM jobs WHERE id != ? ORDER BY submitted_at DESC LIMIT 1",
                           (holder,)).fetchone()[0]
    if point == "supervisor:bad_ack":
        assert result.returncode == 0 and result.stdout.strip() == job
    else:
        assert result.returncode == -signal.SIGKILL and result.stdout == ""
    wait_for(lambda: is_lean(jobman.state(job)["supervisor_pid"]), timeout=20)
    jobman("group", "set", "paused", "--limit", "2", check=True)
    assert jobman("wait", "-q", job, holder, timeout=30).returncode == 0


def test_a_database_replaced_while_a_waiter_is_lean_is_never_written(jobman):
    holder, lean = paused_waiters(jobman, 2)
    job = lean[0]
    pid = jobman.state(job)["supervisor_pid"]
    db = jobman.home / "jobman.db"
    copy = jobman.home / "copy.db"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    os.replace(copy, db)
    with open(jobman.home / "bells" / f"{job}.fifo", "wb", buffering=0) as bell:
        bell.write(b"!")
    wait_for(lambda: not alive(pid), timeout=10, message="the woken supervisor to exit")
    log = (jobman.home / "logs" / job / "supervisor.log").read_text()
    assert "was deleted or replaced while the job waited" in log, log
    assert jobman.state(job)["phase"] == "waiting"  # the new file's copy of the job was left untouched


def test_jobman_lean_wait_0_keeps_a_waiter_in_python_form(jobman):
    holder, _ = paused_waiters(jobman, 1)
    kept = jobman.run("true", opts=["--group", "paused"], env={**WINDOWS, "JOBMAN_LEAN_WAIT": "0"})
    wait_for(lambda: jobman.state(kept)["waiting_for"] == "slot", timeout=10)
    pid = jobman.state(kept)["supervisor_pid"]
    deadline = time.time() + 1.5  # five rounds
    while time.time() < deadline:
        assert argv0(pid) not in (b"jobman-wait", None)
        time.sleep(0.1)
    assert jobman.show(kept)["supervisor"]["form"] == "python"
    jobman("group", "set", "paused", "--limit", "2", check=True)
    assert jobman("wait", "-q", kept, holder, timeout=30).returncode == 0


def test_a_ring_lost_with_its_ringer_is_made_up_for_by_the_rounds_holder(jobman, tmp_path):
    """The dependency's supervisor is killed between committing its outcome and ringing its dependent (fault
    point supervisor:before_wake). The dependent waits lean with a fallback poll a minute away: the holder of
    the lease round sees its reason to wait gone for two rounds and rings it."""
    holder, _ = paused_waiters(jobman, 1)
    gate = tmp_path / "gate"
    first = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done",
                       env={**WINDOWS, "JOBMAN_TEST_FAULT": "supervisor:before_wake"})
    then = jobman.run("true", opts=["--after-success", first], env=WINDOWS)
    wait_for(lambda: is_lean(jobman.state(then)["supervisor_pid"]), timeout=20)
    gate.touch()
    wait_for(lambda: jobman.state(first)["outcome"] == "succeeded", timeout=20)
    started = time.time()
    assert jobman("wait", then, timeout=30).returncode == 0
    assert time.time() - started < 10  # a few 0.3 s rounds, not the minute of its own fallback poll
    assert "rang 1 waiting job(s) whose reason to wait had gone" in \
        (jobman.home / "logs" / holder / "supervisor.log").read_text()
    jobman("cancel", holder, check=True)
