"""What people who live in pueue, tsp and nq reach for, through the real CLI and agents: every attempt's
output kept, cancel reaching a `setsid` descendant, a second SIGTERM stopping the agent's jobs."""
import os
import signal

from .support import Agent, machine_status, pids_with_env, run_until_idle, stado, submit, wait_for


def test_every_attempt_keeps_its_output_under_its_own_header(stado_env, tmp_path):
    count = tmp_path / "count"
    job = submit(stado_env, f"echo x >> {count}; n=$(wc -l < {count}); echo attempt-output-$n; "
                            f"[ $n -ge 3 ] || exit 5", "--retries", "2")
    agent = run_until_idle(stado_env, tmp_path)
    assert agent.returncode == 0, agent.log()
    assert machine_status(stado_env, job)["outcome"] == "succeeded"
    watch = stado(stado_env, "job", "watch", job)
    assert watch.stdout.splitlines() == ["==> attempt 1 <==", "attempt-output-1", "==> attempt 2 <==",
                                         "attempt-output-2", "==> attempt 3 <==", "attempt-output-3"]


def test_a_job_of_one_attempt_has_no_header(stado_env, tmp_path):
    job = submit(stado_env, "echo only")
    run_until_idle(stado_env, tmp_path)
    assert stado(stado_env, "job", "watch", job).stdout == "only\n"


def test_cancel_stops_a_descendant_that_left_for_a_session_of_its_own(stado_env, tmp_path):
    started = tmp_path / "started"
    job = submit(stado_env, f"setsid sleep 300 & touch {started}; wait")
    agent = Agent(stado_env, tmp_path)
    try:
        wait_for(started.exists, message="job started")
        wait_for(lambda: any(os.getsid(p) == p for p in pids_with_env("WC_JOB_ID", job)),
                 message="the setsid descendant to run in its own session")
        stado(stado_env, "cancel", job)
        wait_for(lambda: not pids_with_env("WC_JOB_ID", job), timeout=10,
                 message="every process of the job, the setsid one included, to be gone")
        wait_for(lambda: machine_status(stado_env, job)["moving"] == [], message="running record settled")
        assert machine_status(stado_env, job)["outcome"] == "cancelled"
    finally:
        agent.stop()


def test_a_second_sigterm_stops_the_jobs_records_them_cancelled_and_exits(stado_env, tmp_path):
    started = tmp_path / "started"
    job = submit(stado_env, f"trap '' TERM; touch {started}; while :; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, "--slots", "1", "--kill-after", "0.5")
    try:
        wait_for(started.exists, message="job started")
        queued = submit(stado_env, "true")
        agent.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "not claiming any more" in agent.log(), message="the first SIGTERM to be heard")
        assert agent.proc.poll() is None and pids_with_env("WC_JOB_ID", job)  # the first waits for the job
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.wait(20) == 0, agent.log()
        assert not pids_with_env("WC_JOB_ID", job)  # SIGKILL after --kill-after: it ignored SIGTERM
        status = machine_status(stado_env, job)
        assert (status["state"], status["outcome"], status["moving"]) == ("cancelled", "cancelled", [])
        assert "shutdown of agent" in str(status.get("cancel") or status)
        assert machine_status(stado_env, queued)["state"] == "queued"  # nothing claimed after the first
        assert "job cancelled (by this agent's shutdown)" in agent.log()
    finally:
        agent.stop()
