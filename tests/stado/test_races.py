"""Three races found by driving the library's steps by hand, driven here the same way on every
backend (the Interleave wrapper parks one caller between two requests). Each must end with exactly one
run of each attempt and one terminal record, and no job lost."""
import time
from runkit.core.clock import SYSTEM
import threading

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import lookup, submission
from stado.core import documents as d
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec

from .faultproxy import Rule, for_target, through
from .interleave import Crashed, Interleave
from .storekit import make_target, server_for

FAIL = d.classify_exit(1, None, timed_out=False, timeout=None)
OK = d.classify_exit(0, None, timed_out=False, timeout=None)


@pytest.fixture(params=["memory", "file", "s3", "s3-faulty", "azure"])
def store(request, tmp_path):
    if request.param == "memory":
        yield Interleave(MemoryStore())
        return
    if request.param == "s3-faulty":
        # SeaweedFS behind the fault proxy: writes that land and lose their answer, requests failed before they
        # reach it, answers held back. The races must end the same way: the writers tell their own landed writes
        # by their nonce, and the retries hide the rest.
        target = make_target("s3", tmp_path, server_for(request, "s3"))
        with for_target(target, seed=31) as proxy:
            proxy.set_rules([Rule("commit_then_lose", kinds=("create", "cas", "delete_if_match"), rate=0.15),
                             Rule("fail_before", rate=0.1), Rule("delay", rate=0.05, delay=(0.05, 0.2))])
            opened = through(target, proxy, max_retries=10).open()
            yield Interleave(opened)
            opened.close()
        return
    opened = make_target(request.param, tmp_path, server_for(request, request.param)).open()
    yield Interleave(opened)
    opened.close()


def submit(store, retries=1) -> str:
    return submission.submit(store, [submission.Submission(JobSpec(command="work", retries=retries))], clock=SYSTEM)[0]["id"]


def claim(store, job_id, agent):
    """An agent's claim of whatever the job's queue entry holds now (None: nothing to claim, or lost)."""
    found = cas.read(store, keys.queued(job_id), job_id)
    if found is None:
        return None
    return jobs.claim(store, found[0], agent_id=agent, instance_ref=f"local@{agent}", lease_expires_at=1e12,
                      queued_version=found[1], now=time.time())


def in_thread(name, fn):
    box = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread, box


def state_keys(store, job_id):
    return sorted(key for key in (keys.state_key(s, job_id) for s in keys.STATE_PREFIXES)
                  if cas.read(store, key, job_id) is not None)


def test_a_stale_settle_never_runs_a_retry_twice(store):
    """An agent's leftovers pass reads a `finishing` document; its owner settles it (retry: back to queue/);
    a third agent claims the retry; then the stale pass goes on. It must be fenced: the new owner keeps its
    claim and renews it, and the retry is claimed once."""
    job = submit(store)
    doc, version = claim(store, job, "owner")
    running = keys.running(job)
    decided = store.hold("owner", "put_if_match", running)          # the owner parks after its fenced decision
    owner, owner_box = in_thread("owner", lambda: jobs.finish(store, doc, version, FAIL, now=time.time()))
    decided.wait_reached()
    read = store.hold("leftovers", "get", running)                 # the stale pass parks once it has read it
    leftovers, left_box = in_thread("leftovers", lambda: jobs.settle_leftovers(store, writer="stale", now=time.time()))
    read.wait_reached()
    decided.release()
    owner.join()
    assert owner_box["result"]["state"] == "queued"                 # the retry went back to the queue
    retry = claim(store, job, "third")
    assert retry is not None
    read.release()
    leftovers.join()
    assert "error" not in left_box, left_box
    assert left_box["result"] == []                                # overtaken: it wrote nothing
    held = cas.read(store, running, job)
    assert held[0]["owner"] == "third" and held[0]["claim"] == retry[0]["claim"]
    renewed = jobs.renew(store, *retry, lease_expires_at=2e12, now=time.time())
    assert not isinstance(renewed, jobs.Overtaken), renewed            # the new owner is not fenced
    assert state_keys(store, job) == [running]                     # nothing requeued a second time
    assert claim(store, job, "fourth") is None
    assert jobs.finish(store, *renewed, OK, now=time.time())["state"] == "completed"
    assert state_keys(store, job) == [keys.terminal("completed", job)]


