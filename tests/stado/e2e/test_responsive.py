"""Short ids and a fleet that feels responsive, through the real CLI and agents."""
import json
import os
import time

import pytest

from .support import Agent, machine_status, pids_with_env, run_until_idle, stado, submit, wait_for


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_every_command_that_takes_a_job_takes_a_unique_prefix(stado_env, tmp_path):
    first, second = submit(stado_env, "echo one"), submit(stado_env, "echo two")
    common = next(i for i in range(36) if first[i] != second[i])
    assert common >= 6  # UUIDv7s made a moment apart share their first digits
    short = second[:common + 1]
    assert machine_status(stado_env, short)["id"] == second
    assert stado(stado_env, "status", short.replace("-", "")).stdout.startswith(f"id:               {second}")
    ambiguous = stado(stado_env, "status", first[:common], ok=False)
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr.count("\n") == 1 and first in ambiguous.stderr and second in ambiguous.stderr
    assert stado(stado_env, "status", first[:5], ok=False).returncode == 3
    stado(stado_env, "cancel", short)
    assert machine_status(stado_env, second)["outcome"] == "cancelled"
    run_until_idle(stado_env, tmp_path)
    first_short = first[:next(i for i in range(36) if first[i] != second[i]) + 1]
    assert stado(stado_env, "job", "watch", first_short).stdout == "one\n"
    rerun = stado(stado_env, "job", "rerun", first_short).stdout.strip()
    assert machine_status(stado_env, rerun)["rerun_of"] == first


def _gone_at(job: str, within: float) -> float:
    """When the job's last process was seen gone, looking every 5 ms (wait_for's looks grow apart)."""
    deadline = time.monotonic() + within
    while pids_with_env("WC_JOB_ID", job):
        assert time.monotonic() < deadline, "SIGKILL did not end the job"
        time.sleep(0.005)
    return time.time()


def _stamp(path) -> float:
    return float(path.read_text().split()[0])


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_timeout_and_its_kill_after_are_kept_by_the_agents_timer_not_its_poll(stado_env, tmp_path):
    """A 5 s poll (the default): a 1.5 s timeout still ends the job at 1.5 s, and SIGKILL follows SIGTERM after
    --kill-after (0.7 s), each within 100 ms."""
    start, term = tmp_path / "start", tmp_path / "term"
    # The shell ignores nothing but records SIGTERM, then keeps running until SIGKILL.
    job = submit(stado_env, f"trap 'date +%s.%N > {term}' TERM; date +%s.%N > {start}; "
                            "while :; do sleep 0.02; done", "--timeout", "1.5s")
    agent = Agent(stado_env, tmp_path, "--poll-seconds", "5", "--kill-after", "0.7")
    try:
        wait_for(start.exists, timeout=20, message="the job to start")
        wait_for(lambda: term.exists() and term.read_text().strip(), timeout=10, message="SIGTERM at the timeout")
        killed = _gone_at(job, within=10)
        took_term = _stamp(term) - _stamp(start)
        took_kill = killed - _stamp(term)
        # Measured from the shell's first line, which under load comes a little after its spawn (the timer's zero):
        # early by that much at most, never late by more than 100 ms.
        assert 1.2 < took_term < 1.6, took_term
        # Seen by the test's own scan of /proc, every 5 ms, which costs some ms itself on a busy machine; measured from
        # the trap's stamp, which a loaded machine may write late (the gap then looks a little short).
        assert 0.7 - 0.1 <= took_kill < 0.7 + 0.15, took_kill
        wait_for(lambda: machine_status(stado_env, job)["terminal"], timeout=20, message="the job settled")
        assert machine_status(stado_env, job)["outcome"] == "timed_out"
    finally:
        agent.stop()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_submit_to_the_local_directory_wakes_an_idle_agent_at_once(stado_env, tmp_path):
    """A 60 s poll: the agent looks at the queue once at start, then sleeps; the submit's ring starts the job."""
    agent = Agent(stado_env, tmp_path, "--poll-seconds", "60")
    try:
        wait_for(lambda: "started on" in agent.log(), timeout=20, message="the agent to start")
        assert f"with {os.cpu_count()} slot(s)" in agent.log()  # one per core by default
        for n in range(3):
            mark = tmp_path / f"started-{n}"
            t0 = time.time()
            submit(stado_env, f"date +%s.%N > {mark}")
            started = float(wait_for(lambda mark=mark: mark.exists() and mark.read_text().strip(), timeout=10,
                                     interval=0.005, message="the job to start"))
            assert started - t0 < 1.0, started - t0  # a poll would be 60 s; measured ~60 ms (bench/stado_latency.py)
    finally:
        agent.stop()


