"""Short ids: a unique id prefix of at least 6 characters finds a job, an ambiguous one names its
candidates, and a prefix costs one short LIST per state directory, never a scan; a schedule's name finds the
newest job it fired."""
from datetime import datetime, UTC

import pytest

from stado.core import documents as d
from stado.core import keys
from stado.queue import lookup, schedules
from stado.core.errors import BadInput, JobNotFound
from stado.objectstore.metered import MeteredStore
from stado.objectstore.file import FileStore
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec

SPEC = JobSpec("true").to_json()


def put_job(store, job_id: str, state: str = "queued") -> None:
    doc = d.queued_doc(job_id, SPEC, now=0.0, submitter="test", nonce=job_id[-6:])
    store.put_if_absent(keys.state_key(state, job_id), d.encode(doc.raw))


IDS = ["0193aa00-1111-7000-8000-000000000001", "0193aa00-1111-7000-8000-000000000002",
       "0193aa00-2222-7000-8000-000000000003", "0193ab00-0000-7000-8000-000000000004"]


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path):
    store = MemoryStore() if request.param == "memory" else FileStore(str(tmp_path / "store"))
    for job_id, state in zip(IDS, ("queued", "running", "completed", "failed")):
        put_job(store, job_id, state)
    return store


def test_a_unique_prefix_finds_the_job_with_or_without_hyphens(store):
    assert lookup.find(store, "0193ab") == IDS[3]
    assert lookup.find(store, "0193aa00-2222") == IDS[2]
    assert lookup.find(store, "0193aa002222") == IDS[2]
    assert lookup.find(store, "0193AA00-2222") == IDS[2]
    assert lookup.find(store, IDS[1].upper()) == IDS[1]


def test_an_ambiguous_prefix_is_bad_input_naming_the_candidates(store):
    with pytest.raises(BadInput) as e:
        lookup.find(store, "0193aa00-1111")
    assert str(e.value).startswith("job id prefix '0193aa00-1111' is ambiguous: it matches ")
    assert IDS[0] in str(e.value) and IDS[1] in str(e.value) and IDS[2] not in str(e.value)


def test_too_short_or_unmatched_prefixes_are_not_found(store):
    with pytest.raises(JobNotFound, match="at least 6 characters"):
        lookup.find(store, "0193a")
    with pytest.raises(JobNotFound, match="no job id starts with it"):
        lookup.find(store, "0193ac")


def test_a_name_wins_over_a_prefix(store):
    store.put(keys.name_entry("0193ab", IDS[0]), IDS[0].encode())
    assert lookup.find(store, "0193ab") == IDS[0]


def test_a_prefix_costs_one_short_list_per_state_directory(tmp_path):
    inner = FileStore(str(tmp_path / "store"))
    for n in range(300):
        put_job(inner, f"0193aa00-{n:04x}-7000-8000-000000000000", "completed")
    put_job(inner, IDS[3], "queued")
    store = MeteredStore(inner)
    seen = []
    real = inner.list_page

    def page(prefix, *, start_after=None, limit=1000):
        got = real(prefix, start_after=start_after, limit=limit)
        seen.append(len(got))
        return got

    inner.list_page = page  # type: ignore[method-assign]
    assert lookup.find(store, "0193ab00") == IDS[3]
    assert store.counts["LIST"] == 1 + 5  # the name index (none), then one page per state directory
    assert max(seen) <= 6                  # pages of a few keys, never the 300 completed jobs


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_schedule_name_finds_its_newest_fire_and_status_names_the_schedule():
    store = MemoryStore()
    doc = schedules.add(store, "tick", "*/5 * * * *", SPEC, by="op", now=at("2026-11-30 10:01:00"))
    known = schedules.ScheduleKnowledge(store, submitter="agent")
    known.tick(at("2026-11-30 10:05:01"))
    known.tick(at("2026-11-30 10:10:01"))
    newest = schedules.fire_job_id(doc, at("2026-11-30 10:10:00"))
    assert lookup.find(store, "tick") == newest
    data = d.status_json(lookup.view(store, newest))
    assert data["schedule"] == {"name": "tick", "fire_time": "2026-11-30T10:10:00.000Z"}
    from stado.commands import render
    assert "schedule:         tick (fired for 2026-11-30T10:10:00.000Z)" in render.job_details(data)


def test_a_fire_whose_name_entry_was_lost_is_found_through_the_schedule():
    store = MemoryStore()
    doc = schedules.add(store, "tick", "*/5 * * * *", SPEC, by="op", now=at("2026-11-30 10:01:00"))
    schedules.ScheduleKnowledge(store, submitter="agent").tick(at("2026-11-30 10:05:01"))
    job = schedules.fire_job_id(doc, at("2026-11-30 10:05:00"))
    store.delete(keys.name_entry("tick", job))  # an agent from before name entries, or a crash after the fire
    assert lookup.find(store, "tick") == job
    store.delete(keys.queued(job))
    for entry in list(store.list(keys.READY)):
        store.delete(entry.key)
    with pytest.raises(JobNotFound):
        lookup.find(store, "tick")
