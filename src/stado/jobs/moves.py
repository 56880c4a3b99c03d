"""The owner's renewals and the pulse, and every move out of running/: finish (the owner's fenced
decision), settle (take, write the new record, delete running/ at the version taken), the leftovers pass."""
from ..core import documents as d
from ..core import faults, keys
from ..store.cas import create, create_seen, new_nonce, read, remove, replace, replace_seen
from ..core.errors import Conflict, CorruptDocument
from ..queue.lookup import terminal_records
from ..objectstore.base import ObjectStore, Version
from ..queue.readyindex import index, unindex
from .common import CONFLICT_RETRIES, Overtaken, running_records


def renew(store: ObjectStore, doc: d.Job, version: Version, *, lease_expires_at: float, now: float,
          started_at: float | None = None, process: dict | None = None,
          on_attempt=None) -> tuple[d.Job, Version] | Overtaken:
    """Renew the lease: a compare-and-swap on the running document, so a writer that moved it first
    (cancel, reaper) wins and this worker learns it. `on_attempt(doc, version)`: told each renewal before it is
    sent, with the version it is written on (the job's keeper learns of a renewal whose answer may come late)."""
    for _ in range(CONFLICT_RETRIES):  # our own renewals (another thread of this agent) may move it meanwhile
        new = d.renewed_doc(doc, now=now, lease_expires_at=lease_expires_at, nonce=new_nonce(),
                            started_at=started_at, process=process)
        if on_attempt is not None:
            on_attempt(new, version)
        new_version, seen = replace_seen(store, keys.running(doc.id), new, version)
        if new_version is not None:
            return new, new_version
        if seen is None or not own_write(doc, seen[0]):
            return Overtaken(*seen) if seen else Overtaken(None)
        # Our own earlier renewal landed though its answer was lost: renew on top of it, not against it.
        found = read(store, keys.running(doc.id), doc.id)
        if found is None or not own_write(doc, found[0]):
            return Overtaken(*found) if found else Overtaken(None)
        doc, version = found
    return Overtaken(*seen) if seen else Overtaken(None)


def own_write(mine: d.Job, current: d.Job) -> bool:
    """Whether the running document is one this owner wrote for this attempt (a renewal whose answer it
    never got), rather than a cancel, a reaper's or a settler's move."""
    return (current.claim == mine.claim and current.owner == mine.owner
            and current.written_by == mine.owner and current.running_phase)


def pulse(store: ObjectStore, doc: d.Job, *, renewed: bool, now: float) -> None:
    """The per-job heartbeat, written after every renewal attempt, successful or not."""
    body = {"job": doc.id, "agent": doc.owner, "at": d.iso(now), "renewed": renewed,
            "generation": doc.generation, "nonce": new_nonce()}
    store.put(keys.heartbeat(doc.id), d.encode(body))


def finish(store: ObjectStore, doc: d.Job, version: Version, res: dict, *,
           now: float) -> d.Job | Overtaken | None:
    """Running -> terminal (or back to the queue for a retry). First the fenced decision (put-if-match
    of phase 'finishing' with the outcome: it is also this writer's take), then settle() writes the new
    record and deletes the old."""
    t = now
    for _ in range(CONFLICT_RETRIES):  # our own renewals (another thread of this agent) may move it meanwhile
        fin = d.finishing_doc(doc, res, now=t, nonce=new_nonce())
        new_version, seen = replace_seen(store, keys.running(doc.id), fin, version)
        if new_version is not None:
            return settle(store, fin, new_version, writer=doc.owner, now=t, taken=True)  # type: ignore[arg-type]
        if seen is None or not own_write(doc, seen[0]):
            return Overtaken(*seen) if seen else Overtaken(None)
        # A renewal of ours landed though its answer was lost: decide on top of it.
        found = read(store, keys.running(doc.id), doc.id)
        if found is None or not own_write(doc, found[0]):
            return Overtaken(*found) if found else Overtaken(None)
        doc, version = found[0].with_(process=doc.process), found[1]
    return Overtaken(*seen) if seen else Overtaken(None)


