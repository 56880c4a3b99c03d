"""stado's conditional writes and transitions through the fault proxy in front of the real SeaweedFS, at high fault
rates: what each call returned is held to the durable state, read straight from the server. A call that returned
success landed; a call that raised left one of the states its transition documents (docs/stado.md, "Transitions"),
never a lie, and the next pass finishes it."""
import time
from runkit.core.clock import SYSTEM
import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import submission
from stado.core import documents as d
from stado.objectstore import StoreError
from stado.core.spec import JobSpec
from stado.queue.submission import Submission

from .faultproxy import ANSWERS, KINDS, Rule, for_target, through
from .storekit import make_target

WRITES = ("create", "cas", "put", "delete_if_match", "delete")
OK = d.classify_exit(0, None, timed_out=False, timeout=None)
LEASE = 10**10  # far away: no reaper is part of these tests


@pytest.fixture
def target(seaweedfs, tmp_path):
    return make_target("s3", tmp_path, seaweedfs)


@pytest.fixture
def proxy(target):
    with for_target(target, seed=3) as proxy:
        yield proxy


@pytest.fixture
def direct(target):
    store = target.open()
    yield store
    store.close()


def queued_job(store, command="true"):
    [doc] = submission.submit(store, [Submission(JobSpec(command))], clock=SYSTEM)
    return cas.read(store, keys.queued(doc.id), doc.id)


# -- the cas helpers: a write of ours whose answer was lost is ours ----------------------------------------------

@pytest.mark.parametrize("answer", ANSWERS)
def test_a_create_committed_then_lost_is_its_writer_s_success(target, proxy, direct, answer):
    store = through(target, proxy).open()
    doc, _ = queued_job(direct)
    mine = doc.with_(nonce=cas.new_nonce())
    proxy.add(Rule("commit_then_lose", kinds=("create",), answers=(answer,)))  # every try: the retries too
    version = cas.create(store, "running/x.json", mine)
    assert version is not None
    found = cas.read(direct, "running/x.json")
    assert found[0].nonce == mine.nonce and found[1] == version
    assert proxy.exchanges(kind="create")[0].lost


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_put_if_match_committed_then_lost_is_its_writer_s_success(target, proxy, direct, answer):
    store = through(target, proxy).open()
    doc, version = queued_job(direct)
    mine = doc.with_(nonce=cas.new_nonce(), generation=doc.generation + 1)
    proxy.add(Rule("commit_then_lose", kinds=("cas",), answers=(answer,)))
    new_version, other = cas.replace(store, keys.queued(doc.id), mine, version)
    assert other is None and new_version is not None
    found = cas.read(direct, keys.queued(doc.id), doc.id)
    assert found[0].nonce == mine.nonce and found[1] == new_version
    assert proxy.exchanges(kind="cas")[0].lost


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_conditional_delete_committed_then_lost_is_false_and_the_version_is_gone(target, proxy, direct, answer):
    """base.py: False says the version no longer stands, not that the key is still there."""
    store = through(target, proxy).open()
    doc, version = queued_job(direct)
    # A cut inside the headers leaves the status line whole, and urllib (unlike obstore) reads it: that client
    # can tell its delete landed. The other garbles leave it nothing to tell by.
    proxy.add(Rule("commit_then_lose", kinds=("delete_if_match",), answers=(answer,), garbles=("cut_status", "short_body"),
                   limit=1))
    assert cas.remove(store, keys.queued(doc.id), version) is False
    assert cas.read(direct, keys.queued(doc.id), doc.id) is None


def test_a_claim_whose_queue_delete_answer_was_lost_is_genuine_and_runs_once(target, proxy, direct):
    """The claim's delete of the entry it came from lands but answers 503: the False that follows is read as
    "the entry is gone", the claim stands, and the job's state is running with no queue entry."""
    store = through(target, proxy).open()
    doc, version = queued_job(direct)
    proxy.add(Rule("commit_then_lose", kinds=("delete_if_match",), prefix="queue/", answers=("503",), limit=1))
    claimed = jobs.claim(store, doc, agent_id="a1", instance_ref="local@h", lease_expires_at=LEASE,
                         queued_version=version, now=time.time())
    assert claimed is not None
    running = cas.read(direct, keys.running(doc.id), doc.id)
    assert running[0].claim == claimed[0].claim and running[1] == claimed[1]
    assert cas.read(direct, keys.queued(doc.id), doc.id) is None
    assert proxy.lost("delete_if_match")


