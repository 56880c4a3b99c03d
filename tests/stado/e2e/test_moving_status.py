"""`stado status --json --all` while real agents claim, run, retry and finish jobs: at every look, every job
submitted is there exactly once, none corrupt, no problem (a script waiting for "nothing unfinished" must never
see a job vanish)."""
import json
import time

import pytest

from .support import Agent, stado

JOBS = 120  # enough moves, 2 agents of 4 slots, that a look which dropped a moving job would meet one


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_every_job_is_in_every_status_while_agents_move_them(stado_env, tmp_path):
    batch = tmp_path / "jobs.json"
    entries = [{"command": "true"} if n % 3 else {"command": f"test -e {tmp_path}/r-$WC_JOB_ID || "
                                                                   f"{{ touch {tmp_path}/r-$WC_JOB_ID; exit 3; }}",
                                                        "retries": 1}
               for n in range(JOBS)]
    batch.write_text(json.dumps(entries))
    submitted = stado(stado_env, "submit", "--batch", str(batch)).stdout.split()
    assert len(submitted) == JOBS
    agents = [Agent(stado_env, tmp_path, "--slots", "4", "--until-idle", name=f"agent-{n}", host=f"host{n}")
              for n in range(2)]
    looks = moving = 0
    deadline = time.monotonic() + 90
    try:
        while any(agent.proc.poll() is None for agent in agents):
            assert time.monotonic() < deadline, "the agents did not drain the jobs in 90 s"
            seen = json.loads(stado(stado_env, "status", "--json", "--all").stdout)
            ids = [job["id"] for job in seen["jobs"]]
            assert sorted(ids) == sorted(submitted), (set(submitted) - set(ids), len(ids))
            assert (seen["corrupt"], seen["problems"]) == (0, []), seen
            looks += 1
            moving += any(not job["terminal"] for job in seen["jobs"])
    finally:
        for agent in agents:
            agent.wait(30)
            agent.stop()
    final = json.loads(stado(stado_env, "status", "--json", "--all").stdout)
    assert sorted(j["id"] for j in final["jobs"]) == sorted(submitted)
    assert {j["state"] for j in final["jobs"]} == {"completed"}, [a.log() for a in agents]
    assert sum(j["failures"] for j in final["jobs"]) == JOBS // 3  # every third job failed once and ran again
    assert moving >= 3, f"only {moving} of {looks} looks saw a job not yet finished: nothing moved while looking"
