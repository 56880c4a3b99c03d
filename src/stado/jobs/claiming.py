"""Queued -> running: the claim (create-if-absent of running/, one winner), the check that it is genuine,
giving back a claim whose process never started, re-adoption of a job whose lease lapsed while its process
ran, and the take-over of a job a replaced worker left on this host."""
from runkit.core.records import record

from ..core import documents as d
from ..core import faults, keys
from ..store.cas import create, new_nonce, read, remove, replace
from ..core.errors import Conflict, CorruptDocument
from ..queue.lookup import terminal_records
from ..objectstore.base import ObjectStore, StoreError, StoreUnavailable, Version
from ..queue.readyindex import index, unindex
from .common import CONFLICT_RETRIES
from .moves import settle, settle_own_cancel


def claim(store: ObjectStore, queued: d.Job, *, agent_id: str, instance_ref: str, lease_expires_at: float,
          now: float, queued_version: Version | None = None, index_version: Version | None = None,
          recheck: bool = True, owner_process: dict | None = None) -> tuple[d.Job, Version] | None:
    """Queued -> running: create-if-absent of running/<id>.json, one winner. None when the job is not ours
    to start: another claim or a cancel holds running/ (if it was claimed from this very queue entry, the
    entry is a leftover and is removed), the job already has a terminal record, or the queue entry we read
    was stale (the job went round the queue meanwhile). `queued_version` is the version of the queue entry
    `queued` was read from; without it (`queued` came from the claim-order index, a hint) the ledger entry
    is read now and claimed as it stands. `index_version`: the version of the job's claim-order index entry
    as listed (it is removed at that version, with no read). `recheck=False`: running/ is not read again after
    the claim (see verify_claim: the caller starts the job only while the claim's own promise holds).
    `owner_process`: the claiming agent's identity on its host (documents.claim_doc)."""
    t = now
    job_id = queued.id
    if queued_version is None:
        found = read(store, keys.queued(job_id), job_id)
        if found is None:
            return None
        queued, queued_version = found
    if queued.held or d.retry_waits(queued, t):
        return None  # held, or a retry whose delay runs on `now`: not claimed yet (agents skip both before here)
    doc = d.claim_doc(queued, agent_id=agent_id, instance_ref=instance_ref, now=t,
                      lease_expires_at=lease_expires_at, nonce=new_nonce(), owner_process=owner_process)
    try:
        version = create(store, keys.running(job_id), doc)
    except StoreUnavailable as e:
        raise Unverified(doc, None, queued, queued_version, e) from None  # landed or not: told on the next tick
    if version is None:
        try:
            _finish_interrupted_claim(store, queued, queued_version, doc, writer=agent_id, now=t)
        except StoreUnavailable as e:
            raise Unverified(doc, None, queued, queued_version, e) from None  # ours, moved by a cancel? next tick
        return None
    try:
        return verify_claim(store, doc, version, queued, queued_version, writer=agent_id, now=t,
                            index_version=index_version, recheck=recheck)
    except CorruptDocument:
        give_back(store, doc, version, writer=agent_id, now=t, restore=True)
        raise
    except StoreError as e:
        raise Unverified(doc, version, queued, queued_version, e) from None


class Unverified(Exception):
    """A claim landed, but whether it is genuine could not be read (the store failed): the caller holds it,
    starts nothing, renews it, and calls verify_claim again on its next tick."""

    def __init__(self, doc: d.Job, version: Version | None, queued: d.Job, queued_version: Version, error: StoreError):
        super().__init__(f"{doc.id}: claimed, but the check that the claim is genuine failed ({error})")
        self.doc, self.version, self.queued, self.queued_version, self.error = doc, version, queued, queued_version, error


