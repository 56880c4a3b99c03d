"""Admission: the fence (can an agent ever run a job), what its slots hold (can it run the job now), the
room a claim pass keeps back for a job that waits for it, what a job costs, and what an agent offers."""
import os

import pytest

from runkit.core.clock import SYSTEM

from stado.queue import submission
from stado.core.admission import (Holdings, Offer, Room, cost_of, offer_of, past_cap, share_of, size_text, unschedulable,
                             why_not)
from stado.agent import Agent, AgentConfig
from stado.core.documents import iso
from stado.core.errors import BadInput
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec

from .inprocess import FakeHost, FakeIO, FakeWorkspace

G = 1 << 30
GPU_BOX = Offer(frozenset({"x86", "cuda"}), cores=8, memory=64 * G, accelerators=2, devices=("3", "5"), slots=4)


def test_the_fence_names_what_does_not_match():
    assert why_not({"capabilities": ["cuda"], "cores": 8, "memory": 64 * G, "accelerators": 2}, GPU_BOX) is None
    cases = {
        "needs capabilities arm, fast": {"capabilities": ["fast", "arm", "x86"]},
        "allows providers aws, gcp, this agent is local": {"providers": ["aws", "gcp"]},
        "requires a spot machine, this agent is not spot": {"spot": "require"},
        "needs 9 cores, this agent has 8": {"cores": 9},
        "needs 99999G of memory, this agent has 64G": {"memory": 99999 * G},
        "needs 3 accelerators, this agent has 2": {"accelerators": 3},
    }
    for reason, spec in cases.items():
        assert why_not(spec, GPU_BOX) == reason
    spot = Offer(frozenset(), 1, None, 0, provider="aws", spot=True, price_per_hour=0.3)
    assert why_not({"spot": "never"}, spot) == "refuses spot machines, this agent is spot"
    assert why_not({"providers": ["aws"], "spot": "require", "memory": 1 << 50}, spot) is None  # memory not counted
    assert why_not({"cost_cap": 0}, spot) == "has a cost cap of $0, this agent costs $0.3/hour"
    free = Offer(frozenset(), 1, None, 0, provider="aws", spot=True, price_per_hour=0.0)
    assert why_not({"cost_cap": 0}, free) is None  # a price of $0 is a price: the cap holds there


def test_a_cost_cap_is_not_run_where_no_price_can_judge_it_unless_it_is_advisory():
    assert GPU_BOX.price_per_hour is None  # declared no price
    assert why_not({"cost_cap": 5}, GPU_BOX) == ("has a cost cap of $5, this agent declares no price "
                                                 "(--price-per-hour), so its cost cannot be judged")
    assert why_not({"cost_cap": 5, "cost_cap_advisory": True}, GPU_BOX) is None
    assert why_not({}, GPU_BOX) is None  # no cap: nothing to judge
    assert past_cap({"cost_cap": 0, "cost_cap_advisory": True}, GPU_BOX, 1e6) is None  # runs there unjudged


def test_sizes_read_as_people_write_them():
    assert [size_text(n) for n in (99999 * G, 64 * G, int(23.46 * G), 512 << 20, 4096, 10)] == [
        "99999G", "64G", "23.5G", "512M", "4K", "10 bytes"]


def test_holdings_give_each_job_its_own_devices_and_free_what_dropped_slots_held():
    held = Holdings(GPU_BOX)
    a = held.hold("a", {"cores": 2, "accelerators": 1, "memory": 8 * G})
    b = held.hold("b", {"accelerators": 1})
    assert (a.devices, b.devices, a.cores, b.cores) == (("3",), ("5",), 2, 1)
    assert held.hold("a", {"cores": 7}) is a  # held once, from the claim on
    assert held.free() == Room(slots=2, cores=5, memory=56 * G, accelerators=0)
    held.sync({"b": {"accelerators": 1}, "adopted": {"cores": 4}})  # a dropped; a job taken over is held too
    assert set(held.held) == {"b", "adopted"}
    assert held.hold("c", {"accelerators": 1}).devices == ("3",)  # a's device is free again
    assert held.free() == Room(slots=1, cores=2, memory=64 * G, accelerators=0)


