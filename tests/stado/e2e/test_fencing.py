"""The fencing that holds on every backend, through stado's own guarded writes: a writer that read an older
version of a job's document loses, even after a writer rewrote identical bytes (which on S3-compatible
servers gives back the same MD5 ETag). It holds because no two stado writes are byte-identical: each
carries a new generation and nonce."""
from runkit.core.clock import SYSTEM
import time

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import submission
from stado.core import documents as d
from stado.jobs import Overtaken
from stado.core.spec import JobSpec
from stado.queue.submission import Submission


def _claimed(store):
    job = submission.submit(store, [Submission(JobSpec("true"))], clock=SYSTEM)[0]
    queued = cas.read(store, keys.queued(job["id"]), job["id"])[0]
    return jobs.claim(store, queued, agent_id="a", instance_ref="local@h", lease_expires_at=time.time() + 5, now=time.time())


def test_a_stale_writer_is_fenced_even_after_an_identical_bytes_rewrite(store):
    doc1, v1 = _claimed(store)
    key = keys.running(doc1["id"])
    # Another writer moves the document on (here a worker taking it over; a cancel or a reaper alike).
    doc2, v2 = jobs.take_over(store, doc1, v1, agent_id="b", lease_expires_at=time.time() + 10, now=time.time())
    rewritten = store.put(key, d.encode(doc2))  # a retried request re-sends the very same bytes
    if not store.unique_versions:
        assert rewritten == v2  # SeaweedFS: the ETag is the body's MD5, so the version came back
    for stale in (lambda: jobs.renew(store, doc1, v1, lease_expires_at=time.time() + 20, now=time.time()),
                  lambda: jobs.finish(store, doc1, v1, d.classify_exit(0, None, timed_out=False, timeout=None), now=time.time())):
        got = stale()
        assert isinstance(got, Overtaken) and got.current["nonce"] == doc2["nonce"], got
    new_version, current = cas.replace(store, key, d.renewed_doc(doc1, now=time.time(), lease_expires_at=0,
                                                                  nonce=cas.new_nonce()), v1)
    assert new_version is None and current["nonce"] == doc2["nonce"]
    assert cas.read(store, key)[0] == doc2  # nothing the stale writer sent landed


def test_every_write_of_the_same_change_has_new_bytes(store):
    """What the fencing rests on: renewing from the same document twice never gives the same bytes, so a
    version can only come back if a writer re-sends its own bytes, never from another write."""
    doc1, v1 = _claimed(store)
    now = time.time()
    a = d.renewed_doc(doc1, now=now, lease_expires_at=now + 5, nonce=cas.new_nonce())
    b = d.renewed_doc(doc1, now=now, lease_expires_at=now + 5, nonce=cas.new_nonce())
    assert d.encode(a) != d.encode(b) and a["generation"] == b["generation"] == doc1["generation"] + 1
    version_a, _ = cas.replace(store, keys.running(doc1["id"]), a, v1)
    assert version_a is not None and version_a != v1
    version_b, current = cas.replace(store, keys.running(doc1["id"]), b, v1)  # same change, second writer
    assert version_b is None and current["nonce"] == a["nonce"]