def verify_claim(store: ObjectStore, doc: d.Job, version: Version | None, queued: d.Job, queued_version: Version, *,
                 writer: str, now: float, index_version: Version | None = None,
                 recheck: bool = True) -> tuple[d.Job, Version] | None:
    """After a claim's create won: (doc, version) if the claim is genuine (then the queue entry it came from
    is removed), None if it came from a stale read (then it is given back). A `version` of None: whether
    the create landed is not known (its answer was lost): running/ is read to tell. StoreError: not known yet."""
    job_id = queued.id
    if version is None:
        found = read(store, keys.running(job_id), job_id)
        if found is None or found[0].claim != doc.claim:
            return None  # it did not land (or landed and was settled since): nothing of ours to start
        if not found[0].running_phase:
            settle_own_cancel(store, job_id, doc.claim, writer=writer, now=now)  # a cancel reached it first: nothing started
            return None
        doc, version = found
    faults.point("claim-written")
    # The queue entry the claim came from is deleted first, if-match on the version read: when that lands, the
    # entry read was still the job's current one (no requeue wrote a newer one), which is what reading it again
    # would have told.
    try:
        removed = remove(store, keys.queued(job_id), queued_version)
    except StoreError:
        removed = False  # landed or not: the checks below read what is there
    if removed:
        # The job is no longer queued under that entry: its index entry goes at once (other agents listing it
        # meanwhile read a ledger entry that is gone, and lose a race for nothing), before the checks.
        try:
            unindex(store, queued, index_version)
        except StoreError:
            pass  # an index entry whose job is no longer queued is removed by a later pass
        # The entry read was the current one: only a terminal record can make the claim stale.
        stale = "terminal" if terminal_records(store, job_id) else None
    else:
        # Refused (or not known): the entry was replaced or removed. A newer generation (a requeue, or `stado job
        # hold` of this very entry: the hold came first, as the entry's version decides) makes the claim stale,
        # and it is given back with nothing started; the newer entry (held or not) stays.
        stale = stale_claim(store, queued)
    if stale:
        give_back(store, doc, version, writer=writer, now=now, restore=stale != "terminal")
        if stale == "terminal" and not removed and remove(store, keys.queued(job_id), queued_version):
            unindex(store, queued)  # a leftover beside a final record
        return None
    # Last, that the claim still stands: a claimant that stalled past its promise may have been reaped, and the
    # job claimed and started by another worker since (the queue entry would then be gone, as it is now).
    # `recheck=False`: the caller starts the job only while the claim's own promise holds, measured from before
    # the create (the agent's SlotRunner._still_ours, which renews first otherwise): no reaper can have taken a
    # claim whose promise holds, and a cancel that reached the claim is met by its first renewal (or its finish),
    # whose compare-and-swap is refused, and the slot stops what it started and settles the cancel.
    if not recheck:
        return _cleared(doc, removed), version
    current = read(store, keys.running(job_id), job_id)
    if current is None or current[0].claim != doc.claim:
        return None
    if current[0].cancelling:
        settle_own_cancel(store, job_id, doc.claim, writer=writer, now=now)  # a cancel reached the claim first
        return None
    return (_cleared(current[0], removed), current[1]) if current[0].running_phase else None


def _cleared(doc: d.Job, removed: bool) -> d.Job:
    """The claim's document, saying (from its next write on) that its claim removed the queue entry it came from:
    the attempt's settle then need not look for a leftover entry beside its terminal record (moves._terminate)."""
    return doc.with_(ledger_cleared=True) if removed else doc


def stale_claim(store: ObjectStore, queued: d.Job) -> str | None:
    """Whether a create that just won running/ came from a stale read of the queue: "terminal" when the
    job already has a final record, "requeued" when its queue entry is newer than the one read (for a later
    attempt, documents.attempt_of; or for the same attempt at a higher generation: held, or given back), None when
    the claim is genuine (the entry read is still there, or a competitor that saw our claim removed it: running/ was
    free, so no move of the job was under way). The attempt is compared first: copies of one move written by
    different settlers each carry their own take's generation, so a late copy of an earlier move can outnumber the
    entry of the move after it. CorruptDocument when it cannot be told."""
    job_id = queued.id
    if terminal_records(store, job_id):
        return "terminal"
    current = read(store, keys.queued(job_id), job_id)
    if current is not None and current[0].nonce != queued.nonce:
        if (d.attempt_of(current[0]), current[0].generation) > (d.attempt_of(queued), queued.generation):
            return "requeued"
        # Older than the entry we claimed from: written late by a settler that was overtaken (its move had been
        # finished by another writer, and the entry it meant to write already consumed). Not the job's: drop it.
        if remove(store, keys.queued(job_id), current[1]):
            unindex(store, current[0])
    return None


