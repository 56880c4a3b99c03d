"""The agent's decisions, in process: real Agents on a real in-memory store, driven step by step on a ManualClock
with a fake process host (tests/stado/inprocess.py). Nothing sleeps, so hours of an agent's time take
milliseconds; what the subprocess tests show end to end (tests/stado/e2e) is shown here decision
by decision: the claim, the renewal, an exit recorded, a retry, a timeout, a cancel, a dead worker reaped, a drain,
a shutdown, problems said once, a slot's phases, and the agent's memory bounded however long it runs."""
import time

import pytest

from stado.core import documents as d
from stado import jobs
from stado.core import keys
from stado.queue import submission
from stado.agent import claim_pass
from stado.agent.logonce import LogOnce
from stado.agent.slot import Phase, Stop
from stado.store.cas import read
from stado.queue.lookup import view
from stado.core.problems import CORRUPT, Problem
from stado.jobs.reaper import LEASE_EXPIRED, reap
from stado.core.spec import JobSpec

from .inprocess import World
from .scripted_faults import Scripted



@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


def submit(world: World, command: str = "run 1", **spec) -> str:
    return submission.submit(world.store, [submission.Submission(JobSpec(command=command, **spec))],
                             clock=world.clock)[0]["id"]


def state(world: World, job_id: str) -> str:
    return view(world.store, job_id).state


def test_a_job_is_claimed_started_renewed_and_recorded_by_its_exit(world):
    agent = world.agent()
    job = submit(world, "run 12 exit 0")
    world.run_until(lambda: job in agent.slots)
    slot = agent.slots[job]
    assert slot.phase == Phase.RUNNING and state(world, job) == "running"
    generations = set()
    world.run_until(lambda: generations.add(read(world.store, keys.running(job))[0]["generation"]) or
                    world.clock.now > 1_010)
    assert len(generations) >= 5, generations  # renewed every poll (1 s) while it ran
    world.run_until(lambda: state(world, job) == "completed")
    done = view(world.store, job).doc
    assert done["exit_code"] == 0 and done["outcome"] == "succeeded" and not agent.slots


def test_a_failed_attempt_is_retried_within_its_budget(world):
    world.agent()
    job = submit(world, "run 2 exit 3", retries=1)
    world.run_until(lambda: state(world, job) == "failed")
    doc = view(world.store, job).doc
    assert doc["failures"] == 1 and doc["exit_code"] == 3 and doc["error"]["class"] == "exit_code"
    assert sum(1 for p in world.agents[0].host.procs.values()) == 2  # two attempts, one process each


def test_a_job_past_its_timeout_is_stopped_and_recorded_timed_out(world):
    agent = world.agent()
    job = submit(world, "run 3600", timeout=30.0)
    world.run_until(lambda: job in agent.slots and agent.slots[job].phase == Phase.STOPPING)
    assert agent.slots[job].stop == Stop.TIMEOUT and 30 <= world.clock.now - 1_000 <= 33
    world.run_until(lambda: state(world, job) == "failed")
    assert view(world.store, job).doc["outcome"] == "timed_out"


def test_a_process_that_ignores_sigterm_gets_sigkill_after_kill_after(world):
    agent = world.agent(kill_after=3.0)
    job = submit(world, "run 3600 ignore-term", timeout=10.0)
    world.run_until(lambda: state(world, job) == "failed")
    [process] = agent.host.of_job(job)
    assert process.signals == [15, 9]


def test_a_cancel_of_a_running_job_stops_it_at_the_next_renewal(world):
    agent = world.agent()
    job = submit(world, "run 3600")
    world.run_until(lambda: job in agent.slots and agent.slots[job].phase == Phase.RUNNING)
    report = jobs.cancel(world.store, job, by="op", clock=world.clock)
    assert report.kind == "cancelled_running"
    asked = world.clock.now
    world.run_until(lambda: view(world.store, job).terminal)
    assert world.clock.now - asked <= 1.5  # within a poll: its renewal met the cancel
    assert view(world.store, job).state == "cancelled" and agent.host.of_job(job)[0].signals == [15]


