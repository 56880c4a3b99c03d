"""Every JSON document stado reads back from the store, damaged at random (tests/fuzz/corruption.py): reading it
gives the reader's own clear error (CorruptDocument, ArtifactError, ... : a StadoError whose message names the
key) or a value, never a crash; and the commands that meet it (status, machine status, cancel, repair, reap,
results, schedule list) report it and go on, never losing the other jobs beside it."""
import json
import uuid

from hypothesis import example, given, strategies as st

from stado import keys
from stado.errors import CorruptDocument, StadoError
from stado.objectstore import open_store

from . import corruption as c
from .conftest import examples

GOOD = "01a22e00-0000-7000-8000-00000000000a"   # a completed job beside the damaged one: it must stay visible
JOB = "01a22e00-0000-7000-8000-00000000000b"


def _store(**documents: bytes):
    store = open_store(f"memory://fuzz-{uuid.uuid4().hex}")
    store.put(keys.terminal("completed", GOOD), json.dumps(c.terminal(GOOD)).encode())
    for key, data in documents.items():
        store.put(key, data)
    return store


def _one_line(e: Exception) -> None:
    assert str(e) and "\n" not in str(e), repr(e)


BASES = {"queued": lambda: c.queued(JOB), "running": lambda: c.running(JOB), "completed": lambda: c.terminal(JOB),
         "failed": lambda: c.terminal(JOB, "failed"), "cancelled": lambda: c.cancelled(JOB)}


@examples(400)
@given(st.sampled_from(sorted(BASES)).flatmap(lambda s: st.tuples(st.just(s), c.damaged(BASES[s]()))))
def test_a_damaged_job_document_decodes_or_is_corrupt(case):
    from stado.documents import decode

    state, data = case
    key = keys.state_key(state, JOB)
    try:
        doc = decode(key, data, JOB)
    except CorruptDocument as e:
        _one_line(e)
        assert key in str(e)
        return
    assert doc["id"] == JOB and isinstance(doc["spec"], dict) and isinstance(doc["spec"]["command"], str)


def _damaged_job(states, damage, data):
    return _store(**{keys.state_key(s, JOB): (d if hurt else json.dumps(BASES[s]()).encode())
                     for s, hurt, d in zip(states, damage, data)})


DAMAGED_JOB = st.lists(st.sampled_from(sorted(BASES)), min_size=1, max_size=2, unique=True).flatmap(
    lambda states: st.tuples(st.just(states), st.lists(st.booleans(), min_size=len(states), max_size=len(states)),
                             st.tuples(*[c.damaged(BASES[s]()) for s in states])))


@examples(150)
@given(DAMAGED_JOB)
def test_readers_and_writers_of_a_job_with_damaged_records_report_it_and_go_on(case):
    """A job whose records (one or two, each damaged or not) may be corrupt: reading it (status of all jobs, of
    one, machine status), cancelling, repairing and reaping it give an answer or a one-line StadoError, and the
    good job beside it stays visible and untouched."""
    from stado import jobs, reaper, repair
    from stado.documents import status_json
    from stado.lookup import view
    from stado.overview import overview

    store = _damaged_job(*case)
    assert GOOD in {v.id for v in overview(store, finished_limit=None).jobs}
    try:
        json.dumps(status_json(view(store, JOB)))
    except StadoError as e:
        _one_line(e)
    for act in (lambda: jobs.cancel(store, JOB, by="fuzz"), lambda: repair.repair(store, JOB, by="fuzz"),
                lambda: reaper.reap(store, writer="fuzz")):
        try:
            act()
        except StadoError as e:
            _one_line(e)
    assert view(store, GOOD).state == "completed"


def _as_named(name) -> bytes:
    doc = c.cancelled(JOB)
    doc["spec"]["name"] = name
    return json.dumps(doc).encode()


