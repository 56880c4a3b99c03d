"""Restart: an agent that starts on a host settles, before its first tick, the running jobs the worker it
replaced left there (docs/stado.md, "Liveness"; src/stado/agent/takeover.py)."""
import json
import os
import re
import signal
from pathlib import Path

import pytest

from stado.store import cas
from stado.core import keys

from tests.stado.e2e.support import Agent, machine_status, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)


def _job(stado_env, tmp_path, name):
    ledger, gate = tmp_path / f"{name}.ledger", tmp_path / f"{name}.gate"
    job = submit(stado_env, f"echo start $$ >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done")
    return job, ledger, gate


def _running_under(store, job, agent, ledger):
    wait_for(lambda: ledger.exists(), message="the job started")
    return wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"),
                    message="its process recorded")


def _kill(agent):
    agent.proc.send_signal(signal.SIGKILL)
    agent.proc.wait(10)


def test_a_job_still_running_keeps_its_lease_and_the_new_agent_records_its_end(stado_env, tmp_path, store):
    job, ledger, gate = _job(stado_env, tmp_path, "job")
    first = Agent(stado_env, tmp_path, name="first")
    try:
        _running_under(store, job, first, ledger)
        old_owner = cas.read(store, keys.running(job), job)[0]["owner"]
        _kill(first)
        second = Agent(stado_env, tmp_path, name="second")
        line = (rf"init: {job}: left by the worker this one replaced, but still run here by pid \d+; it keeps its "
                r"lease$")
        wait_for(lambda: re.search(line, second.log(), re.M), timeout=30, message="the restart check's init: line")
        status = machine_status(stado_env, job)
        assert status["state"] == "running" and status["owner"] not in (None, old_owner)  # taken over, not requeued
        assert status["requeues"] == 0
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
        second.stop()
    finally:
        first.stop()
    assert ledger.read_text().count("start") == 1  # never started a second time
    assert machine_status(stado_env, job)["exit_code"] == 0  # the exit its shell recorded


def test_a_job_no_process_runs_is_requeued_as_a_lapsed_lease_and_run_again(stado_env, tmp_path, store):
    job, ledger, gate = _job(stado_env, tmp_path, "job")
    first = Agent(stado_env, tmp_path, name="first")
    try:
        process = _running_under(store, job, first, ledger)
        _kill(first)
        # The job's processes and its keeper die with it (a power cut, say): nothing on the host saw how it ended.
        keeper = json.loads((Path(process["work_dir"]).parent / "keeper.json").read_text())
        os.kill(keeper["pid"], signal.SIGKILL)
        os.killpg(process["pgid"], signal.SIGKILL)
        wait_for(lambda: not _alive(process["pgid"]), message="the job's processes gone")
        gate.touch()
        second = Agent(stado_env, tmp_path, name="second")
        line = (rf"init: {job}: requeued \(its worker was replaced while it ran; started \S+ by the worker this one "
                r"replaced on local@testhost; restart 1\)$")
        wait_for(lambda: re.search(line, second.log(), re.M), timeout=30, message="the restart check's init: line")
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its rerun")
        second.stop()
    finally:
        first.stop()
    status = machine_status(stado_env, job)
    assert status["requeues"] == 1 and ledger.read_text().count("start") == 2


def test_a_live_sibling_agents_jobs_are_never_touched(stado_env, tmp_path, store):
    job, ledger, gate = _job(stado_env, tmp_path, "sibling")
    sibling = Agent(stado_env, tmp_path, name="sibling")
    newcomer = None
    try:
        _running_under(store, job, sibling, ledger)
        owner = cas.read(store, keys.running(job), job)[0]["owner"]
        newcomer = Agent(stado_env, tmp_path, name="newcomer")
        wait_for(lambda: "started on local@testhost" in newcomer.log(), message="the newcomer up")
        wait_for(lambda: "idle" in newcomer.log() or machine_status(stado_env, job)["owner"] == owner, timeout=10,
                 message="the newcomer's first pass")
        assert f"init: {job}" not in newcomer.log()
        assert machine_status(stado_env, job)["owner"] == owner and ledger.read_text().count("start") == 1
        gate.touch()
        # The record is written before the agent logs it, so the line may trail the state by a moment.
        wait_for(lambda: f"{job}: exit 0 -> completed" in sibling.log(), timeout=30, message="the sibling's end line")
        assert machine_status(stado_env, job)["state"] == "completed"
        assert ledger.read_text().count("start") == 1
    finally:
        if newcomer is not None:
            newcomer.stop()
        sibling.stop()


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_killed_between_the_spawn_and_its_record_leaves_a_job_the_new_agent_watches(stado_env, tmp_path,
                                                                                            store):
    """The process is not in the running record yet (the first renewal writes it): the restart check finds it by
    its work directory and watches it to its end, rather than recording an end it did not see."""
    job, ledger, gate = _job(stado_env, tmp_path, "job")
    first = Agent(stado_env, tmp_path, name="first", extra_env={"STADO_FAULT_POINT": "spawned"})
    try:
        assert first.proc.wait(30) == 86, first.log()
        wait_for(lambda: ledger.exists(), message="the job started")
        assert cas.read(store, keys.running(job), job)[0].get("process") is None
        second = Agent(stado_env, tmp_path, name="second")
        wait_for(lambda: "still run here by pid" in second.log(), timeout=30, message="the restart check's init: line")
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                 message="the process recorded by the new owner")
        assert machine_status(stado_env, job)["state"] == "running"
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
        second.stop()
    finally:
        first.stop()
    assert ledger.read_text().count("start") == 1
    assert machine_status(stado_env, job)["exit_code"] == 0