def settle(store: ObjectStore, doc: d.Job, version: Version, *, writer: str, now: float,
           taken: bool = False, terminal_checked: bool = False,
           queue_entry: tuple[d.Job, Version] | None = None) -> d.Job | None:
    """Finish the move of a running document whose phase already decided it ('finishing', or 'cancelling'
    once no process of it may run): take it at `version` (unless `taken`: the caller's own conditional
    write just produced `version`), write the new record, delete running/ at the version taken. Returns
    the new record; None when another writer took the document first (that writer finishes the move).

    A corrupt record where the new one belongs raises CorruptDocument and running/ is kept: the decided
    outcome stays readable there, nothing is overwritten on a guess, and the next pass finishes the move
    once the bad key is repaired (`stado repair`).

    `terminal_checked`: the caller read the terminal records (none) after its own create of `doc` (a cancel
    tombstone) and has held running/ since, so none can have been written meanwhile but by a settler of this
    same cancel (whose cancelled/ record the create meets): _terminate need not read them again.

    `queue_entry`: the queue entry (document, version) the caller read before its create of `doc`: a terminal
    move deletes it at that version instead of reading it again (read only when that delete is refused)."""
    return _settle(store, doc, version, writer=writer, now=now, taken=taken, terminal_checked=terminal_checked,
                   queue_entry=queue_entry)[0]


def _settle(store: ObjectStore, doc: d.Job, version: Version, *, writer: str, now: float,
            taken: bool, terminal_checked: bool,
            queue_entry: tuple[d.Job, Version] | None = None) -> tuple[d.Job | None, bool]:
    """settle(), and whether its delete of running/ landed."""
    t = now
    job_id = doc.id
    if not (doc.finishing or doc.cancelling):
        return None, False  # nothing decided: a running attempt is its owner's (or the reaper's) to move
    if not taken:
        mine = d.taken_doc(doc, writer=writer, now=t, nonce=new_nonce())
        took, _ = replace(store, keys.running(job_id), mine, version)
        if took is None:
            return None, False
        version = took
        doc = mine
    if doc.finishing and doc.requeue:
        new = _requeue(store, d.requeued_after_loss(doc, now=t, nonce=new_nonce(), writer=writer), doc)
        faults.point("requeue-written")
    elif doc.finishing and d.retry_earned(doc, doc.result or {}):
        new = _requeue(store, d.requeued_after_failure(doc, now=t, nonce=new_nonce(), writer=writer), doc)
        faults.point("requeue-written")
    else:
        new = _terminate(store, doc, writer=writer, now=t, terminal_checked=terminal_checked and taken,
                         queue_entry=queue_entry)
    if remove(store, keys.running(job_id), version):
        return new, True
    if new.state == "queued":
        return _overtaken(store, doc, new, writer=writer, now=t), False
    return new, False


def settle_own_cancel(store: ObjectStore, job_id: str, claim: str | None, *, writer: str,
                      now: float, seen: tuple[d.Job, Version] | None = None) -> d.Job | None:
    """A cancel of an attempt whose process never started or is gone, settled by that attempt's own agent. If
    another settler took the record first (a reaper settling the cancel of an owner it judged silent) and
    stopped short (it crashed between its take and its delete), the record is taken again: that settler's delete
    is refused, and nobody else would finish the move before a lease had passed, since the record still names
    an owner and no outcome. The same holds after this writer's own take, when its delete is refused: a settler
    that took the record after it (a reaper whose promise check saw this owner late) may have stopped short in
    turn, and the record it left still names this owner with no outcome, so it is taken again until the delete
    lands or the record is no longer this cancel. Returns the new record; None when the record is gone or no
    longer this claim's cancel before this writer settled it.

    `seen`: the record (document, version) as the caller last read it (the refused renewal that met the cancel):
    the first take is made at that version, with no read; a record moved on since refuses it and is read."""
    done = None
    for _ in range(CONFLICT_RETRIES):
        found = seen if seen is not None else read(store, keys.running(job_id), job_id)
        seen = None  # taken at most once: a refused take reads what stands
        if found is None or found[0].claim != claim or not found[0].cancelling:
            return done
        settled, removed = _settle(store, *found, writer=writer, now=now, taken=False, terminal_checked=False)
        done = settled or done
        if removed:
            return done
    return done


