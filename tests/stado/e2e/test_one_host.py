"""Two agents on one host, and an agent that dies for good: a job runs once.

- A second live agent naming the same host with another work root is refused in one line: it would not see the
  first one's locks. (Before, it settled the first one's running jobs as left by a replaced worker, and they ran
  twice: 21 or 22 runs of 20 jobs.)
- An agent that is gone is known gone by the process its records name, whatever work root it used: the agent
  that starts next on the host with another work root takes its job over (its process still runs there).
- An agent SIGKILLed and not restarted: the job's keeper renews its claim for a while (--bridge-seconds) for the
  agent that next starts on the host, then stops the job's processes before the promise passes and requeues it, so
  the next attempt never runs beside the first; a job whose command ended just before its agent died is recorded by
  its keeper and never runs again.
"""
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from stado.store import cas
from stado.core import keys
from stado.core.documents import parse_iso

from tests.stado.fakeclock import faked_clock

from .support import Agent, machine_status, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)


def _starts(ledger: Path) -> list[tuple[str, float, float | None]]:
    """(job, start, end) of each run a job wrote to the ledger ("start JOB T" and "end JOB T" lines)."""
    runs: dict[tuple[str, str], list] = {}
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        word, job, pid, at = line.split()
        run = runs.setdefault((job, pid), [job, None, None])
        run[1 if word == "start" else 2] = float(at)
    return [tuple(run) for run in runs.values()]


def _job(ledger: Path, seconds: float) -> str:
    """Writes its start, and its end: when it ends, or when it is stopped (SIGTERM)."""
    stamp = 'python3 -c "import time; print(time.time())"'
    end = f"echo end $WC_JOB_ID $$ $({stamp}) >> {ledger}"
    return (f"trap '{end}; exit 143' TERM; echo start $WC_JOB_ID $$ $({stamp}) >> {ledger}; "
            f"sleep {seconds} & wait $!; {end}")


def test_a_second_agent_on_the_host_with_another_work_root_is_refused_and_every_job_runs_once(stado_env, tmp_path):
    ledger = tmp_path / "ledger"
    jobs = [submit(stado_env, _job(ledger, 0.2)) for _ in range(20)]
    first = Agent(stado_env, tmp_path, "--until-idle", "--slots", "2", "--work-root", str(tmp_path / "A"), name="a")
    try:
        wait_for(lambda: ledger.exists(), timeout=30, message="the first agent running jobs")
        second = Agent(stado_env, tmp_path, "--until-idle", "--slots", "2", "--work-root", str(tmp_path / "B"),
                       name="b")
        assert second.wait(timeout=60) == 2
        said = second.log().strip().splitlines()
        assert len(said) == 1 and "already runs on this machine as local@testhost with another --work-root" in said[0]
        assert first.wait(timeout=120) == 0
    finally:
        first.stop()
    runs = _starts(ledger)
    assert sorted(job for job, _, _ in runs) == sorted(jobs)  # every job once, none twice
    assert all(machine_status(stado_env, job)["state"] == "completed" for job in jobs)


def test_the_next_agent_with_another_work_root_takes_over_a_gone_agents_job(stado_env, tmp_path, store):
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start $WC_JOB_ID $$ 0 >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done")
    first = Agent(stado_env, tmp_path, "--work-root", str(tmp_path / "A"), "--reap-margin", "30", name="a")
    try:
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                 message="its process recorded")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        second = Agent(stado_env, tmp_path, "--work-root", str(tmp_path / "B"), name="b")
        line = rf"init: {job}: left by the worker this one replaced, but still run here by pid \d+; it keeps its lease$"
        wait_for(lambda: re.search(line, second.log(), re.M), timeout=30, message="the take-over")
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
        second.stop()
    finally:
        first.stop()
    assert len(_starts(ledger)) == 1 and machine_status(stado_env, job)["requeues"] == 0


