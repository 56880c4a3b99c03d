"""The lease round: one waiting supervisor keeps the lease of every waiting job whose supervisor lives,
so that the others sleep until their fallback poll. What must hold when its holder dies, stops or moves
on, and when a waiter is dead or stopped: leases are kept only for the living (a stopped supervisor lives),
the round is always taken up again, and no job is lost or kept waiting by it."""
import os
import signal
import time

from tests.helpers import alive, wait_for

# A fallback poll far longer than the test: only the round and the doorbells can move anything.
SLOW_POLL = {"JOBMAN_POLL_INTERVAL": "30s", "JOBMAN_LEASE": "2s", "JOBMAN_RENEW_INTERVAL": "0.4s"}


def holder(jobman) -> tuple[str, int] | None:
    """(job id, supervisor pid) of the round's holder while its hold lasts."""
    with jobman.db() as conn:
        row = conn.execute("SELECT s.job_id, s.supervisor_pid FROM lease_round r JOIN job_state s"
                           " ON s.supervisor_id = r.supervisor_id WHERE r.expires_at > ?", (time.time(),)).fetchone()
    return tuple(row) if row else None


def waiting_jobs(jobman, count: int, env=None, group: str = "paused") -> list[str]:
    jobman("group", "set", group, "--limit", "0", check=True)
    ids = [jobman("run", "--print-id", "--group", group, "--", "true", env=env, check=True).stdout.strip() for _ in range(count)]
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "slot" for j in ids), timeout=30)
    return ids


def leases_left(jobman, ids) -> dict[str, float]:
    now = time.time()
    return {j: jobman.state(j)["lease_end"] - now for j in ids}


def open_and_drain(jobman, ids, limit: int = 2) -> None:
    jobman("group", "set", "paused", "--limit", str(limit), check=True)
    assert jobman("wait", "-q", *ids, timeout=60).returncode == 0


def supervisor_log(jobman, job_id: str) -> str:
    return "".join(p.read_text() for p in (jobman.home / "logs").rglob("supervisor.log") if job_id in str(p))


def test_one_supervisor_holds_the_round_and_every_waiting_lease_stays_fresh(jobman):
    ids = waiting_jobs(jobman, 6, env=SLOW_POLL)
    first = wait_for(lambda: holder(jobman), timeout=10)
    revisions = {j: jobman.state(j)["revision"] for j in ids}
    deadline = time.time() + 3  # 8-9 rounds 0.32-0.4 s apart, no fallback poll of any waiter
    while time.time() < deadline:
        # A 2 s lease is renewed once it has less than two periods (0.8 s) left: never less than a period.
        assert min(leases_left(jobman, ids).values()) > 0.25
        assert holder(jobman) == first
        time.sleep(0.1)
    # ... and none of them is rewritten for it: the round covers each job once and from then on writes only when
    # it last saw every covered supervisor alive, so its writes follow what changes, not the jobs that wait.
    assert all(jobman.state(j)["revision"] == revisions[j] for j in ids)
    assert all(jobman.state(j)["lease_cover"] == 2.0 for j in ids)
    assert "holds the lease round" in supervisor_log(jobman, first[0])
    open_and_drain(jobman, ids)


def test_a_killed_holder_is_replaced_and_no_waiting_job_is_lost(jobman):
    env = {"JOBMAN_POLL_INTERVAL": "1s", "JOBMAN_LEASE": "2s", "JOBMAN_RENEW_INTERVAL": "0.4s"}
    ids = waiting_jobs(jobman, 5, env=env)
    dead_job, dead_pid = wait_for(lambda: holder(jobman), timeout=10)
    os.kill(dead_pid, signal.SIGKILL)
    # The first waiter to wake after the hold ran out takes the round on (fallback polls 1-1.5 s apart).
    new_job, _ = wait_for(lambda: (h := holder(jobman)) and h[0] != dead_job and h, timeout=10)
    others = [j for j in ids if j != dead_job]
    wait_for(lambda: min(leases_left(jobman, others).values()) > 1.0, timeout=5)
    # The dead supervisor's lease is not renewed by anyone: its job is lost, and only it.
    wait_for(lambda: jobman("reconcile", check=True) and jobman.state(dead_job)["phase"] == "finished", timeout=10)
    assert jobman.state(dead_job)["outcome"] == "lost"
    assert all(jobman.state(j)["phase"] == "waiting" for j in others)
    open_and_drain(jobman, others)


