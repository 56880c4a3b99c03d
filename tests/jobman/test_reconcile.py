"""Reconciliation of supervisors that stopped renewing: lost only when the identity no longer verifies."""
import os
import signal
import time
from pathlib import Path

from tests.helpers import alive, kill_all, wait_for


def running(jobman, *command, opts=()):
    job_id = jobman.run(*command, opts=opts)
    state = wait_for(lambda: (s := jobman.state(job_id))["phase"] == "running" and s, message="running")
    return job_id, state


def target_pid(jobman, job_id):
    with jobman.db() as conn:
        return wait_for(lambda: conn.execute("SELECT pid FROM attempts WHERE job_id = ?", (job_id,)).fetchone()[0])


def reconcile_until(jobman, job_id, outcome, timeout=10.0):
    def check():
        jobman("reconcile", check=True)
        s = jobman.state(job_id)
        return s["phase"] == "finished" and s
    state = wait_for(check, timeout=timeout, message=f"{job_id} to be reconciled")
    assert state["outcome"] == outcome, state
    return state


def test_sigkill_of_running_supervisor_becomes_lost_after_lease(jobman):
    jobman.env["JOBMAN_LEASE"] = "3s"  # room for a reconcile pass while the dead supervisor's lease runs
    job_id, state = running(jobman, "sleep", "60")
    target = target_pid(jobman, job_id)
    os.kill(state["supervisor_pid"], signal.SIGKILL)
    # Before the lease expires nothing is decided, though the supervisor is gone.
    lease_end = jobman.state(job_id)["lease_end"]
    changes = jobman("reconcile", "--json", check=True).stdout
    assert time.time() < lease_end, "the reconcile pass ran after the lease expired: nothing was tested"
    assert job_id not in changes
    assert jobman.state(job_id)["phase"] == "running"
    final = reconcile_until(jobman, job_id, "lost")
    assert final["exit_code"] is None and final["exit_signal"] is None  # no exit code invented
    assert final["finished_at"] >= state["lease_end"] - 0.05
    shown = jobman.show(job_id)
    assert shown["target_alive"] is True and "still alive" in shown["lost_note"]
    assert alive(target)
    kill_all([target])


def test_sigstopped_supervisor_past_its_lease_is_not_lost(jobman, tmp_path):
    out = tmp_path / "out"
    job_id, state = running(jobman, "sh", "-c", f"sleep 1.5; echo done > {out}")
    pid = state["supervisor_pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: time.time() > jobman.state(job_id)["lease_end"] + 0.3, timeout=10)
        changes = jobman("reconcile", "--json", check=True).stdout
        assert job_id not in changes
        assert jobman.state(job_id)["phase"] == "running"
    finally:
        os.kill(pid, signal.SIGCONT)
    final = jobman.wait_finished(job_id)
    assert final["outcome"] == "succeeded"
    assert out.read_text() == "done\n"


def _forge(jobman, job_id, column, value):
    with jobman.db() as conn:
        conn.execute(f"UPDATE job_state SET {column} = ? WHERE job_id = ?", (value, job_id))


def test_altered_start_time_makes_the_job_lost(jobman):
    job_id, state = running(jobman, "sleep", "60")
    target = target_pid(jobman, job_id)
    sup = state["supervisor_pid"]
    os.kill(sup, signal.SIGSTOP)  # keep it from renewing, so the lease expires
    _forge(jobman, job_id, "supervisor_start_time", state["supervisor_start_time"] + 1)
    try:
        final = reconcile_until(jobman, job_id, "lost")
        assert final["exit_code"] is None
    finally:
        os.kill(sup, signal.SIGCONT)
    # The real supervisor finds it no longer owns the job and leaves without touching the record.
    wait_for(lambda: not alive(sup), timeout=10, message="the fenced supervisor to exit")
    assert jobman.state(job_id)["outcome"] == "lost"
    kill_all([target])


def test_altered_boot_id_makes_the_job_lost(jobman):
    job_id, state = running(jobman, "sleep", "60")
    target = target_pid(jobman, job_id)
    sup = state["supervisor_pid"]
    os.kill(sup, signal.SIGSTOP)
    _forge(jobman, job_id, "supervisor_boot_id", "00000000-0000-0000-0000-000000000000")
    try:
        reconcile_until(jobman, job_id, "lost")
    finally:
        os.kill(sup, signal.SIGCONT)
    kill_all([target])


def test_zombie_supervisor_does_not_verify(jobman):
    """A supervisor that died but was not reaped (a zombie) is not alive: the job becomes lost."""
    import subprocess
    import sys

    # Submit from a long-lived process that never reaps its children: the supervisor is its child.
    code = ("import os, sys, time\n"
            "from jobman import cli\n"
            "cli.main(['run', '--print-id', '--', 'sleep', '60'])\n"
            "sys.stdout.flush()\n"
            "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], env=jobman.env, stdout=subprocess.PIPE, text=True)
    try:
        job_id = parent.stdout.readline().strip()
        state = wait_for(lambda: (s := jobman.state(job_id))["phase"] == "running" and s)
        target = target_pid(jobman, job_id)
        sup = state["supervisor_pid"]
        os.kill(sup, signal.SIGKILL)
        wait_for(lambda: Path(f"/proc/{sup}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                 message="the supervisor to be a zombie")
        reconcile_until(jobman, job_id, "lost")
        kill_all([target])
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
