"""The claim-order index beside the queue: ready/<rank>-<id>, a copy of each queued document.

queue/ stays the ledger (a job is pending exactly while its queue entry exists); ready/ only tells agents
what to look at first. Listing it in key order gives the highest priority first, then the oldest, so an
agent reads one bounded page (its window) and still finds a high-priority job submitted behind 100,000
low-priority ones. An entry is written after its queue entry (so an index entry always copies a ledger
entry that existed), removed once the job is claimed or ends (on the version read: a stale remover never
hides a newer entry), and the agents' slow pass (`reconcile`) indexes a queue entry a crash left
unindexed and removes entries whose job is no longer queued.
"""
from ..core import documents as d
from ..core import keys
from ..store.cas import read, remove
from ..core.errors import CorruptDocument
from ..objectstore.base import ObjectStore, StoreError, Version
from ..core.problems import CORRUPT, Problem

def index(store: ObjectStore, queued: d.Job) -> None:
    store.put(keys.ready(queued.spec.priority or 0, queued.id), d.encode(queued))
    store.ring(READY_TOPIC)  # an idle agent of this host claims it now, not at its next poll (the local directory)


READY_TOPIC = "ready"  # what ObjectStore.ring tells: a job was put in the claim-order index


def unindex(store: ObjectStore, queued: d.Job, version: Version | None = None) -> None:
    """Remove the job's entry if it is the copy of `queued` (a requeue wrote a newer one: that one stays).

    `version`: the entry's version as the caller listed it, when the caller has just removed the queue entry
    it claimed: the index entry is deleted at that version with no read. Whatever ledger entry it copies, the
    job is no longer queued under it; a newer index entry (a requeue's, written after its ledger entry) has
    another version, since every ledger entry's bytes are unique (generation, nonce), and stays."""
    key = keys.ready(queued.spec.priority or 0, queued.id)
    if version is not None:
        remove(store, key, version)
        return
    try:
        found = read(store, key, queued.id)
    except CorruptDocument:
        found = None
        try:
            blob = store.get(key)
            store.delete_if_match(key, blob.version)
        except StoreError:
            pass
    if found is not None and found[0].nonce == queued.nonce:
        remove(store, key, found[1])


def reconcile(store: ObjectStore) -> "list[str | Problem]":
    """Index queue entries the index lacks; remove index entries whose job is no longer queued: a line for each
    thing done, a Problem for each queue entry that cannot be read. ready/ is
    listed before queue/: an entry listed was written after its queue entry, so a queue entry missing from
    the later listing was claimed (or ended) since, and a requeue meanwhile wrote a new version of the
    entry, which the conditional delete leaves alone. Two LISTs of whole prefixes: the slow cadence's."""
    indexed = {job_id: e for e in store.list(keys.READY) if (job_id := keys.job_id_of_ready(e.key))}
    queued = {job_id: e for e in store.list(keys.QUEUE) if (job_id := keys.job_id_of(e.key, keys.QUEUE))}
    lines: list[str | Problem] = []
    for job_id in queued.keys() - indexed.keys():
        try:
            found = read(store, keys.queued(job_id), job_id)
        except CorruptDocument as e:
            lines.append(Problem(CORRUPT, job_id, f"{e}: skipped; `stado status` lists it, `stado repair {job_id}` "
                                                  "clears it"))
            continue
        if found is not None:
            index(store, found[0])
            lines.append(f"{job_id}: queued but missing from the claim-order index; indexed")
    for job_id in indexed.keys() - queued.keys():
        entry = indexed[job_id]
        if remove(store, entry.key, entry.version):
            lines.append(f"{job_id}: removed a claim-order index entry whose job is no longer queued")
    return lines
