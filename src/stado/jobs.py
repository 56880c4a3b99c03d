"""A job's transitions in the object store, one function each, with the precondition in a conditional write.

One rule fences every move: running/<id>.json is the job's move lock.

- The claim creates it (create-if-absent: one winner); while it exists nobody else can claim the job.
- A move out of running/ (to a terminal record, or back to the queue) first takes the record: a
  put-if-match on the version this writer read (or just wrote itself). Then it writes the new record
  (create-if-absent, or put-if-match on the leftover it replaces), then deletes running/ with
  delete-if-match on the version it took. A writer whose take fails was overtaken and writes nothing; a
  writer overtaken after its take finds its delete refused, while whoever took the record from it
  finishes the same move (the decision is written in the record), so nothing is written twice.
- Every delete is conditional on the version read: a stale writer never removes a newer record.
- Terminal records are final. A queue entry beside one is a leftover to clean up; a claim that finds
  one starts nothing.

docs/stado.md has the table: each transition, its writes in order, the condition on each, and what a
reader sees after a crash between any two.
"""
import time
from collections import namedtuple

from . import documents as d
from . import faults, keys
from .cas import create, new_nonce, read, remove, replace
from .errors import Conflict, CorruptDocument, JobNotFound
from .lookup import find, records, terminal_records
from .objectstore.base import ObjectStore, StoreError, StoreUnavailable, Version
from .readyindex import index, unindex

CONFLICT_RETRIES = 8


class Fenced(namedtuple("Fenced", "current")):
    """A conditional write lost: `current` is what holds the key now (None: the key is gone)."""

    __slots__ = ()


def _now(now: float | None) -> float:
    return time.time() if now is None else now


# -- the claim -----------------------------------------------------------------------------------------

def claim(store: ObjectStore, queued: dict, *, agent_id: str, instance_ref: str, lease_expires_at: float,
          now: float | None = None, queued_version: Version | None = None) -> tuple[dict, Version] | None:
    """Queued -> running: create-if-absent of running/<id>.json, one winner. None when the job is not ours
    to start: another claim or a cancel holds running/ (if it was claimed from this very queue entry, the
    entry is a leftover and is removed), the job already has a terminal record, or the queue entry we read
    was stale (the job went round the queue meanwhile). `queued_version` is the version of the queue entry
    `queued` was read from; without it (`queued` came from the claim-order index, a hint) the ledger entry
    is read now and claimed as it stands."""
    t = _now(now)
    job_id = queued["id"]
    if queued_version is None:
        found = read(store, keys.queued(job_id), job_id)
        if found is None:
            return None
        queued, queued_version = found
    doc = d.claim_doc(queued, agent_id=agent_id, instance_ref=instance_ref, now=t,
                      lease_expires_at=lease_expires_at, nonce=new_nonce())
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
        return verify_claim(store, doc, version, queued, queued_version, writer=agent_id, now=t)
    except CorruptDocument:
        give_back(store, doc, version, writer=agent_id, now=t, restore=True)
        raise
    except StoreError as e:
        raise Unverified(doc, version, queued, queued_version, e) from None


class Unverified(Exception):
    """A claim landed, but whether it is genuine could not be read (the store failed): the caller holds it,
    starts nothing, renews it, and calls verify_claim again on its next tick."""

    def __init__(self, doc: dict, version: Version | None, queued: dict, queued_version: Version, error: StoreError):
        super().__init__(f"{doc['id']}: claimed, but the check that the claim is genuine failed ({error})")
        self.doc, self.version, self.queued, self.queued_version, self.error = doc, version, queued, queued_version, error