def _overtaken(store: ObjectStore, doc: d.Job, new: d.Job, *, writer: str, now: float) -> d.Job:
    """A move back to the queue whose delete of running/ was refused: another writer took the record after this
    one did. Either a settler of the same decision (its entry and ours are one move), or a cancel that landed
    while the retry or requeue was being written: then the cancel stands, and the entry this move wrote is a
    leftover beside it, withdrawn here (a claim of it would start nothing anyway). Returns the record that
    stands for the job: the queue entry, or the cancelled record.

    When running/ holds another claim (the move was finished by another settler and the job claimed again before
    this writer's create of the entry landed in the empty key), the late copy of this move's entry is left where it
    is, not withdrawn: that claim may be one that gives itself back with nothing started, counting on the entry it
    finds there to keep the job queued (jobs.claiming._return_to_queue), and the copy is the same retry as the entry it
    was claimed from. Otherwise whoever comes next meets it: a claim pass drops it while the claim holds running/
    (documents.is_leftover_queue_entry: the same move as the holder's), that claim's own move back to the queue
    replaces it (_requeue: it is for an earlier attempt), and a claim of it after the job ended finds the terminal
    record and starts nothing."""
    job_id = doc.id
    found = read(store, keys.running(job_id), job_id)
    if found is not None and found[0].claim == doc.claim and d.decided(found[0]):
        finished = settle(store, *found, writer=writer, now=now)  # the cancel is decided: anyone may finish it
        if finished is not None:
            return finished
    terminal = terminal_records(store, job_id)
    if not terminal:
        return new
    _withdraw(store, job_id, doc.claim)
    return next(iter(terminal.values()))[0]


def _withdraw(store: ObjectStore, job_id: str, claim: str | None) -> None:
    """Remove the queue entry a move of `claim` wrote back, at the version read (never a newer entry)."""
    found = read(store, keys.queued(job_id), job_id)
    if found is not None and claim is not None and found[0].requeued_from == claim:
        if remove(store, keys.queued(job_id), found[1]):
            unindex(store, found[0])


def _requeue(store: ObjectStore, again: d.Job, running: d.Job) -> d.Job:
    """Write the queue entry of a retry. A writer that took running/ gets here, so the key holds nothing, this move's
    own entry (another settler wrote it, or it stands held or given back since), an entry for an earlier attempt (the
    leftover this attempt was claimed from, or a late copy of the move before this one, written by a settler of that
    move that was overtaken after its entry was claimed), or, when this writer was overtaken in turn, an entry of
    the job's later history. The attempt an entry would start tells them apart (documents.attempt_of: every move back
    to the queue counts one more): an entry for an earlier attempt is replaced, never taken for this move's (a claim
    of it would run an attempt that already ran); one for the attempt this move queues, or a later one, stands.
    Generations cannot tell: each settler's take moves its own copy's generation on, so a late copy of an earlier
    move may carry a higher generation than this move's entry."""
    key = keys.queued(again.id)
    for _ in range(CONFLICT_RETRIES):
        # Create first: the key normally holds nothing (the claim removed the entry it came from), and a create
        # that finds something there costs what the read it replaces did; only then is the entry read.
        if create(store, key, again) is not None:
            index(store, again)
            return again
        found = read(store, key, again.id)
        if found is None:
            continue
        current, current_version = found
        if current.requeued_from == running.claim or d.attempt_of(current) >= d.attempt_of(again):
            index(store, current)  # the index copies the entry that stands (another settler may have written it)
            return current
        if replace(store, key, again, current_version)[0] is not None:
            index(store, again)
            return again
    raise Conflict(f"{again['id']}: its queue entry kept changing while requeuing it; the next pass tries again")


