"""The reaper's verdict (pure, time as an argument) and its moves, on the in-memory store."""
from stado.store.storeclock import StoreClock
from runkit.core.clock import SYSTEM
import threading
import time

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import lookup, submission
from stado.core import documents as d
from stado.objectstore.memory import MemoryStore
from stado.jobs.reaper import LEASE_EXPIRED, Watch, instance_may_be_deleted, liveness, reap
from stado.core.spec import JobSpec

from .interleave import Interleave


def submit(store, command="train") -> str:
    return submission.submit(store, [submission.Submission(JobSpec(command))], clock=SYSTEM)[0]["id"]


def claim(store, job_id, agent="a1", promise=None, host="h1"):
    queued = cas.read(store, keys.queued(job_id), job_id)
    return jobs.claim(store, queued[0], agent_id=agent, instance_ref=f"local@{host}",
                      lease_expires_at=time.time() + 60 if promise is None else promise, queued_version=queued[1], now=time.time())


def iso(t):
    return d.iso(t)


LATER = 40.0  # seconds: reaping at the store's time this much after a claim whose promise was none (lease 0)


def test_the_verdict():
    doc = d.Job({"lease_expires_at": iso(1000.0)})
    assert liveness(doc, now=999.0) == "promise"
    assert liveness(doc, now=1001.0, margin=2.0) == "promise"          # within the margin for clocks
    assert liveness(doc, now=1010.0) == "expired"
    assert liveness(doc, now=1010.0, pulse_at=1005.0) == "pulse"         # the renewal fails, not the worker
    assert liveness(doc, now=1010.0, pulse_at=999.0) == "expired"        # a pulse from before the promise
    assert liveness(doc, now=1010.0, checkpoint_at=1001.0) == "checkpoint"
    assert liveness(d.Job({"lease_expires_at": None}), now=1e12) == "unpromised"
    assert liveness(d.Job({}), now=1e12) == "unpromised"
    # By the store's clock: the document's own write time plus its promised lease, whatever its writer's clock said
    # (a worker an hour ahead wrote lease_expires_at an hour late).
    ahead = d.Job({"lease_expires_at": iso(1000.0 + 3600), "lease_seconds": 5.0})
    assert liveness(ahead, now=1004.0, modified=1000.0) == "promise"
    assert liveness(ahead, now=1010.0, modified=1000.0) == "expired"
    # A pulse proves the worker alive for a lease (at least 30 s) from its own time, not for ever.
    assert liveness(ahead, now=1020.0, modified=1000.0, pulse_at=1006.0) == "pulse"
    assert liveness(ahead, now=1040.0, modified=1000.0, pulse_at=1006.0) == "expired"
    assert liveness(ahead, now=1040.0, modified=1000.0, checkpoint_at=1009.0) == "checkpoint"


def test_a_job_whose_worker_stopped_speaking_is_requeued_once_then_failed():
    store = MemoryStore()
    job = submit(store)
    now = time.time()
    claim(store, job, promise=now - 30)
    first = reap(store, writer="reaper", now=now + LATER, clock=StoreClock())
    assert (first.requeued, first.failed, first.reaped) == (1, 0, 1), first.lines
    queued = lookup.view(store, job)
    assert (queued.state, queued.doc["requeues"], queued.doc["failures"]) == ("queued", 1, 0)
    assert queued.doc["last_result"]["error"] == {"class": "worker_lease_expired", "message": LEASE_EXPIRED}
    assert queued.doc["requeue_reason"] == LEASE_EXPIRED
    claim(store, job, agent="a2", promise=now - 30)
    second = reap(store, writer="reaper", now=now + LATER, clock=StoreClock())
    assert (second.requeued, second.failed) == (0, 1)
    failed = lookup.view(store, job)
    assert (failed.state, failed.terminal, failed.doc["error"]["class"]) == ("failed", True, "worker_lease_expired")
    assert [e.key for e in store.list(keys.RUNNING)] == [] and [e.key for e in store.list(keys.QUEUE)] == []