def verify_claim(store: ObjectStore, doc: dict, version: Version | None, queued: dict, queued_version: Version, *,
                 writer: str, now: float | None = None) -> tuple[dict, Version] | None:
    """After a claim's create won: (doc, version) if the claim is genuine (then the queue entry it came from
    is removed), None if it came from a stale read (then it is given back). A `version` of None: whether
    the create landed is not known (its answer was lost): running/ is read to tell. StoreError: not known yet."""
    job_id = queued["id"]
    if version is None:
        found = read(store, keys.running(job_id), job_id)
        if found is None or found[0].get("claim") != doc["claim"]:
            return None  # it did not land (or landed and was settled since): nothing of ours to start
        if found[0].get("phase") != "running":
            settle(store, *found, writer=writer, now=now)  # a cancel reached it first: nothing was started
            return None
        doc, version = found
    stale = stale_claim(store, queued)
    if stale:
        give_back(store, doc, version, writer=writer, now=now, restore=stale != "terminal")
        if stale == "terminal" and remove(store, keys.queued(job_id), queued_version):  # a leftover beside a final record
            unindex(store, queued)
        return None
    faults.point("claim-written")
    try:
        if remove(store, keys.queued(job_id), queued_version):
            unindex(store, queued)
    except StoreError:
        pass  # the claim is won; a leftover queue entry is removed by the next pass (_finish_interrupted_claim)
    # Last, that the claim still stands: a claimant that stalled past its promise may have been reaped, and the
    # job claimed and started by another worker since (the queue entry would then be gone, as it is now).
    current = read(store, keys.running(job_id), job_id)
    if current is None or current[0].get("claim") != doc["claim"]:
        return None
    if current[0].get("phase") == "cancelling":
        settle(store, *current, writer=writer, now=now)  # a cancel reached the claim first: nothing was started
        return None
    return current if current[0].get("phase") == "running" else None


def stale_claim(store: ObjectStore, queued: dict) -> str | None:
    """Whether a create that just won running/ came from a stale read of the queue: "terminal" when the
    job already has a final record, "requeued" when its queue entry is newer (a higher generation) than the
    one read, None when the claim is genuine (the entry read is still there, or a competitor that saw our
    claim removed it: running/ was free, so no move of the job was under way). CorruptDocument when it
    cannot be told."""
    job_id = queued["id"]
    if terminal_records(store, job_id):
        return "terminal"
    current = read(store, keys.queued(job_id), job_id)
    if current is not None and current[0].get("nonce") != queued["nonce"]:
        if current[0].get("generation", 0) > queued.get("generation", 0):
            return "requeued"
        # Older than the entry we claimed from: written late by a settler that was overtaken (its move had been
        # finished by another writer, and the entry it meant to write already consumed). Not the job's: drop it.
        if remove(store, keys.queued(job_id), current[1]):
            unindex(store, current[0])
    return None


def give_back(store: ObjectStore, doc: dict, version: Version, *, writer: str, now: float | None = None,
              restore: bool = False) -> None:
    """Undo a claim (or cancel tombstone) whose process never started: delete running/ at our version.
    With `restore`, a queue entry that is gone meanwhile (a competitor that saw our claim removed it as a
    leftover) is written back first, while we still hold running/, so the job stays queued. If a cancel
    moved running/ first, settle that cancel: nothing ran, so nothing needs stopping."""
    if restore:
        _return_to_queue(store, doc, writer=writer, now=_now(now))
    if remove(store, keys.running(doc["id"]), version):
        return
    found = read(store, keys.running(doc["id"]), doc["id"])
    if found is not None and found[0].get("phase") == "cancelling" and found[0].get("claim") == doc["claim"]:
        settle(store, found[0], found[1], writer=writer, now=now)


def _return_to_queue(store: ObjectStore, doc: dict, *, writer: str, now: float) -> None:
    """Before an unstarted claim lets go of running/: make sure the job stands in the queue under an entry
    that is not the one it was claimed from. A competitor that saw the claim may be about to delete that
    entry as a leftover (on its version): it must find it replaced, not gone, nor still there."""
    back = d.returned_doc(doc, now=now, nonce=new_nonce(), writer=writer)
    key = keys.queued(doc["id"])
    for _ in range(CONFLICT_RETRIES):
        found = read(store, key, doc["id"])
        if found is None:
            written = create(store, key, back) is not None
        elif found[0].get("nonce") == doc.get("claimed_from"):
            written = replace(store, key, back, found[1])[0] is not None
        else:
            return  # another entry stands (ours, written before, or the job went round the queue)
        if written:
            index(store, back)
            return
    raise Conflict(f"{doc['id']}: its queue entry kept changing while giving the claim back; the claim stays")


