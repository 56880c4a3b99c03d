"""Submit, run, watch, cancel, rerun, pause, results: the stado CLI and agents as real processes."""
import json
import os
import signal
import time

import pytest

from stado.objectstore import NotFound

from .support import (Agent, machine_status, pids_with_env, run_until_idle, stado, status_json, submit,
                      group_alive, wait_for)


def test_a_job_runs_once_and_its_status_says_so(stado_env, tmp_path):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID >> {ran}; echo out-line; exit 3", "--name", "three")
    assert machine_status(stado_env, job)["state"] == "queued"
    agent = run_until_idle(stado_env, tmp_path)
    assert agent.returncode == 0, agent.log()
    assert ran.read_text().split() == [job]
    status = machine_status(stado_env, "three")
    assert (status["state"], status["terminal"], status["outcome"], status["exit_code"]) == ("failed", True, "failed", 3)
    assert status["error"]["class"] == "exit_code"
    assert status["instance_ref"] == "local@testhost" and status["started_at"] and status["finished_at"]
    watch = stado(stado_env, "job", "watch", job, ok=False)
    assert watch.returncode == 3 and "out-line" in watch.stdout
    table = stado(stado_env, "status").stdout
    assert job in table and "failed (3)" in table and "three" in table


def test_watch_follows_state_and_output_live_until_terminal(stado_env, tmp_path):
    gate = tmp_path / "gate"
    job = submit(stado_env, f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second")
    agent = Agent(stado_env, tmp_path, "--until-idle")
    try:
        import subprocess

        from .support import STADO
        import threading

        watcher = subprocess.Popen([STADO, "job", "watch", job, "--interval", "0.1"], env=stado_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        reader = threading.Thread(target=lambda: seen.extend(iter(watcher.stderr.readline, "")), daemon=True)
        reader.start()
        # Release the job only once the watcher has reported it running, so no poll can miss that state.
        wait_for(lambda: any("running on local@testhost" in line for line in seen), timeout=30,
                 message="the watcher to report the job running")
        gate.touch()
        out = watcher.stdout.read()
        watcher.wait(timeout=30)
        reader.join(timeout=10)
        watcher.stdout.close()
        watcher.stderr.close()
        err = "".join(seen)
        assert watcher.returncode == 0
        assert out.splitlines() == ["first", "second"]
        assert "running on local@testhost" in err and "completed: succeeded" in err
        assert agent.wait(30) == 0
    finally:
        agent.stop()


def test_cancel_before_claim_means_it_never_starts(stado_env, tmp_path):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo ran >> {ran}", "--name", "doomed")
    out = stado(stado_env, "cancel", "doomed", "--reason", "not needed").stdout
    assert "cancelled before it started" in out
    run_until_idle(stado_env, tmp_path)
    assert not ran.exists()
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["outcome"]) == ("cancelled", True, "cancelled")
    assert status["moving"] == []


def test_cancel_while_running_stops_the_process_group_within_a_tick(stado_env, tmp_path):
    started = tmp_path / "started"
    job = submit(stado_env, f"sleep 300 & sleep 300 & touch {started}; wait")
    agent = Agent(stado_env, tmp_path)
    try:
        wait_for(started.exists, message="job started")
        pids = pids_with_env("WC_JOB_ID", job)
        pgid = os.getpgid(pids[0])
        assert len(pids) >= 3 and all(os.getpgid(p) == pgid for p in pids)
        out = stado(stado_env, "cancel", job).stdout
        t0 = time.monotonic()  # the cancel is durable from here on
        assert "stopped at its agent's next tick" in out
        wait_for(lambda: not group_alive(pgid) and not pids_with_env("WC_JOB_ID", job), timeout=5,
                 message="process group gone")
        elapsed = time.monotonic() - t0
        assert elapsed < 1.0, elapsed  # a tick is 0.1 s here, plus one renewal round trip and the signal
        assert machine_status(stado_env, job)["state"] == "cancelled"
        wait_for(lambda: machine_status(stado_env, job)["moving"] == [], message="running record settled")
        assert "cancelled; stopping process group" in agent.log()
    finally:
        agent.stop()


def test_cancel_of_a_finished_job_is_reported_and_writes_nothing(stado_env, tmp_path, store):
    job = submit(stado_env, "true")
    run_until_idle(stado_env, tmp_path)
    before = {e.key: e.version for e in store.list("")}
    done = stado(stado_env, "cancel", job, ok=False)
    assert done.returncode == 1  # it could not be honoured: the job had already ended otherwise
    assert "already completed (succeeded); nothing written" in done.stdout
    assert {e.key: e.version for e in store.list("")} == before


def test_rerun_runs_the_exact_spec_under_a_new_id(stado_env, tmp_path):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID $CARGO_BUILD_JOBS >> {ran}", "--cores", "1", "--name", "again",
                 "--priority", "4", "--capabilities", "x86")
    run_until_idle(stado_env, tmp_path, "--capabilities", "x86")
    new = json.loads(stado(stado_env, "job", "rerun", "again", "--json").stdout)
    assert new["rerun_of"] == job and new["id"] != job
    run_until_idle(stado_env, tmp_path, "--capabilities", "x86")
    assert ran.read_text().splitlines() == [f"{job} 1", f"{new['id']} 1"]
    assert status_json(stado_env)["counts"] == {"completed": 2}
    stado_json = json.loads(stado(stado_env, "status", new["id"], "--json").stdout)
    original = json.loads(stado(stado_env, "status", job, "--json").stdout)
    assert stado_json["spec"] == original["spec"] and stado_json["rerun_of"] == job