def test_a_dead_workers_job_is_requeued_by_another_agent_and_run_again(world):
    """Agent a claims a job and then stops speaking (its steps stop: a crash); agent b's reaper watches the
    running record for a lease, requeues it (`worker lease expired`), and claims it itself."""
    a = world.agent("a")
    job = submit(world, "run 3600")
    world.run_until(lambda: job in a.slots and a.slots[job].phase == Phase.RUNNING, agents=[a])
    b = world.agent("b")
    crashed = world.clock.now
    world.run_until(lambda: job in b.slots, agents=[b])
    assert f"{job}: requeued ({LEASE_EXPIRED}" in world.log("b")
    assert world.clock.now - crashed >= 2.0  # a promise (a poll and the write's time), then a lease watched
    assert view(world.store, job).doc["requeues"] == 1


def test_a_live_worker_is_never_reaped_however_long_its_job_runs(world):
    a, b = world.agent("a"), world.agent("b", settle_seconds=1.0)
    job = submit(world, "run 7200")
    world.run_until(lambda: world.clock.now > 1_000 + 3_600, limit=4_000)  # an hour of both agents' time
    assert job in a.slots and state(world, job) == "running"
    assert "requeued" not in world.log("b") and not b.slots


def test_a_reaper_whose_host_clock_is_an_hour_ahead_reaps_no_sooner_nor_later(world):
    """It judges by the store's clock (read from its agents/ record's write), not its host's: a dead worker's job
    is requeued a lease or so after its last word, as an honest reaper would."""
    a = world.agent("a")
    job = submit(world, "run 3600")
    world.run_until(lambda: job in a.slots and a.slots[job].phase == Phase.RUNNING, agents=[a])
    last_word = world.clock.now
    ahead = world.agent("ahead", skew=3600.0)
    assert "this host's clock is 3600.0 s ahead of the store's" in world.log("ahead")
    world.run_until(lambda: job in ahead.slots, agents=[ahead])
    assert 2.0 <= world.clock.now - last_word <= 15.0, world.clock.now - last_word


def test_a_claim_stopped_between_its_write_and_its_check_renews_before_its_job_starts(world):
    """The agent is stopped (SIGSTOP) past the claim's promise just after its create landed, and the check that
    follows cannot be read (the GETs of completed/ fail): the slot is held. It must count the promise from before the
    claim's write, not from when it made the slot after the stop: the job starts only on a promise renewed since,
    one the store's clock still honours, or the reaper would requeue a job that runs."""
    world.store = store = Scripted(world.store)
    a = world.agent("a")
    store.on("delete_if_match", "ready/", before=lambda key: world.clock.advance_to(world.clock.now + 20))
    store.on("get", "completed/", fail=1)  # the claim's check; the one its launch makes reads
    job = submit(world, "run 30 exit 0")
    world.run_until(lambda: a.host.of_job(job), agents=[a])
    assert "held, not started" in world.log("a")
    doc, _ = read(store, keys.running(job), job)
    started = world.clock.wall() - (a.clock.monotonic() - a.host.of_job(job)[0].started)
    assert doc.lease_expires_at > d.iso(started), (doc.lease_expires_at, world.log("a"))  # renewed first
    world.run_until(lambda: state(world, job) == "completed")
    assert len(a.host.of_job(job)) == 1


def test_a_draining_agent_hands_back_what_has_not_started(world):
    agent = world.agent(inputs_ready=False)
    job = submit(world, "run 5")
    world.run_until(lambda: job in agent.slots)
    assert agent.slots[job].phase == Phase.CLAIMED
    agent.stop("SIGTERM", drain=True)
    world.run_until(lambda: agent in world.done)
    doc = view(world.store, job).doc
    assert state(world, job) == "queued" and doc["handbacks"] == 1 and doc["requeues"] == 0


def test_a_second_stop_cancels_the_running_jobs_by_the_shutdown(world):
    agent = world.agent()
    job = submit(world, "run 3600")
    world.run_until(lambda: job in agent.slots and agent.slots[job].phase == Phase.RUNNING)
    agent.stop("SIGTERM")
    world.step()
    assert job in agent.slots  # the first stop lets it run
    agent.stop("SIGTERM")
    world.run_until(lambda: agent in world.done)
    assert view(world.store, job).doc["cancelled_by"].startswith("shutdown of agent")


def test_a_job_that_ends_while_its_record_is_taken_over_records_nothing(world):
    agent = world.agent()
    job = submit(world, "run 3600")
    world.run_until(lambda: job in agent.slots and agent.slots[job].phase == Phase.RUNNING)
    doc, version = read(world.store, keys.running(job))
    world.store.put_if_match(keys.running(job), b"{not json", version)  # someone wrote over it
    world.run_until(lambda: job not in agent.slots)
    assert "the job is no longer ours" in world.log() and agent.host.of_job(job)[0].signals == [15]


