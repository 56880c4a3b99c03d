"""Every JSON document stado reads back from the store, damaged at random (corruption.py here): reading it
gives the reader's own clear error (CorruptDocument, ArtifactError, ... : a StadoError whose message names the
key) or a value, never a crash; and the commands that meet it (status, machine status, cancel, repair, reap,
results, schedule list) report it and go on, never losing the other jobs beside it."""
from stado.store.storeclock import StoreClock
import time
from runkit.core.clock import SYSTEM
import json
import uuid

from hypothesis import example, given, strategies as st

from stado.core import keys
from stado.core.errors import CorruptDocument, StadoError
from stado.objectstore import open_store

from . import corruption as c
from tests.fuzzing import examples
from datetime import UTC

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
    from stado.core.documents import decode

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
    from stado import jobs
    from stado.jobs import reaper
    from stado.commands import repair
    from stado.core.documents import status_json
    from stado.queue.lookup import view
    from stado.commands.overview import overview

    store = _damaged_job(*case)
    assert GOOD in {v.id for v in overview(store, finished_limit=None, now=time.time()).jobs}
    try:
        json.dumps(status_json(view(store, JOB)))
    except StadoError as e:
        _one_line(e)
    for act in (lambda: jobs.cancel(store, JOB, by="fuzz", clock=SYSTEM), lambda: repair.repair(store, JOB, by="fuzz", now=time.time()),
                lambda: reaper.reap(store, writer="fuzz", now=time.time(), clock=StoreClock())):
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
@example(case=(["queued"], [False], (b"",)))
@example(case=(["completed"], [True], (b"{",)))
def test_status_shows_a_job_with_damaged_records(case):
    """`stado status` (table and JSON) shows the good job and accounts for the damaged one: as a job when one of
    its records can be read, else counted corrupt; every record it could not read is named under problems, and
    `stado status ID` shows the job it resolves."""
    from stado.commands import render
    from stado.core.documents import decode, status_json
    from stado.queue.lookup import view
    from stado.commands.overview import overview

    states, damage, data = case
    store = _damaged_job(*case)
    unreadable = [keys.state_key(s, JOB) for s, hurt, d in zip(states, damage, data) if hurt and not _decodes(s, d)]
    # Readers go in the documented order and stop at the first record they can read: what they met before it
    # is what they must report.
    order = [keys.state_key(s, JOB) for s in keys.TERMINAL_STATES + ("running", "queued") if s in states]
    met = order[:next((i + 1 for i, k in enumerate(order) if k not in unreadable), len(order))]
    ov = overview(store, finished_limit=None, now=time.time())
    table, as_json = render.overview_table(ov), render.overview_json(ov)
    json.dumps(as_json)
    rows = [line.split()[0] for line in table.splitlines()]
    shown = {job["id"]: job["state"] for job in as_json["jobs"]}
    assert shown.get(GOOD) == "completed" and GOOD in rows, table
    readable = len(unreadable) < len(states)
    assert (JOB in shown and JOB in rows) == readable, table
    assert as_json["corrupt"] == (0 if readable else 1) and ("1 corrupt" in table) == (not readable), table
    for key in (k for k in met if k in unreadable):  # unreadable at this key, for readers as for the decoder
        assert any(p.startswith(key) for p in as_json["problems"]), (key, as_json["problems"])
        assert f"problem: {key}" in table, table
    try:
        v = view(store, JOB)
    except StadoError as e:
        assert not readable, e
        return
    assert readable and decode(keys.state_key(v.state, JOB), json.dumps(v.doc.raw).encode(), JOB)
    details = render.job_details(dict(status_json(v), spec=v.doc.get("spec")))
    assert details.splitlines()[0].split() == ["id:", JOB] and "state:" in details, details
    assert shown[JOB] == v.state


def _decodes(state: str, data: bytes) -> bool:
    from stado.core.documents import decode

    try:
        decode(keys.state_key(state, JOB), data, JOB)
    except CorruptDocument:
        return False
    return True


@examples(250)
@given(c.damaged(c.manifest(JOB)))
@example(data=json.dumps(c.manifest(JOB)).encode())
def test_a_damaged_result_manifest_is_an_artifact_error(tmp_path_factory, data):
    from stado.queue.artifacts import read_manifest, results

    store = _store(**{keys.terminal("completed", JOB): json.dumps(c.terminal(JOB)).encode(),
                      keys.manifest(JOB): data})
    try:
        manifest = read_manifest(store, JOB)
    except StadoError as e:
        _one_line(e)
        assert keys.manifest(JOB) in str(e) and e.exit_code == 5
    else:
        assert manifest == json.loads(data) and isinstance(manifest["artifacts"], list)
    out = tmp_path_factory.mktemp("results")
    try:
        results(store, JOB, str(out / "dir"), stall_timeout=5)
    except StadoError as e:
        _one_line(e)
    assert not list(out.glob("*/*/**")), "nothing is written outside the results directory"


@examples(250)
@given(c.damaged(c.pause_record()))
def test_a_damaged_pause_record_still_pauses_and_every_reader_shows_it(data):
    from stado.queue import pause
    from stado.commands import render
    from stado.commands.overview import overview

    store = _store(**{keys.QUEUE_PAUSE: data})
    record = pause.pause_record(store)
    assert isinstance(record, dict)
    ov = overview(store, finished_limit=None, now=time.time())
    render.overview_table(ov)
    json.dumps(render.overview_json(ov))
    again, already = pause.pause(store, by="fuzz", reason="again", now=time.time())
    assert already and isinstance(again, dict)
    assert pause.resume(store) is not None and pause.pause_record(store) is None


