"""Jobs in the object store: each transition is one function with its precondition in the
conditional write (create-if-absent for the claim, put-if-match on the expected version for the
rest). Two-write transitions write the new record before deleting the old one; every function here
is idempotent, so the next pass (agent, CLI or reaper) can finish a move that a crash interrupted.
"""
import os
import time
from collections import namedtuple

from runkit.ids import is_uuid, uuid7

from . import documents as d
from . import faults, keys
from .errors import BadInput, Conflict, CorruptDocument, JobNotFound
from .objectstore.base import (AlreadyExists, NotFound, ObjectStore, PreconditionFailed, StoreError,
                               StoreUnavailable, Version)
from .spec import InputRef, JobSpec, check_name, validate, with_inputs

CONFLICT_RETRIES = 8


def new_nonce() -> str:
    return os.urandom(12).hex()


def whoami() -> str:
    """user@host of the process writing: recorded as who submitted, cancelled or paused."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if not user:
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError):
            user = str(os.getuid())
    return f"{user}@{os.uname().nodename}"


# -- reading and conditional writing -------------------------------------------------------------------

def read(store: ObjectStore, key: str, job_id: str | None = None) -> tuple[dict, Version] | None:
    """The decoded document and its version, None if absent; CorruptDocument if unreadable."""
    try:
        blob = store.get(key)
    except NotFound:
        return None
    return d.decode(key, blob.data, job_id), blob.version


def create(store: ObjectStore, key: str, doc: dict) -> Version | None:
    """Create-if-absent. None when another writer's document is there; our own retried request that
    landed counts as success (the nonce tells). A connection dropped mid-request leaves the same
    question, settled the same way; if even the read-back fails, the store error goes to the caller."""
    try:
        return store.put_if_absent(key, d.encode(doc))
    except AlreadyExists:
        return _ours(store, key, doc)
    except StoreUnavailable as dropped:
        try:
            return _ours(store, key, doc)
        except StoreError:
            raise dropped from None


def _ours(store: ObjectStore, key: str, doc: dict) -> Version | None:
    """The key's version if the document there is the one we wrote (same nonce), else None."""
    try:
        blob = store.get(key)
    except NotFound:
        return None
    try:
        current = d.decode(key, blob.data)
    except CorruptDocument:
        return None
    return blob.version if current.get("nonce") == doc["nonce"] else None


def replace(store: ObjectStore, key: str, doc: dict, version: Version) -> tuple[Version | None, dict | None]:
    """Put-if-match. (new version, None) on success; (None, current document or None if gone) when
    another writer moved first. A retried request of ours that landed counts as success."""
    try:
        return store.put_if_match(key, d.encode(doc), version), None
    except PreconditionFailed:
        found = read(store, key)
        if found is None:
            return None, None
        current, current_version = found
        if current.get("nonce") == doc["nonce"]:
            return current_version, None
        return None, current


def records(store: ObjectStore, job_id: str, corrupt: list | None = None) -> dict[str, tuple[dict, Version]]:
    """Every record the job has, by state (normally one; two while a move is under way).

    Read in lifecycle order (queued, running, terminal): every move writes its new record before it
    deletes the old one, so a job that moves on between two reads is found in the later state. (Which
    record wins is decided afterwards, terminal first, by documents.resolve.)

    A corrupt record raises CorruptDocument, unless `corrupt` is a list: then it is appended there and
    the job is resolved from the records that can be read (readers report it; writers must not guess)."""
    found = {}
    for state in ("queued", "running") + keys.TERMINAL_STATES:
        try:
            got = read(store, keys.state_key(state, job_id), job_id)
        except CorruptDocument as e:
            if corrupt is None:
                raise
            corrupt.append(e)
            continue
        if got is not None:
            found[state] = got
    return found


def view(store: ObjectStore, job_id: str) -> d.JobView:
    """The job as readers show it. Corrupt records are skipped and listed in the view's `problems`; a job
    with nothing but corrupt records raises the first one's CorruptDocument."""
    for _ in range(3):  # a move back to an earlier state (a requeue) can slip between reads: look again
        corrupt: list[CorruptDocument] = []
        recs = records(store, job_id, corrupt)
        v = d.resolve(job_id, {state: doc for state, (doc, _) in recs.items()})
        if v is not None:
            v.problems = [str(e) for e in corrupt]
            return v
        if corrupt:
            raise corrupt[0]
    raise JobNotFound(f"no job {job_id}: check the id with `stado status`")