def _finish_interrupted_claim(store: ObjectStore, queued: dict, queued_version: Version, mine: dict, *, writer: str,
                              now: float) -> None:
    found = read(store, keys.running(queued["id"]), queued["id"])
    if found is None:
        return
    holder, holder_version = found
    if holder.get("claim") == mine["claim"] and holder.get("phase") == "cancelling":
        # Our create landed (its answer was lost) and a cancel reached the claim before we knew it was ours:
        # nothing was started, so the cancel is settled here.
        settle(store, holder, holder_version, writer=writer, now=now)
    elif holder.get("phase") == "cancelling" and holder.get("owner") is None:
        settle(store, holder, holder_version, writer=writer, now=now)  # a cancel of the queued job, interrupted
    elif d.is_leftover_queue_entry(queued, holder):
        if remove(store, keys.queued(queued["id"]), queued_version):  # claimed, but its claimant stopped short
            unindex(store, queued)


# -- re-adoption ----------------------------------------------------------------------------------------

class Readopted(namedtuple("Readopted", "doc version why cancelled")):
    """What readopt() did: (doc, version) of the running document moved back, or why not (`why`: who took
    the queued record first; `cancelled`: it was a cancellation)."""

    __slots__ = ()


def readopt(store: ObjectStore, prior: dict, *, agent_id: str, instance_ref: str, lease_expires_at: float,
            now: float | None = None) -> Readopted:
    """Seed 003: a job requeued while the worker that claimed it still runs its process. Move the queued
    record back to running/ as the attempt already under way (the same started_at and process, a fresh
    lease), with the claim's one-winner create; if another worker or a cancellation took it first, say so."""
    t = _now(now)
    job_id = prior["id"]
    found = read(store, keys.queued(job_id), job_id)
    if found is None or found[0].get("requeued_from") != prior.get("claim"):
        return _taken_first(store, job_id)
    queued, queued_version = found
    doc = dict(d.claim_doc(queued, agent_id=agent_id, instance_ref=instance_ref, now=t, lease_expires_at=lease_expires_at,
                           nonce=new_nonce()), started_at=prior.get("started_at"), process=prior.get("process"),
               readopted={"at": d.iso(t), "after": prior.get("claim")})
    try:
        version = create(store, keys.running(job_id), doc)
    except StoreUnavailable as e:
        raise Unverified(doc, None, queued, queued_version, e) from None  # landed or not: told on the next tick
    if version is None:
        return _taken_first(store, job_id)
    try:
        genuine = verify_claim(store, doc, version, queued, queued_version, writer=agent_id, now=t)
    except StoreError:
        # Its process runs here whatever the store says: hold the claim just made (renewed from now on); the
        # queue entry it came from, if left, is a leftover the next claimant removes.
        return Readopted(doc, version, None, False)
    return Readopted(*genuine, None, False) if genuine else _taken_first(store, job_id)


def _taken_first(store: ObjectStore, job_id: str) -> Readopted:
    terminal = terminal_records(store, job_id)
    if "cancelled" in terminal:
        return Readopted(None, None, "a cancellation took the queued record", True)
    if terminal:
        return Readopted(None, None, f"the job ended {next(iter(terminal))} meanwhile", False)
    holder = read(store, keys.running(job_id), job_id)
    if holder is not None and holder[0].get("phase") == "cancelling":
        return Readopted(None, None, "a cancellation took the queued record", True)
    if holder is not None:
        owner = f"agent {holder[0].get('owner')} on {holder[0].get('instance_ref')}"
        return Readopted(None, None, f"another worker ({owner}) claimed it", False)
    return Readopted(None, None, "another worker took the queued record", False)


def take_over(store: ObjectStore, doc: dict, version: Version, *, agent_id: str, lease_expires_at: float,
              now: float | None = None) -> tuple[dict, Version] | None:
    """An agent restarting on a host becomes the owner of a job the worker it replaced left running there
    (a compare-and-swap, so a reaper or a cancel that moved first wins). None if it lost."""
    t = _now(now)
    new = dict(d.renewed_doc(dict(doc, owner=agent_id), now=t, lease_expires_at=lease_expires_at, nonce=new_nonce()),
               taken_over={"from": doc.get("owner"), "at": d.iso(t)})
    new_version, _ = replace(store, keys.running(doc["id"]), new, version)
    return None if new_version is None else (new, new_version)