def test_a_stopped_holder_is_replaced_and_steps_down_when_it_resumes(jobman):
    env = {"JOBMAN_POLL_INTERVAL": "1s", "JOBMAN_LEASE": "2s", "JOBMAN_RENEW_INTERVAL": "0.4s"}
    ids = waiting_jobs(jobman, 4, env=env)
    stopped_job, stopped_pid = wait_for(lambda: holder(jobman), timeout=10)
    os.kill(stopped_pid, signal.SIGSTOP)
    try:
        wait_for(lambda: (h := holder(jobman)) and h[0] != stopped_job, timeout=10)
        # The new holder watches every job the round covered, the stopped supervisor's too: it lives, so its
        # lease is kept again, and nobody's is left to run out for good.
        wait_for(lambda: min(leases_left(jobman, ids).values()) > 0.5, timeout=10)
        jobman("reconcile", check=True)
        assert jobman.state(stopped_job)["phase"] == "waiting"
    finally:
        os.kill(stopped_pid, signal.SIGCONT)
    # Awake again, it looks at the round, finds another holder, and keeps its own lease till the round does.
    wait_for(lambda: "this one renews only its own lease" in supervisor_log(jobman, stopped_job), timeout=10)
    wait_for(lambda: leases_left(jobman, [stopped_job])[stopped_job] > 0.5, timeout=10)
    assert holder(jobman)[0] != stopped_job
    open_and_drain(jobman, ids)


def test_a_stopped_waiter_keeps_its_job_and_renews_again_when_it_resumes(jobman):
    ids = waiting_jobs(jobman, 4, env=SLOW_POLL)
    round_job, _ = wait_for(lambda: holder(jobman), timeout=10)
    job = next(j for j in ids if j != round_job)
    pid = jobman.state(job)["supervisor_pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        # Stopped, it lives: the round keeps its lease (six rounds and more, past a whole 2 s lease) ...
        deadline = time.time() + 2.5
        while time.time() < deadline:
            assert min(leases_left(jobman, ids).values()) > 0.25
            time.sleep(0.1)
        jobman("reconcile", check=True)
        assert jobman.state(job)["phase"] == "waiting"
        shown = jobman.show(job)["supervisor"]
        assert shown["alive"] and shown["stopped"]  # ... and `show` says what it is
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: leases_left(jobman, [job])[job] > 0.5, timeout=5)
    jobman("group", "set", "paused", "--limit", "4", check=True)
    assert jobman("wait", "-q", *ids, timeout=60).returncode == 0


def test_a_holder_whose_job_starts_hands_the_round_on_at_once(jobman, tmp_path):
    """Each waiter waits for a job of its own. The holder's dependency ends: it starts, and another waiter
    holds the round well before any fallback poll (30 s) could have noticed."""
    gates = [tmp_path / f"gate{i}" for i in range(3)]
    jobman("group", "set", "wide", "--limit", "10", check=True)
    blockers = [jobman.run("sh", "-c", f"while [ ! -e {g} ]; do sleep 0.02; done", opts=["--group", "wide"],
                           env=SLOW_POLL) for g in gates]
    waiters = [jobman("run", "--print-id", "--group", "wide", "--after-success", b, "--", "sleep", "5", env=SLOW_POLL,
                      check=True).stdout.strip() for b in blockers]
    wait_for(lambda: all(jobman.state(w)["waiting_for"] == "dependencies" for w in waiters), timeout=30)
    first, _ = wait_for(lambda: holder(jobman), timeout=10)
    index = waiters.index(first)
    gates[index].touch()
    wait_for(lambda: jobman.state(first)["phase"] == "running", timeout=10)
    handed = wait_for(lambda: (h := holder(jobman)) and h[0] != first and h, timeout=3)
    assert handed[0] in waiters
    rest = [w for w in waiters if w != first]
    deadline = time.time() + 2
    while time.time() < deadline:
        assert min(leases_left(jobman, rest + [first]).values()) > 0.25  # (a waiter: never less than a period left)
        time.sleep(0.1)
    for g in gates:
        g.touch()
    assert jobman("wait", "-q", *waiters, timeout=60).returncode == 0


