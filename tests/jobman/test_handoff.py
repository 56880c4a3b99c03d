"""The handoff from `jobman run` to a detached supervisor end to end, and every crash window of
docs/architecture.md ("The handoff's crash windows"), each put exactly there by a fault point (JOBMAN_TEST_FAULT)."""
import hashlib
import os
import signal
import subprocess
import sys
import time

from runkit.core.ids import is_uuid7

from tests.helpers import alive, wait_for
from tests.jobman.conftest import JOBMAN


def events(jobman, job_id):
    with jobman.db() as conn:
        return [r[0] for r in conn.execute("SELECT kind FROM events WHERE job_id = ? ORDER BY id", (job_id,))]


def only_job(jobman):
    with jobman.db() as conn:
        rows = conn.execute("SELECT id FROM jobs").fetchall()
    assert len(rows) == 1
    return rows[0][0]


def test_run_prints_id_after_claim_and_job_succeeds(jobman, tmp_path):
    out = tmp_path / "out.txt"
    job_id = jobman.run("sh", "-c", f"echo ran > {out}")
    assert is_uuid7(job_id)
    state = jobman.state(job_id)
    # By the time the id is printed, a supervisor owns the job and its identity and lease are recorded.
    assert state["phase"] != "submitting"
    assert is_uuid7(state["supervisor_id"]) and state["supervisor_pid"] > 0
    assert state["supervisor_start_time"] > 0 and state["supervisor_boot_id"]
    assert state["credential_hash"] is None and state["claim_deadline"] is None
    final = jobman.wait_finished(job_id)
    assert final["outcome"] == "succeeded" and final["exit_code"] == 0
    assert out.read_text() == "ran\n"
    assert events(jobman, job_id) == ["job_submitted", "supervisor_claimed", "attempt_started", "attempt_exited",
                                      "job_finished"]


def test_default_windows_are_stored_with_the_job(jobman):
    env = {k: "" for k in ("JOBMAN_CLAIM_WINDOW", "JOBMAN_LEASE", "JOBMAN_RENEW_INTERVAL", "JOBMAN_POLL_INTERVAL")}
    before = time.time()
    job_id = jobman.run("true", env=env)
    with jobman.db() as conn:
        windows = conn.execute("SELECT claim_window, lease_duration, renew_interval, poll_interval FROM jobs"
                               " WHERE id = ?", (job_id,)).fetchone()
        submitted = conn.execute("SELECT at FROM events WHERE job_id = ? AND kind = 'job_submitted'",
                                 (job_id,)).fetchone()[0]
        claimed = conn.execute("SELECT at FROM events WHERE job_id = ? AND kind = 'supervisor_claimed'",
                               (job_id,)).fetchone()[0]
    assert windows == (10.0, 15.0, 5.0, 30.0)
    assert before <= submitted <= claimed
    state = jobman.wait_finished(job_id)
    assert state["outcome"] == "succeeded"


def test_credential_is_only_stored_as_a_hash_and_never_in_argv_or_environment(jobman):
    job_id = jobman.run("sleep", "30")
    state = jobman.state(job_id)
    pid = state["supervisor_pid"]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert argv[-3:-1] == [b"__supervise", job_id.encode()] and argv[-1] == b""
    with open(f"/proc/{pid}/environ", "rb") as f:
        environ = dict(item.split("=", 1) for item in f.read().decode().split("\0") if item)
    assert environ == jobman.env  # nothing was added to the supervisor's environment
    # Right after acknowledging, the supervisor lets go of its launch pipes: stdin and stdout become
    # /dev/null, stderr its log.
    wait_for(lambda: os.readlink(f"/proc/{pid}/fd/2").endswith(f"{job_id}/supervisor.log"),
             message="the supervisor to detach")
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == "/dev/null"
    # It runs in a session of its own.
    assert os.getsid(pid) == pid
    jobman("cancel", job_id, check=True)