def test_problems_are_values_said_once_however_many_passes_meet_them(world):
    agent = world.agent(settle_seconds=1.0)
    bad = "01a22e00-0000-7000-8000-0000000000bd"
    world.store.put(keys.running(bad), b"{torn")
    summary = reap(world.store, writer="test", clock=agent.clock, now=time.time())
    assert summary.problems == [Problem(CORRUPT, bad, summary.problems[0].text)] and not summary.lines
    world.run_until(lambda: world.clock.now > 1_000 + 30)  # thirty reaper passes
    assert world.log().count(f"{keys.running(bad)}: corrupt document") == 1


def test_the_agents_memory_is_bounded_however_many_jobs_it_has_seen(world):
    """What an agent keeps between passes is keyed by version and pruned with the listing; its log-once map is
    bounded: a queue that turns over thousands of jobs it cannot run leaves nothing behind."""
    agent = world.agent()
    for round_ in range(3):
        ids = [j["id"] for j in submission.submit(
            world.store, [submission.Submission(JobSpec("run 1", capabilities=("gpu",))) for _ in range(300)],
            clock=world.clock)]
        world.step()
        assert len(agent.queue._skip) == 300  # not for this agent: skipped until the entry changes
        for job_id in ids:
            jobs.cancel(world.store, job_id, by="op", clock=world.clock)
        world.step()
        world.clock.advance(2.0)
        world.step()
        assert len(agent.queue._skip) == 0 and len(agent.queue._docs) == 0, round_
    assert len(agent.ctx.log_once) <= 1000


def test_log_once_is_bounded_and_says_a_thing_again_when_it_changes():
    said = []
    once = LogOnce(said.append, limit=3)
    for n in range(10):
        once(f"k{n}", 1, f"line {n}")
    once("k9", 1, "again")
    once("k9", 2, "changed")
    assert len(once) == 3 and said[-1] == "changed" and "again" not in said


def test_a_claim_pass_yields_decisions_and_claims_nothing_it_cannot_fit(world):
    agent = world.agent(cores=2, slots=3)
    big = submit(world, "run 5", cores=2)
    small = submit(world, "run 5", cores=1)
    decisions = list(claim_pass.ClaimPass(agent.ctx, agent.queue, running=set(), room=agent.room()))
    assert [type(x).__name__ for x in decisions] == ["Claim"]  # the big one fits; the small one finds no core left
    assert decisions[0].doc["id"] == big and read(world.store, keys.queued(small)) is not None


def test_a_slot_goes_through_its_phases(world):
    """CLAIMED while its inputs arrive, RUNNING once spawned, STOPPING from the cancel's SIGTERM (ignored here) to
    the SIGKILL after --kill-after, then ENDED, CLOSED and DONE within the step that settles it (and drops it)."""
    agent = world.agent(kill_after=3.0)
    job = submit(world, "run 3600 ignore-term")
    seen: list[str] = []

    def phases() -> bool:
        slot = agent.slots.get(job)
        if slot is not None and (not seen or seen[-1] != slot.phase):
            seen.append(slot.phase)
        return view(world.store, job).terminal

    world.run_until(lambda: phases() or (job in agent.slots and world.clock.now > 1_005))
    jobs.cancel(world.store, job, by="op", clock=world.clock)
    world.run_until(phases)
    assert seen == [Phase.RUNNING, Phase.STOPPING] and agent.host.of_job(job)[0].signals == [15, 9]
    assert view(world.store, job).state == "cancelled" and job not in agent.slots

    waiting = world.agent("waiting", inputs_ready=False)
    other = submit(world, "run 5")
    world.run_until(lambda: other in waiting.slots, agents=[waiting])
    assert waiting.slots[other].phase == Phase.CLAIMED and not waiting.slots[other].started


def test_the_tier_runs_in_well_under_ten_seconds_of_real_time(world):
    started = time.monotonic()
    world.agent()
    ids = [submit(world, f"run {n % 7} exit {n % 2}") for n in range(40)]
    world.run_until(lambda: all(view(world.store, j).terminal for j in ids), limit=3600)
    assert time.monotonic() - started < 5.0