def find(store: ObjectStore, selector: str) -> str:
    """An exact id, or a display name (the newest job that has it) -> the job's id."""
    if is_uuid(selector):
        return selector
    try:
        check_name(selector)
    except BadInput:
        raise JobNotFound(f"{selector!r} is neither a job id nor a job name: see `stado status`") from None
    ids = [e.key.rsplit("/", 1)[-1] for e in store.list(keys.name_prefix(selector))]
    for job_id in sorted((i for i in ids if is_uuid(i)), reverse=True):  # ids sort by creation time: newest first
        if _has_records(store, job_id):
            return job_id
        # A name entry whose job was never written (the submit stopped between its two writes): skip it.
    raise JobNotFound(f"no job named {selector!r}: see `stado status` for names and ids")


def _has_records(store: ObjectStore, job_id: str) -> bool:
    """Whether any record of the job exists (readable or not: a corrupt one is still the job's)."""
    for state in ("queued", "running") + keys.TERMINAL_STATES:
        try:
            store.get(keys.state_key(state, job_id))
            return True
        except NotFound:
            continue
    return False


# -- submission ----------------------------------------------------------------------------------------

class Submission(namedtuple("Submission", "spec inputs", defaults=((),))):
    """A validated JobSpec whose inputs, (job selector, artifact name) pairs, may still name jobs by
    selector (resolved before anything is written). (namedtuple: typing costs a submission ~7 ms.)"""

    __slots__ = ()


def submit(store: ObjectStore, items: list[Submission], *, submitter: str | None = None,
           rerun_of: str | None = None, now: float | None = None) -> list[dict]:
    """Queue jobs, all or nothing as far as validation goes: every spec and every input is checked (inputs
    resolved to ids) before the first write. Inputs may name a job earlier in the same batch."""
    submitter = submitter or whoami()
    planned: list[tuple[str, JobSpec]] = []
    batch_names: dict[str, str] = {}
    for item in items:
        job_id = uuid7()
        refs = []
        for selector, name in item.inputs:
            producer = batch_names.get(selector)
            if producer is None:
                producer = find(store, selector)
                if not records(store, producer):
                    raise JobNotFound(f"input {selector}:{name}: no such job; nothing was submitted")
            refs.append(InputRef(producer, name))
        spec = validate(with_inputs(item.spec, tuple(refs)))
        planned.append((job_id, spec))
        if spec.name:
            batch_names[spec.name] = job_id
    docs = []
    for job_id, spec in planned:
        t = time.time() if now is None else now
        doc = d.queued_doc(job_id, spec.to_json(), now=t, submitter=submitter, nonce=new_nonce(), rerun_of=rerun_of)
        if spec.name:
            # The name index is written first: a crash between the two writes leaves a name that points at
            # no job (lookups skip it), never a job its name cannot find.
            store.put(keys.name_entry(spec.name, job_id), job_id.encode())
        if create(store, keys.queued(job_id), doc) is None:
            raise Conflict(f"job id {job_id} already taken (clock or id generator fault); nothing more was submitted")
        docs.append(doc)
    return docs


def rerun(store: ObjectStore, selector: str, *, submitter: str | None = None) -> tuple[dict, dict]:
    """Resubmit a job's exact spec under a new id. Returns (original view doc, new queued doc)."""
    from .spec import spec_from_json

    job_id = find(store, selector)
    original = view(store, job_id).doc
    spec = spec_from_json(original["spec"])
    inputs = tuple((ref.job, ref.name) for ref in spec.inputs)
    new = submit(store, [Submission(with_inputs(spec, ()), inputs)], submitter=submitter, rerun_of=job_id)[0]
    return original, new


# -- claim, renewal, finish (the agent's transitions) ---------------------------------------------------

def claim(store: ObjectStore, queued: dict, *, agent_id: str, instance_ref: str, lease_expires_at: float,
          now: float | None = None) -> tuple[dict, Version] | None:
    """Queued -> running: create-if-absent of running/<id>.json, one winner. None when another claim
    (or a cancel tombstone) holds the slot; if it was claimed from this very queue entry, the entry is a
    leftover of an interrupted move and this pass finishes the move."""
    t = time.time() if now is None else now
    job_id = queued["id"]
    doc = d.claim_doc(queued, agent_id=agent_id, instance_ref=instance_ref, now=t,
                      lease_expires_at=lease_expires_at, nonce=new_nonce())
    version = create(store, keys.running(job_id), doc)
    if version is None:
        _finish_interrupted_claim(store, queued, agent_id)
        return None
    if _claim_is_stale(store, queued):
        store.delete(keys.running(job_id))
        return None
    faults.point("claim-written")
    try:
        store.delete(keys.queued(job_id))
    except StoreError:
        pass  # the claim is won; a leftover queue entry is finished by the next pass (_finish_interrupted_claim)
    return doc, version