def give_back(store: ObjectStore, doc: d.Job, version: Version, *, writer: str, now: float,
              restore: bool = False, handed_back: bool = False) -> None:
    """Undo a claim (or cancel tombstone) whose process never started: delete running/ at our version.
    With `restore`, a queue entry that is gone meanwhile (a competitor that saw our claim removed it as a
    leftover) is written back first, while we still hold running/, so the job stays queued. If a cancel
    moved running/ first, settle that cancel: nothing ran, so nothing needs stopping."""
    if restore:
        _return_to_queue(store, doc, writer=writer, now=now, handed_back=handed_back)
    for _ in range(CONFLICT_RETRIES):
        if remove(store, keys.running(doc.id), version):
            return
        found = read(store, keys.running(doc.id), doc.id)
        if found is None or found[0].claim != doc.claim:
            return  # gone, or another claim's: nothing of ours to give back
        if found[0].cancelling or d.decided(found[0]) or found[0].owner != doc.owner:
            break  # a cancel's, a reaper's or a successor's move: settled below if it is a cancel, else theirs
        # Still this claim, undecided: our own renewal moved the record after its answer was lost (the agent holds
        # an unverified claim's lease too). Left in place, it would stand for a process nobody runs until a reaper
        # found its promise broken (the simulator's "abandoned", seed 13477): deleted at the version it has now.
        version = found[1]
    settle_own_cancel(store, doc.id, doc.claim, writer=writer, now=now)


def _return_to_queue(store: ObjectStore, doc: d.Job, *, writer: str, now: float, handed_back: bool = False) -> None:
    """Before an unstarted claim lets go of running/: make sure the job stands in the queue under an entry
    that is not the one it was claimed from. A competitor that saw the claim may be about to delete that
    entry as a leftover (on its version): it must find it replaced, not gone, nor still there."""
    back = d.returned_doc(doc, now=now, nonce=new_nonce(), writer=writer, handed_back=handed_back)
    key = keys.queued(doc.id)
    for _ in range(CONFLICT_RETRIES):
        found = read(store, key, doc.id)
        if found is None:
            written = create(store, key, back) is not None
        elif found[0].nonce == doc.claimed_from:
            written = replace(store, key, back, found[1])[0] is not None
        else:
            return  # another entry stands (ours, written before, or the job went round the queue)
        if written:
            index(store, back)
            return
    raise Conflict(f"{doc.id}: its queue entry kept changing while giving the claim back; the claim stays")


def _finish_interrupted_claim(store: ObjectStore, queued: d.Job, queued_version: Version, mine: d.Job, *, writer: str,
                              now: float) -> None:
    found = read(store, keys.running(queued.id), queued.id)
    if found is None:
        return
    holder, holder_version = found
    if holder.claim == mine.claim and holder.cancelling:
        # Our create landed (its answer was lost) and a cancel reached the claim before we knew it was ours:
        # nothing was started, so the cancel is settled here.
        settle(store, holder, holder_version, writer=writer, now=now)
    elif holder.cancelling and d.decided(holder):
        settle(store, holder, holder_version, writer=writer, now=now)  # a cancel no process outlives, interrupted
    elif d.is_leftover_queue_entry(queued, holder):
        if remove(store, keys.queued(queued.id), queued_version):  # claimed, but its claimant stopped short
            unindex(store, queued)


class Readopted(record("Readopted", "doc version why cancelled")):
    """What readopt() did: (doc, version) of the running document moved back, or why not (`why`: who took
    the queued record first; `cancelled`: it was a cancellation)."""

    __slots__ = ()