def test_room_kept_back_for_a_waiting_job_blocks_only_what_it_waits_for():
    room = Room(slots=3, cores=4, memory=None, accelerators=0)
    waiting_gpu = {"accelerators": 1}
    assert not room.fits(waiting_gpu)
    assert room.short_of(waiting_gpu) == "1 accelerators (0 free)"
    room.take(waiting_gpu)  # kept back: later GPU jobs may not take a device before it
    assert room.fits({"cores": 3}) and not room.fits({"accelerators": 1})
    room.take({"cores": 3})
    assert not room.fits({"cores": 1}) and room.short_of({"cores": 2}) == "2 cores (0 free)"
    room.take({})
    assert room.short_of({}) == "a slot, 1 cores (0 free)"
    big = Room(slots=4, cores=2, memory=8 * G, accelerators=0)
    big.take({"cores": 4, "memory": 1 * G})  # a 4-core job waits: nothing behind it takes its cores
    assert not big.fits({"cores": 1})


def test_cost_is_the_price_pro_rated_by_the_share_the_job_reserved():
    assert share_of({"cores": 2}, GPU_BOX) == 0.25  # 2 of 8 cores; 1 of 4 slots
    assert share_of({"cores": 1, "accelerators": 1}, GPU_BOX) == 0.5  # 1 of 2 devices
    assert share_of({"memory": 64 * G}, GPU_BOX) == 1.0
    priced = Offer(frozenset(), cores=2, memory=None, accelerators=0, price_per_hour=36.0, slots=2)
    assert cost_of({}, priced, 3600) == 18.0
    assert past_cap({"cost_cap": 0.01}, priced, 1.9) is None
    assert past_cap({"cost_cap": 0.01}, priced, 2.1) == ("its cost passed its cap of $0.01: $0.0105 after 2.1 s at "
                                                          "$36/hour for 50% of the agent; its process group was stopped")
    assert past_cap({}, priced, 1e6) is None and past_cap({"cost_cap": 0}, GPU_BOX, 1e6) is None  # no cap, no price


def test_the_agent_config_checks_its_offer_and_fills_in_the_defaults(tmp_path):
    base = {"work_root": str(tmp_path), "stado_bin": "stado"}
    offer = AgentConfig(**base, slots=3, accelerators=2).check().offer()
    assert offer.devices == ("0", "1") and offer.accelerators == 2 and offer.slots == 3
    assert offer.cores == max(os.cpu_count() or 1, 3) and offer.memory and offer.memory > 1 << 20
    offer = AgentConfig(**base, accelerator_devices=("GPU-a1", "GPU-b2"), cores=16, memory=None, spot=True,
                        provider="aws", price_per_hour=1.5).check().offer()
    assert (offer.devices, offer.accelerators, offer.cores, offer.memory) == (("GPU-a1", "GPU-b2"), 2, 16, None)
    bad = {
        "--accelerators 3 but --accelerator-devices names 2 (0,1)": {"accelerators": 3,
                                                                      "accelerator_devices": ("0", "1")},
        "--accelerator-devices names a device twice: 0,0": {"accelerator_devices": ("0", "0")},
        "bad accelerator device 'a/b'": {"accelerator_devices": ("a/b",)},
        "bad provider 'on prem'": {"provider": "on prem"},
        "--price-per-hour must be a number of US dollars": {"price_per_hour": float("inf")},
        "--memory must be a size greater than 0": {"memory": 0},
        "--cores must be at least 1": {"cores": 0},
    }
    for message, fields in bad.items():
        with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
            AgentConfig(**base, **fields).check()