# -- transitions at high fault rates ------------------------------------------------------------------------------

def faulty(proxy):
    proxy.set_rules([Rule("commit_then_lose", kinds=WRITES, rate=0.35),
                     Rule("fail_before", kinds=KINDS, rate=0.2),
                     Rule("delay", kinds=KINDS, rate=0.1, delay=(0.05, 0.3))])


def attempt(fn, *args, **kwargs):
    """(what fn returned, None), or (None, the store error or Unverified it raised)."""
    try:
        return fn(*args, **kwargs), None
    except (StoreError, jobs.Unverified) as e:
        return None, e


class Checker:
    """The durable state of one job, read straight from the server, held to what the calls said."""

    def __init__(self, direct, job_id):
        self.direct, self.id = direct, job_id

    def running(self):
        return cas.read(self.direct, keys.running(self.id), self.id)

    def queued(self):
        return cas.read(self.direct, keys.queued(self.id), self.id)

    def terminal(self):
        return {state: found for state in ("completed", "failed", "cancelled")
                if (found := cas.read(self.direct, keys.terminal(state, self.id), self.id)) is not None}


def submitted(store, direct, command):
    """Submit through the faulty path; (queue doc, version) as it stands, or None where nothing was queued."""
    before = {e.key for e in direct.list(keys.QUEUE)}
    docs, error = attempt(submission.submit, store, [Submission(JobSpec(command))], clock=SYSTEM)
    if error is None:
        [doc] = docs
        found = Checker(direct, doc.id).queued()
        assert found is not None and found[0].nonce == doc.nonce  # returned: it landed, as returned
        return found
    new = {e.key for e in direct.list(keys.QUEUE)} - before
    assert len(new) <= 1  # raised: nothing, or the whole job (its create landed, its answer did not)
    if not new:
        return None
    found = cas.read(direct, new.pop())
    assert found is not None and found[0].spec.command == command
    return found


def claimed(store, direct, doc, version):
    check = Checker(direct, doc.id)
    for _ in range(20):
        got, error = attempt(jobs.claim, store, doc, agent_id="a1", instance_ref="local@h", lease_expires_at=LEASE,
                             queued_version=version, now=time.time())
        if isinstance(error, jobs.Unverified):
            running = check.running()
            assert running is None or (running[0].claim == error.doc.claim and running[0].running_phase)
            for _ in range(20):
                got, again = attempt(jobs.verify_claim, store, error.doc, error.version, error.queued,
                                     error.queued_version, writer="a1", now=time.time())
                if again is None:
                    break
            else:
                raise AssertionError(f"{doc.id}: its claim could not be verified in 20 passes")
            if got is None:  # it did not land: the job is still queued, claimed again below
                assert check.running() is None and check.queued() is not None
                continue
        elif error is not None:
            assert check.running() is None  # a create that raised, read back as not landed
            continue
        assert got is not None, f"{doc.id}: a claim with no competitor was refused"
        running = check.running()
        assert running[0].claim == got[0].claim and running[1] == got[1] and running[0].running_phase
        assert not check.terminal()
        return got
    raise AssertionError(f"{doc.id}: not claimed in 20 tries")


def renewed(store, direct, doc, version):
    check = Checker(direct, doc.id)
    got, error = attempt(jobs.renew, store, doc, version, lease_expires_at=LEASE, now=time.time())
    running = check.running()
    assert running is not None and running[0].claim == doc.claim and running[0].running_phase
    if error is not None:
        return doc, version  # raised: ours stands, renewed or not; the next renewal meets its own if it landed
    assert not isinstance(got, jobs.Overtaken), f"{doc.id}: overtaken with no competitor"
    assert running[0].nonce == got[0].nonce and running[1] == got[1]
    return got