def test_a_leftover_queue_entry_cleanup_never_deletes_a_newer_entry(store):
    """An agent finds the leftover queue entry of an interrupted claim and is about to delete it; the job's
    owner fails it with a retry meanwhile, which rewrites that queue entry. The delete must not remove the
    new entry: the job would vanish with no record anywhere."""
    job = submit(store)
    queue = keys.queued(job)
    store.hold("owner", "delete_if_match", queue, when="before", crash=True)  # the claimant stops short
    _, box = in_thread("owner", lambda: claim(store, job, "owner"))
    _.join()
    assert isinstance(box.get("error"), Crashed)
    doc, version = cas.read(store, keys.running(job), job)
    leftover = cas.read(store, queue, job)
    assert leftover is not None and leftover[0]["nonce"] == doc["claimed_from"]
    about_to_delete = store.hold("cleaner", "delete_if_match", queue, when="before")
    cleaner, clean_box = in_thread("cleaner", lambda: jobs.claim(
        store, leftover[0], agent_id="cleaner", instance_ref="local@cleaner", lease_expires_at=1e12,
        queued_version=leftover[1], now=time.time()))
    about_to_delete.wait_reached()
    assert jobs.finish(store, doc, version, FAIL, now=time.time())["state"] == "queued"   # the owner's retry rewrites queue/
    about_to_delete.release()
    cleaner.join()
    assert clean_box == {"result": None}
    assert state_keys(store, job) == [queue]                       # the job is still there, queued
    again = claim(store, job, "next")
    assert again is not None and again[0]["failures"] == 1
    assert jobs.finish(store, *again, OK, now=time.time())["state"] == "completed"
    assert state_keys(store, job) == [keys.terminal("completed", job)]


def test_a_cancel_landing_on_a_stale_claim_never_runs_the_cancelled_job(store):
    """An agent reads the queue entry, then the job goes round (claimed, failed, requeued); the stale
    claimant's create of running/ succeeds and a cancel lands on it before it sees that its claim is stale.
    The job must end cancelled, with nothing left in queue/ for the next claim pass to start."""
    job = submit(store)
    stale_read = cas.read(store, keys.queued(job), job)
    doc, version = claim(store, job, "first")
    assert jobs.finish(store, doc, version, FAIL, now=time.time())["state"] == "queued"
    created = store.hold("stale", "put_if_absent", keys.running(job))
    stale, stale_box = in_thread("stale", lambda: jobs.claim(
        store, stale_read[0], agent_id="stale", instance_ref="local@stale", lease_expires_at=1e12,
        queued_version=stale_read[1], now=time.time()))
    created.wait_reached()
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert report.kind == "cancelled_running"
    created.release()
    stale.join()
    assert stale_box == {"result": None}                            # nothing was started
    assert state_keys(store, job) == [keys.terminal("cancelled", job)]  # no queue entry left to start
    assert claim(store, job, "next") is None
    view = lookup.view(store, job)
    assert (view.state, view.terminal) == ("cancelled", True)


def test_a_claim_pass_never_starts_a_job_that_has_a_terminal_record(store):
    """Whatever left a queue entry beside a terminal record, a claim starts nothing and removes the leftover."""
    job = submit(store)
    doc, version = claim(store, job, "first")
    assert jobs.finish(store, doc, version, OK, now=time.time())["state"] == "completed"
    leftover = d.queued_doc(job, doc["spec"], now=0, submitter="test", nonce=cas.new_nonce())
    cas.create(store, keys.queued(job), leftover)  # (its own write, told by its nonce, under lost answers)
    assert claim(store, job, "second") is None
    assert state_keys(store, job) == [keys.terminal("completed", job)]


# `stado job hold` against a claim: the queue entry's version decides which came first, and the job runs at most once.

def _hold(store, job):
    from stado.jobs.hold import hold

    return hold(store, job, by="op", now=time.time())


