"""`stado status` over jobs that move while it reads: each job is resolved by reading it again, terminal first,
never counted corrupt and never dropped. A wrapper around a real store (the local directory, SeaweedFS) moves a job
with the real transitions at an exact point: between a LIST and its GETs, or between two LISTs."""
import time
import pytest

from stado import jobs
from stado.core import keys
from stado.commands import render
from stado.objectstore.memory import MemoryStore
from stado.commands.overview import overview

from .scripted_faults import Scripted
from .storekit import make_target, server_for
from .test_races import FAIL, OK, claim, submit


@pytest.fixture(params=["memory", "file", "s3"])
def real(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
        return
    opened = make_target(request.param, tmp_path, server_for(request, request.param)).open()
    yield opened
    opened.close()


def shown(ov, job):
    return [v for v in ov.jobs if v.id == job]


def run_to(store, job, result):
    doc, version = claim(store, job, "agent-a")
    return jobs.finish(store, doc, version, result, now=time.time())


def test_a_job_that_finishes_between_the_listings_and_its_read_is_shown_finished(real):
    """The fault run's `16 corrupt (see problems)`: listed under queue/ only, claimed and completed before its
    record was read. Before: counted corrupt, no problem listed, left out of --json --all."""
    job = submit(real, retries=0)
    store = Scripted(real).on("get", keys.queued(job), before=lambda key: run_to(real, job, OK))
    ov = overview(store, finished_limit=None, now=time.time())
    [view] = shown(ov, job)
    assert (view.state, view.terminal, ov.corrupt, ov.problems) == ("completed", True, 0, [])
    assert ov.counts["completed"] == 1 and "corrupt" not in render.overview_table(ov)
    assert [j["id"] for j in render.overview_json(ov)["jobs"]] == [job]


def test_a_running_job_that_finishes_before_its_read_is_shown_finished(real):
    job = submit(real, retries=0)
    doc, version = claim(real, job, "agent-a")
    store = Scripted(real).on("get", keys.running(job), before=lambda key: jobs.finish(real, doc, version, FAIL, now=time.time()))
    ov = overview(store, finished_limit=None, now=time.time())
    [view] = shown(ov, job)
    assert (view.state, view.outcome, ov.corrupt, ov.problems) == ("failed", "failed", 0, [])


def test_a_job_sent_back_to_the_queue_while_queue_is_listed_is_still_shown(real):
    """Running when running/ is first listed; its attempt fails and earns a retry (back to queue/) right after
    queue/ is listed: before, listed in neither (queue/ then running/) and dropped; now running/ is listed on
    both sides of queue/, and the record read again is the queued one."""
    job = submit(real, retries=1)
    doc, version = claim(real, job, "agent-a")
    store = Scripted(real).on("list", keys.QUEUE, after=lambda: jobs.finish(real, doc, version, FAIL, now=time.time()))
    ov = overview(store, finished_limit=None, now=time.time())
    [view] = shown(ov, job)
    assert (view.state, view.doc.failures, ov.corrupt, ov.problems) == ("queued", 1, 0, [])


def test_a_corrupt_record_is_counted_once_and_listed(real):
    """The count stays honest: a job whose only record cannot be read is `1 corrupt` with its problem beside it."""
    job = submit(real, retries=0)
    real.put(keys.queued(job), b"{not json")
    ov = overview(real, finished_limit=None, now=time.time())
    assert ov.corrupt == 1 and shown(ov, job) == []
    assert len(ov.problems) == 1 and ov.problems[0].startswith(f"{keys.queued(job)}: corrupt document")
    assert "1 corrupt (see problems)" in render.overview_table(ov)


def test_every_job_is_shown_once_while_each_moves_at_every_read(real):
    """Ten jobs, each moved on (claimed, finished, retried) just before its own record is read: all ten shown,
    each once, none corrupt."""
    ids = [submit(real, retries=1) for _ in range(10)]
    store = Scripted(real)
    for n, job in enumerate(ids):
        move = [lambda key, j=job: run_to(real, j, OK), lambda key, j=job: run_to(real, j, FAIL),
                lambda key, j=job: claim(real, j, "agent-b")][n % 3]
        store.on("get", keys.queued(job), before=move)
    ov = overview(store, finished_limit=None, now=time.time())
    assert sorted(v.id for v in ov.jobs) == sorted(ids) and ov.corrupt == 0 and ov.problems == []
    assert {v.id: v.state for v in ov.jobs} == {job: ("completed", "queued", "running")[n % 3]
                                                 for n, job in enumerate(ids)}
