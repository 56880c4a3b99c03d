"""Corrupt records outside queue/ are reported (agent log, `stado status`), never crash an agent, and never
lose other jobs. The rule is the same on every backend: these run on the local directory."""
import pytest

from .support import Agent, machine_status, run_until_idle, stado, status_json, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file"], indirect=True)


def test_a_corrupt_running_record_of_a_queued_job_is_reported_and_other_jobs_run(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    blocked = submit(stado_env, f"echo blocked >> {ran}")
    store.put(f"running/{blocked}.json", b"garbage")
    other = submit(stado_env, f"echo other >> {ran}")
    agent = run_until_idle(stado_env, tmp_path)
    assert agent.returncode == 0, agent.log()
    assert f"running/{blocked}.json: corrupt document (not JSON" in agent.log()
    assert ran.read_text().split() == ["other"]
    assert machine_status(stado_env, other)["state"] == "completed"
    # Nothing was lost: the blocked job is still queued, and status says what is wrong.
    assert {e.key for e in store.list("queue/")} == {f"queue/{blocked}.json"}
    status = status_json(stado_env)
    assert any(f"running/{blocked}.json: corrupt document" in p for p in status["problems"])
    assert [j["state"] for j in status["jobs"] if j["id"] == blocked] == ["queued"]
    [problem] = machine_status(stado_env, blocked)["problems"]
    assert problem.startswith(f"running/{blocked}.json: corrupt document (not JSON")


def test_a_running_record_corrupted_under_a_running_job_stops_only_that_job(stado_env, tmp_path, store):
    started, gate = tmp_path / "started", tmp_path / "gate"
    victim = submit(stado_env, f"touch {started}; sleep 300")
    agent = Agent(stado_env, tmp_path, "--slots", "2")
    try:
        wait_for(started.exists, message="job started")
        store.put(f"running/{victim}.json", b"garbage")
        wait_for(lambda: f"running/{victim}.json: corrupt document" in agent.log(), message="agent reports it")
        later = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done")
        wait_for(lambda: machine_status(stado_env, later)["state"] == "running", message="a later job runs")
        gate.touch()
        wait_for(lambda: machine_status(stado_env, later)["state"] == "completed", message="the later job completes")
        assert agent.proc.poll() is None, agent.log()
        assert f"{victim}: process group" in agent.log()  # stopped: the record is no longer the one it wrote
    finally:
        agent.stop()
    assert any(f"running/{victim}.json: corrupt document" in p for p in status_json(stado_env)["problems"])


def test_a_corrupt_terminal_record_beside_a_queue_entry_starts_nothing(stado_env, tmp_path, store):
    """A claim looks for a terminal record before it starts anything: one that cannot be read may be the
    job's final word, so the job is not started on a guess; the others run."""
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo held >> {ran}")
    store.put(f"completed/{job}.json", b"garbage")
    other = submit(stado_env, f"echo other >> {ran}")
    agent = run_until_idle(stado_env, tmp_path)
    assert agent.returncode == 0, agent.log()
    assert f"{job}: not claimed: completed/{job}.json: corrupt document" in agent.log()
    assert ran.read_text().split() == ["other"]
    assert machine_status(stado_env, other)["state"] == "completed"
    assert {e.key for e in store.list("queue/")} == {f"queue/{job}.json"} and not list(store.list("running/"))
    assert f"problem: completed/{job}.json: corrupt document" in stado(stado_env, "status").stdout


def test_a_corrupt_terminal_record_met_at_finish_leaves_the_outcome_in_running(stado_env, tmp_path, store):
    started, gate = tmp_path / "started", tmp_path / "gate"
    job = submit(stado_env, f"touch {started}; while [ ! -e {gate} ]; do sleep 0.05; done")
    other = submit(stado_env, "true")
    agent = Agent(stado_env, tmp_path, "--slots", "2")
    try:
        wait_for(started.exists, message="job started")
        store.put(f"completed/{job}.json", b"garbage")
        gate.touch()
        wait_for(lambda: f"completed/{job}.json: corrupt document" in agent.log(), message="the agent to report it")
        wait_for(lambda: machine_status(stado_env, other)["state"] == "completed", message="the other job")
        assert agent.proc.poll() is None, agent.log()
    finally:
        agent.stop()
    status = machine_status(stado_env, job)
    assert (status["state"], status["phase"], status["exit_code"]) == ("running", "finishing", 0)
    assert status["problems"] and f"completed/{job}.json" in status["problems"][0]
    table = stado(stado_env, "status").stdout
    assert f"problem: completed/{job}.json: corrupt document" in table
    # A later agent's leftover pass reports it again and dies of nothing.
    again = run_until_idle(stado_env, tmp_path, name="again")
    assert again.returncode == 0 and f"completed/{job}.json: corrupt document" in again.log()
    store.delete(f"completed/{job}.json")  # an operator removes the bad record: the next pass settles the move
    last = run_until_idle(stado_env, tmp_path, name="last")
    assert last.returncode == 0 and "finished an interrupted move to completed" in last.log()
    assert machine_status(stado_env, job)["state"] == "completed"


def test_status_counts_only_jobs_that_resolved_and_corrupt_ones_apart(stado_env, store):
    from runkit.core.ids import uuid7

    bad = uuid7()
    store.put(f"queue/{bad}.json", b"{this is not json")
    good = submit(stado_env, "true")
    status = status_json(stado_env)
    assert status["counts"] == {"queued": 1} and status["corrupt"] == 1
    assert [j["id"] for j in status["jobs"]] == [good]
    summary = stado(stado_env, "status").stdout.splitlines()
    assert "0 running, 1 queued, 0 completed, 0 failed, 0 cancelled, 1 corrupt (see problems)" in summary
