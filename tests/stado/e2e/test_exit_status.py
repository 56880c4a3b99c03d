"""A job's exit status is recorded as the kernel reported it (the agent starts the command with
/bin/sh -c): an exit as an exit, a signal as a signal; the shell's $PPID is the agent and it leads its own
process group, the one the record names. Also when the agent that started it died and another took it over."""
import re
import signal

import pytest

from stado.store import cas
from stado.core import keys

from .support import Agent, machine_status, stado, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file"], indirect=True)

# (command, exit_code, signal, `stado job watch` exit status)
ENDS = [("exit 130", 130, None, 130), ("exit 143", 143, None, 143), ("kill -INT $$", None, 2, 130),
        ("kill -TERM $$", None, 15, 143), ("exit 0", 0, None, 0)]


def test_an_exit_is_recorded_as_an_exit_and_a_signal_as_a_signal(stado_env, tmp_path, store):
    seen = tmp_path / "seen"
    seen.mkdir()
    jobs = [submit(stado_env, f"echo $$ $PPID $(cut -d' ' -f5 /proc/$$/stat) > {seen}/$WC_JOB_ID; {command}")
            for command, *_ in ENDS]
    agent = Agent(stado_env, tmp_path, "--until-idle", "--slots", "2")
    assert agent.wait(60) == 0, agent.log()
    for job, (command, code, sig, watched) in zip(jobs, ENDS):
        status = machine_status(stado_env, job)
        assert (status["exit_code"], status["signal"]) == (code, sig), (command, status)
        assert status["error"] is None if code == 0 else status["error"]["class"] == ("exit_code" if sig is None
                                                                                       else "signal")
        assert stado(stado_env, "job", "watch", job, ok=False).returncode == watched, command
        pid, ppid, pgrp = map(int, (seen / job).read_text().split())
        # No wrapper between the agent and the job's shell: its parent is the agent, and the process group it
        # leads is the one recorded (what a cancel signals).
        assert ppid == agent.proc.pid and pgrp == pid, command
        assert re.search(rf"{job}: started as process group {pid}$", agent.log(), re.M), command


def test_an_exit_status_is_recorded_as_is_by_the_agent_that_took_over_a_running_job(stado_env, tmp_path, store):
    gate = tmp_path / "gate"
    job = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 130")
    first = Agent(stado_env, tmp_path, name="first")
    try:
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=30,
                 message="the job running")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        second = Agent(stado_env, tmp_path, name="second")
        wait_for(lambda: "left by the worker this one replaced, but still run here" in second.log(), timeout=30,
                 message="the take-over")
        gate.touch()  # its shell ends re-parented away from any agent; the new one reads the kernel's status
        wait_for(lambda: machine_status(stado_env, job)["terminal"], timeout=30, message="its end")
        second.stop()
    finally:
        first.stop()
    status = machine_status(stado_env, job)
    assert (status["state"], status["exit_code"], status["signal"]) == ("failed", 130, None), (status, second.log())