def test_a_newer_pulse_or_checkpoint_keeps_a_job_whose_promise_passed():
    store = MemoryStore()
    by_pulse, by_checkpoint, dead, promised = (submit(store) for _ in range(4))
    past = time.time() - 30
    for job in (by_pulse, by_checkpoint, dead):
        doc, _ = claim(store, job, promise=past)
    claim(store, promised)
    jobs.pulse(store, cas.read(store, keys.running(by_pulse))[0], renewed=False, now=time.time())   # renewal failing, worker alive
    store.put(keys.checkpoint_prefix(by_checkpoint) + "step-100.pt", b"weights")
    summary = reap(store, writer="reaper", now=time.time() + 20, clock=StoreClock())  # within a pulse's 30 s
    assert summary.alive["pulse"] == 1 and summary.alive["checkpoint"] == 1 and summary.alive["promise"] == 1
    assert summary.requeued == 1 and f"{dead}: requeued (worker lease expired" in summary.lines[0]
    assert [lookup.view(store, j).state for j in (by_pulse, by_checkpoint, dead, promised)] == [
        "running", "running", "queued", "running"]


def test_a_reaper_whose_clock_runs_ahead_waits_until_it_has_watched_the_promised_lease():
    """Simulator seed 397 (race1's world): a reaper whose wall clock had jumped 21 s ahead requeued a job its
    worker had just renewed, and the worker started its process beside the next claim's. With a watch, the
    verdict also needs the document unchanged, on the reaper's own monotonic clock, for the lease its worker
    promised (a duration) plus the margin."""
    store = MemoryStore()
    job = submit(store)
    now = time.time()
    doc, _ = claim(store, job, promise=now + 0.3)
    assert doc["lease_seconds"] == pytest.approx(0.3, abs=0.05)
    ahead, watch = now + 60.0, Watch()
    first = reap(store, writer="reaper", now=ahead, margin=0.2, watch=watch, clock=StoreClock())
    assert first.reaped == 0 and first.alive["watch"] == 1, first.as_json()
    assert first.as_json()["alive_by_watch"] == 1 and "watched for less than a lease 1" in first.line()
    renewed, _ = jobs.renew(store, *cas.read(store, keys.running(job)), lease_expires_at=time.time() + 0.3, now=time.time())
    time.sleep(0.3)
    second = reap(store, writer="reaper", now=ahead, margin=0.2, watch=watch, clock=StoreClock())
    assert second.reaped == 0 and second.alive["watch"] == 1, "a renewal is a new version: the watch starts again"
    deadline = time.monotonic() + 5
    while (third := reap(store, writer="reaper", now=ahead, margin=0.2, watch=watch, clock=StoreClock())).reaped == 0:
        assert time.monotonic() < deadline, third.as_json()
        time.sleep(0.05)
    assert third.requeued == 1 and lookup.view(store, job).state == "queued"
    # One-shot (`stado reap`, no watch): the wall clocks alone decide, as before.
    claim(store, job, promise=time.time() + 0.3)
    assert reap(store, writer="reaper", now=ahead, margin=0.2, clock=StoreClock()).failed == 1


def test_a_reaper_reads_a_record_it_watches_once_while_the_listing_shows_it_unchanged():
    """Watching a silent worker's record for a lease costs one GET, not one per pass: the LIST's version says the
    record is the one already read. A renewal (a new version) is read again, and the watch still reaps it once its
    lease has passed unchanged."""
    from stado.objectstore.metered import MeteredStore

    store = MeteredStore(MemoryStore())
    job = submit(store)
    now = time.time()
    claim(store, job, promise=now + 0.3)
    ahead, watch = now + 60.0, Watch()

    def gets_of_running():
        return store.by_prefix.get(("GET", "running"), 0)

    store.reset()
    for _ in range(3):
        assert reap(store, writer="reaper", now=ahead, margin=0.2, watch=watch, clock=StoreClock()).alive["watch"] == 1
    assert gets_of_running() == 1
    jobs.renew(store, *cas.read(store, keys.running(job)), lease_expires_at=time.time() + 0.3, now=time.time())
    store.reset()
    deadline = time.monotonic() + 5
    while (passed := reap(store, writer="reaper", now=ahead, margin=0.2, watch=watch, clock=StoreClock())).reaped == 0:
        assert time.monotonic() < deadline, passed.as_json()
        time.sleep(0.05)
    assert gets_of_running() == 1  # the renewal's version, read once; the reaper's own take needs no read
    assert passed.requeued == 1 and lookup.view(store, job).state == "queued"