# -- the owner's renewals -------------------------------------------------------------------------------

def renew(store: ObjectStore, doc: dict, version: Version, *, lease_expires_at: float, now: float | None = None,
          started_at: float | None = None, process: dict | None = None) -> tuple[dict, Version] | Fenced:
    """Renew the lease: a compare-and-swap on the running document, so a writer that moved it first
    (cancel, reaper) wins and this worker learns it."""
    for _ in range(2):
        new = d.renewed_doc(doc, now=_now(now), lease_expires_at=lease_expires_at, nonce=new_nonce(),
                            started_at=started_at, process=process)
        new_version, current = replace(store, keys.running(doc["id"]), new, version)
        if new_version is not None:
            return new, new_version
        if current is None or not _own_renewal(doc, current):
            return Fenced(current)
        # Our own earlier renewal landed though its answer was lost: renew on top of it, not against it.
        found = read(store, keys.running(doc["id"]), doc["id"])
        if found is None or not _own_renewal(doc, found[0]):
            return Fenced(found[0] if found else None)
        doc, version = found
    return Fenced(current)


def _own_renewal(mine: dict, current: dict) -> bool:
    """Whether the running document is one this owner wrote for this attempt (a renewal whose answer it
    never got), rather than a cancel, a reaper's or a settler's move."""
    return (current.get("claim") == mine.get("claim") and current.get("owner") == mine.get("owner")
            and current.get("written_by") == mine.get("owner") and current.get("phase") == "running")


def pulse(store: ObjectStore, doc: dict, *, renewed: bool, now: float | None = None) -> None:
    """The per-job heartbeat, written after every renewal attempt, successful or not."""
    body = {"job": doc["id"], "agent": doc.get("owner"), "at": d.iso(_now(now)), "renewed": renewed,
            "generation": doc["generation"], "nonce": new_nonce()}
    store.put(keys.heartbeat(doc["id"]), d.encode(body))


# -- moves out of running/ ------------------------------------------------------------------------------

def finish(store: ObjectStore, doc: dict, version: Version, res: dict, *, now: float | None = None) -> dict | Fenced:
    """Running -> terminal (or back to the queue for a retry). First the fenced decision (put-if-match
    of phase 'finishing' with the outcome: it is also this writer's take), then settle() writes the new
    record and deletes the old."""
    t = _now(now)
    for _ in range(2):
        fin = d.finishing_doc(doc, res, now=t, nonce=new_nonce())
        new_version, current = replace(store, keys.running(doc["id"]), fin, version)
        if new_version is not None:
            return settle(store, fin, new_version, writer=doc["owner"], now=t, taken=True)
        if current is None or not _own_renewal(doc, current):
            return Fenced(current)
        # A renewal of ours landed though its answer was lost: decide on top of it.
        found = read(store, keys.running(doc["id"]), doc["id"])
        if found is None or not _own_renewal(doc, found[0]):
            return Fenced(found[0] if found else None)
        doc, version = dict(found[0], process=doc.get("process")), found[1]
    return Fenced(current)


def settle(store: ObjectStore, doc: dict, version: Version, *, writer: str, now: float | None = None,
           taken: bool = False) -> dict | None:
    """Finish the move of a running document whose phase already decided it ('finishing', or 'cancelling'
    once no process of it may run): take it at `version` (unless `taken`: the caller's own conditional
    write just produced `version`), write the new record, delete running/ at the version taken. Returns
    the new record; None when another writer took the document first (that writer finishes the move).

    A corrupt record where the new one belongs raises CorruptDocument and running/ is kept: the decided
    outcome stays readable there, nothing is overwritten on a guess, and the next pass finishes the move
    once the bad key is repaired (`stado repair`)."""
    t = _now(now)
    job_id = doc["id"]
    if doc.get("phase") not in ("finishing", "cancelling"):
        return None  # nothing decided: a running attempt is its owner's (or the reaper's) to move
    if not taken:
        mine = d.taken_doc(doc, writer=writer, now=t, nonce=new_nonce())
        version, _ = replace(store, keys.running(job_id), mine, version)
        if version is None:
            return None
        doc = mine
    if doc.get("phase") == "finishing" and doc.get("requeue"):
        new = _requeue(store, d.requeued_after_loss(doc, now=t, nonce=new_nonce(), writer=writer), doc)
        faults.point("requeue-written")
    elif doc.get("phase") == "finishing" and d.retry_earned(doc, doc["result"]):
        new = _requeue(store, d.requeued_after_failure(doc, now=t, nonce=new_nonce(), writer=writer), doc)
        faults.point("requeue-written")
    else:
        new = _terminate(store, doc, writer=writer, now=t)
    remove(store, keys.running(job_id), version)
    return new