@examples(150)
@given(DAMAGED_JOB)
@example(case=(["cancelled"], [True], (_as_named(["a", "list"]),)))
def test_status_shows_a_job_with_damaged_records(case):
    from stado import render
    from stado.documents import status_json
    from stado.lookup import view
    from stado.overview import overview

    store = _damaged_job(*case)
    ov = overview(store, finished_limit=None)
    render.overview_table(ov)
    json.dumps(render.overview_json(ov))
    try:
        v = view(store, JOB)
    except StadoError:
        return
    render.job_details(dict(status_json(v), spec=v.doc.get("spec")))


@examples(250)
@given(c.damaged(c.manifest(JOB)))
def test_a_damaged_result_manifest_is_an_artifact_error(tmp_path_factory, data):
    from stado.artifacts import read_manifest, results

    store = _store(**{keys.terminal("completed", JOB): json.dumps(c.terminal(JOB)).encode(),
                      keys.manifest(JOB): data})
    try:
        read_manifest(store, JOB)
    except StadoError as e:
        _one_line(e)
    out = tmp_path_factory.mktemp("results")
    try:
        results(store, JOB, str(out / "dir"), stall_timeout=5)
    except StadoError as e:
        _one_line(e)
    assert not list(out.glob("*/*/**")), "nothing is written outside the results directory"


@examples(250)
@given(c.damaged(c.pause_record()))
def test_a_damaged_pause_record_still_pauses_and_every_reader_shows_it(data):
    from stado import pause, render
    from stado.overview import overview

    store = _store(**{keys.QUEUE_PAUSE: data})
    record = pause.pause_record(store)
    assert isinstance(record, dict)
    ov = overview(store, finished_limit=None)
    render.overview_table(ov)
    json.dumps(render.overview_json(ov))
    again, already = pause.pause(store, by="fuzz", reason="again")
    assert already and isinstance(again, dict)
    assert pause.resume(store) is not None and pause.pause_record(store) is None


@examples(250)
@given(c.damaged(c.agent_record()))
@example(data=json.dumps(dict(c.agent_record(), accelerators=[None])).encode())
def test_a_damaged_agent_record_is_reported_and_status_goes_on(data):
    from stado import render
    from stado.overview import overview

    store = _store(**{keys.agent("01a22e00-0000-7000-8000-000000000001"): data,
                      keys.queued(JOB): json.dumps(c.queued(JOB, capabilities=["gpu"])).encode()})
    ov = overview(store, finished_limit=None)
    assert {v.id for v in ov.jobs} == {GOOD, JOB}
    render.overview_table(ov)
    json.dumps(render.overview_json(ov))


@examples(250)
@given(c.damaged(c.schedule()))
@example(data=json.dumps(dict(c.schedule(), spec=None)).encode())
@example(data=json.dumps(dict(c.schedule(), cron=5)).encode())
def test_a_damaged_schedule_is_skipped_by_every_agent_and_listed(data):
    from stado.schedules import ScheduleKnowledge, list_schedules

    store = _store(**{keys.schedule("nightly"): data})
    for line in ScheduleKnowledge(store, submitter="fuzz").tick(4_102_444_800.0):
        assert "\n" not in line
    try:
        list_schedules(store)
    except StadoError as e:
        _one_line(e)


@examples(200)
@given(c.damaged(c.schedule()))
def test_read_json_gives_an_object_or_a_corrupt_document(data):
    from stado.cas import read_json

    store = _store(**{keys.schedule("nightly"): data})
    try:
        found = read_json(store, keys.schedule("nightly"))
    except CorruptDocument as e:
        _one_line(e)
        return
    assert isinstance(found[0], dict)


@examples(200)
@given(c.damaged(c.store_check()))
def test_a_damaged_store_check_verdict_is_checked_again(data):
    """The day-long verdict an agent reads before it claims anything: damaged, the store is probed again."""
    from stado.storecheck import VERDICT_KEY, ensure_safe

    store = _store(**{VERDICT_KEY: data})
    ensure_safe(store)
    assert json.loads(store.get(VERDICT_KEY).data)["safe"] is True