def test_unschedulable_judges_the_whole_offer_of_live_agents():
    now = 10_000.0
    small = {"instance_ref": "local@small", "last_seen": iso(now - 1), "live_for": 10, "cores": 4, "memory": 8 * G,
             "accelerators": 0, "slots": 2, "price_per_hour": 2}
    large = dict(small, instance_ref="local@large", memory=64 * G, accelerators=2, accelerator_devices=[0, 1],
                 provider="onprem", spot=True)
    agents = [small, large]
    assert unschedulable({"memory": 32 * G}, agents, now) is None  # the large one can
    assert unschedulable({"memory": 99999 * G}, agents, now) == (
        "local@large: needs 99999G of memory, this agent has 64G; local@small: needs 99999G of memory, this agent "
        "has 8G")
    assert unschedulable({"accelerators": 3}, agents, now).count("needs 3 accelerators") == 2
    assert unschedulable({"spot": "never", "accelerators": 1}, agents, now) == (
        "local@large: refuses spot machines, this agent is spot; local@small: needs 1 accelerators, this agent has 0")
    assert unschedulable({"cost_cap": 0}, agents, now) == (
        "local@large: has a cost cap of $0, this agent costs $2/hour; local@small: has a cost cap of $0, this agent "
        "costs $2/hour")
    # Only live agents count: a stale or stopping agent that could run it does not make it schedulable, and an
    # unreadable offer is left out rather than crashing `stado status`.
    stale = dict(large, instance_ref="local@stale", memory=1 << 50, last_seen=iso(now - 60))
    stopping = dict(stale, instance_ref="local@stopping", last_seen=iso(now), stopping=True)
    garbage = dict(small, instance_ref="local@garbage", cores="many")
    assert offer_of(garbage) is None
    assert unschedulable({"memory": 99999 * G}, [small, stale, stopping, garbage], now) == (
        "local@small: needs 99999G of memory, this agent has 8G")
    assert unschedulable({"memory": 99999 * G}, [], now) is None  # no live agent to ask


def _agent(tmp_path, store, **config):
    """An in-process agent (tests/stado/inprocess.py): the claim pass and the slots are real, nothing is spawned."""
    host = FakeHost(SYSTEM)
    agent = Agent(store, AgentConfig(work_root=str(tmp_path), stado_bin="/bin/false", host="h", **config),
                  log=lambda _: None, host=host, workspace=FakeWorkspace(), new_io=lambda *a, **k: FakeIO())
    return agent, lambda: [p.command for p in host.procs.values()]


def _submit(store, command, **spec):
    return submission.submit(store, [submission.Submission(JobSpec(command, **spec))], clock=SYSTEM)[0]["id"]


def test_a_claim_pass_admits_against_what_is_free_and_keeps_room_for_the_job_ahead(tmp_path):
    store = MemoryStore()
    agent, started = _agent(tmp_path, store, slots=4, cores=4, memory=16 * G, accelerators=1)
    _submit(store, "half", cores=2, priority=9)
    _submit(store, "gpu-1", accelerators=1, priority=8)
    _submit(store, "gpu-2", accelerators=1, priority=7)
    _submit(store, "three", cores=3, priority=6)  # does not fit the 2 cores left: keeps them back
    _submit(store, "one", priority=5)
    _submit(store, "huge", memory=32 * G, priority=10)  # can never fit: not for this agent, keeps nothing back
    agent.claim()
    assert started() == ["half", "gpu-1"]  # "one" would fit the 2 free cores, but "three" waits for them ahead of it
    assert agent.room() == Room(slots=2, cores=1, memory=16 * G, accelerators=0)
    _drop(agent, "half")
    agent.claim()  # gpu-2 waits for the device and keeps a core back for then: "three" does not fit the 2 left
    assert started() == ["half", "gpu-1"]
    _drop(agent, "gpu-1")
    agent.claim()
    assert started() == ["half", "gpu-1", "gpu-2", "three"]
    assert agent.holdings.held.keys() == agent.slots.keys()
    _submit(store, "gpu-3", accelerators=1, priority=9)
    _submit(store, "late", priority=0)
    _drop(agent, "three")
    agent.claim()  # gpu-3 waits for the device only: the cores it does not need go to the jobs behind it
    assert started()[4:] == ["one", "late"] and "huge" not in started()


def _drop(agent, command: str) -> None:
    del agent.slots[next(i for i, s in agent.slots.items() if s.doc["spec"]["command"] == command)]
