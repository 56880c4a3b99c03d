"""Re-adoption: a job requeued while the worker that claimed it still runs its process is not started a second
time beside it (docs/stado.md, "Liveness")."""
import os
import re
import signal
import time

import pytest

from stado.store import cas
from stado.core import keys
from stado.agent.hostfiles import job_dir

from tests.stado.e2e.support import Agent, machine_status, stado, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)


def _running_job(stado_env, tmp_path, store, name="agent", *args):
    """A job running under an agent with no reaper pass of its own, whose keepers stop a job only well past its
    promise (--reap-margin 40: SIGTERM 10 s past it): `stado reap --margin 0` requeues the job within that, as a
    reaper more eager than the agents' margin would, while its process still runs (the case re-adoption is for)."""
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start $$ >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, "--settle-seconds", "3600", "--reap-margin", "40", *args, name=name)
    wait_for(lambda: ledger.exists() and ledger.read_text().count("start") == 1, message="the job started")
    wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"),
             message="its process recorded (at its first renewal)")
    return job, agent, ledger, gate


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _flocks_held(pid: int) -> int:
    with open("/proc/locks") as f:
        return sum(1 for line in f if line.split()[1:2] == ["FLOCK"] and line.split()[4] == str(pid))


def _stall_past_promise(agent, store, job):
    """SIGSTOP the agent, then wait (bounded) until the promise in its job's running record has passed. Never
    while it holds a lock of the local-directory store beyond its own host lock (a write in flight): a reaper
    would wait on that lock for as long as the agent stays stopped."""
    for _ in range(100):
        agent.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: _state(agent.proc.pid) == "T", timeout=10, message="the agent to stop")
        if _flocks_held(agent.proc.pid) <= 1:
            break
        agent.proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)  # let its write finish before stopping it again
    # As the reaper judges it: the record's write time by the store's clock plus its promised lease, and the
    # uncertainty of `stado reap`'s own reading of that clock (a second on S3, which stamps whole seconds).
    entry = next(e for e in store.list(keys.RUNNING) if e.key == keys.running(job))
    promise = entry.modified + cas.read(store, keys.running(job), job)[0]["lease_seconds"]
    wait_for(lambda: time.time() > promise + 1.5, timeout=30, message="the promise to pass")


def test_a_stalled_agent_takes_its_job_back_and_no_second_process_starts(stado_env, tmp_path, store):
    job, agent, ledger, gate = _running_job(stado_env, tmp_path, store)
    try:
        pgid = cas.read(store, keys.running(job), job)[0]["process"]["pgid"]
        _stall_past_promise(agent, store, job)
        reaped = stado(stado_env, "reap", "--margin", "0").stdout
        assert f"{job}: requeued (worker lease expired" in reaped and "reaped 1 (requeued 1" in reaped
        assert machine_status(stado_env, job)["state"] == "queued"
        agent.proc.send_signal(signal.SIGCONT)
        line = (rf"{job}: already running here as process group {pgid} for \d+ s: its lease lapsed while it ran and "
                r"it was put back in the queue; the running process took the job back and no second process was "
                r"started$")
        wait_for(lambda: re.search(line, agent.log(), re.M), timeout=30, message="the re-adoption line")
        status = machine_status(stado_env, job)
        assert (status["state"], status["requeues"]) == ("running", 1)
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="completion")
    finally:
        agent.proc.send_signal(signal.SIGCONT)
        agent.stop()
    assert ledger.read_text().count("start") == 1  # exactly one process ever ran it


def test_a_stalled_agent_whose_job_another_worker_claimed_first_stops_its_copy(stado_env, tmp_path, store):
    job, agent, ledger, gate = _running_job(stado_env, tmp_path, store)
    other = None
    try:
        pgid = cas.read(store, keys.running(job), job)[0]["process"]["pgid"]
        _stall_past_promise(agent, store, job)
        assert "requeued 1" in stado(stado_env, "reap", "--margin", "0").stdout
        other = Agent(stado_env, tmp_path, name="other", host="otherhost")
        wait_for(lambda: ledger.read_text().count("start") == 2, timeout=30, message="the other worker to start it")
        holder = cas.read(store, keys.running(job), job)[0]["owner"]
        agent.proc.send_signal(signal.SIGCONT)
        line = (f"{job}: already running here as process group {pgid} for ")
        wait_for(lambda: line in agent.log() and "claimed it first" in agent.log(), timeout=30,
                 message="the line that says another worker claimed it")
        assert f"another worker (agent {holder} on local@otherhost) claimed it first; stopping process group {pgid}, " \
               "and nothing is started" in agent.log()
        wait_for(lambda: not _group_alive(pgid), timeout=30, message="the stale copy to be stopped")
        wait_for(lambda: f"{job}: process group {pgid} stopped; nothing recorded" in agent.log(), timeout=30,
                 message="the stalled agent to drop its slot")
        # Both agents share this work root (as two agents on one host do): the directory the job's next attempt
        # runs in is not the stalled agent's to remove (the soak found a restart loop when it was).
        started_at = cas.read(store, keys.running(job), job)[0]["started_at"]
        assert os.path.isdir(job_dir(str(other.work_root), job, started_at))
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="completion")
    finally:
        agent.proc.send_signal(signal.SIGCONT)
        agent.stop()
        if other is not None:
            other.stop()
    assert [e.key for e in store.list("completed/")] == [f"completed/{job}.json"]
    assert f"{job}: exit" not in agent.log()  # the stalled agent recorded nothing


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