def finished(store, direct, doc, version):
    """Finish as the owner does: again at its next tick while its decision has not landed."""
    check = Checker(direct, doc.id)
    for _ in range(20):
        got, error = attempt(jobs.finish, store, doc, version, OK, now=time.time())
        terminal = check.terminal()
        assert set(terminal) <= {"completed"}
        if error is None:
            assert not isinstance(got, jobs.Overtaken) and got is not None and got.state == "completed"
            assert terminal["completed"][0].nonce == got.nonce
            return
        running = check.running()
        # raised: the decision is not written (running/ as it was), or it is (finishing, the outcome readable), or
        # the record is written too and running/ is a leftover, or the move is done; never a second record, never
        # the job back in the queue
        assert running is None or running[0].claim == doc.claim
        assert running is not None or terminal
        assert check.queued() is None
        if running is None or not running[0].running_phase:
            return  # decided: the next leftovers pass finishes the move
        if running[1] != version:
            doc, version = running  # a renewal of ours had landed unseen: decide on top of it
    raise AssertionError(f"{doc.id}: its decision did not land in 20 ticks")


@pytest.mark.parametrize("seed", [1, 2])
def test_submit_claim_renew_finish_at_high_fault_rates_say_what_landed(target, direct, seed):
    with for_target(target, seed=seed) as proxy:
        store = through(target, proxy).open()
        faulty(proxy)
        ids = []
        for n in range(8):
            found = submitted(store, direct, f"echo {n}")
            if found is None:
                continue
            doc, version = found
            ids.append(doc.id)
            doc, version = claimed(store, direct, doc, version)
            for _ in range(2):
                doc, version = renewed(store, direct, doc, version)
            finished(store, direct, doc, version)
        assert len(ids) >= 4, "most submissions land"
        lost = {e.kind for e in proxy.lost()}
        assert {"create", "cas"} <= lost, lost  # the faults were real: writes of each kind landed unseen
        proxy.clear()
        jobs.settle_leftovers(store, writer="checker", now=time.time())  # the next pass finishes what a raised call left
    for job_id in ids:
        check = Checker(direct, job_id)
        assert list(check.terminal()) == ["completed"] and check.running() is None and check.queued() is None


def test_a_schedule_added_and_removed_through_lost_answers_is_added_and_removed(target, proxy, direct):
    from stado.queue import schedules

    store = through(target, proxy).open()
    proxy.add(Rule("commit_then_lose", kinds=("create",), prefix="schedules/", answers=("503",), limit=1))
    added = schedules.add(store, "nightly", "0 3 * * *", JobSpec("true").to_json(), by="op", now=time.time())  # not "already exists"
    assert schedules.get(direct, "nightly")[0]["nonce"] == added["nonce"]
    proxy.set_rules([Rule("commit_then_lose", kinds=("delete_if_match",), prefix="schedules/", answers=("503",),
                          limit=1)])
    assert schedules.remove_schedule(store, "nightly")["nonce"] == added["nonce"]  # not "no schedule named"
    assert not direct.list_page("schedules")
    assert [e.lost for e in proxy.exchanges(kind="delete_if_match")][0]


@pytest.mark.parametrize("lost", ["refused", "dropped"])
def test_a_tombstone_whose_answer_was_lost_is_deleted_not_left_standing(lost):
    """GCS's conditional delete (objectstore/tombstones.py) puts a tombstone with put-if-match, then deletes it. A
    put that landed, answered as refused by its own retry or not answered at all, is still its writer's to delete."""
    from stado.objectstore.memory import MemoryStore
    from stado.objectstore.tombstones import TombstoneDeletes

    from .faulty import DroppedMatches, LostResponses

    memory = MemoryStore()
    version = memory.put("queue/k.json", b"k")
    inner = LostResponses(memory) if lost == "refused" else DroppedMatches(memory)
    store = TombstoneDeletes(inner)
    assert store.delete_if_match("queue/k.json", version) is True
    assert not memory.list_page("queue") and not store.tombstones("")