def test_an_agent_killed_for_good_its_keeper_stops_the_job_before_another_host_starts_it(stado_env, tmp_path, store):
    ledger = tmp_path / "ledger"
    job = submit(stado_env, _job(ledger, 8))
    # Its keeper renews for it 1 s once it is gone (waiting for an agent on its host to take the job over), then
    # stops the job and requeues it.
    first = Agent(stado_env, tmp_path, "--work-root", str(tmp_path / "A"), "--bridge-seconds", "1", name="a")
    other = None
    try:
        process = wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                           message="its process recorded")
        first.proc.send_signal(signal.SIGKILL)  # as the OOM killer does; never restarted
        first.proc.wait(10)
        other = Agent(stado_env, tmp_path, "--settle-seconds", "0.5", name="b", host="otherhost")
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=60,
                 message="the job requeued and run again on the other host")
        other.stop()
    finally:
        first.stop()
        if other is not None:
            other.stop()
    runs = sorted(_starts(ledger), key=lambda run: run[1])
    assert len(runs) == 2, runs
    (_, first_start, first_end), (_, second_start, _) = runs
    assert first_end is not None and first_end - first_start < 7  # stopped by its keeper, not ended on its own
    assert first_end < second_start, runs  # never beside the next attempt
    kept = json.loads((Path(process["work_dir"]).parent / "kept.json").read_text())
    assert kept["attempt"] and "did not renew" in kept["why"]
    assert machine_status(stado_env, job)["requeues"] == 1


def test_a_command_that_ended_as_its_agent_died_is_recorded_and_never_run_again(stado_env, tmp_path, store):
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start $WC_JOB_ID $$ 0 >> {ledger}; while [ ! -e {gate} ]; do sleep 0.02; done; "
                            "exit 3")
    first = Agent(stado_env, tmp_path, "--work-root", str(tmp_path / "A"), name="a")
    other = None
    try:
        process = wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                           message="its process recorded")
        first.proc.send_signal(signal.SIGSTOP)  # its loop cannot reap the shell ...
        gate.touch()                            # ... whose command ends now (its keeper writes how)
        status = Path(process["work_dir"]).parent / "exit-status"
        wait_for(status.exists, timeout=10, message="the command's end, seen by its keeper")
        first.proc.send_signal(signal.SIGKILL)  # ... and it dies before recording anything
        first.proc.wait(10)
        other = Agent(stado_env, tmp_path, "--settle-seconds", "0.5", name="b", host="otherhost")
        wait_for(lambda: machine_status(stado_env, job)["state"] == "failed", timeout=60, message="the outcome")
    finally:
        first.stop()
        if other is not None:
            other.stop()
    status = machine_status(stado_env, job)
    assert (status["exit_code"], status["requeues"]) == (3, 0)
    assert len(_starts(ledger)) == 1  # never started again


def test_a_keeper_on_a_host_whose_clock_is_off_writes_the_stores_time(stado_env, tmp_path, store):
    """The soak found a failed record stamped 90 s before the runs it ended: the keeper of an agent whose host's
    clock was 90 s behind renewed its claim, and wrote its verdict, by that clock. It counts on its agent's reading
    of the store's clock now (`store` in the promise): its renewals promise a time still ahead by the store's clock,
    and its requeue carries the store's time."""
    ledger = tmp_path / "ledger"
    job = submit(stado_env, _job(ledger, 30))
    first = Agent(stado_env, tmp_path, "--work-root", str(tmp_path / "A"), "--bridge-seconds", "3", name="a",
                  extra_env=faked_clock("-90"))
    try:
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                 message="its process recorded")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        seen = []

        def requeued():
            found = cas.read(store, keys.running(job), job)
            if found is not None:
                seen.append((found[0].raw.get("lease_expires_at"), found[1], time.time()))
            return cas.read(store, keys.queued(job), job)

        wait_for(requeued, timeout=60, message="its keeper's requeue")
    finally:
        first.stop()

    queued = cas.read(store, keys.queued(job), job)[0]
    assert abs(parse_iso(queued.raw["written_at"]) - time.time()) < 30, queued.raw["written_at"]
    assert queued.raw["written_by"].startswith("keeper of")
    promises = {version: (parse_iso(until), when) for until, version, when in seen if until}
    assert len(promises) >= 2, seen  # the claim, and at least one bridge renewal
    assert all(until > when - 10 for until, when in promises.values()), seen  # none already past when read