def test_supervisor_dies_before_claim(jobman):
    result = jobman("run", "--print-id", "--", "true", env={"JOBMAN_TEST_FAULT": "supervisor:before_claim"})
    assert result.returncode == 1
    assert result.stdout == ""
    assert "did not claim" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    job_id = only_job(jobman)
    state = jobman.state(job_id)
    assert state["phase"] == "finished" and state["outcome"] == "submission_failed"
    assert state["credential_hash"] is None
    assert "launch failed" in state["detail"]


def test_cli_dies_after_commit_before_launch(jobman):
    result = jobman("run", "--print-id", "--", "true", env={"JOBMAN_TEST_FAULT": "cli:after_commit", "JOBMAN_CLAIM_WINDOW": "0.5s"})
    assert result.returncode == -signal.SIGKILL and result.stdout == ""
    job_id = only_job(jobman)
    state = jobman.state(job_id)
    assert state["phase"] == "submitting" and state["supervisor_id"] is None
    assert jobman("list", "--json", check=True)  # a reading command before the deadline changes nothing
    wait_for(lambda: time.time() > state["claim_deadline"], timeout=5)
    reconciled = jobman("reconcile", "--json", check=True)
    assert job_id in reconciled.stdout
    final = jobman.state(job_id)
    assert final["outcome"] == "submission_failed"
    assert final["detail"] == "no supervisor claimed the job before its claim deadline"


def test_claim_committed_but_acknowledgement_lost(jobman):
    """The supervisor dies right after its claim: the CLI reconciles from the database and prints the id."""
    result = jobman("run", "--print-id", "--", "true", env={"JOBMAN_TEST_FAULT": "supervisor:after_claim"})
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    state = jobman.state(job_id)
    assert state["phase"] == "starting" and state["supervisor_id"]
    # That supervisor is dead: once its lease expires, reconciliation calls the job lost.
    final = wait_for(lambda: jobman("reconcile") and jobman.state(job_id)["phase"] == "finished"
                     and jobman.state(job_id), timeout=10)
    assert final["outcome"] == "lost" and final["exit_code"] is None


def rejections(jobman, job_id):
    """The reasons recorded when `jobman run` rejected the acknowledgement and read the handover back."""
    import json

    with jobman.db() as conn:
        return [json.loads(r[0])["reason"] for r in conn.execute(
            "SELECT data FROM events WHERE job_id = ? AND kind = 'acknowledgement_rejected'", (job_id,))]


def test_malformed_acknowledgement_is_rejected_then_reconciled(jobman, tmp_path):
    out = tmp_path / "out"
    result = jobman("run", "--print-id", "--", "sh", "-c", f"echo ok > {out}", env={"JOBMAN_TEST_FAULT": "supervisor:bad_ack"})
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    # The rejection itself was the path taken: the record says why the acknowledgement was not believed.
    assert rejections(jobman, job_id) == ["the acknowledgement has unknown fields: extra"]
    assert jobman.wait_finished(job_id)["outcome"] == "succeeded"
    assert out.read_text() == "ok\n"


def test_oversized_acknowledgement_is_rejected_then_reconciled(jobman):
    result = jobman("run", "--print-id", "--json", "--", "true", env={"JOBMAN_TEST_FAULT": "supervisor:big_ack"})
    assert result.returncode == 0, result.stderr
    import json

    answer = json.loads(result.stdout)
    assert answer["supervisor_id"] == jobman.state(answer["id"])["supervisor_id"]
    assert rejections(jobman, answer["id"]) == ["the acknowledgement is larger than 1024 bytes"]
    # The supervisor survived its failed write and ran the job.
    assert jobman.wait_finished(answer["id"])["outcome"] == "succeeded"


def test_an_intact_acknowledgement_records_no_rejection(jobman):
    job_id = jobman.run("true")
    assert rejections(jobman, job_id) == []