def started_at(jobman, job_id: str) -> float | None:
    with jobman.db() as conn:
        row = conn.execute("SELECT started_at FROM attempts WHERE job_id = ? AND number = 1", (job_id,)).fetchone()
    return row[0] if row else None


def test_stopped_waiters_at_the_head_of_a_line_do_not_stall_it(jobman, tmp_path):
    """A group of 2 slots, both held; the first two of its line are SIGSTOPped, then both slots are freed. The
    stopped waiters cannot take their turn, and used to hold the line while stopped: every job behind them waited
    until SIGCONT. Now a waiter that cannot take a slot is stepped over (the next one is rung), so the jobs behind
    start at once, well within a lease; the stopped ones keep their place and run once they are awake again."""
    gate = tmp_path / "gate"
    jobman("group", "set", "two", "--limit", "2", check=True)
    blockers = [jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--group", "two"],
                           env=SLOW_POLL) for _ in range(2)]
    wait_for(lambda: all(jobman.state(b)["phase"] == "running" for b in blockers), timeout=30)
    line = [jobman.run("true", opts=["--group", "two"], env=SLOW_POLL) for _ in range(5)]
    wait_for(lambda: all(jobman.state(j)["waiting_for"] == "slot" for j in line), timeout=30)
    stopped = [jobman.state(j)["supervisor_pid"] for j in line[:2]]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        freed = time.time()
        gate.touch()
        wait_for(lambda: all(jobman.state(j)["outcome"] == "succeeded" for j in line[2:]), timeout=20,
                 message="the jobs behind the stopped waiters to run")
        assert started_at(jobman, line[2]) - freed < 2.0  # within a lease (2 s here) of the slots' freeing
        assert all(jobman.state(j)["phase"] == "waiting" for j in line[:2])  # their place kept, their job too
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    assert jobman("wait", "-q", *line[:2], timeout=60).returncode == 0


def test_a_cancel_of_a_stopped_waiter_is_carried_out_without_it(jobman):
    """`jobman cancel` of a waiting job whose supervisor is SIGSTOPped used to say "cancel requested" and change
    nothing until SIGCONT (its dependents waited as long). The cancel is carried out by whoever can (the command,
    a reconcile pass), guarded by the job's revision; the supervisor, resumed, finds its job cancelled and leaves
    without touching it, its doorbell removed."""
    ids = waiting_jobs(jobman, 3, env=SLOW_POLL)
    round_job, _ = wait_for(lambda: holder(jobman), timeout=10)
    job = next(j for j in ids if j != round_job)
    dependent = jobman.run("true", opts=["--after-success", job], env=SLOW_POLL)
    wait_for(lambda: jobman.state(dependent)["waiting_for"] == "dependencies", timeout=30)
    pid = jobman.state(job)["supervisor_pid"]
    bell = jobman.home / "bells" / f"{job}.fifo"
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.time()
        done = jobman("cancel", job, check=True)
        assert time.time() - began < 5 and done.stdout.strip().endswith(": cancelled"), done.stdout
        state = jobman.state(job)
        assert state["outcome"] == "cancelled" and "was stopped, so the cancel was carried out" in state["detail"]
        assert jobman.wait_finished(dependent, timeout=10)["outcome"] == "dependency_failed"
        revision = state["revision"]
    finally:
        os.kill(pid, signal.SIGCONT)  # the cancel's ring waits in its doorbell: it looks at once
    wait_for(lambda: not alive(pid), timeout=20, message="the resumed supervisor to leave")
    assert jobman.state(job)["revision"] == revision and jobman.state(job)["outcome"] == "cancelled"
    assert not bell.exists()
    assert "no longer the owner" in supervisor_log(jobman, job) or "by another process" in supervisor_log(jobman, job)
    open_and_drain(jobman, [j for j in ids if j != job])
