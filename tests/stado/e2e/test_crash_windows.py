"""The two-write transitions' crash windows, each opened by a fault point (STADO_FAULT_POINT): readers
show the right state, nothing runs twice, and the next pass finishes the move."""
import time
import pytest

from tests.helpers import run_for

from .support import Agent, machine_status, run_until_idle, stado, submit, wait_for

FAULT_EXIT = 86


def test_claim_written_but_queue_entry_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID >> {ran}")
    crashed = run_until_idle(stado_env, tmp_path, name="crashing", extra_env={"STADO_FAULT_POINT": "claim-written"})
    assert crashed.returncode == FAULT_EXIT, crashed.log()
    assert {e.key for e in store.list("queue/")} == {f"queue/{job}.json"}
    assert {e.key for e in store.list("running/")} == {f"running/{job}.json"}
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["moving"]) == ("running", False, ["queued"])
    assert job in stado(stado_env, "status").stdout

    # An agent on another host: the leftover queue entry is removed, and nothing starts beside the claim.
    elsewhere = run_until_idle(stado_env, tmp_path, name="elsewhere", host="otherhost")
    assert elsewhere.returncode == 0, elsewhere.log()
    assert not ran.exists(), "the claimed job must not run a second time beside its claim"
    assert list(store.list("queue/")) == []  # the move is finished
    status = machine_status(stado_env, job)
    assert (status["state"], status["moving"]) == ("running", [])  # held by the crashed agent's claim

    # An agent starting on the crashed one's host settles what it left: nothing of it runs, so it is requeued
    # (its worker was replaced while it ran) and run, once.
    after = run_until_idle(stado_env, tmp_path, name="replacement")
    assert after.returncode == 0, after.log()
    assert f"init: {job}: requeued (its worker was replaced while it ran; started " in after.log()
    assert "by the worker this one replaced on local@testhost; restart 1)" in after.log()
    assert ran.read_text().split() == [job]
    status = machine_status(stado_env, job)
    assert (status["state"], status["requeues"]) == ("completed", 1)


def test_terminal_written_but_running_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID >> {ran}; exit 4")
    crashed = run_until_idle(stado_env, tmp_path, name="crashing",
                             extra_env={"STADO_FAULT_POINT": "terminal-written"})
    assert crashed.returncode == FAULT_EXIT, crashed.log()
    assert {e.key for e in store.list("failed/")} == {f"failed/{job}.json"}
    assert {e.key for e in store.list("running/")} == {f"running/{job}.json"}
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["outcome"], status["exit_code"], status["moving"]) == (
        "failed", True, "failed", 4, ["running"])

    after = run_until_idle(stado_env, tmp_path, name="next")
    assert after.returncode == 0
    assert "finished an interrupted move to failed" in after.log()
    assert list(store.list("running/")) == []
    assert ran.read_text().split() == [job]  # ran exactly once
    assert machine_status(stado_env, job)["moving"] == []


def test_cancel_written_but_queue_entry_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo ran >> {ran}")
    cancel = stado({**stado_env, "STADO_FAULT_POINT": "cancel-written"}, "cancel", job, ok=False)
    assert cancel.returncode == FAULT_EXIT
    assert machine_status(stado_env, job)["state"] == "cancelled"
    assert {e.key for e in store.list("queue/")} == {f"queue/{job}.json"}
    run_until_idle(stado_env, tmp_path)
    assert not ran.exists()
    assert list(store.list("queue/")) == [] and list(store.list("running/")) == []
    assert machine_status(stado_env, job)["moving"] == []


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_running_agent_finishes_interrupted_moves_on_its_slow_cadence(stado_env, tmp_path, store):
    """settle_leftovers runs at an agent's start and then every --settle-seconds while it runs."""

    from stado.core import documents as d
    from stado.store import cas
    from stado import jobs
    from stado.core import keys

    agent = Agent(stado_env, tmp_path, "--settle-seconds", "0.3")
    try:
        wait_for(lambda: "started on" in agent.log(), message="agent up")
        # Another agent died between the terminal write and the running delete (written here, by hand).
        # The queue is paused so that the live agent cannot claim the job first; settling goes on.
        stado(stado_env, "queue", "pause")
        job = submit(stado_env, "true")
        queued = cas.read(store, keys.queued(job), job)[0]
        doc, version = jobs.claim(store, queued, agent_id="dead", instance_ref="local@gone", lease_expires_at=0, now=time.time())
        fin = d.finishing_doc(doc, d.classify_exit(0, None, timed_out=False, timeout=None), now=time.time(),
                              nonce=cas.new_nonce())
        store.put_if_match(keys.running(job), d.encode(fin), version)
        term = d.terminal_doc(fin, now=time.time(), nonce=cas.new_nonce(), writer="dead")
        store.put_if_absent(keys.terminal("completed", job), d.encode(term))
        wait_for(lambda: not list(store.list("running/")), timeout=10, message="the live agent to finish the move")
        # It deletes running/ first and logs after: wait for the line rather than race it.
        wait_for(lambda: f"{job}: finished an interrupted move to completed" in agent.log(), message="its log line")
        assert machine_status(stado_env, job)["moving"] == []
        # A job held up by a corrupt record is looked at again on the same cadence once the record is gone.
        blocked = submit(stado_env, "true")  # still paused: the agent cannot claim it before it is spoiled
        store.put(f"running/{blocked}.json", b"garbage")
        stado(stado_env, "queue", "resume")
        wait_for(lambda: f"{blocked}: not claimed" in agent.log(), message="the agent to skip it")
        store.delete(f"running/{blocked}.json")
        wait_for(lambda: machine_status(stado_env, blocked)["state"] == "completed", timeout=10,
                 message="the unblocked job to run")
        assert agent.proc.poll() is None
    finally:
        agent.stop()


def test_an_idle_agent_loop_lists_only_the_index_and_the_queue_on_its_slow_cadence(tmp_path):
    """An idle poll lists one page of ready/ only; the periodic passes list running/ (the reaper's), queue/ and
    ready/ (the index against the ledger) and schedules/; terminal prefixes are never listed."""
    from stado.agent import Agent as InProcessAgent
    from stado.agent import AgentConfig
    from stado.objectstore.metered import MeteredStore
    from stado.objectstore import open_store

    store = MeteredStore(open_store(f"file://{tmp_path}/store"))
    agent = InProcessAgent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false",
                                              poll_seconds=0.02, settle_seconds=0.1, host="h"), log=lambda _: None)
    assert run_for(agent, 1.0) == 0
    listed = {prefix: n for (kind, prefix), n in store.by_prefix.items() if kind == "LIST"}
    # Each poll lists one page of the claim-order index; the reaper's pass lists running/; the index check
    # (its own, slower cadence) lists queue/ and ready/ once more; schedules/ is listed every 30 s.
    assert set(listed) == {"ready", "queue", "running", "schedules"}, listed
    assert listed["running"] >= 5 and listed["queue"] == 1 and listed["schedules"] == 1, listed
    assert listed["ready"] > 2 * listed["running"], listed