def readopt(store: ObjectStore, prior: d.Job, *, agent_id: str, instance_ref: str, lease_expires_at: float,
            now: float, owner_process: dict | None = None, ended: bool = False) -> Readopted:
    """Re-adoption: a job requeued while the worker that claimed it still runs its process. Move the queued
    record back to running/ as the attempt already under way (the same started_at and process, a fresh
    lease), with the claim's one-winner create; if another worker or a cancellation took it first, say so.

    `ended`: the attempt's command has ended, its outcome not recorded: it is taken back only from a requeue after
    a lost worker (the reaper's; never from the retry its own settle wrote, nor a claim given back), and only once
    the claim is known genuine (Unverified when that cannot be read), so that the outcome it records is the job's
    only one."""
    t = now
    job_id = prior.id
    found = read(store, keys.queued(job_id), job_id)
    if found is None or found[0].requeued_from != prior.claim:
        return _taken_first(store, job_id)
    if ended and not lost_worker_requeue(prior, found[0]):
        return _taken_first(store, job_id)
    queued, queued_version = found
    doc = d.claim_doc(queued, agent_id=agent_id, instance_ref=instance_ref, now=t, lease_expires_at=lease_expires_at,
                      nonce=new_nonce(), owner_process=owner_process).with_(started_at=prior.started_at,
                                                                            process=prior.process,
                                               readopted={"at": d.iso(t), "after": prior.claim})
    try:
        version = create(store, keys.running(job_id), doc)
    except StoreUnavailable as e:
        raise Unverified(doc, None, queued, queued_version, e) from None  # landed or not: told on the next tick
    if version is None:
        return _taken_first(store, job_id)
    try:
        genuine = verify_claim(store, doc, version, queued, queued_version, writer=agent_id, now=t)
    except StoreError as e:
        if ended:
            raise Unverified(doc, version, queued, queued_version, e) from None
        # Its process runs here whatever the store says: hold the claim just made (renewed from now on); the
        # queue entry it came from, if left, is a leftover the next claimant removes.
        return Readopted(doc, version, None, False)
    return Readopted(*genuine, None, False) if genuine else _taken_first(store, job_id)


def lost_worker_requeue(prior: d.Job, queued: d.Job) -> bool:
    """Whether `queued` is the requeue of `prior`'s attempt after its worker was judged lost (a reaper, a keeper or a
    restart check): one requeue more, the failed attempts and hand-backs as they were."""
    return (queued.requeues == prior.requeues + 1 and queued.failures == prior.failures
            and queued.handbacks == prior.handbacks)


def _taken_first(store: ObjectStore, job_id: str) -> Readopted:
    """Why the job is not this worker's to take back. Only a cancel of the queued record itself (a tombstone: no
    owner) is a cancel of what this worker ran; a claim by another worker, cancelled there or not, is that
    worker's attempt, and never this worker's to settle."""
    holder = read(store, keys.running(job_id), job_id)
    if holder is not None and holder[0].owner is not None:
        owner = f"agent {holder[0].owner} on {holder[0].instance_ref}"
        there = " (and it is being cancelled there)" if holder[0].cancelling else ""
        return Readopted(None, None, f"another worker ({owner}) claimed it{there}", False)
    if holder is not None and holder[0].cancelling:
        return Readopted(None, None, "a cancellation took the queued record", True)
    terminal = terminal_records(store, job_id)
    if "cancelled" in terminal:
        return Readopted(None, None, "a cancellation took the queued record", True)
    if terminal:
        return Readopted(None, None, f"the job ended {next(iter(terminal))} meanwhile", False)
    return Readopted(None, None, "another worker took the queued record", False)


def take_over(store: ObjectStore, doc: d.Job, version: Version, *, agent_id: str, lease_expires_at: float,
              now: float, owner_process: dict | None = None) -> tuple[d.Job, Version] | None:
    """An agent restarting on a host becomes the owner of a job the worker it replaced left running there
    (a compare-and-swap, so a reaper or a cancel that moved first wins). None if it lost."""
    t = now
    new = d.renewed_doc(doc.with_(owner=agent_id, owner_process=owner_process), now=t, lease_expires_at=lease_expires_at,
                        nonce=new_nonce())
    if doc.owner != agent_id:  # again after its own take-over's answer was lost: the first one's account stands
        new = new.with_(taken_over={"from": doc.owner, "at": d.iso(t)})
    new_version, _ = replace(store, keys.running(doc.id), new, version)
    return None if new_version is None else (new, new_version)