def test_pause_stops_claiming_but_accepts_submissions(stado_env, tmp_path):
    out = stado(stado_env, "queue", "pause", "--reason", "disk swap").stdout
    assert "paused by" in out and "disk swap" in out
    job = submit(stado_env, "true")
    agent = run_until_idle(stado_env, tmp_path, name="paused-agent")
    assert "queue paused by" in agent.log() and "disk swap" in agent.log()
    assert machine_status(stado_env, job)["state"] == "queued"
    status = status_json(stado_env)
    assert status["paused"]["reason"] == "disk swap" and status["paused"]["by"] and status["paused"]["at"]
    assert "PAUSED" in stado(stado_env, "status").stdout
    assert "resumed" in stado(stado_env, "queue", "resume").stdout
    run_until_idle(stado_env, tmp_path, name="resumed-agent")
    assert machine_status(stado_env, job)["state"] == "completed"


def test_sigterm_stops_claiming_and_lets_the_running_job_finish(stado_env, tmp_path, store):
    started, gate = tmp_path / "started", tmp_path / "gate"
    first = submit(stado_env, f"touch {started}; while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, "--slots", "2")
    try:
        wait_for(started.exists, message="first job running")
        agent.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "SIGTERM: not claiming" in agent.log(), message="agent acknowledged SIGTERM")
        second = submit(stado_env, "true")  # a free slot, but the agent is stopping

        def pulses():
            try:
                return json.loads(store.get(f"status/{first}/heartbeat").data)["generation"]
            except NotFound:
                return 0  # its first pulse comes with the first renewal, one tick after the start

        seen = wait_for(pulses, message="the job's first heartbeat")
        wait_for(lambda: pulses() >= seen + 3, message="three more agent ticks")  # it would have claimed by now
        assert agent.proc.poll() is None  # still there: its job runs on
        gate.touch()
        assert agent.wait(30) == 0
    finally:
        agent.stop()
    assert machine_status(stado_env, first)["state"] == "completed"
    assert machine_status(stado_env, second)["state"] == "queued"


def test_timeout_stops_the_job_and_records_timed_out(stado_env, tmp_path):
    job = submit(stado_env, "sleep 30", "--timeout", "0.3s")
    run_until_idle(stado_env, tmp_path)
    status = machine_status(stado_env, job)
    assert (status["state"], status["outcome"], status["error"]["class"]) == ("failed", "timed_out", "timeout")
    assert stado(stado_env, "job", "watch", job, ok=False).returncode == 124


def test_corrupt_queue_document_is_reported_and_skipped(stado_env, tmp_path, store):
    from runkit.core.ids import uuid7

    bad = f"queue/{uuid7()}.json"
    store.put(bad, b"{this is not json")
    good = submit(stado_env, "true")
    status = status_json(stado_env)
    assert any(bad in p and "corrupt" in p for p in status["problems"])
    assert f"problem: {bad}: corrupt document" in stado(stado_env, "status").stdout
    agent = run_until_idle(stado_env, tmp_path)
    assert agent.returncode == 0
    assert f"{bad}: corrupt document (not JSON" in agent.log()
    assert machine_status(stado_env, good)["state"] == "completed"