def _claim_is_stale(store: ObjectStore, queued: dict) -> bool:
    """Whether a create that just won running/ came from a stale read of the queue. running/ is free
    again only once a move has finished: the job settled (its terminal record was written first) or went
    back to the queue (a newer queue document was written first). A queue entry that is gone with no
    terminal record was deleted by a competing claimant that saw our claim land: ours is genuine."""
    job_id = queued["id"]
    try:
        current = read(store, keys.queued(job_id), job_id)
    except CorruptDocument:
        return True
    if current is not None:
        return current[0].get("nonce") != queued["nonce"]
    for state in keys.TERMINAL_STATES:
        try:
            if read(store, keys.terminal(state, job_id), job_id) is not None:
                return True
        except CorruptDocument:
            return True  # something terminal was written there: do not start the job on a guess
    return False


def _finish_interrupted_claim(store: ObjectStore, queued: dict, writer: str) -> None:
    found = read(store, keys.running(queued["id"]), queued["id"])
    if found is None:
        return
    holder, _ = found
    if not d.is_leftover_queue_entry(queued, holder):
        return  # a newer queue document (a requeue in progress): not ours to touch
    if holder.get("phase") == "cancelling" and holder.get("owner") is None:
        settle(store, holder, writer=writer)
    else:
        store.delete(keys.queued(queued["id"]))


class Fenced(namedtuple("Fenced", "current")):
    """A conditional write lost: `current` is what holds the key now (None: the key is gone)."""

    __slots__ = ()


def renew(store: ObjectStore, doc: dict, version: Version, *, lease_expires_at: float, now: float | None = None,
          started_at: float | None = None, process: dict | None = None) -> tuple[dict, Version] | Fenced:
    """Renew the lease: a compare-and-swap on the running document, so a writer that moved it first
    (cancel, reaper) wins and this worker learns it."""
    t = time.time() if now is None else now
    new = d.renewed_doc(doc, now=t, lease_expires_at=lease_expires_at, nonce=new_nonce(), started_at=started_at,
                        process=process)
    new_version, current = replace(store, keys.running(doc["id"]), new, version)
    if new_version is None:
        return Fenced(current)
    return new, new_version


def pulse(store: ObjectStore, doc: dict, *, renewed: bool, now: float | None = None) -> None:
    """The per-job heartbeat, written after every renewal attempt, successful or not."""
    t = time.time() if now is None else now
    body = {"job": doc["id"], "agent": doc.get("owner"), "at": d.iso(t), "renewed": renewed,
            "generation": doc["generation"], "nonce": new_nonce()}
    store.put(keys.heartbeat(doc["id"]), d.encode(body))


def finish(store: ObjectStore, doc: dict, version: Version, res: dict, *, now: float | None = None) -> dict | Fenced:
    """Running -> terminal (or back to the queue for a retry). First the fenced decision (put-if-match
    of phase 'finishing' with the outcome), then settle() writes the new record and deletes the old."""
    t = time.time() if now is None else now
    fin = d.finishing_doc(doc, res, now=t, nonce=new_nonce())
    new_version, current = replace(store, keys.running(doc["id"]), fin, version)
    if new_version is None:
        return Fenced(current)
    return settle(store, fin, writer=doc["owner"], now=t)


def settle(store: ObjectStore, doc: dict, *, writer: str, now: float | None = None) -> dict:
    """Finish the move of a running document whose phase already decided it ('finishing' or
    'cancelling'): new record first, then delete running/. Idempotent: any pass may call it again.

    A corrupt record where the new one belongs (terminal, or the queue entry of a retry) raises
    CorruptDocument and running/ is kept: the decided outcome stays readable there, nothing is
    overwritten on a guess, and the next pass finishes the move once the bad key is repaired or deleted."""
    t = time.time() if now is None else now
    job_id = doc["id"]
    if doc.get("phase") == "finishing" and d.retry_earned(doc, doc["result"]):
        again = d.requeued_after_failure(doc, now=t, nonce=new_nonce(), writer=writer)
        found = read(store, keys.queued(job_id), job_id)
        if found is None:
            create(store, keys.queued(job_id), again)
        elif found[0].get("generation", 0) < again["generation"]:
            replace(store, keys.queued(job_id), again, found[1])
        store.delete(keys.running(job_id))
        return again
    term = d.terminal_doc(doc, now=t, nonce=new_nonce(), writer=writer)
    if create(store, keys.terminal(term["state"], job_id), term) is None:
        found = read(store, keys.terminal(term["state"], job_id), job_id)
        term = found[0] if found else term
    faults.point("cancel-written" if term["state"] == "cancelled" else "terminal-written")
    if doc.get("owner") is None:
        store.delete(keys.queued(job_id))  # a tombstone's queue entry goes before the tombstone itself
    store.delete(keys.running(job_id))
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
        doc = found[0]
        if doc.get("phase") == "finishing" or (doc.get("phase") == "cancelling" and doc.get("owner") is None):
            try:
                term = settle(store, doc, writer=writer)
            except CorruptDocument as e:
                lines.append(f"{job_id}: cannot finish its move: {e}; its outcome stays in {entry.key} until that "
                             "key is repaired or deleted")
                continue
            lines.append(f"{job_id}: finished an interrupted move to {term['state']}")
    return lines