def _watch_lines(env: dict, job: str, until: str, timeout: float = 30) -> str:
    """`stado job watch JOB`'s stderr up to the first line containing `until` (the watch is then stopped)."""
    import subprocess

    from .support import STADO

    proc = subprocess.Popen([STADO, "job", "watch", job], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    seen = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            seen.append(line)
            if until in line or not line:
                break
    finally:
        proc.kill()
        proc.wait(10)
        proc.stderr.close()  # type: ignore[union-attr]
    return "".join(seen)


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_status_and_watch_say_why_a_job_waits(stado_env, tmp_path):
    job = submit(stado_env, "true")
    text = stado(stado_env, "status").stdout
    assert "1 queued job(s) wait: no live agent serves this queue" in text, text
    assert "waiting:          no live agent serves this queue" in stado(stado_env, "status", job).stdout
    assert "waiting: no live agent serves this queue" in _watch_lines(stado_env, job, "waiting:")
    stado(stado_env, "cancel", job)

    started = tmp_path / "started"
    busy = submit(stado_env, f"touch {started}; sleep 300")
    agent = Agent(stado_env, tmp_path, "--slots", "1", "--cores", "2")
    try:
        wait_for(started.exists, timeout=20, message="the first job to start")
        assert machine_status(stado_env, busy)["state"] == "running"
        waiting = submit(stado_env, "true")
        huge = submit(stado_env, "true", "--cores", "8")
        text = stado(stado_env, "status").stdout
        assert f"waiting: {waiting}: every agent that can run it is full (local@testhost runs 1/1)" in text, text
        assert f"unschedulable: {huge}: no live agent can run it (local@testhost: needs 8 cores, this agent has 2)" in text
        agent_line = next(line for line in text.splitlines() if line.startswith("  local@testhost"))
        assert "[1/1 slots busy]" in agent_line and " s ago" in agent_line, agent_line
        ago = float(agent_line.rsplit("seen ", 1)[1].split()[0])
        assert ago <= 2, agent_line  # its renewals (every 0.1 s poll here) say it lives, not only its record
        details = stado(stado_env, "status", waiting).stdout
        assert "waiting:          every agent that can run it is full (local@testhost runs 1/1)" in details
        assert "every agent that can run it is full" in _watch_lines(stado_env, waiting, "waiting:")
        assert "no live agent can run it (local@testhost: needs 8 cores" in stado(stado_env, "status", huge).stdout
        data = json.loads(stado(stado_env, "status", "--json").stdout)
        assert data["no_live_agent"] is False
        assert {j["id"]: j["waiting"] for j in data["jobs"]}[waiting].startswith("every agent that can run it is full")
        assert data["agents"][0]["running_now"] == 1
    finally:
        agent.stop()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_logs_prints_the_output_as_stored_its_tail_one_attempt_and_follows(stado_env, tmp_path):
    count = tmp_path / "count"
    job = submit(stado_env, f"echo x >> {count}; n=$(wc -l < {count}); seq 1 50 | sed \"s/^/$n-/\"; "
                            f"[ $n -ge 2 ] || exit 5", "--retries", "1", "--name", "twice")
    run_until_idle(stado_env, tmp_path)
    everything = stado(stado_env, "logs", "twice").stdout
    assert everything == "".join(f"{a}-{i}\n" for a in (1, 2) for i in range(1, 51))  # no headers, no state lines
    assert stado(stado_env, "logs", job, "--tail", "3").stdout == "2-48\n2-49\n2-50\n"
    assert stado(stado_env, "logs", job, "-n", "0").stdout == ""
    assert stado(stado_env, "logs", job, "--attempt", "1", "-n", "2").stdout == "1-49\n1-50\n"
    assert stado(stado_env, "logs", job, "--attempt", "3").stdout == ""
    bad = stado(stado_env, "logs", job, "--attempt", "0", ok=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1

    import subprocess

    from .support import STADO

    gate = tmp_path / "gate"
    live = submit(stado_env, f"echo before; while [ ! -e {gate} ]; do sleep 0.05; done; echo after; exit 3")
    agent = Agent(stado_env, tmp_path, name="follower")
    try:
        follower = subprocess.Popen([STADO, "logs", live, "--follow", "--interval", "0.1"], env=stado_env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert follower.stdout.readline() == b"before\n"  # type: ignore[union-attr]
        gate.touch()
        out, err = follower.communicate(timeout=30)
        assert (out, err, follower.returncode) == (b"after\n", b"", 3)  # the job's own exit status
    finally:
        agent.stop()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_the_systemd_unit_runs_the_agent_so_that_a_restart_leaves_running_jobs_alone(stado_env, tmp_path):
    import re
    import shlex
    import signal
    import subprocess

    work = tmp_path / "work"
    unit_text = stado(stado_env, "agent", "--systemd-unit", "--poll-seconds", "0.1", "--work-root", str(work),
                      "--host", "testhost", "--kill-after", "2").stdout
    unit = tmp_path / "stado-agent.service"
    unit.write_text(unit_text)
    verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr
    settings = dict(line.split("=", 1) for line in unit_text.splitlines() if "=" in line and not line.startswith("#"))
    assert settings["Restart"] == "always" and settings["KillMode"] == "process"
    assert settings["WantedBy"] == "default.target"
    assert re.search(r"^Environment=STADO_CONFIG=/\S+$", unit_text, re.M)
    assert stado_env["STADO_CONFIG"] in unit_text
    assert "User=" in stado(stado_env, "agent", "--systemd-unit", "system").stdout
    bad = stado(stado_env, "agent", "--systemd-unit", "--slots", "0", ok=False)
    assert bad.returncode == 2 and bad.stdout == ""

    # What systemd does with it: start ExecStart; on restart, SIGTERM to the agent alone (KillMode=process), SIGKILL
    # to it alone after TimeoutStopSec; start ExecStart again. The job lives on and the new agent takes it back.
    argv = shlex.split(settings["ExecStart"].replace("%%", "%"))
    env = {**stado_env, "STADO_CONFIG": unit_text.split("Environment=STADO_CONFIG=", 1)[1].split("\n", 1)[0]}
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    job = submit(stado_env, f"echo start >> {ledger}; while [ ! -e {gate} ]; do sleep 0.05; done; echo done")
    logs = [open(tmp_path / f"unit-{n}.log", "wb") for n in (1, 2)]
    first = subprocess.Popen(argv, env=env, stdout=logs[0], stderr=subprocess.STDOUT)
    second = None
    try:
        wait_for(ledger.exists, timeout=20, message="the job to start")
        first.send_signal(signal.SIGTERM)           # claims nothing more, waits for its job...
        with pytest.raises(subprocess.TimeoutExpired):
            first.wait(1)
        first.send_signal(signal.SIGKILL)           # ...until TimeoutStopSec: the agent alone is killed
        first.wait(10)
        assert pids_with_env("WC_JOB_ID", job)     # the job runs on
        second = subprocess.Popen(argv, env=env, stdout=logs[1], stderr=subprocess.STDOUT)
        wait_for(lambda: "still run here by pid" in (tmp_path / "unit-2.log").read_text(), timeout=30,
                 message="the new agent to take the job back")
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
        assert ledger.read_text() == "start\n" and stado(stado_env, "logs", job).stdout == "done\n"
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
