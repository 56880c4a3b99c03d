"""Many agents (separate processes) drain a queue: every job runs exactly once."""
import collections
import json

import pytest

from .support import Agent, stado

# (agents, jobs) per backend: 8 x 300 on the local directory, 4 x 100 on each server.
SIZES = {"file": (8, 300), "s3": (4, 100), "azure": (4, 100)}


@pytest.mark.slow
def test_agents_drain_the_queue_and_every_job_runs_exactly_once(store_target, stado_env, tmp_path):
    agents, count = SIZES[store_target.backend]
    ran = tmp_path / "ran.txt"
    batch = tmp_path / "batch.txt"
    batch.write_text("".join(f"echo $WC_JOB_ID >> {ran}  # {n}\n" for n in range(count)))
    submitted = stado(stado_env, "submit", "--batch", str(batch)).stdout.split()
    assert len(submitted) == count == len(set(submitted))
    procs = [Agent(stado_env, tmp_path, "--until-idle", "--slots", "2", name=f"agent-{n}", host=f"host{n % 3}")
             for n in range(agents)]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.stop()
    assert codes == [0] * agents, [p.log()[-2000:] for p in procs if p.proc.returncode]
    lines = ran.read_text().split()
    dupes = [job for job, n in collections.Counter(lines).items() if n > 1]
    assert dupes == [] and sorted(lines) == sorted(submitted)
    status = json.loads(stado(stado_env, "status", "--json", "--all").stdout)
    assert status["counts"] == {"completed": count} and status["problems"] == []
    assert status["agents"] == []  # each agent removed its record when it exited
    claims = [line for p in procs for line in p.log().splitlines() if ": claimed (" in line]
    assert len(claims) == count  # one claim per job: no claim was undone after its job started
