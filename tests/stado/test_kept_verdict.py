"""A keeper that stopped a job's processes records the requeue itself unless another writer moved the record since
(standin.lapse_kept): a record at any write its own agent is known to have made is its agent's, also one whose
answer was lost (its nonce named in the promise file), and only a move by someone else (a cancel, a reaper, an agent
that took the job over) is theirs. On a real local-directory store."""
from runkit.core.clock import SYSTEM
import time

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import submission
from stado.agent.keeper import own_writes
from stado.objectstore.file import FileStore
from stado.core.spec import JobSpec
from stado.agent.standin import lapse_kept


def _running(tmp_path):
    store = FileStore(str(tmp_path / "store"))
    job = submission.submit(store, [submission.Submission(JobSpec("sleep 60"))], clock=SYSTEM)[0]["id"]
    queued = cas.read(store, keys.queued(job), job)
    doc, version = jobs.claim(store, queued[0], agent_id="a1", instance_ref="local@h1",
                              lease_expires_at=time.time() + 60, queued_version=queued[1], now=time.time())
    return store, job, doc, version


def _lapse(store, job, doc, promise):
    versions, nonces = own_writes(promise)
    return lapse_kept(job, doc.claim, versions, "stopped by its keeper", nonces=nonces, store=store)


def test_a_renewal_whose_answer_was_lost_is_still_its_agents_write(tmp_path):
    store, job, doc, version = _running(tmp_path)
    attempted = []
    jobs.renew(store, doc, version, lease_expires_at=time.time() + 60,
               on_attempt=lambda new, base: attempted.append((new.nonce, list(base))), now=time.time())
    [(nonce, base)] = attempted
    # What its agent had told the keeper: the claim's version, and the renewal as unanswered (its answer an error).
    promise = {"version": list(version), "unanswered": [nonce]}
    said = _lapse(store, job, doc, promise)
    assert said.startswith("requeued"), said
    assert cas.read(store, keys.queued(job), job) is not None and cas.read(store, keys.running(job), job) is None


def test_a_renewal_in_flight_the_keeper_was_told_of_is_its_agents_write(tmp_path):
    store, job, doc, version = _running(tmp_path)
    attempted = []
    jobs.renew(store, doc, version, lease_expires_at=time.time() + 60,
               on_attempt=lambda new, base: attempted.append(new.nonce), now=time.time())
    promise = {"version": list(version), "trying": {"nonce": attempted[0], "base": list(version)}}
    assert _lapse(store, job, doc, promise).startswith("requeued")


def test_another_writers_move_since_is_theirs(tmp_path):
    store, job, doc, version = _running(tmp_path)
    # An agent that took the job over renewed it as its own: a write its keeper was never told of.
    taken = doc.with_(owner="a2", written_by="a2", nonce=cas.new_nonce())
    cas.replace(store, keys.running(job), taken, version)
    said = _lapse(store, job, doc, {"version": list(version), "unanswered": ["0" * 24]})
    assert said.startswith("its agent, or the agent that took it over, wrote its record since"), said
    assert cas.read(store, keys.running(job), job) is not None and cas.read(store, keys.queued(job), job) is None
