"""A real queue: hundreds of waiting supervisors, each with its own process and connection (one supervisor
per job, by design), idle and then drained, at the default windows (15 s lease, 5 s renewal) and the default
fallback poll."""
import json
import subprocess
import time

import pytest

from tests.helpers import wait_for
from tests.jobman.conftest import JOBMAN, LEASE_END

SEED_WINDOWS = {"JOBMAN_CLAIM_WINDOW": "10s", "JOBMAN_LEASE": "15s", "JOBMAN_RENEW_INTERVAL": "5s",
                "JOBMAN_POLL_INTERVAL": ""}
JOBS = 600
SUBMITTERS = 3


def submit_all(jobman, count: int) -> list[subprocess.CompletedProcess]:
    """`jobman run --group q -- true`, `count` times, SUBMITTERS at a time (as a shell loop of users would)."""
    env = {**jobman.env, **SEED_WINDOWS}
    results, running, pending = [], [], count
    while pending or running:
        while pending and len(running) < SUBMITTERS:
            running.append(subprocess.Popen([JOBMAN, "run", "--print-id", "--group", "q", "--", "true"], env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            pending -= 1
        done = running.pop(0)
        out, err = done.communicate(timeout=120)
        results.append((done.returncode, out.strip(), err.strip()))
    return results


def argv0(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0]
    except OSError:
        return b""


@pytest.mark.slow
def test_six_hundred_waiting_jobs_idle_then_drain(jobman):
    jobman("group", "set", "q", "--limit", "0", check=True)
    results = submit_all(jobman, JOBS)
    failures = [r for r in results if r[0] != 0]
    assert failures == [], failures[:3]
    ids = [out for _, out, _ in results]
    with jobman.db() as conn:
        wait_for(lambda: conn.execute("SELECT count(*) FROM job_state WHERE waiting_for = 'slot'").fetchone()[0]
                 == JOBS, timeout=120, message="every job to wait for its slot")
    time.sleep(30)  # the idle queue: the lease round keeping 600 leases, lean waiters asleep on their doorbells
    with jobman.db() as conn:
        states = dict(conn.execute("SELECT coalesce(outcome, phase), count(*) FROM job_state GROUP BY 1").fetchall())
        pids = [r[0] for r in conn.execute("SELECT supervisor_pid FROM job_state")]
        freshest = conn.execute(f"SELECT min({LEASE_END}) FROM job_state").fetchone()[0] - time.time()
    assert states == {"waiting": JOBS}, states
    assert freshest > 5  # a 15 s lease, renewed by the round every 4-5 s
    # Every supervisor but the round's holder (and any caught changing form) waits in its lean form.
    assert sum(argv0(pid) == b"jobman-wait" for pid in pids) >= JOBS - 3
    for log in (jobman.home / "logs").rglob("supervisor.log"):
        text = log.read_text()
        assert "Traceback" not in text and "supervisor error" not in text, text
    listed = jobman("list", "--json", check=True)
    assert len(json.loads(listed.stdout)) == 100 and "500 older waiting job(s) not shown" in listed.stderr
    assert len(json.loads(jobman("list", "--active", "--json", check=True).stdout)) == JOBS
    jobman("group", "set", "q", "--limit", "2", check=True)
    assert jobman("wait", "-q", *ids, timeout=600).returncode == 0
    with jobman.db() as conn:
        outcomes = dict(conn.execute("SELECT outcome, count(*) FROM job_state GROUP BY 1").fetchall())
        overlap = conn.execute("SELECT max(n) FROM (SELECT (SELECT count(*) FROM attempts b WHERE b.started_at <="
                               " a.started_at AND b.ended_at > a.started_at) AS n FROM attempts a)").fetchone()[0]
    assert outcomes == {"succeeded": JOBS}, outcomes
    assert overlap <= 2
    for log in (jobman.home / "logs").rglob("supervisor.log"):
        assert "Traceback" not in log.read_text()