def _requeue(store: ObjectStore, again: dict, running: dict) -> dict:
    """Write the queue entry of a retry. Only the holder of running/ gets here, so the key holds nothing,
    this move's own entry (another settler wrote it), or the leftover entry this attempt was claimed from."""
    key = keys.queued(again["id"])
    for _ in range(CONFLICT_RETRIES):
        found = read(store, key, again["id"])
        if found is None:
            if create(store, key, again) is not None:
                index(store, again)
                return again
            continue
        current, current_version = found
        if current.get("requeued_from") == running["claim"] or current.get("generation", 0) >= again["generation"]:
            index(store, current)  # the index copies the entry that stands (another settler may have written it)
            return current
        if replace(store, key, again, current_version)[0] is not None:
            index(store, again)
            return again
    raise Conflict(f"{again['id']}: its queue entry kept changing while requeuing it; the next pass tries again")


def _terminate(store: ObjectStore, doc: dict, *, writer: str, now: float) -> dict:
    """Write the terminal record (create-if-absent: final once written), then remove a queue entry left
    beside it. A cancel tombstone or a reaper's verdict meeting a job that already ended writes nothing:
    the existing terminal record stands."""
    job_id = doc["id"]
    term = None
    if doc.get("owner") is None or doc.get("reaped"):
        # A cancel tombstone (a job that never started) or a reaper's verdict on a claim: either may stand on a
        # stale read (the queue entry it came from written late by an overtaken settler, the job already ended
        # meanwhile). A job has one final word: an existing terminal record stands.
        existing = terminal_records(store, job_id)
        if existing:
            term = next(iter(existing.values()))[0]
    if term is None:
        term = d.terminal_doc(doc, now=now, nonce=new_nonce(), writer=writer)
        key = keys.terminal(term["state"], job_id)
        if create(store, key, term) is None:
            found = read(store, key, job_id)
            if found is None:  # terminal records are never deleted: the store is not answering straight
                raise Conflict(f"{job_id}: {key} was reported present and then absent; the next pass tries again")
            term = found[0]
    faults.point("cancel-written" if term["state"] == "cancelled" else "terminal-written")
    leftover = read(store, keys.queued(job_id), job_id)
    if leftover is not None and remove(store, keys.queued(job_id), leftover[1]):
        unindex(store, leftover[0])
    return term


def settle_leftovers(store: ObjectStore, *, writer: str) -> list[str]:
    """One pass over running/: finish moves whose outcome is already decided (phase 'finishing', or a
    cancel tombstone of a job that never started). Running jobs, and cancels that wait for their owner to
    stop a process, are left alone (they belong to their agent, or to the reaper). Returns lines to log."""
    lines = []
    for entry in store.list(keys.RUNNING):
        job_id = keys.job_id_of(entry.key, keys.RUNNING)
        if job_id is None:
            continue
        try:
            found = read(store, entry.key, job_id)
        except CorruptDocument as e:
            lines.append(f"{e}: skipped")
            continue
        if found is None:
            continue
        doc, version = found
        if doc.get("phase") == "finishing" or (doc.get("phase") == "cancelling" and doc.get("owner") is None):
            try:
                term = settle(store, doc, version, writer=writer)
            except CorruptDocument as e:
                lines.append(f"{job_id}: cannot finish its move: {e}; its outcome stays in {entry.key} until that "
                             f"key is repaired (`stado repair {job_id}`)")
                continue
            if term is not None:
                lines.append(f"{job_id}: finished an interrupted move to {term['state']}")
    return lines


# -- cancellation --------------------------------------------------------------------------------------