@examples(250)
@given(c.damaged(c.agent_record()))
@example(data=json.dumps(dict(c.agent_record(), accelerators=[None])).encode())
def test_a_damaged_agent_record_is_reported_and_status_goes_on(data):
    from stado.commands import render
    from stado.commands.overview import overview

    store = _store(**{keys.agent("01a22e00-0000-7000-8000-000000000001"): data,
                      keys.queued(JOB): json.dumps(c.queued(JOB, capabilities=["gpu"])).encode()})
    ov = overview(store, finished_limit=None, now=time.time())
    assert {v.id for v in ov.jobs} == {GOOD, JOB}
    render.overview_table(ov)
    json.dumps(render.overview_json(ov))


# An instant when the schedule's every-minute cron is due (2100-01-01T00:00:00Z), ten minutes after its last fire
# (a few fire times skipped on the way, not a hundred thousand: each costs a step of cronsim).
DUE = 4_102_444_800.0
SCHEDULE = dict(c.schedule(), last_fired=DUE - 600)


@examples(250)
@given(c.damaged(SCHEDULE))
@example(data=json.dumps(SCHEDULE).encode())
@example(data=json.dumps(dict(SCHEDULE, spec=None)).encode())
@example(data=json.dumps(dict(SCHEDULE, spec={"command": 5})).encode())
@example(data=json.dumps(dict(SCHEDULE, cron=5)).encode())
@example(data=b"{")
def test_a_damaged_schedule_is_skipped_by_every_agent_and_listed(data):
    """An agent's firing step (ScheduleKnowledge.tick) fires a sound schedule when due, and only sound jobs: a
    damaged schedule whose spec would not make a job document fires nothing and is said (one line naming its
    key); firing again at the same time writes nothing more. `stado schedule list` lists every schedule with a
    name, cron and spec, and reports one without (its key, and how to remove it) under problems."""
    from stado.core.documents import decode
    from stado.queue.schedules import ScheduleKnowledge, list_schedules

    key = keys.schedule("nightly")
    store = _store(**{key: data})
    lines = ScheduleKnowledge(store, submitter="fuzz").tick(DUE)
    assert all("\n" not in line for line in lines)
    queued = {e.key: decode(e.key, store.get(e.key).data) for e in store.list(keys.QUEUE)}  # every one a sound job
    doc = _json_object(data)
    if data == json.dumps(SCHEDULE).encode():
        assert len(queued) == 2, lines  # 23:59 and 00:00, both within the grace
    if doc is None or not isinstance(doc.get("spec"), dict) or not isinstance(doc["spec"].get("command"), str):
        assert not queued, queued
    if queued:
        assert all(job.get("schedule", {}).get("name") == doc.get("name") for job in queued.values())
    elif doc is not None and not doc.get("paused"):
        assert any(line.startswith(key) for line in lines) or not _due(doc), lines
    assert ScheduleKnowledge(store, submitter="fuzz").tick(DUE) is not None
    assert {e.key for e in store.list(keys.QUEUE)} == set(queued), "fired twice"
    problems: list[str] = []
    listed = list_schedules(store, problems=problems, now=time.time())  # one damaged schedule never hides the others
    sound = (doc is not None and doc.get("name") == "nightly" and isinstance(doc.get("cron"), str)
             and isinstance(doc.get("spec"), dict))
    assert (len(listed), len(problems)) == ((1, 0) if sound else (0, 1)), (listed, problems)
    for problem in problems:
        assert "\n" not in problem and problem.startswith(key) and "`stado schedule rm nightly` removes it" in problem


def _json_object(data: bytes) -> dict | None:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _due(doc: dict) -> bool:
    """Whether the (maybe damaged) schedule has a fire time in the grace before DUE, by cronsim itself."""
    from datetime import datetime

    from cronsim import CronSim

    try:
        last = float(doc.get("last_fired") or 0)
        start = datetime.fromtimestamp(max(last, DUE - 120), UTC)
        return next(CronSim(doc["cron"], start)).timestamp() <= DUE
    except Exception:  # whatever makes it unreadable makes it not due here
        return False


@examples(200)
@given(c.damaged(c.schedule()))
def test_read_json_gives_an_object_or_a_corrupt_document(data):
    from stado.store.cas import read_json

    store = _store(**{keys.schedule("nightly"): data})
    try:
        found = read_json(store, keys.schedule("nightly"))
    except CorruptDocument as e:
        _one_line(e)
        assert _json_object(data) is None
        return
    # compared as text: a NaN the document holds is never equal to itself
    assert found is not None and json.dumps(found[0]) == json.dumps(_json_object(data))


@examples(200)
@given(c.damaged(c.store_check()))
def test_a_damaged_store_check_verdict_is_checked_again(data):
    """The day-long verdict an agent reads before it claims anything: damaged, the store is probed again."""
    from stado.store.guarantees import VERDICT_KEY, ensure_safe

    store = _store(**{VERDICT_KEY: data})
    ensure_safe(store, clock=SYSTEM)
    again = json.loads(store.get(VERDICT_KEY).data)
    assert again["safe"] is True and again["nonce"] != _json_object(data or b"null") and store.get(VERDICT_KEY).data != data
