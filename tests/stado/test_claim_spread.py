"""Claim order with several agents: agents that list the head of the claim order at the same moment each
begin at their own part of it (claim_pass.spread, by their rank among the live agents: fleet.py), so they do not race
for the same entry; one agent alone keeps the exact order (priority, then creation), and nothing of a higher
priority is ever passed over. Real agents on a real in-memory store, on a ManualClock (tests/stado/inprocess.py);
the two agents that list at once are two threads parked at their LIST (tests/stado/interleave.py)."""
import threading

from stado.core import documents as d
from stado.core import keys
from stado.queue import submission
from stado.core.admission import refresh_seconds
from stado.core.spec import JobSpec

from .inprocess import World
from .interleave import Interleave

DEAD_AGENT = "00000000-0000-7000-8000-00000000dead"


def interleaved_world(tmp_path) -> World:
    world = World(tmp_path)
    world.store = Interleave(world.store)  # every request logged, in order, with the thread that made it
    return world


def submit(world: World, command: str = "run 1", priority: int = 0) -> str:
    spec = JobSpec(command=command, priority=priority)
    return submission.submit(world.store, [submission.Submission(spec)], clock=world.clock)[0]["id"]


def claim_order(world: World) -> list[str]:
    """Job ids in the order their claims' create-if-absent of running/ was made (won or lost)."""
    return [keys.job_id_of(key, keys.RUNNING) for _, verb, key in world.store.log
            if verb == "put_if_absent" and key.startswith(keys.RUNNING)]


def know_each_other(world: World, agents) -> None:
    """Step the agents, with nothing queued, through one cadence of their records, then have each list the live
    agents as it does at its record's cadence while its passes see work (an idle agent does not): each then knows
    the others."""
    until = world.clock.now + refresh_seconds(agents[0].cfg.poll_seconds) + 0.5
    world.run_until(lambda: world.clock.now >= until, agents=agents)
    for agent in agents:
        agent.fleet.refresh(agent.store, agent.clock.wall(), agent.clock.monotonic())


def agents_listed(world: World) -> int:
    return sum(1 for _, verb, key in world.store.log if verb.startswith("list") and key.startswith(keys.AGENTS))



def _two_agents(tmp_path):
    """A world (an interleaving store) with two agents of 2 slots each that know each other."""
    world = interleaved_world(tmp_path)
    a, b = world.agent("a", slots=2), world.agent("b", slots=2)
    know_each_other(world, [a, b])
    return world, a, b

def test_an_idle_agent_lists_the_live_agents_only_once_its_passes_see_work(tmp_path):
    world = interleaved_world(tmp_path)
    a, b = world.agent("a", slots=1), world.agent("b", slots=1)
    cadence = refresh_seconds(a.cfg.poll_seconds)
    until = world.clock.now + 2 * cadence + 0.5
    world.run_until(lambda: world.clock.now >= until, agents=[a, b])
    assert agents_listed(world) == 0 and a.fleet.rank() == (0, 1)  # idle: one LIST of ready/ a poll, nothing more
    submit(world, "run 1000")
    submit(world, "run 1000")
    submit(world, "run 1000")
    until = world.clock.now + cadence + 0.5
    world.run_until(lambda: world.clock.now >= until, agents=[a, b])
    # Each claimed, and their passes still see the third job: at its record's cadence each listed the other.
    assert agents_listed(world) >= 2 and {a.fleet.rank()[1], b.fleet.rank()[1]} == {2}


def test_one_agent_claims_in_exact_priority_then_creation_order(tmp_path):
    world = interleaved_world(tmp_path)
    # The record of an agent that died long ago: not live, so the lone agent spreads over nothing.
    world.store.put(keys.agent(DEAD_AGENT), d.encode({"agent": DEAD_AGENT, "last_seen": d.iso(world.clock.wall())}))
    world.clock.advance(600.0)
    agent = world.agent(slots=3)
    jobs = [(submit(world, priority=5 * (n % 3 == 2)), 5 * (n % 3 == 2)) for n in range(12)]
    world.run_until(lambda: len(claim_order(world)) == len(jobs))
    assert agent.fleet.rank() == (0, 1)
    assert claim_order(world) == [job for job, _ in sorted(jobs, key=lambda j: (-j[1], j[0]))]


def _claim_at_once(world: World, first, second) -> None:
    """Both agents list the claim-order index before either claims (two agents polling at the same moment); then the
    first claims, then the second, from the listing it made before the first's claims."""
    gates = {name: world.store.hold(name, "list_page", keys.READY) for name in ("first", "second")}
    threads = {name: threading.Thread(target=agent.claim, name=name)
               for name, agent in (("first", first), ("second", second))}
    for name in ("first", "second"):
        threads[name].start()
        gates[name].wait_reached()
    for name in ("first", "second"):
        gates[name].release()
        threads[name].join()


def test_two_agents_listing_the_same_head_at_once_claim_different_entries(tmp_path):
    world, a, b = _two_agents(tmp_path)
    jobs = [submit(world, "run 100") for _ in range(6)]
    _claim_at_once(world, a, b)
    assert len(a.slots) == 2 and len(b.slots) == 2  # neither lost a race, nor backed off
    assert sorted([*a.slots, *b.slots]) == jobs[:4]  # the head, shared
    # The second never touched what the first had taken: no read of its ledger entry, no create of its running/.
    taken = set(a.slots)
    assert not [(verb, key) for thread, verb, key in world.store.log
                if thread == "second" and any(job in key for job in taken)]


def test_whichever_lists_first_the_lower_rank_takes_the_head(tmp_path):
    world, a, b = _two_agents(tmp_path)
    low, high = sorted([a, b], key=lambda agent: agent.id)
    jobs = [submit(world, "run 100") for _ in range(6)]
    _claim_at_once(world, high, low)
    assert sorted(low.slots) == jobs[:2] and sorted(high.slots) == jobs[2:4]


def test_a_higher_priority_entry_is_never_passed_over_to_spread(tmp_path):
    world, a, b = _two_agents(tmp_path)
    high = max([a, b], key=lambda agent: agent.id)
    assert high.fleet.rank() == (1, 2)
    plain = [submit(world, "run 100") for _ in range(5)]
    urgent = submit(world, "run 100", priority=5)
    high.claim()
    assert sorted(high.slots) == sorted([urgent, plain[0]])  # the urgent one first, then the oldest: nothing skipped


def test_entries_left_to_an_agent_that_does_not_come_are_taken_after_two_polls(tmp_path):
    world, a, b = _two_agents(tmp_path)
    low, high = sorted([a, b], key=lambda agent: agent.id)
    jobs = [submit(world, "run 1") for _ in range(12)]
    start = world.clock.now
    # Only the higher-ranked agent claims (the other is stuck, its record still live): it leaves it the head's first
    # two entries, then takes them once they have waited two polls.
    world.run_until(lambda: set(jobs[:2]) <= set(claim_order(world)), agents=[high])
    assert world.clock.now - start <= 3 * high.cfg.poll_seconds + 1.0  # its first pass, then two polls
    order = claim_order(world)
    assert order[:2] == jobs[2:4] and len(order) < len(jobs) and not low.slots