def _terminate(store: ObjectStore, doc: d.Job, *, writer: str, now: float, terminal_checked: bool = False,
               queue_entry: tuple[d.Job, Version] | None = None) -> d.Job:
    """Write the terminal record (create-if-absent: final once written), then remove a queue entry left
    beside it. A cancel tombstone or a reaper's verdict meeting a job that already ended writes nothing:
    the existing terminal record stands."""
    job_id = doc.id
    term = None
    if (doc.owner is None and not terminal_checked) or doc.reaped:
        # A cancel tombstone (a job that never started) or a reaper's verdict on a claim: either may stand on a
        # stale read (the queue entry it came from written late by an overtaken settler, the job already ended
        # meanwhile). A job has one final word: an existing terminal record stands.
        existing = terminal_records(store, job_id)
        if existing:
            term = next(iter(existing.values()))[0]
    elif doc.cancelling and not doc.finishing and doc.owner is not None:
        # A cancel of a running attempt: its canceller wrote cancelled/ right after its put-if-match (then left the
        # process to its owner), so the record is nearly always there: read it first rather than meet it with a
        # refused create and a read. Absent (that canceller stopped between its two writes): created below.
        found = read(store, keys.terminal(d.CANCELLED, job_id), job_id)
        if found is not None:
            term = found[0]
    if term is None:
        term = d.terminal_doc(doc, now=now, nonce=new_nonce(), writer=writer)
        key = keys.terminal(term.state, job_id)
        made, found = create_seen(store, key, term)
        if made is None:
            found = found or read(store, key, job_id)  # (read again only if the refused create's read-back was not)
            if found is None:  # terminal records are never deleted: the store is not answering straight
                raise Conflict(f"{job_id}: {key} was reported present and then absent; the next pass tries again")
            term = found[0]
    faults.point("cancel-written" if term.state == "cancelled" else "terminal-written")
    if (doc.finishing or doc.cancelling) and not doc.reaped and doc.get("ledger_cleared"):
        # The owner's own decision (or a cancel of its running attempt), on an attempt whose claim removed the queue
        # entry it came from: no leftover of it can be there. An entry written since is not this move's to remove: a
        # holder of running/ would have fenced this move's take, and an entry written by a writer that held nothing
        # (an overtaken settler's late requeue, a schedule's fire written again) is met by the next claim of it,
        # which finds this terminal record first and removes the entry, starting nothing (verify_claim).
        return term
    if queue_entry is not None and remove(store, keys.queued(job_id), queue_entry[1]):
        unindex(store, queue_entry[0])
        return term  # the entry the caller read was still there: no need to read it again
    try:
        leftover = read(store, keys.queued(job_id), job_id)
    except CorruptDocument:
        leftover = None  # readers resolve the terminal record first; `stado status` lists the bad key, repair clears it
    if leftover is not None and remove(store, keys.queued(job_id), leftover[1]):
        unindex(store, leftover[0])
    return term


def settle_leftovers(store: ObjectStore, *, writer: str, now: float) -> list[str]:
    """One pass over running/: finish moves whose outcome is already decided (documents.decided: phase
    'finishing', or a cancel no process can outlive). Running jobs, and cancels that wait for their owner to
    stop a process, are left alone (they belong to their agent, or to the reaper). Returns lines to log."""
    lines = []
    for job_id, found, corrupt, _ in running_records(store):
        if corrupt is not None:
            lines.append(f"{corrupt}: skipped")
            continue
        if found is None:
            continue
        doc, version = found
        if d.decided(doc):
            try:
                term = settle(store, doc, version, writer=writer, now=now)
            except CorruptDocument as e:
                lines.append(f"{job_id}: cannot finish its move: {e}; its outcome stays in {keys.running(job_id)} "
                             f"until that key is repaired (`stado repair {job_id}`)")
                continue
            if term is not None:
                lines.append(f"{job_id}: finished an interrupted move to {term.state}")
    return lines