def test_a_job_without_a_promise_is_kept_and_counted():
    store = MemoryStore()
    job = submit(store)
    doc, version = claim(store, job)
    old = dict(doc, lease_expires_at=None, generation=doc["generation"] + 1, nonce=cas.new_nonce())
    store.put_if_match(keys.running(job), d.encode(old), version)
    summary = reap(store, writer="reaper", now=time.time() + 1e6, clock=StoreClock())
    assert summary.alive["unpromised"] == 1 and summary.reaped == 0
    assert "unpromised 1" in summary.line()


def test_a_renewal_that_lands_first_wins_and_the_reaper_writes_nothing():
    store = Interleave(MemoryStore())
    job = submit(store)
    doc, version = claim(store, job, promise=time.time() - 30)
    gate = store.hold("reaper", "get", keys.running(job))
    box = {}
    thread = threading.Thread(target=lambda: box.update(s=reap(store, writer="reaper", now=time.time() + LATER, clock=StoreClock())),
                              name="reaper")
    thread.start()
    gate.wait_reached()
    renewed = jobs.renew(store, doc, version, lease_expires_at=time.time() + 60, now=time.time())
    assert not isinstance(renewed, jobs.Overtaken)
    gate.release()
    thread.join()
    assert box["s"].reaped == 0 and box["s"].lost_race == 1
    assert cas.read(store, keys.running(job))[0]["claim"] == doc["claim"]


def test_a_cancel_whose_agent_is_dead_is_settled_by_the_reaper():
    store = MemoryStore()
    job = submit(store)
    claim(store, job, promise=time.time() - 30)
    jobs.cancel(store, job, by="op", clock=SYSTEM)
    view = lookup.view(store, job)
    assert (view.state, view.terminal) == ("cancelled", False)        # waiting for an agent that is gone
    summary = reap(store, writer="reaper", now=time.time() + LATER, clock=StoreClock())
    assert summary.cancelled == 1
    view = lookup.view(store, job)
    assert (view.state, view.terminal, view.also) == ("cancelled", True, [])


def test_a_dead_owners_cancel_a_reaper_took_and_did_not_finish_is_finished_by_the_next_pass_of_anyone():
    """The reaper takes a dead owner's cancel and stops short (its delete of running/ fails on the store). Its
    take says no process runs (the same judgement as its requeue verdict), so the move is decided: any agent's
    leftovers pass finishes it at once, not only a reaper that has watched the new version for a whole lease."""
    from stado.objectstore.base import StoreUnavailable

    class DeleteFails(MemoryStore):
        fail = 1

        def delete_if_match(self, key, version):
            if key.startswith(keys.RUNNING) and self.fail:
                self.fail -= 1
                raise StoreUnavailable(f"connection reset while deleting {key}")
            return super().delete_if_match(key, version)

    store = DeleteFails()
    job = submit(store)
    claim(store, job, promise=time.time() - 30)
    jobs.cancel(store, job, by="op", clock=SYSTEM)
    with pytest.raises(StoreUnavailable):  # it stops short: the agent logs the pass's store error and goes on
        reap(store, writer="reaper", now=time.time() + LATER, clock=StoreClock())
    assert store.fail == 0
    left = cas.read(store, keys.running(job))[0]
    assert left.cancelling and left.settled_by == "reaper" and d.decided(left)
    view = lookup.view(store, job)
    assert (view.state, view.terminal) == ("cancelled", True)  # no process is said to be stopping
    assert jobs.settle_leftovers(store, writer="another agent", now=time.time()) == [f"{job}: finished an interrupted move to cancelled"]
    assert [e.key for e in store.list("") if not e.key.startswith("status/")] == [keys.terminal("cancelled", job)]


