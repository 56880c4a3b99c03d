"""One pipeline file, both tools: `jobman run --from pipeline.toml` on this machine and `stado submit --batch
pipeline.toml` on a fleet of two agents (two work roots, two hosts' names, one local-directory store) run the same
jobs to the same outcomes, and a field one tool cannot honour is refused by it, whole, in one line."""
import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
JOBMAN, STADO = str(BIN / "jobman"), str(BIN / "stado")

PIPELINE = """
[defaults]
retries = 1
retryable_exit_codes = [75]

[jobs.prepare]
command = ["sh", "-c", "echo prepared"]

[jobs.train1]
command = "test \\"$SEED\\" = 1"
after_success = ["prepare"]
env = { SEED = "1" }

[jobs.train2]
command = "exit 3"
after_success = ["prepare"]

[jobs.train3]
command = ["echo", "it's train3"]
after_success = ["prepare"]

[jobs.evaluate]
command = "echo evaluate"
after_success = ["train1", "train2", "train3"]

[jobs.cleanup]
command = "echo cleanup"
after_failure = ["train2"]

[jobs.report]
command = "echo report"
after = ["evaluate"]
timeout = "1m"
"""
EXPECTED = {"prepare": "succeeded", "train1": "succeeded", "train2": "failed", "train3": "succeeded",
            "evaluate": "dependency_failed", "cleanup": "succeeded", "report": "succeeded"}


def _run(argv, env, timeout=120, ok=(0,)):
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode in ok, (argv, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done


def _jobman_env(tmp_path: Path) -> dict:
    return dict(os.environ, JOBMAN_HOME=str(tmp_path / "jobman-home"))


def _stado_env(tmp_path: Path) -> dict:
    config = tmp_path / "stado.toml"
    config.write_text(f'[store]\nurl = "file://{tmp_path}/store"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_", "GOOGLE_", "STADO_"))}
    return dict(env, STADO_CONFIG=str(config), XDG_DATA_HOME=str(tmp_path / "xdg"),
                XDG_STATE_HOME=str(tmp_path / "xdg-state"))


def test_the_same_pipeline_file_ends_the_same_on_jobman_and_on_a_two_agent_fleet(tmp_path):
    path = tmp_path / "pipeline.toml"
    path.write_text(PIPELINE)

    jobman = _jobman_env(tmp_path)
    handles = _run([JOBMAN, "run", "--from", str(path)], jobman).stdout.split()
    assert len(handles) == len(EXPECTED)
    _run([JOBMAN, "wait", "--all", "-q"], jobman, ok=(3,))  # train2's own exit status, whenever asked
    listed = json.loads(_run([JOBMAN, "list", "--all", "--json"], jobman).stdout)
    on_laptop = {job["name"]: job["outcome"] for job in listed}

    stado = _stado_env(tmp_path)
    ids = _run([STADO, "submit", "--batch", str(path)], stado).stdout.split()
    assert len(ids) == len(EXPECTED)
    agents = [subprocess.Popen([STADO, "agent", "--until-idle", "--slots", "2", "--poll-seconds", "0.2", "--host",
                                f"host-{n}", "--work-root", str(tmp_path / f"work-{n}")], env=stado,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for n in (1, 2)]
    for agent in agents:
        assert agent.wait(180) == 0
    _run([STADO, "wait", *ids], stado, ok=(3,))
    jobs = json.loads(_run([STADO, "status", "--all", "--json"], stado).stdout)["jobs"]
    on_fleet = {job["name"]: job["outcome"] for job in jobs}

    assert on_laptop == on_fleet == EXPECTED
    by_agent = {job["name"]: job["instance_ref"] for job in jobs}
    assert by_agent["evaluate"] is not None  # an agent that could run it ended it, once


def test_a_field_one_tool_cannot_honour_is_refused_by_it_whole(tmp_path):
    for field, tool in (("cores = 2", "jobman"), ('group = "gpu"', "stado")):
        path = tmp_path / f"{tool}-pipeline.toml"
        path.write_text(f'[jobs.a]\ncommand = "true"\n\n[jobs.b]\ncommand = "true"\n{field}\n')
        if tool == "jobman":
            env = _jobman_env(tmp_path)
            done = _run([JOBMAN, "run", "--from", str(path)], env, ok=(2,))
            assert "no jobs" in _run([JOBMAN, "list"], env).stdout
        else:
            env = _stado_env(tmp_path)
            done = _run([STADO, "submit", "--batch", str(path)], env, ok=(2,))
            assert json.loads(_run([STADO, "status", "--json"], env).stdout)["jobs"] == []
        assert done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and f"job b: field {field.split()[0]} is not supported by {tool}" in lines[0], lines
