"""The scheduler through real `stado agent` processes: claim order across agents with different offers,
admission against what is free (accelerator devices named to the job), unschedulable jobs, the cost cap,
and a schedule fired by an agent's clock."""
import json
import signal

import pytest

from stado.core import documents as d
from stado.queue.lookup import view

from .support import Agent, machine_status, run_until_idle, stado, status_json, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file"], indirect=True)

# What each agent of the order test offers, and which jobs it may run.
AGENTS = {
    "cpu": ("--capabilities", "x86"),
    "gpu": ("--capabilities", "x86,cuda", "--accelerators", "1"),
    "fast": ("--capabilities", "x86,fast", "--cores", "4"),
}


def _runnable(job: dict, kind: str) -> bool:
    needs = set(job["capabilities"])
    offers = {"cpu": {"x86"}, "gpu": {"x86", "cuda"}, "fast": {"x86", "fast"}}[kind]
    return needs <= offers and (job["accelerators"] == 0 or kind == "gpu") and (job["cores"] <= 2 or kind == "fast")


def test_priority_then_creation_order_across_three_agents_with_different_offers(stado_env, tmp_path):
    jobs = []
    for n in range(45):
        kind = ("plain", "gpu", "fast")[(n // 3) % 3]
        jobs.append({"command": f"sleep 0.05 # {n}", "priority": (-5, 0, 5)[n % 3],
                     "capabilities": ["cuda"] if kind == "gpu" and n % 2 else [],
                     "accelerators": 1 if kind == "gpu" else 0, "cores": 4 if kind == "fast" else 1})
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(jobs))
    ids = stado(stado_env, "submit", "--batch", str(batch)).stdout.split()
    assert len(ids) == 45 and ids == sorted(ids)  # created in this order
    for job, job_id in zip(jobs, ids):
        job["id"] = job_id
    agents = {kind: Agent(stado_env, tmp_path, "--until-idle", "--slots", "1", *flags, name=kind, host=kind)
              for kind, flags in AGENTS.items()}
    try:
        codes = {kind: a.wait(timeout=120) for kind, a in agents.items()}
    finally:
        for a in agents.values():
            a.stop()
    assert codes == dict.fromkeys(AGENTS, 0), {k: a.log()[-2000:] for k, a in agents.items()}
    rows = {row["id"]: row for row in status_json(stado_env)["jobs"]}
    for job in jobs:
        row = rows[job["id"]]
        assert row["state"] == "completed", row
        job["ran_on"], job["claimed_at"] = row["instance_ref"].removeprefix("local@"), row["claimed_at"]
        assert _runnable(job, job["ran_on"]), job  # a GPU job never lands on a CPU-only agent
    assert {j["ran_on"] for j in jobs if j["accelerators"]} == {"gpu"}
    assert {j["ran_on"] for j in jobs if j["cores"] == 4} == {"fast"}
    for job in jobs:
        mine = [k for k in jobs if _runnable(k, job["ran_on"]) and k["claimed_at"] > job["claimed_at"]]
        # Priority first: no job this agent could run and that outranked this one was still waiting when it
        # claimed this one (another agent may have taken it earlier).
        assert not [k for k in mine if k["priority"] > job["priority"]], job
        # Then creation time: no older job of the same priority was still waiting when this one was claimed, but
        # those an agent left to agents of lower rank (claim_pass.spread: at most rank x slots of them, ranks 0-2 here).
        older = [k for k in mine if k["priority"] == job["priority"] and k["id"] < job["id"]]
        assert len(older) <= len(AGENTS) - 1, (job, older)


def test_one_agent_starts_jobs_of_equal_priority_in_submission_order(stado_env, tmp_path):
    ledger = tmp_path / "ledger"
    ids = [submit(stado_env, f"echo {n} >> {ledger}") for n in range(10)]
    urgent = submit(stado_env, f"echo urgent >> {ledger}", "--priority", "5")
    agent = run_until_idle(stado_env, tmp_path, "--slots", "1")
    assert agent.returncode == 0, agent.log()
    assert ledger.read_text().split() == ["urgent"] + [str(n) for n in range(10)]
    claimed = [machine_status(stado_env, job)["claimed_at"] for job in ids]
    assert claimed == sorted(claimed) and urgent


def test_with_four_agents_a_job_starts_only_once_the_earlier_ones_of_its_priority_are_claimed_or_spread(stado_env, tmp_path):
    ledger = tmp_path / "ledger"
    # Each job notes when it started, on the clock the agents' claimed_at comes from (one host).
    jobs = [(submit(stado_env, f"echo $WC_JOB_ID $(date +%s.%N) >> {ledger}; sleep 0.05", "--priority",
                    str(5 * (n % 2))), 5 * (n % 2)) for n in range(40)]
    agents = [Agent(stado_env, tmp_path, "--until-idle", "--slots", "1", name=f"a{n}", host=f"h{n}") for n in range(4)]
    try:
        codes = [a.wait(timeout=120) for a in agents]
    finally:
        for a in agents:
            a.stop()
    assert codes == [0] * 4, [a.log()[-2000:] for a in agents]
    started = {job: float(at) for job, at in (line.split() for line in ledger.read_text().splitlines())}
    claimed = {job: d.parse_iso(machine_status(stado_env, job)["claimed_at"]) for job, _ in jobs}
    assert len(started) == len(jobs) and len({machine_status(stado_env, j)["instance_ref"] for j, _ in jobs}) > 1
    for job, priority in jobs:
        # An earlier job of the same priority (ids sort by creation) had been claimed when this one started, but
        # those its agent left to agents of lower rank (claim_pass.spread: at most rank x slots, ranks 0-3 here).
        earlier = [k for k, p in jobs if p == priority and k < job]
        waiting = [k for k in earlier if claimed[k] > started[job]]
        assert len(waiting) <= len(agents) - 1, (job, waiting)


def test_accelerator_variables_name_the_devices_reserved_for_the_job(stado_env, tmp_path):
    seen = tmp_path / "seen"
    seen.mkdir()
    # Two one-device jobs wait for each other, so they run at the same time and must hold different devices.
    pair = (f"echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES $ROCR_VISIBLE_DEVICES $HIP_VISIBLE_DEVICES "
            f"$CARGO_BUILD_JOBS > {seen}/$WC_JOB_ID.tmp && mv {seen}/$WC_JOB_ID.tmp {seen}/$WC_JOB_ID; "
            f"n=0; while [ $(ls {seen} | grep -vc tmp) -lt 2 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done")
    one_a = submit(stado_env, pair, "--accelerators", "1", "--cores", "2", "--priority", "9")
    one_b = submit(stado_env, pair, "--accelerators", "1", "--priority", "9")
    both = submit(stado_env, f"echo \"[$CUDA_VISIBLE_DEVICES]\" > {seen}/both.txt", "--accelerators", "2")
    none = submit(stado_env, f"echo \"[$CUDA_VISIBLE_DEVICES] $CARGO_BUILD_JOBS\" > {seen}/none.txt", "--cores", "3",
                  "--priority", "-1")
    agent = Agent(stado_env, tmp_path, "--until-idle", "--slots", "3", "--cores", "4", "--accelerator-devices",
                  "3,5", extra_env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    assert agent.wait(timeout=60) == 0, agent.log()
    for job in (one_a, one_b, both, none):
        assert machine_status(stado_env, job)["state"] == "completed", agent.log()
    got = {job: (seen / job).read_text().split() for job in (one_a, one_b)}
    assert {got[one_a][0], got[one_b][0]} == {"3", "5"}, got  # one device each, never the same one
    assert all(len(set(v[:4])) == 1 for v in got.values()), got  # the four variables agree
    assert (got[one_a][4], got[one_b][4]) == ("2", "1")  # CARGO_BUILD_JOBS: the cores reserved
    assert (seen / "both.txt").read_text().strip() == "[3,5]"
    assert (seen / "none.txt").read_text().split() == ["[]", "3"]  # no device reserved: none visible
    log = agent.log()
    assert f"{both}: waits for 2 accelerators" in log  # it waited for the pair to let go of the devices


def test_a_job_no_live_agent_can_ever_admit_is_reported_unschedulable(stado_env, tmp_path):
    huge = submit(stado_env, "echo never", "--memory", "99999G")
    many = submit(stado_env, "echo never", "--accelerators", "4")
    aws = submit(stado_env, "echo never", "--provider", "aws,gcp")
    spot = submit(stado_env, "echo never", "--spot", "require")
    free_only = submit(stado_env, "echo never", "--cost-cap", "0")
    advisory = submit(stado_env, "echo advisory", "--cost-cap", "0", "--cost-cap-advisory")
    fits = submit(stado_env, "echo fits", "--memory", "1G", "--accelerators", "1", "--spot", "never")
    agents = [Agent(stado_env, tmp_path, "--memory", "8G", "--accelerators", "2", "--price-per-hour", "0.5",
                    name="a", host="small"),
              Agent(stado_env, tmp_path, "--memory", "64G", "--accelerator-devices", "0,1,2", "--provider", "onprem",
                    name="b", host="large")]
    try:
        wait_for(lambda: machine_status(stado_env, fits)["state"] == "completed", timeout=30, message="fits done")
        wait_for(lambda: len(status_json(stado_env)["agents"]) == 2, timeout=30, message="both agents' records")
        rows = {row["id"]: row for row in status_json(stado_env)["jobs"]}
        expected = {
            huge: ["local@large: needs 99999G of memory, this agent has 64G",
                   "local@small: needs 99999G of memory, this agent has 8G"],
            many: ["local@large: needs 4 accelerators, this agent has 3",
                   "local@small: needs 4 accelerators, this agent has 2"],
            aws: ["local@large: allows providers aws, gcp, this agent is onprem",
                  "local@small: allows providers aws, gcp, this agent is local"],
            spot: ["local@large: requires a spot machine, this agent is not spot",
                   "local@small: requires a spot machine, this agent is not spot"],
            # A cap is judged by a price: the priced agent costs more than $0, the other declares no price.
            free_only: ["local@large: has a cost cap of $0, this agent declares no price (--price-per-hour), so its "
                        "cost cannot be judged", "local@small: has a cost cap of $0, this agent costs $0.5/hour"],
        }
        for job, reasons in expected.items():
            assert rows[job]["state"] == "queued" and rows[job]["unschedulable"] == "; ".join(reasons), rows[job]
        # An advisory cap may run where no price judges it (the large agent), never past it (the small one).
        wait_for(lambda: machine_status(stado_env, advisory)["state"] == "completed", message="advisory job done")
        assert machine_status(stado_env, advisory)["instance_ref"] == "local@large"
        table = stado(stado_env, "status").stdout
        assert (f"unschedulable: {huge}: no live agent can run it (local@large: needs 99999G of memory, this agent "
                "has 64G; local@small: needs 99999G of memory, this agent has 8G)") in table
        assert "64G, 3 accelerators (0,1,2), provider onprem;" in table
        assert "8G, 2 accelerators (0,1), provider local, $0.5/hour;" in table
        log = agents[0].log() + agents[1].log()
        assert f"{huge}: not for this agent: needs 99999G of memory" in log
    finally:
        for a in agents:
            a.proc.send_signal(signal.SIGTERM)
        assert [a.wait(timeout=30) for a in agents] == [0, 0]
    for job in expected:
        assert machine_status(stado_env, job)["state"] == "queued"  # never claimed, never run


def test_the_cost_cap_stops_a_job_after_about_two_seconds(stado_env, tmp_path):
    # $36/hour for the agent; the job reserves one of its two slots and one of its two cores: half of it, so
    # $18/hour, and its $0.01 cap is passed after 2 s.
    job = submit(stado_env, "sleep 60", "--cost-cap", "0.01")
    cheap = submit(stado_env, "sleep 0.5", "--cost-cap", "0.01")
    agent = Agent(stado_env, tmp_path, "--until-idle", "--slots", "2", "--cores", "2", "--price-per-hour", "36")
    assert agent.wait(timeout=60) == 0, agent.log()
    status = machine_status(stado_env, job)
    assert status["state"] == "failed" and status["error"]["class"] == "cost_cap", status
    assert "its cost passed its cap of $0.01" in status["error"]["message"]
    assert "at $36/hour for 50% of the agent" in status["error"]["message"]
    ran = _seconds(status["finished_at"]) - _seconds(status["started_at"])
    assert 1.9 <= ran <= 8, ran
    assert status["cost_usd"] >= 0.01 and status["signal"] == signal.SIGTERM
    assert machine_status(stado_env, cheap)["state"] == "completed"  # within its cap: untouched
    assert machine_status(stado_env, cheap)["cost_usd"] < 0.01
    assert f"{job}: its cost passed its cap of $0.01" in agent.log()
    assert "failed (cost_cap)" in stado(stado_env, "status").stdout
    # Its own exit status in the one table, not the 143 of an ordinary SIGTERM.
    assert stado(stado_env, "job", "watch", job, ok=False).returncode == 119


def test_an_agent_fires_a_schedule_by_the_clock(stado_env, tmp_path, store):
    """The real-time check: an agent's loop fires each fire time when the clock reaches it (cronsim's optional
    leading seconds field makes fire times 2 s apart), once, and the job runs."""
    stado(stado_env, "schedule", "add", "tick", "*/2 * * * * *", "--", "echo", "tick")
    agent = Agent(stado_env, tmp_path)
    try:
        fired = wait_for(lambda: _fired(stado_env, store, 2), timeout=30, message="two fire times submitted")
    finally:
        agent.proc.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)
    started = _seconds(next(line.split(" ", 1)[0] for line in agent.log().splitlines() if "started on" in line))
    first, second = fired[:2]
    assert _seconds(second["schedule"]["fire_time"]) - _seconds(first["schedule"]["fire_time"]) == 2
    for job in (first, second):
        fire = _seconds(job["schedule"]["fire_time"])
        assert fire > started - 2  # a fire time of this agent's life (or the one just before its first pass)
        assert 0 <= _seconds(job["submitted_at"]) - fire < 1.5, job  # submitted when the clock reached it
    assert [line for line in agent.log().splitlines() if "schedule tick: fired" in line]


def _fired(env: dict, store, n: int) -> list[dict] | None:
    """The first n jobs the schedule fired (their documents, in fire order), once there are n."""
    ids = sorted(row["id"] for row in status_json(env)["jobs"] if row["name"] == "tick")
    return [view(store, job_id).doc for job_id in ids[:n]] if len(ids) >= n else None


def _seconds(text: str) -> float:
    from stado.core.documents import parse_iso

    return parse_iso(text)


BAD_SUBMISSIONS = {
    ("--spot", "maybe"): "invalid choice: 'maybe' (choose from 'allow', 'require', 'never')",
    ("--cost-cap", "-1"): "'-1' must be a finite number >= 0",
    ("--cost-cap", "lots"): "'lots' is not a number",
    ("--priority", "5000"): "bad priority 5000: use a whole number from -1000 to 1000 (higher runs first)",
    ("--timeout", "0"): "timeout must be greater than 0",
    ("--timeout", "soon"): "bad --timeout: malformed duration 'soon'",
    ("--cores", "0"): "bad cores 0: use a whole number from 1 to 4096",
    ("--memory", "0"): "bad memory 0: give a size from 1 byte to 1 PiB, e.g. 4G or 512M",
    ("--memory", "12Q"): "bad --memory: malformed size '12Q'",
    ("--accelerators", "-1"): "bad accelerators -1: use a whole number from 0 to 1024",
    ("--provider", "a/b"): "bad provider 'a/b'",
}


def test_a_bad_spec_is_one_line_that_names_it_and_nothing_is_written(stado_env, store):
    for flags, message in BAD_SUBMISSIONS.items():
        got = stado(stado_env, "submit", "true", *flags, ok=False)
        assert got.returncode == 2 and got.stdout == "", (flags, got)
        assert got.stderr.count("\n") == 1 and message in got.stderr, (flags, got.stderr)
    batch = {"spot": "sometimes", "cost_cap": -2, "priority": 1.5, "timeout": "-", "memory": "1X"}
    for field, value in batch.items():
        got = stado(stado_env, "submit", "--batch", "/dev/stdin", ok=False,
                    input=json.dumps([{"command": "true"}, {"command": "true", field: value}]))
        assert got.returncode == 2 and got.stderr.count("\n") == 1, (field, got.stderr)
        assert "entry 2" in got.stderr and "nothing was submitted" in got.stderr, got.stderr
    assert list(store.list("")) == []


BAD_AGENTS = {
    ("--memory", "0"): "--memory must be a size greater than 0",
    ("--memory", "lots"): "bad --memory: malformed size 'lots'",
    ("--accelerators", "2", "--accelerator-devices", "0"): "--accelerators 2 but --accelerator-devices names 1 (0)",
    ("--accelerator-devices", "0,0"): "--accelerator-devices names a device twice",
    ("--accelerator-devices", ","): "--accelerator-devices is empty",
    ("--price-per-hour", "-1"): "'-1' must be a finite number >= 0",
    ("--price-per-hour", "inf"): "'inf' must be a finite number >= 0",
    ("--provider", "on prem"): "bad provider 'on prem'",
    ("--cores", "0"): "--cores must be at least 1",
}


def test_a_bad_agent_offer_is_one_line_before_the_store_is_touched(stado_env, store, tmp_path):
    for flags, message in BAD_AGENTS.items():
        got = stado(stado_env, "agent", "--work-root", str(tmp_path / "work"), *flags, ok=False, timeout=20)
        assert got.returncode == 2 and got.stderr.count("\n") == 1 and message in got.stderr, (flags, got.stderr)
    assert list(store.list("")) == []