def test_acknowledgement_read_but_cli_dies_before_printing(jobman, tmp_path):
    out = tmp_path / "out"
    result = jobman("run", "--print-id", "--name", "orphaned-id", "--", "sh", "-c", f"echo ok > {out}",
                    env={"JOBMAN_TEST_FAULT": "cli:after_ack"})
    assert result.returncode == -signal.SIGKILL and result.stdout == ""
    # The id never reached the shell, but the job is owned and runs; jobman list finds it.
    listed = jobman("list", "--json", check=True).stdout
    assert "orphaned-id" in listed
    job_id = only_job(jobman)
    assert jobman.wait_finished(job_id)["outcome"] == "succeeded"


def test_claim_after_deadline_is_refused(jobman):
    result = jobman("run", "--print-id", "--", "true", env={"JOBMAN_TEST_FAULT": "supervisor:late_claim",
                                              "JOBMAN_CLAIM_WINDOW": "0.3s"})
    assert result.returncode == 1 and result.stdout == ""
    job_id = only_job(jobman)
    state = jobman.state(job_id)
    assert state["outcome"] == "submission_failed"
    assert state["supervisor_id"] is None


def _submit_with_known_credential(jobman, credential: bytes) -> str:
    """Commit a job exactly as `jobman run` does, but keep the credential so a test can present it."""
    code = (
        "import sys, time, json\n"
        "from jobman.commands import api; from jobman.handoff import spec as s\n"
        "from jobman.store import transitions\n"
        "from runkit.core.ids import uuid7\n"
        "st = api.State()\n"
        "spec = s.build(argv=['sleep', '30'], cwd=None, env_policy='inherit', env_pairs=[], environ=__import__('os').environ,"
        " name=None, group='default', priority=0, not_before=None, retry=s.default_retry(), timeout=None,"
        " kill_after=10.0, log_limit=0, separate_stderr=False, windows=s.windows_from_env(__import__('os').environ))\n"
        "job_id = uuid7()\n"
        "transitions.submit(st.conn, job_id=job_id, spec=spec, dependencies=[],"
        f" credential_hash=bytes.fromhex('{hashlib.sha256(credential).hexdigest()}'), clock=__import__('runkit.core.clock').core.clock.SYSTEM)\n"
        "print(job_id)\n")
    result = subprocess.run([sys.executable, "-c", code], env=jobman.env, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_second_supervisor_with_same_credential_is_refused(jobman):
    credential = os.urandom(32)
    job_id = _submit_with_known_credential(jobman, credential)
    first = subprocess.Popen([JOBMAN, "__supervise", job_id], env=jobman.env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first.stdin.write(credential)
    first.stdin.close()
    ack = first.stdout.readline()
    assert job_id.encode() in ack
    state = jobman.state(job_id)
    assert state["phase"] in ("starting", "waiting", "running")
    second = subprocess.run([JOBMAN, "__supervise", job_id], env=jobman.env, input=credential,
                            capture_output=True, timeout=30)
    assert second.returncode == 3
    assert b"refused" in second.stderr and b"already" in second.stderr
    after = jobman.state(job_id)
    assert after["supervisor_id"] == state["supervisor_id"] and after["phase"] != "finished"
    assert alive(state["supervisor_pid"])
    jobman("cancel", job_id, check=True)
    first.wait(timeout=30)
    first.stdout.close()
    first.stderr.close()


def test_wrong_credential_is_refused(jobman):
    job_id = _submit_with_known_credential(jobman, os.urandom(32))
    result = subprocess.run([JOBMAN, "__supervise", job_id], env=jobman.env, input=os.urandom(32),
                            capture_output=True, timeout=30)
    assert result.returncode == 3 and b"wrong launch credential" in result.stderr
    assert jobman.state(job_id)["phase"] == "submitting"


def test_supervise_accepts_a_job_id_and_nothing_else(jobman):
    job_id = jobman.run("true")
    for argv in ([job_id, "extra"], [], ["not-a-job-id"], [job_id, "--executable", "/bin/sh"]):
        result = subprocess.run([JOBMAN, "__supervise", *argv], env=jobman.env, input=b"", capture_output=True,
                                timeout=30)
        assert result.returncode == 2, argv
        assert b"exactly one job id" in result.stderr
    result = subprocess.run([JOBMAN, "__supervise", job_id], env=jobman.env, input=b"", capture_output=True,
                            timeout=30)
    assert result.returncode == 3 and b"no launch credential" in result.stderr


def test_ctrl_c_before_commit_submits_nothing(jobman, tmp_path):
    marker = tmp_path / "marker"
    # SIGINT at its default in the CLI, as a terminal's foreground process has it. Under xdist the CLI was
    # once seen starting with SIGINT and SIGQUIT ignored (inherited from the worker; /proc SigIgn), and a
    # Python started with SIGINT ignored installs no KeyboardInterrupt handler.
    proc = subprocess.Popen([JOBMAN, "run", "--print-id", "--", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**jobman.env, "JOBMAN_TEST_FAULT": "cli:before_commit",
                                 "JOBMAN_TEST_MARKER": str(marker)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(marker.exists, message="the CLI to reach the point before its commit")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert out == b""
    assert jobman.count_jobs() == 0


def test_interrupts_after_commit_do_not_abandon_the_job(jobman, tmp_path):
    marker, out = tmp_path / "marker", tmp_path / "out"
    proc = subprocess.Popen([JOBMAN, "run", "--print-id", "--", "sh", "-c", f"echo ok > {out}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env={**jobman.env, "JOBMAN_TEST_FAULT": "cli:slow_after_commit",
                                 "JOBMAN_TEST_MARKER": str(marker)})
    wait_for(marker.exists, message="the CLI to commit")
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        os.killpg(proc.pid, sig)
    marker.unlink()  # the signals are sent: the CLI goes on past its fault point
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    job_id = stdout.decode().strip()
    assert jobman.wait_finished(job_id)["outcome"] == "succeeded"
    assert out.read_text() == "ok\n"


def test_closing_the_terminal_after_run_does_not_affect_the_job(jobman, tmp_path):
    """Run `jobman run` in a session of its own (as a terminal would), kill its parent shell and send
    SIGHUP to the whole session right after the id is printed: the job runs to its end."""
    out = tmp_path / "out"
    script = (f"{JOBMAN} run --print-id -- sh -c 'sleep 1; echo survived > {out}' > {tmp_path}/id; "
              f"kill -HUP 0; sleep 30")
    shell = subprocess.Popen(["setsid", "sh", "-c", script], env=jobman.env)
    wait_for(lambda: (tmp_path / "id").exists() and (tmp_path / "id").read_text().strip(), timeout=30)
    job_id = (tmp_path / "id").read_text().strip()
    try:
        os.killpg(os.getpgid(shell.pid), signal.SIGKILL)
    except ProcessLookupError:
        pass
    shell.wait(timeout=10)
    assert jobman.wait_finished(job_id)["outcome"] == "succeeded"
    assert out.read_text() == "survived\n"


def test_a_supervisor_that_finds_its_spec_unreadable_fails_that_job_only(jobman):
    credential = os.urandom(32)
    job_id = _submit_with_known_credential(jobman, credential)
    with jobman.db() as conn:
        conn.execute("UPDATE jobs SET spec = '{\"argv\": 17' WHERE id = ?", (job_id,))
    result = subprocess.run([JOBMAN, "__supervise", job_id], env=jobman.env, input=credential,
                            capture_output=True, timeout=30)
    assert result.returncode == 1 and job_id.encode() in result.stdout  # it claimed, then failed the job
    state = jobman.state(job_id)
    assert state["outcome"] == "failed" and "unreadable" in state["detail"]
    other = jobman.run("true")
    assert jobman("wait", other).returncode == 0
