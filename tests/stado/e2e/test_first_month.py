"""The first month's sweep on the fleet: 300 jobs of one line batch named by a template, with a retry, on two
agents; two fail; `stado wait --name` answers the same each time it is asked; the failures are rerun by selector
once fixed, and their reruns succeed."""
import json

import pytest

from .support import Agent, stado

SWEEP = 300
FAILING = (7, 150)


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_sweep_on_two_agents_fails_twice_and_its_failures_are_rerun_by_selector(stado_env, tmp_path, store_target):
    batch = tmp_path / "sweep.txt"
    batch.write_text("".join(f"test -e {tmp_path}/ok-{n} || test {n} -ne {FAILING[0]} -a {n} -ne {FAILING[1]}\n"
                             for n in range(1, SWEEP + 1)))
    ids = stado(stado_env, "submit", "--batch", str(batch), "--name", "sweep-{n}", "--retries", "1").stdout.split()
    assert len(ids) == SWEEP
    agents = [Agent(stado_env, tmp_path, "--until-idle", "--slots", "4", "--work-root", str(tmp_path / f"work-{n}"),
                    name=f"agent-{n}", host=f"host-{n}") for n in (1, 2)]
    try:
        assert [agent.wait(300) for agent in agents] == [0, 0], [agent.log() for agent in agents]
    finally:
        for agent in agents:
            agent.stop()
    first = stado(stado_env, "wait", "--name", "sweep-*", ok=False)
    assert first.returncode == 1, first.stderr
    named = sorted(line for line in first.stderr.splitlines() if "failed" in line)
    assert len(named) == 2 and all(f"sweep-{n} (" in "".join(named) for n in FAILING), named
    again = stado(stado_env, "wait", "--name", "sweep-*", ok=False)
    assert (again.returncode, again.stderr) == (first.returncode, first.stderr)
    failed = json.loads(stado(stado_env, "status", "--state", "failed", "--name", "sweep-*", "--json").stdout)["jobs"]
    assert sorted(job["name"] for job in failed) == sorted(f"sweep-{n}" for n in FAILING)
    assert all(job["failures"] == 1 for job in failed)  # one failed attempt retried, and the retry failed too

    for n in FAILING:
        (tmp_path / f"ok-{n}").touch()
    rerun = stado(stado_env, "job", "rerun", "--state", "failed", "--name", "sweep-*")
    new = [line.split()[0] for line in rerun.stdout.splitlines()]
    assert len(new) == 2, rerun.stdout
    agent = Agent(stado_env, tmp_path, "--until-idle", name="agent-3", host="host-3")
    try:
        assert agent.wait(120) == 0, agent.log()
    finally:
        agent.stop()
    assert stado(stado_env, "wait", *new).returncode == 0
