"""The agent's own timers, in process on a ManualClock: a timeout falls due on the agent's timer, not at
its next poll; the claim passes come fast while they find work and back off to --poll-seconds while idle."""
from stado.queue import submission
from stado.agent.slot import Phase, Stop
from stado.core.spec import JobSpec

from .inprocess import World


def submit(world: World, command: str, **spec) -> str:
    return submission.submit(world.store, [submission.Submission(JobSpec(command=command, **spec))],
                             clock=world.clock)[0]["id"]


def test_a_timeout_is_kept_to_the_millisecond_whatever_the_poll(tmp_path):
    world = World(tmp_path)
    agent = world.agent(poll_seconds=10.0)
    job = submit(world, "run 3600", timeout=2.5)
    world.run_until(lambda: job in agent.slots and agent.slots[job].phase == Phase.RUNNING)
    started = agent.slots[job].started_mono
    world.run_until(lambda: agent.slots[job].phase == Phase.STOPPING)
    assert agent.slots[job].stop == Stop.TIMEOUT
    assert agent.slots[job].stop_sent - started == 2.5  # the slot's deadline, not the next poll 10 s on


def claim_times(world: World, agent, until: float) -> list[float]:
    times = []
    real = agent.claim

    def claim():
        times.append(round(world.clock.now - 1_000.125, 3))
        return real()

    agent.claim = claim
    world.run_until(lambda: world.clock.now - 1_000.125 >= until, limit=until + 10)
    agent.claim = real
    return times


def test_claim_passes_back_off_while_idle_and_come_fast_while_they_claim(tmp_path):
    world = World(tmp_path)
    agent = world.agent(poll_seconds=4.0, busy_poll_seconds=0.5, slots=4, settle_seconds=1000.0)
    idle = claim_times(world, agent, 15.0)
    assert [b - a for a, b in zip(idle, idle[1:])] == [1.0, 2.0, 4.0, 4.0]  # then one LIST per poll
    for _ in range(3):
        submit(world, "run 3600")
    busy = claim_times(world, agent, 40.0)
    gaps = [round(b - a, 3) for a, b in zip(busy, busy[1:])]
    assert busy[0] - idle[-1] == 4.0                  # found at the next poll (a remote store rings no one)
    assert gaps[:4] == [0.5, 1.0, 2.0, 4.0], gaps       # it claimed: the next pass comes fast, then backs off again
    assert set(gaps[4:]) == {4.0}
    assert len(agent.slots) == 3


def test_sigkill_follows_sigterm_after_kill_after_to_the_millisecond(tmp_path):
    world = World(tmp_path)
    agent = world.agent(poll_seconds=10.0, kill_after=0.7)
    sent = []
    real = agent.host.signal

    def signal(process, sig):
        sent.append((sig, agent.clock.monotonic()))
        return real(process, sig)

    agent.host.signal = signal
    job = submit(world, "run 3600 ignore-term", timeout=1.25)
    world.run_until(lambda: len(sent) >= 2)
    (term, at_term), (kill, at_kill) = sent[:2]
    assert (term, kill) == (15, 9)
    assert 0.7 <= at_kill - at_term <= 0.7 + 0.001  # the in-process world steps its clock by 1 ms at least
    assert agent.slots[job].stop == Stop.TIMEOUT