# -- cancellation --------------------------------------------------------------------------------------

class CancelReport(namedtuple("CancelReport", "job_id kind view message")):
    """What `stado cancel` did. kind: cancelled_queued | cancelled_running | already_cancelling |
    finishing | already_terminal; view: the job's JobView before; message: one line for the user."""

    __slots__ = ()


def cancel(store: ObjectStore, selector: str, *, by: str | None = None, reason: str | None = None,
           now: float | None = None) -> CancelReport:
    by = by or whoami()
    job_id = find(store, selector)
    for _ in range(CONFLICT_RETRIES):
        t = time.time() if now is None else now
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
            doc, version = recs["running"]
            phase = doc.get("phase")
            if phase == "finishing":
                res = doc.get("result") or {}
                return CancelReport(job_id, "finishing", v,
                                    f"{job_id}: already finished ({res.get('outcome')}); its record is being written; "
                                    "nothing written")
            if phase == "cancelling":
                if doc.get("owner") is None:
                    settle(store, doc, writer=by, now=t)
                return CancelReport(job_id, "already_cancelling", v, f"{job_id}: already being cancelled")
            moved = d.cancelling_doc(doc, by=by, reason=reason, now=t, nonce=new_nonce())
            new_version, _ = replace(store, keys.running(job_id), moved, version)
            if new_version is None:
                continue  # the owner renewed or finished meanwhile: look again
            term = d.terminal_doc(moved, now=t, nonce=new_nonce(), writer=by)
            create(store, keys.terminal("cancelled", job_id), term)
            return CancelReport(job_id, "cancelled_running", v,
                                f"{job_id}: cancelled; its process group on {doc.get('instance_ref')} is stopped at its "
                                "agent's next tick")
        queued, _ = recs["queued"]
        tomb = d.cancel_tombstone(queued, by=by, reason=reason, now=t, nonce=new_nonce())
        if create(store, keys.running(job_id), tomb) is None:
            continue  # an agent claimed it first: cancel the running job instead
        settle(store, tomb, writer=by, now=t)
        return CancelReport(job_id, "cancelled_queued", v, f"{job_id}: cancelled before it started")
    raise Conflict(f"{job_id}: the job kept changing while cancelling it; run `stado cancel {selector}` again")


# -- the queue pause -----------------------------------------------------------------------------------

def pause(store: ObjectStore, *, by: str | None = None, reason: str | None = None,
          now: float | None = None) -> tuple[dict, bool]:
    """(the pause record, whether it was already paused). Only claiming stops; submissions go on."""
    t = time.time() if now is None else now
    record = {"paused": True, "by": by or whoami(), "at": d.iso(t), "reason": reason, "generation": 1,
              "nonce": new_nonce()}
    try:
        store.put_if_absent(keys.QUEUE_PAUSE, d.encode(record))
        return record, False
    except AlreadyExists:
        current = pause_record(store)
        if current is None:
            return pause(store, by=by, reason=reason, now=now)
        return current, current.get("nonce") != record["nonce"]


def resume(store: ObjectStore) -> dict | None:
    """The pause record that was lifted, or None if the queue was not paused."""
    record = pause_record(store)
    if record is not None:
        store.delete(keys.QUEUE_PAUSE)
    return record


def pause_record(store: ObjectStore) -> dict | None:
    import json

    try:
        data = store.get(keys.QUEUE_PAUSE).data
    except NotFound:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    # An unreadable pause record still pauses: stopping claims is the safe reading of it.
    return record if isinstance(record, dict) else {"paused": True, "by": "?", "at": "?", "reason": "unreadable record"}
