"""What `stado cancel` says after a lost answer is what the store holds: a store error in the middle of a cancel
sends it back to read the job again and decide from that (its own cancel known by its cancel id); only a store
that stays unreadable ends it, saying whether its write may have landed (exit 7) or nothing was written (exit 4).
Each window is opened by a wrapper around a real store (the local directory, SeaweedFS)."""
import time
from runkit.core.clock import SYSTEM
import pytest

from stado import jobs
from stado.core import keys
from stado.queue import lookup
from stado.core.errors import NotWritten, OutcomeUnknown

from .scripted_faults import Scripted
from .storekit import make_target, server_for
from .test_races import OK, claim, state_keys, submit

SETTLE = 2.0


@pytest.fixture(params=["file", "s3"])
def real(request, tmp_path):
    opened = make_target(request.param, tmp_path, server_for(request, request.param)).open()
    yield opened
    opened.close()


def cancel(store, job):
    return jobs.cancel(store, job, by="op@host", settle_seconds=SETTLE, clock=SYSTEM)


def test_a_queued_job_s_cancel_whose_answer_was_lost_says_cancelled(real):
    """The tombstone landed, its answer was lost and the next reads failed: before, `cannot reach the store`
    (exit 4) for a cancel that had taken effect."""
    job = submit(real, retries=0)
    store = Scripted(real)
    store.on("put_if_absent", keys.RUNNING, lose=1, after=lambda: store.down(calls=4))
    report = cancel(store, job)
    assert (report.kind, report.honoured) == ("cancelled_queued", True)
    assert (lookup.view(real, job).state, lookup.view(real, job).terminal) == ("cancelled", True)
    assert state_keys(real, job) == [keys.terminal("cancelled", job)]
    assert claim(real, job, "agent-b") is None


def test_a_running_job_s_cancel_whose_answer_was_lost_says_cancelled(real):
    job = submit(real, retries=0)
    claim(real, job, "agent-a")
    store = Scripted(real)
    store.on("put_if_match", keys.RUNNING, lose=1, after=lambda: store.down(calls=4))
    report = cancel(store, job)
    assert (report.kind, report.honoured) == ("cancelled_running", True)
    view = lookup.view(real, job)
    assert (view.state, view.phase) == ("cancelled", "cancelling")  # its agent stops it at its next renewal
    assert keys.terminal("cancelled", job) in state_keys(real, job)


def test_a_cancel_whose_settle_lost_an_answer_finishes_it(real):
    """The cancelled/ record landed, its answer was lost, then reads failed: the cancel reads again, finds its own
    record by its cancel id, and finishes the move it was making (the tombstone and the queue entry go)."""
    job = submit(real, retries=0)
    store = Scripted(real)
    store.on("put_if_absent", keys.CANCELLED, lose=1, after=lambda: store.down(calls=3))
    report = cancel(store, job)
    assert (report.kind, report.honoured) == ("cancelled_queued", True)
    assert state_keys(real, job) == [keys.terminal("cancelled", job)]


def test_a_cancel_that_cannot_read_back_its_landed_write_says_it_cannot_tell(real):
    job = submit(real, retries=0)
    store = Scripted(real)
    store.on("put_if_absent", keys.RUNNING, lose=1, after=store.down)
    with pytest.raises(OutcomeUnknown) as unknown:
        cancel(store, job)
    assert unknown.value.exit_code == 7 and unknown.value.job_id == job
    assert str(unknown.value).startswith(f"could not tell whether the cancel of {job} landed: cannot reach the store")
    assert f"`stado status {job}` tells once the store answers" in str(unknown.value)
    store.up()
    assert lookup.view(store, job).state == "running"  # the tombstone holds it: no agent can start it
    assert claim(real, job, "agent-b") is None


def test_a_cancel_that_never_reached_the_store_says_nothing_was_written(real):
    job = submit(real, retries=0)
    before = state_keys(real, job)
    store = Scripted(real)
    store.down()
    with pytest.raises(NotWritten) as refused:
        cancel(store, job)
    assert refused.value.exit_code == 4
    assert str(refused.value).endswith(f"; nothing was written (the cancel of {job} was not sent)")
    assert state_keys(real, job) == before


def test_a_cancel_whose_write_failed_while_the_job_ended_says_it_had_ended(real):
    """Exit 0 only when the job will not run again: the cancel's write failed without landing, and the job
    completed before the cancel read it again: the answer is `already completed` (exit 1), as the store says."""
    job = submit(real, retries=0)
    doc, version = claim(real, job, "agent-a")
    store = Scripted(real).on("put_if_match", keys.RUNNING, fail=1)
    store.on("get", keys.terminal("completed", job), before=lambda key: jobs.finish(real, doc, version, OK, now=time.time()))
    report = cancel(store, job)
    assert (report.kind, report.honoured) == ("already_terminal", False)
    assert lookup.view(real, job).state == "completed"


def test_a_tombstone_that_landed_after_the_job_ended_is_taken_back(real):
    """The job was claimed and completed between the cancel's read of queue/ and its tombstone's create; the
    tombstone landed, its answer was lost, reads failed a moment: the cancel reads again, finds the job completed,
    takes its own tombstone back (as its terminal check would have) and says it had ended (exit 1)."""
    job = submit(real, retries=0)

    def completes(key):
        doc, version = claim(real, job, "agent-a")
        jobs.finish(real, doc, version, OK, now=time.time())

    store = Scripted(real)
    store.on("put_if_absent", keys.RUNNING, before=completes, lose=1, after=lambda: store.down(calls=3))
    report = cancel(store, job)
    assert (report.kind, report.honoured) == ("already_terminal", False)
    assert report.message == f"{job}: already completed (succeeded); nothing written"
    assert state_keys(real, job) == [keys.terminal("completed", job)]