class CancelReport(namedtuple("CancelReport", "job_id kind view message")):
    """What `stado cancel` did. kind: cancelled_queued | cancelled_running | already_cancelling |
    finishing | already_terminal; view: the job's JobView before; message: one line for the user."""

    __slots__ = ()


def cancel(store: ObjectStore, selector: str, *, by: str | None = None, reason: str | None = None,
           now: float | None = None) -> CancelReport:
    from .submission import whoami

    by = by or whoami()
    job_id = find(store, selector)
    for _ in range(CONFLICT_RETRIES):
        t = _now(now)
        recs = records(store, job_id)
        v = d.resolve(job_id, {state: doc for state, (doc, _) in recs.items()})
        if v is None:
            raise JobNotFound(f"no job {selector}: check the id with `stado status`")
        if v.state in keys.TERMINAL_STATES:
            what = v.state if v.state == "cancelled" else f"{v.state} ({v.outcome})"
            if not v.terminal:
                what += f"; its process group on {recs['running'][0].get('instance_ref')} is being stopped"
            return CancelReport(job_id, "already_terminal", v, f"{job_id}: already {what}; nothing written")
        if v.state == "running":
            report = _cancel_running(store, v, *recs["running"], by=by, reason=reason, now=t)
        else:
            report = _cancel_queued(store, v, *recs["queued"], by=by, reason=reason, now=t)
        if report is not None:
            return report
    raise Conflict(f"{job_id}: the job kept changing while cancelling it; run `stado cancel {selector}` again")


def _cancel_running(store, v, doc, version, *, by, reason, now) -> CancelReport | None:
    job_id, phase = doc["id"], doc.get("phase")
    if phase == "finishing":
        res = doc.get("result") or {}
        return CancelReport(job_id, "finishing", v, f"{job_id}: already finished ({res.get('outcome')}); its record "
                            "is being written; nothing written")
    if phase == "cancelling":
        if doc.get("owner") is None:
            settle(store, doc, version, writer=by, now=now)
        return CancelReport(job_id, "already_cancelling", v, f"{job_id}: already being cancelled")
    moved = d.cancelling_doc(doc, by=by, reason=reason, now=now, nonce=new_nonce())
    if replace(store, keys.running(job_id), moved, version)[0] is None:
        return None  # the owner renewed or finished meanwhile: look again
    create(store, keys.terminal("cancelled", job_id), d.terminal_doc(moved, now=now, nonce=new_nonce(), writer=by))
    return CancelReport(job_id, "cancelled_running", v, f"{job_id}: cancelled; {_who_stops(store, doc, now)}")


def _who_stops(store: ObjectStore, doc: dict, now: float) -> str:
    """Who will stop the job's processes, as far as the owner's agents/ record tells."""
    import json

    from .admission import is_live, silent_for

    where = doc.get("instance_ref") or "its host"
    try:
        record = json.loads(store.get(keys.agent(doc.get("owner") or "-")).data)
    except (StoreError, ValueError):
        record = None
    if isinstance(record, dict) and is_live(record, now) and not record.get("stopping"):
        return f"its process group on {where} is stopped at its agent's next tick"
    silent = silent_for(record, now) if isinstance(record, dict) else None
    heard = f"has not been heard from for {silent:.0f} s" if silent is not None else "has no live record"
    return (f"its agent {doc.get('owner')} on {where} {heard}: a process of it still running there is stopped when "
            "that agent speaks again or another agent starts on that host; the reaper settles the job once the "
            "agent's lease promise has passed")


def _cancel_queued(store, v, queued, queued_version, *, by, reason, now) -> CancelReport | None:
    """Cancelling a queued job takes its claim slot (create-if-absent on running/), so no agent can start
    it afterwards; then the move is settled like any other."""
    tomb = d.cancel_tombstone(queued, by=by, reason=reason, now=now, nonce=new_nonce())
    version = create(store, keys.running(queued["id"]), tomb)
    if version is None:
        return None  # an agent claimed it first: cancel the running job instead
    if stale_claim(store, queued) == "terminal":
        give_back(store, tomb, version, writer=by, now=now)
        return None  # it ended meanwhile: say so
    settle(store, tomb, version, writer=by, now=now, taken=True)
    return CancelReport(queued["id"], "cancelled_queued", v, f"{queued['id']}: cancelled before it started")