def test_a_hold_while_a_claim_holds_running_is_refused_and_the_claim_runs(store):
    """A claim created running/ and is about to delete the queue entry: `stado job hold` reads the job as running
    (readers resolve running/ over queue/), says so and writes nothing; the claim goes on and starts the job."""
    from stado.jobs.hold import NotQueued

    job = submit(store)
    about_to_delete = store.hold("claimant", "delete_if_match", keys.queued(job), when="before")
    claimant, box = in_thread("claimant", lambda: claim(store, job, "claimant"))
    about_to_delete.wait_reached()
    with pytest.raises(NotQueued, match="is running on local@claimant"):
        _hold(store, job)
    about_to_delete.release()
    claimant.join()
    assert box["result"] is not None and box["result"][0].owner == "claimant"
    assert state_keys(store, job) == [keys.running(job)]


def test_a_hold_between_a_claim_s_check_and_its_delete_wins(store):
    """The same window, the hold written straight to the queue entry (as hold() does once it has read it queued):
    the claim must not start the job."""
    job = submit(store)
    queued, version = cas.read(store, keys.queued(job), job)
    about_to_delete = store.hold("claimant", "delete_if_match", keys.queued(job), when="before")
    claimant, box = in_thread("claimant", lambda: jobs.claim(store, queued, agent_id="claimant",
                                                             instance_ref="local@claimant", lease_expires_at=1e12,
                                                             queued_version=version, now=time.time()))
    about_to_delete.wait_reached()
    held = d.held_doc(queued, by="op", now=1e9, nonce=cas.new_nonce())
    assert cas.replace(store, keys.queued(job), held, version)[0] is not None
    about_to_delete.release()
    claimant.join()
    assert box == {"result": None}                                   # given back: nothing started
    assert state_keys(store, job) == [keys.queued(job)]
    assert cas.read(store, keys.queued(job), job)[0].held["by"] == "op"
    assert claim(store, job, "next") is None                         # held: no claim takes it


def test_a_hold_after_a_claim_s_read_makes_the_claim_stale_and_a_claim_first_refuses_the_hold(store):
    """A claim that read the entry before a hold creates running/ after it: its check sees a newer entry and gives the
    claim back. A hold that comes after a claim's delete finds the job running and writes nothing. Released, the job
    is claimed and runs once."""
    from stado.jobs.hold import NotQueued, release

    job = submit(store)
    stale = cas.read(store, keys.queued(job), job)
    assert _hold(store, job).changed
    assert jobs.claim(store, stale[0], agent_id="stale", instance_ref="local@stale", lease_expires_at=1e12,
                      queued_version=stale[1], now=time.time()) is None
    assert state_keys(store, job) == [keys.queued(job)]
    assert release(store, job, by="op", now=time.time()).changed
    doc, version = claim(store, job, "owner")
    with pytest.raises(NotQueued, match="is running on local@owner"):
        _hold(store, job)
    assert jobs.finish(store, doc, version, OK, now=time.time())["state"] == "completed"
    with pytest.raises(NotQueued, match=r"has ended \(completed\)"):
        _hold(store, job)
    assert state_keys(store, job) == [keys.terminal("completed", job)]


def test_a_resume_landing_while_an_agent_copies_an_older_pause_leaves_the_queue_resumed(store):
    """An agent copying a pause an older stado wrote (control/) into ready/ reads the old record, then a
    `stado queue resume` removes both, then the agent's copy lands: the copy must not pause the queue again."""
    import json

    from stado.queue import pause

    store.put(keys.LEGACY_QUEUE_PAUSE, json.dumps({"paused": True, "by": "old@host", "nonce": "n" * 24}).encode())
    copying = store.hold("agent", "get", keys.LEGACY_QUEUE_PAUSE)  # parked after reading the old record
    agent, box = in_thread("agent", lambda: pause.adopt_legacy(store))
    copying.wait_reached()
    assert pause.resume(store)["by"] == "old@host"
    copying.release()
    agent.join()
    assert "error" not in box, box
    assert pause.pause_record(store) is None
