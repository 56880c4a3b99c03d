"""Cron schedules: each fire time produces exactly one job however many agents fire it (time passed as an
argument), a fire time already dealt with is never submitted again, missed fire times are skipped."""
import time
import multiprocessing
from datetime import datetime, UTC

import pytest

from stado.core import keys
from stado.queue import lookup, schedules
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec

from .storekit import make_target, server_for

SPEC = JobSpec("echo tick", name="tick").to_json()


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def queued_ids(store):
    return sorted(keys.job_id_of(e.key, keys.QUEUE) for e in store.list(keys.QUEUE))


def test_each_fire_time_is_one_job_and_never_fires_again():
    store = MemoryStore()
    doc = schedules.add(store, "tick", "*/5 * * * *", SPEC, by="op", now=at("2026-11-30 10:01:00"))
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    assert known.tick(at("2026-11-30 10:04:59")) == []                       # not due yet
    for minute in ("10:05:00", "10:05:30", "10:09:59"):                     # several looks at one fire time
        known.tick(at(f"2026-11-30 {minute}"))
    [job] = queued_ids(store)
    assert job == schedules.fire_job_id(doc, at("2026-11-30 10:05:00"))
    view = lookup.view(store, job)
    assert view.doc["schedule"] == {"name": "tick", "fire_time": "2026-11-30T10:05:00.000Z"}
    assert view.doc["spec"]["command"] == "echo tick"
    store.delete(keys.queued(job))                                           # claimed and gone
    other = schedules.ScheduleKnowledge(store, submitter="another agent")
    assert other.tick(at("2026-11-30 10:09:00")) == []                       # dealt with: never again
    assert queued_ids(store) == []
    assert "fired" in other.tick(at("2026-11-30 10:10:01"))[0]
    assert len(queued_ids(store)) == 1


def test_missed_fire_times_are_skipped():
    store = MemoryStore()
    schedules.add(store, "tick", "0 * * * *", SPEC, by="op", now=at("2026-11-30 08:30:00"))
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    lines = known.tick(at("2026-11-30 12:30:00"))                           # no agent ran 09:00 .. 12:00
    assert lines == ["schedule tick: skipped 4 fire time(s) up to 2026-11-30T12:00:00.000Z (no agent ran within "
                     "120 s of them)"]
    assert queued_ids(store) == []
    assert "fired 2026-11-30T13:00:00.000Z" in known.tick(at("2026-11-30 13:00:05"))[0]
    [doc] = schedules.list_schedules(store, now=at("2026-11-30 13:00:06"))
    assert (doc["fired"], doc["skipped"], doc["next_fire"]) == (1, 4, "2026-11-30T14:00:00.000Z")


def test_every_fire_time_within_grace_is_fired_in_order_after_a_stall():
    """Simulator (the schedule world): an agent that stalled past two fire times fired only the later one,
    and the earlier was lost without being counted. Each fire time still within grace is fired, in order."""
    store = MemoryStore()
    schedules.add(store, "tick", "* * * * *", SPEC, by="op", now=at("2026-11-30 10:00:30"))
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    lines = known.tick(at("2026-11-30 10:02:10"))                           # stalled past 10:01 and 10:02
    assert [line.split(" as job")[0] for line in lines] == ["schedule tick: fired 2026-11-30T10:01:00.000Z",
                                                              "schedule tick: fired 2026-11-30T10:02:00.000Z"]
    assert len(queued_ids(store)) == 2 and known.tick(at("2026-11-30 10:02:20")) == []


def test_a_paused_schedule_does_not_fire():
    store = MemoryStore()
    schedules.add(store, "tick", "* * * * *", SPEC, by="op", now=at("2026-11-30 10:00:30"))
    schedules.set_paused(store, "tick", True, by="op", now=time.time())
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    assert known.tick(at("2026-11-30 10:01:00")) == [] and queued_ids(store) == []
    schedules.set_paused(store, "tick", False, by="op", now=time.time())
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    assert "fired" in known.tick(at("2026-11-30 10:02:00"))[0]


def _agent_loop(target, times: list[float], barrier, results) -> None:
    try:
        store = target.open()
        known = schedules.ScheduleKnowledge(store, submitter="agent", refresh=0)
        fired = []
        for t in times:
            barrier.wait(timeout=60)
            fired += known.tick(t)
        results.put(fired)
    except BaseException as exc:
        barrier.abort()
        results.put(f"{type(exc).__name__}: {exc}")
        raise


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_four_agents_fire_three_fire_times_as_three_jobs(request, tmp_path, backend):
    target = make_target(backend, tmp_path, server_for(request, backend))
    store = target.open()
    schedules.add(store, "tick", "* * * * *", SPEC, by="op", now=at("2026-11-30 10:00:30"))
    # Each agent looks a few times around each of three minute boundaries.
    times = [at(f"2026-11-30 10:0{m}:{s:02d}") for m in (1, 2, 3) for s in (0, 1, 20, 59)]
    ctx = multiprocessing.get_context("spawn")

    def run_agents():
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_agent_loop, args=(target, times, barrier, results)) for _ in range(4)]
        for p in procs:
            p.start()
        out = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(30)
        assert all(isinstance(lines, list) for lines in out), out
        return [line for lines in out for line in lines]

    fired = run_agents()
    jobs = queued_ids(store)
    assert len(jobs) == 3 and len(fired) == 3, fired
    assert {lookup.view(store, j).doc["schedule"]["fire_time"] for j in jobs} == {
        "2026-11-30T10:01:00.000Z", "2026-11-30T10:02:00.000Z", "2026-11-30T10:03:00.000Z"}
    assert run_agents() == [] and queued_ids(store) == jobs                  # driving them again: nothing