def test_status_says_when_no_live_agent_can_run_a_job(stado_env, tmp_path):
    gpu = submit(stado_env, "nvidia-smi", "--capabilities", "gpu")
    gate = tmp_path / "gate"
    busy = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, "--capabilities", "x86", "--slots", "2")
    try:
        wait_for(lambda: machine_status(stado_env, busy)["state"] == "running", message="agent running a job")
        status = status_json(stado_env)
        row = next(j for j in status["jobs"] if j["id"] == gpu)
        assert row["state"] == "queued" and "needs capabilities gpu" in row["unschedulable"]
        assert f"unschedulable: {gpu}: no live agent can run it" in stado(stado_env, "status").stdout
        assert [a["instance_ref"] for a in status["agents"]] == ["local@testhost"]
        wait_for(lambda: f"{gpu}: not for this agent: needs capabilities gpu" in agent.log(), message="agent log")
        gate.touch()
        wait_for(lambda: machine_status(stado_env, busy)["terminal"], message="busy job done")
    finally:
        agent.stop()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_cancelled_job_is_not_terminal_while_its_processes_still_run(stado_env, tmp_path):
    """The cancelled/ record is durable at once, but the job has not stopped moving until its agent has seen
    its process group gone (here the job ignores SIGTERM and ends only when released)."""
    import subprocess
    import threading

    from .support import STADO

    started, gate = tmp_path / "started", tmp_path / "gate"
    job = submit(stado_env, f"trap '' TERM; touch {started}; while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path, "--kill-after", "600")
    watcher = None
    try:
        wait_for(started.exists, message="job started")
        stado(stado_env, "cancel", job)
        wait_for(lambda: "cancelled; stopping process group" in agent.log(), message="agent sent SIGTERM")
        status = machine_status(stado_env, job)
        assert (status["state"], status["terminal"], status["phase"]) == ("cancelled", False, "cancelling")
        assert pids_with_env("WC_JOB_ID", job), "the job still runs"
        row = next(j for j in status_json(stado_env)["jobs"] if j["id"] == job)
        assert row["terminal"] is False
        assert "cancelled/cancelling" in stado(stado_env, "status").stdout
        again = stado(stado_env, "cancel", job).stdout
        assert "already cancelled" in again and "being stopped" in again
        watcher = subprocess.Popen([STADO, "job", "watch", job, "--interval", "0.1"], env=stado_env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(iter(watcher.stderr.readline, "")), daemon=True)
        reader.start()
        wait_for(lambda: any("cancelled/cancelling" in line for line in seen), message="the watcher's first look")
        assert watcher.poll() is None, seen  # not terminal: it keeps watching
        gate.touch()
        assert watcher.wait(30) == 125  # cancelled: the same code as `jobman wait`
        reader.join(10)
        assert "cancelled: cancelled" in "".join(seen)
        status = machine_status(stado_env, job)
        assert (status["state"], status["terminal"], status["outcome"]) == ("cancelled", True, "cancelled")
        assert not pids_with_env("WC_JOB_ID", job)
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
        if watcher is not None:
            watcher.stderr.close()
        agent.stop()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_dead_agent_is_shown_stale_and_does_not_make_a_job_schedulable(stado_env, tmp_path, store):
    """A SIGKILLed agent leaves its agents/ record behind. Once its last_seen is older than its own
    liveness window (recorded in the record), it is not live: not listed as such, and not an agent the
    queue's jobs could run on."""
    import datetime

    gpu_agent = Agent(stado_env, tmp_path, "--capabilities", "gpu", name="gpu-agent", host="gpuhost")
    x86_agent = Agent(stado_env, tmp_path, "--capabilities", "x86", "--poll-seconds", "5", name="x86-agent")
    try:
        def records():
            return {json.loads(store.get(e.key).data)["instance_ref"]: e.key for e in store.list("agents/")}

        wait_for(lambda: len(records()) == 2, message="both agents' records")
        gpu_agent.proc.kill()
        gpu_agent.wait(10)
        key = records()["local@gpuhost"]
        record = json.loads(store.get(key).data)
        assert record["refresh_seconds"] == 1 and record["live_for"] == 10
        gpu = submit(stado_env, "nvidia-smi", "--capabilities", "gpu")
        # Time passes for the dead agent's record (its last sign of life a minute ago).
        aged = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=60)
        record.update(last_seen=aged.strftime("%Y-%m-%dT%H:%M:%S.000Z"), generation=record["generation"] + 1,
                      nonce="aged-by-the-test")
        store.put(key, json.dumps(record).encode())
        status = status_json(stado_env)
        assert [a["instance_ref"] for a in status["agents"]] == ["local@testhost"]
        assert [a["instance_ref"] for a in status["stale_agents"]] == ["local@gpuhost"]
        row = next(j for j in status["jobs"] if j["id"] == gpu)
        assert "needs capabilities gpu" in (row["unschedulable"] or ""), row
        table = stado(stado_env, "status").stdout
        assert "1 stale agent(s)" in table and "local@gpuhost" in table
        assert f"unschedulable: {gpu}: no live agent can run it" in table
    finally:
        gpu_agent.stop()
        x86_agent.stop()


def test_rerun_of_a_job_that_has_not_finished_is_refused_unless_beside(stado_env, tmp_path, store):
    """`stado job rerun` of a job still queued or running made a second one beside it without a word."""
    job = submit(stado_env, "true", "--name", "once")
    before = {e.key: e.version for e in store.list("")}
    refused = stado(stado_env, "job", "rerun", "once", ok=False)
    assert refused.returncode == 2 and "still queued" in refused.stderr and "--beside" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert {e.key: e.version for e in store.list("")} == before             # nothing written
    beside = json.loads(stado(stado_env, "job", "rerun", "once", "--beside", "--json").stdout)
    assert beside["rerun_of"] == job
