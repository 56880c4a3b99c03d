"""What a provider's clean-up calls (a cloud VM is not deleted while any job on it is alive by the reaper's verdict):
`stado machine may-delete INSTANCE_REF`, and `stado agent --drain` before it."""
import json
import os
import signal
import subprocess

import pytest

from stado.store import cas
from stado.core import keys

from .support import MB, STADO, Agent, machine_status, produce, stado, submit, wait_for


def _may_delete(env, ref, *flags):
    return stado(env, "machine", "may-delete", ref, *flags, ok=False)


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_may_delete_names_the_jobs_alive_on_an_instance_by_promise_pulse_or_checkpoint(stado_env, tmp_path, store):
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, host="vm1")
    try:
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                 message="the job running on vm1")
        held = _may_delete(stado_env, "local@vm1")
        assert held.returncode == 1, held.stderr
        assert held.stdout.splitlines() == ["local@vm1 must not be deleted: 1 job(s) alive on it",
                                            f"  {job}  alive by its promise"]
        assert json.loads(_may_delete(stado_env, "local@vm1", "--json").stdout) == {
            "instance_ref": "local@vm1", "may_delete": False, "alive": [{"id": job, "by": "promise"}]}
        free = _may_delete(stado_env, "local@vm2")
        assert free.returncode == 0 and free.stdout == "local@vm2 may be deleted: no job is alive on it\n"
        # The VM dies with its job: once the promise has passed with no pulse after it, nothing is alive there.
        process = cas.read(store, keys.running(job), job)[0]["process"]
        agent.proc.send_signal(signal.SIGKILL)
        agent.proc.wait(10)
        os.killpg(process["pgid"], signal.SIGKILL)
        wait_for(lambda: _may_delete(stado_env, "local@vm1", "--margin", "0").returncode == 0, timeout=30,
                 message="the promise passed")
        # A checkpoint newer than the passed promise: the job demonstrably works, the VM must stay.
        store.put(keys.checkpoint_prefix(job) + "step-9", b"weights")
        again = _may_delete(stado_env, "local@vm1", "--margin", "0", "--json")
        assert again.returncode == 1 and json.loads(again.stdout)["alive"] == [{"id": job, "by": "checkpoint"}]
    finally:
        agent.stop()
    bad = _may_delete(stado_env, " ")
    assert bad.returncode == 2 and bad.stderr.startswith("stado: bad instance ref") and len(bad.stderr.splitlines()) == 1


@pytest.mark.parametrize("store_target", ["s3"], indirect=True)
def test_drain_hands_back_what_has_not_started_and_lets_what_runs_finish(stado_env, slow, tmp_path, store):
    proxy, slow_env = slow
    producer, _ = produce(stado_env, tmp_path, store, 12 * MB)
    ledger, gate, seen = tmp_path / "ledger", tmp_path / "gate", tmp_path / "seen"
    running = submit(stado_env, f"echo start >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done")
    fetching = submit(stado_env, f"cat big.bin > /dev/null; echo ran > {seen}", "--input", f"{producer}:big.bin")
    proxy.rate = 1 * MB  # its input arrives over 12 s: claimed, not started, while the drain comes
    agent = Agent(slow_env(timeout=2), tmp_path, "--slots", "2", name="drained", host="vm1")
    drain = None
    try:
        wait_for(lambda: ledger.exists() and proxy.down > 1 * MB, timeout=60, message="one running, one fetching")
        assert machine_status(stado_env, fetching)["state"] == "running"
        drain = subprocess.Popen([STADO, "agent", "--drain", "--work-root", str(agent.work_root)], env=stado_env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: f"{fetching}: handed back to the queue" in agent.log(), timeout=30, message="the hand-back")
        back = machine_status(stado_env, fetching)
        # Not a lost worker nor a failure: counted apart, so its next attempt's output is an attempt of its own.
        assert (back["state"], back["requeues"], back["failures"], back["handbacks"]) == ("queued", 0, 0, 1), back
        assert machine_status(stado_env, running)["state"] == "running" and drain.poll() is None  # it waits
        gate.touch()
        out, err = drain.communicate(timeout=60)
        assert drain.returncode == 0, err
        assert agent.wait(10) == 0 and "has exited" in out, (out, agent.log())
    finally:
        if drain is not None and drain.poll() is None:
            drain.kill()
        agent.stop()
    assert machine_status(stado_env, running)["state"] == "completed"
    assert not seen.exists(), "the handed-back job never started here"
    assert "(drain): not claiming any more; handing back 1 job(s) not started yet" in agent.log()
    assert stado(stado_env, "machine", "may-delete", "local@vm1").returncode == 0
    nothing = stado(stado_env, "agent", "--drain", "--work-root", str(agent.work_root))
    assert "nothing to drain" in nothing.stdout
