"""A keeper that stops a job gives it its SIGTERM with time to act on it, also when the store is slow to say whether
the agent's renewal in flight landed (SeaweedFS through tests/stado/faultproxy.py).

Before: the keeper asked the store about that renewal until the SIGKILL deadline itself (three quarters of the
reap margin past the promise), so a slow answer left it no time at all: SIGTERM and SIGKILL went out together, and
the job never ran its handler (the soak's jobs wrote no end to their ledger)."""
import signal

import pytest

from stado.store import cas
from stado.core import keys

from ..faultproxy import Rule, for_target, through
from ..storekit import make_target
from .support import Agent, submit, wait_for

pytestmark = pytest.mark.slow


def _ended(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def test_a_keeper_asking_a_slow_store_about_a_renewal_still_gives_sigterm_time(seaweedfs, tmp_path,
                                                                              make_stado_env):
    target = make_target("s3", tmp_path, seaweedfs)
    direct = target.open()
    ledger = tmp_path / "ledger"
    stamp = 'python3 -c "import time; print(time.time())"'
    job_cmd = (f"trap 'echo end $$ $({stamp}) >> {ledger}; exit 143' TERM; echo start $$ $({stamp}) >> {ledger}; "
               "sleep 60 & wait $!")
    with for_target(target, seed=7) as proxy:
        env = make_stado_env(through(target, proxy, max_retries=0, timeout=60), tmp_path / "through")
        job = submit(make_stado_env(target, tmp_path / "direct"), job_cmd)
        # A reap margin of 4 s: its keeper sends SIGTERM by 1 s past the promise, SIGKILL by 3 s (or 2 s, --kill-after,
        # after SIGTERM).
        agent = Agent(env, tmp_path, "--reap-margin", "4", "--bridge-seconds", "0")
        try:
            wait_for(lambda: (cas.read(direct, keys.running(job), job) or [{}])[0].get("process"), timeout=60,
                     message="its process recorded")
            wait_for(lambda: ledger.exists(), timeout=30, message="the job's start")
            # From now on the agent's renewal lands but its answer is held back (the renewal stays in flight), and
            # every read of the running record (the keeper's question whether it landed) is slow to answer.
            proxy.add(Rule("delay", kinds=("cas",), prefix=keys.RUNNING, delay=(30.0, 30.0)))
            proxy.add(Rule("delay", kinds=("get", "head"), prefix=keys.RUNNING, delay=(30.0, 30.0)))
            pid = int(ledger.read_text().split()[1])
            wait_for(lambda: _ended(pid), timeout=40, message="its keeper stopping the job")
        finally:
            agent.stop()
            proxy.clear()
            direct.close()
    lines = ledger.read_text().splitlines()
    # The SIGTERM handler ran: the job ended by its own hand, not by a SIGKILL sent with the SIGTERM.
    assert len(lines) >= 2 and lines[0].startswith("start ") and lines[1].startswith("end "), lines


def test_a_keeper_requeues_a_job_whose_agents_renewal_landed_unanswered(seaweedfs, tmp_path, make_stado_env):
    """The agent's renewal lands but its answer never comes back in time: the agent's promise file still names the
    version before it. The keeper asks the store, learns that renewal landed, stops the job once its promise has
    run out, and records the requeue itself.

    Before: the keeper took the landed renewal for another writer's move ("its agent, or the agent that took it
    over, wrote its record since: the verdict is theirs") and wrote nothing, so the job stayed `running` with its
    processes stopped until a reaper on another host requeued it a lease later as an expired lease; with no other
    agent, for ever. Found by the e2e keeper-clock test on a loaded machine, then by the simulator (kept-untold)."""
    target = make_target("s3", tmp_path, seaweedfs)
    direct = target.open()
    with for_target(target, seed=11) as proxy:
        env = make_stado_env(through(target, proxy, max_retries=0, timeout=60), tmp_path / "through")
        job = submit(make_stado_env(target, tmp_path / "direct"), "sleep 60")
        agent = Agent(env, tmp_path, "--reap-margin", "4", "--bridge-seconds", "0")
        try:
            wait_for(lambda: (cas.read(direct, keys.running(job), job) or [{}])[0].get("process"), timeout=60,
                     message="its process recorded")
            # The next renewal commits, and its answer is held for longer than the test waits; the agent is then
            # stopped (SIGSTOP) before anything else of it is said, as a host swapping would stop it.
            proxy.add(Rule("delay", kinds=("cas",), prefix=keys.RUNNING, delay=(60.0, 60.0), limit=1))
            wait_for(lambda: [x for x in proxy.exchanges(kind="cas") if x.held], timeout=20,
                     message="a renewal committed and its answer held")
            agent.proc.send_signal(signal.SIGSTOP)
            try:
                wait_for(lambda: cas.read(direct, keys.queued(job), job), timeout=30, message="the keeper's requeue")
            except AssertionError as e:
                keepers = "".join(p.read_text(errors="replace") for p in agent.work_root.rglob("keeper.log"))
                raise AssertionError(f"{e}\n--- keeper:\n{keepers}") from e
            requeued = direct.get(keys.queued(job)).data.decode()
        finally:
            agent.proc.send_signal(signal.SIGCONT)
            agent.stop()
            proxy.clear()
            direct.close()
    [held] = [x for x in proxy.ledger if x.kind == "cas" and x.held]
    assert held.server_status == 200, held
    assert "its keeper stopped the job's processes" in requeued, requeued