def test_a_command_that_ended_unrecorded_while_its_keeper_was_stopped_is_recorded_and_never_run_again(
        stado_env, tmp_path, store):
    """The job's command ends while its agent is stopped and its keeper too, so nothing records how; the agent dies,
    and the one that replaces it on the host finds no process and no exit status. Its keeper lives: the replacement
    takes the job over and waits for the keeper's word rather than requeue a command that had ended."""
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start $WC_JOB_ID $$ 0 >> {ledger}; while [ ! -e {gate} ]; do sleep 0.02; done; "
                            "exit 3")
    first = Agent(stado_env, tmp_path, name="a")
    other = None
    keeper = None
    try:
        process = wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                           message="its process recorded")
        job_dir = Path(process["work_dir"]).parent
        keeper = wait_for(lambda: (job_dir / "keeper.json").exists() and json.loads(
            (job_dir / "keeper.json").read_text())["pid"], timeout=10, message="its keeper")
        first.proc.send_signal(signal.SIGSTOP)   # its loop cannot reap the shell ...
        os.kill(keeper, signal.SIGSTOP)          # ... nor can its keeper look
        gate.touch()
        wait_for(lambda: len([1 for line in ledger.read_text().splitlines()]) == 1, timeout=10)
        time.sleep(0.5)                          # the command has ended; nothing recorded it
        assert not (job_dir / "exit-status").exists()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        other = Agent(stado_env, tmp_path, name="b")  # the same work root and host: it replaces the first
        wait_for(lambda: f"init: {job}: " in other.log(), timeout=30, message="the restart check's word on it")
        os.kill(keeper, signal.SIGCONT)
        wait_for(lambda: machine_status(stado_env, job)["state"] == "failed", timeout=60, message="the outcome")
    finally:
        if keeper is not None:
            try:
                os.kill(keeper, signal.SIGCONT)
            except ProcessLookupError:
                pass
        first.stop()
        if other is not None:
            other.stop()
    status = machine_status(stado_env, job)
    assert (status["exit_code"], status["requeues"]) == (3, 0), status
    assert len(_starts(ledger)) == 1  # never started again


def test_a_sibling_that_dies_for_good_leaves_an_ended_command_recorded_not_run_again(stado_env, tmp_path, store):
    """Two agents on one host (they share its work root). The first dies for good (no agent replaces it) after its
    job's command ended unrecorded, its keeper stopped so that it cannot stand in. When the promise passes, the
    sibling's reaper pass sees on the machine that the owner is gone and its keeper alive: it takes the job over to
    record how it ended, where the promise alone would requeue a command that had ended."""
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start $WC_JOB_ID $$ 0 >> {ledger}; while [ ! -e {gate} ]; do sleep 0.02; done; "
                            "exit 3")
    first = Agent(stado_env, tmp_path, name="a")
    sibling = None
    keeper = None
    try:
        process = wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                           message="its process recorded")
        job_dir = Path(process["work_dir"]).parent
        keeper = wait_for(lambda: (job_dir / "keeper.json").exists() and json.loads(
            (job_dir / "keeper.json").read_text())["pid"], timeout=10, message="its keeper")
        sibling = Agent(stado_env, tmp_path, name="b")
        wait_for(lambda: "started on" in sibling.log(), timeout=30, message="the sibling's start")
        first.proc.send_signal(signal.SIGSTOP)
        os.kill(keeper, signal.SIGSTOP)
        gate.touch()
        wait_for(lambda: len(ledger.read_text().splitlines()) == 1, timeout=10)
        time.sleep(0.5)
        assert not (job_dir / "exit-status").exists()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        wait_for(lambda: f"reaper: {job}: " in sibling.log() or len(_starts(ledger)) > 1, timeout=60,
                 message="the sibling's word on it")
        os.kill(keeper, signal.SIGCONT)
        wait_for(lambda: machine_status(stado_env, job)["state"] in ("failed", "completed")
                 or len(_starts(ledger)) > 1, timeout=60, message="the outcome")
    finally:
        if keeper is not None:
            try:
                os.kill(keeper, signal.SIGCONT)
            except ProcessLookupError:
                pass
        first.stop()
        if sibling is not None:
            sibling.stop()
    assert len(_starts(ledger)) == 1, sibling.log()  # never started again
    status = machine_status(stado_env, job)
    assert (status["state"], status["exit_code"], status["requeues"]) == ("failed", 3, 0), status
    assert f"reaper: {job}: left by its agent " in sibling.log(), sibling.log()