class FakeProvider:
    """A cloud provider's instance clean-up, as a provider integration must write it: it asks the
    reaper's verdict before deleting a VM."""

    def __init__(self, store, instances):
        self.store, self.instances, self.deleted = store, set(instances), []

    def clean_up(self, instance_ref, now=None):
        ok, keeping = instance_may_be_deleted(self.store, instance_ref, now=now, clock=StoreClock())
        if ok:
            self.instances.discard(instance_ref)
            self.deleted.append(instance_ref)
        return keeping


def test_a_vm_is_not_deleted_while_a_job_on_it_is_alive():
    store = MemoryStore()
    provider = FakeProvider(store, {"gcp@vm-1", "gcp@vm-2", "gcp@vm-3"})
    training, stale, elsewhere = submit(store), submit(store), submit(store)
    now = time.time()
    claim(store, training, host="x", promise=now - 30)
    store.put(keys.running(training), d.encode(dict(cas.read(store, keys.running(training))[0],
                                                     instance_ref="gcp@vm-1", generation=9, nonce="n1")))
    store.put(keys.checkpoint_prefix(training) + "ckpt-7", b"...")       # writing a checkpoint: alive
    claim(store, stale, promise=now - 30)
    store.put(keys.running(stale), d.encode(dict(cas.read(store, keys.running(stale))[0],
                                                  instance_ref="gcp@vm-2", generation=9, nonce="n2")))
    claim(store, elsewhere, promise=now + 60)
    later = time.time() + 20  # the store's time: both promises passed, the checkpoint is 20 s old
    assert provider.clean_up("gcp@vm-1", later) == [f"{training} (alive by checkpoint)"]
    assert provider.clean_up("gcp@vm-2", later) == []                   # its only job is dead by the verdict
    assert provider.clean_up("gcp@vm-3", later) == []
    assert sorted(provider.deleted) == ["gcp@vm-2", "gcp@vm-3"] and provider.instances == {"gcp@vm-1"}


@pytest.mark.parametrize("phase", ["finishing", "tombstone"])
def test_the_reaper_finishes_decided_moves_on_its_way(phase):
    store = MemoryStore()
    job = submit(store)
    if phase == "finishing":
        doc, version = claim(store, job)
        store.put_if_match(keys.running(job), d.encode(d.finishing_doc(
            doc, d.classify_exit(0, None, timed_out=False, timeout=None), now=time.time(), nonce="fin")), version)
    else:
        queued = cas.read(store, keys.queued(job))[0]
        store.put_if_absent(keys.running(job), d.encode(d.cancel_tombstone(queued, by="op", reason=None,
                                                                            now=time.time(), nonce="tomb")))
    summary = reap(store, writer="reaper", now=time.time(), clock=StoreClock())
    assert summary.settled == 1
    assert lookup.view(store, job).state == ("completed" if phase == "finishing" else "cancelled")


def test_a_record_the_callers_host_settles_is_counted_and_said():
    store = MemoryStore()
    job = submit(store)
    claim(store, job, promise=time.time() + 0.3)
    asked = []
    summary = reap(store, writer="reaper", now=time.time() + 60.0, margin=0.2,
                   here=lambda doc, version: asked.append(doc.id) or True, clock=StoreClock())
    assert asked == [job] and (summary.here, summary.reaped) == (1, 0), summary.as_json()
    assert summary.as_json()["settled_here"] == 1 and "settled on this host 1" in summary.line()
    assert cas.read(store, keys.running(job), job) is not None  # the caller settles it, not the reaper
