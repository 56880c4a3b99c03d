"""What a job's directory holds, and what is left of it: the store's credentials never sit in a job's directory
(its $STADO_BIN shim names the work root's store file, 0600, instead), and the directory a killed agent left is
removed by the next agent on that work root once the attempt's fate is settled, never while the attempt runs."""
import json
import os
import re
import signal
import stat
from pathlib import Path

import pytest

from stado.core import keys
from stado.store import cas

from .support import Agent, machine_status, pids_with_env, stado, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["s3"], indirect=True)


def _secret(stado_env) -> str:
    secret = stado_env["AWS_SECRET_ACCESS_KEY"]
    assert len(secret) >= 6
    return secret


def _files_holding(root: Path, secret: str) -> list[str]:
    """Every file under `root` whose bytes hold `secret` (grep -r, by hand)."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if secret.encode() in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue  # gone meanwhile
    return found


def _running(store, job):
    return wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"),
                    message="its process recorded")


def test_a_job_directory_holds_no_secret_and_its_stado_bin_still_reaches_the_store(stado_env, tmp_path, store):
    secret = _secret(stado_env)
    gate, listed = tmp_path / "gate", tmp_path / "listed.json"
    job = submit(stado_env, f'"$STADO_BIN" status --json > {listed}.tmp 2>&1; mv {listed}.tmp {listed}; '
                            f'while [ ! -e {gate} ]; do sleep 0.05; done')
    agent = Agent(stado_env, tmp_path)
    try:
        _running(store, job)
        wait_for(listed.exists, message="the job's call back to stado")
        jobs_dir = agent.work_root / "jobs"
        [directory] = list(jobs_dir.iterdir())
        shim = (directory / "stado").read_text()
        assert secret not in shim and "AWS_SECRET_ACCESS_KEY" not in shim
        assert _files_holding(jobs_dir, secret) == []
        [env_file] = [p for p in (agent.work_root / "agents").iterdir() if p.name.endswith(".env")]
        assert str(env_file) in shim and secret in env_file.read_text()  # where the shim reads it from
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((agent.work_root / "agents").stat().st_mode) == 0o700
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
    finally:
        agent.stop()
    assert any(j["id"] == job for j in json.loads(listed.read_text())["jobs"])  # the shim reached the store


def test_a_killed_agents_directory_is_removed_by_the_next_agent_once_the_attempt_is_settled(stado_env, tmp_path,
                                                                                           store):
    secret = _secret(stado_env)
    marker, gate = tmp_path / "ran-once", tmp_path / "gate"
    # The first attempt waits for the gate; the one after the restart ends at once.
    job = submit(stado_env, f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; "
                            f"while [ ! -e {gate} ]; do sleep 0.05; done")
    first = Agent(stado_env, tmp_path, name="first")
    jobs_dir = first.work_root / "jobs"
    try:
        process = _running(store, job)
        [left] = list(jobs_dir.iterdir())
        assert _files_holding(jobs_dir, secret) == []
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        # Its job and its keeper die with it (the whole unit killed): nothing on the host settles the attempt.
        keeper = json.loads((left / "keeper.json").read_text())
        os.kill(keeper["pid"], signal.SIGKILL)
        os.killpg(process["pgid"], signal.SIGKILL)
        wait_for(lambda: not pids_with_env("WC_JOB_ID", job), message="the job's processes gone")
        assert left.exists() and _files_holding(jobs_dir, secret) == []
        second = Agent(stado_env, tmp_path, "--until-idle", name="second")
        assert second.wait(60) == 0, second.log()
    finally:
        first.stop()
    log = second.log()
    assert re.search(rf"init: {job}: requeued \(its worker was replaced while it ran", log), log
    assert re.search(rf"{job}: removed the directory its attempt of \d+ left on this host: its agent \S+ is gone",
                     log), log
    status = machine_status(stado_env, job)
    assert (status["state"], status["requeues"]) == ("completed", 1)
    assert not left.exists()
    # The rerun's own directory goes with its slot (its keeper, a process of its own, may finish after the agent).
    wait_for(lambda: list(jobs_dir.iterdir()) == [], timeout=30, message="the rerun's directory gone")
    assert _files_holding(first.work_root, secret) == [str(next((first.work_root / "agents").glob("*.env")))]


def test_a_directory_whose_attempt_still_runs_under_its_keeper_is_never_removed(stado_env, tmp_path, store):
    gate = tmp_path / "gate"
    job = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done")
    first = Agent(stado_env, tmp_path, name="first")
    try:
        _running(store, job)
        [directory] = list((first.work_root / "jobs").iterdir())
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        second = Agent(stado_env, tmp_path, name="second", extra_env={})
        wait_for(lambda: "still run here by pid" in second.log(), timeout=30, message="the take-over")
        assert directory.exists()  # its process runs: taken over, never tidied
        gate.touch()
        wait_for(lambda: machine_status(stado_env, job)["state"] == "completed", timeout=30, message="its end")
        wait_for(lambda: not directory.exists(), message="its directory removed with the slot that took it over")
        assert "removed the directory" not in second.log()
        second.stop()
    finally:
        first.stop()
    assert stado(stado_env, "status", job).returncode == 0
