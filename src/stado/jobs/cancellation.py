"""Cancellation: a queued job by a tombstone in running/ (the claim's one-winner primitive, so it never
starts), a running one by a put-if-match of phase `cancelling` that its agent sees at its next renewal, and a
job whose attempt has ended but whose move back to the queue (a retry, or a requeue after a lost worker) is
being written by a put-if-match over that decision: nothing runs then, so the cancel is settled at once, and
the move's writer finds its delete refused and withdraws the entry it wrote (jobs.moves._overtaken).

A cancel either stops the job (exit 0: it will not run again) or says why it could not (the job had already
ended otherwise: `honoured` is False, and `stado cancel` exits 1). A store error on the way is not an answer: the
cancel reads the job again and decides from what it holds (its own cancel, landed though its answer was lost, is
known by its cancel id); only a store that stays unreadable for the bound ends it, and then it says whether a
write of its own may have landed (OutcomeUnknown, exit 7) or none was sent (NotWritten, exit 4)."""
from runkit.core.clock import Clock
from runkit.core.records import record

from ..core import documents as d
from ..core import keys
from ..store.cas import create, new_nonce, read, replace
from ..core.errors import Conflict, JobNotFound
from ..queue.lookup import LIFECYCLE, find, records
from ..objectstore.base import ObjectStore, StoreError, Version
from .claiming import give_back, stale_claim
from .common import CONFLICT_RETRIES
from .moves import settle


class CancelReport(record("CancelReport", "job_id kind view message")):
    """What `stado cancel` did. kind: cancelled_queued | cancelled_running | cancelled_finishing |
    already_cancelling | finishing | already_terminal; view: the job's JobView before; message: one line for
    the user."""

    __slots__ = ()

    @property
    def honoured(self) -> bool:
        """Whether the job ends cancelled (False: it had already ended otherwise, and nothing was written)."""
        return self.kind not in ("finishing", "already_terminal") or self.view.state == d.CANCELLED


def cancel(store: ObjectStore, selector: str, *, by: str | None = None, reason: str | None = None,
           clock: Clock, settle_seconds: float | None = None) -> CancelReport:
    """Cancel the job, deciding from what the store holds. A store error on the way (a lost answer to any of its
    writes or reads) sends it back to read the job again, after a backoff, for `settle_seconds` from the first
    error (submission.SETTLE_SECONDS by default): a cancel of ours that landed is known by its cancel id, and the
    answer is what the store shows. Past the bound: NotWritten when nothing of ours was sent, OutcomeUnknown when
    a write of ours may have landed."""
    from ..store.landing import Patience
    from ..queue.submission import SETTLE_SECONDS, whoami

    by = by or whoami()
    patience = Patience(SETTLE_SECONDS if settle_seconds is None else settle_seconds)
    mine: list[tuple[str, CancelReport]] = []  # (cancel id, the report) of every cancel this call wrote
    job_id: str | None = None
    tries = unseen = 0
    while True:
        try:
            if job_id is None:
                job_id = find(store, selector)
            t = clock.wall()
            recs = _first_look(store, job_id) if tries == 0 else records(store, job_id)
            tries += 1
            if not recs:
                unseen += 1  # a job sent back to the queue between two reads (a retry) is missed by one look
                if unseen >= 3:
                    raise JobNotFound(f"no job {selector}: check the id with `stado status`")
                continue
            report = _decide(store, job_id, recs, by=by, reason=reason, now=t, wrote=mine)
        except StoreError as e:
            if not patience.another():
                raise _gave_up(job_id or selector, e, mine) from e
            tries = max(tries, 1)  # what the first look skipped may have moved: read the whole job again
            continue
        if report is not None:
            return report
        if tries >= CONFLICT_RETRIES:
            raise Conflict(f"{job_id}: the job kept changing while cancelling it; run `stado cancel {selector}` again")


def _decide(store: ObjectStore, job_id: str, recs: dict, *, by: str, reason: str | None, now: float,
            wrote: list) -> CancelReport | None:
    """One look's decision: the report, or None to look again (another writer moved first)."""
    v = d.resolve(job_id, {state: doc for state, (doc, _) in recs.items()})
    assert v is not None, "resolve() finds a state in any non-empty set of records"
    if v.state in keys.TERMINAL_STATES:
        ours = _ours(v.doc, wrote)
        if ours is not None:  # our own cancel, settled meanwhile (by us or another writer; its answer to us was lost)
            left = recs.get("running")
            if left is not None and _ours(left[0], wrote) is not None and d.decided(left[0]):
                try:  # what our settle did not get to (any agent's leftovers pass would finish it)
                    settle(store, left[0], left[1], writer=by, now=now)
                except StoreError:
                    pass
            return ours
        if "running" in recs and recs["running"][0].owner is None and _ours(recs["running"][0], wrote) is not None:
            # Our tombstone landed (its answer was lost) after the job had ended: take it back, as the terminal
            # check under it would have.
            give_back(store, recs["running"][0], recs["running"][1], writer=by, now=now)
        what = v.state if v.state == "cancelled" else f"{v.state} ({v.outcome})"
        if not v.terminal:
            what += f"; its process group on {recs['running'][0].get('instance_ref')} is being stopped"
        return CancelReport(job_id, "already_terminal", v, f"{job_id}: already {what}; nothing written")
    if v.state == "running":
        return _cancel_running(store, v, *recs["running"], by=by, reason=reason, now=now, wrote=wrote)
    return _cancel_queued(store, v, *recs["queued"], by=by, reason=reason, now=now, wrote=wrote)


def _ours(doc: d.Job, wrote: list) -> "CancelReport | None":
    """The report of our own cancel when `doc` carries it (by its cancel id)."""
    return next((report for cancel_id, report in wrote if doc.cancel_id == cancel_id), None)


def _gave_up(job: str, error: StoreError, wrote: list) -> Exception:
    from ..core.errors import NotWritten, OutcomeUnknown
    from ..objectstore.base import AccessDenied, StoreUnavailable

    said = str(error) if isinstance(error, (StoreUnavailable, AccessDenied)) else f"object store error: {error}"
    if wrote:
        return OutcomeUnknown(f"could not tell whether the cancel of {job} landed: {said}; `stado status {job}` "
                              "tells once the store answers", job)
    return NotWritten(f"{said}; nothing was written (the cancel of {job} was not sent)")


def _first_look(store: ObjectStore, job_id: str) -> dict[str, tuple[d.Job, Version]]:
    """queue/ alone when the job is queued: a queued job's cancel answers the other records with its own writes
    before it decides anything (the tombstone's create answers running/, the terminal check made while the
    tombstone holds it, stale_claim, answers the terminal records), and any other answer (a claim or a cancel
    there first, an end meanwhile) sends the loop to the full read, resolved terminal state first. Not queued:
    the later states, in lifecycle order, as records() reads them after queue/."""
    found = read(store, keys.queued(job_id), job_id)
    return {d.QUEUED: found} if found is not None else records(store, job_id, states=LIFECYCLE[1:])


def _cancel_running(store, v, doc, version, *, by, reason, now, wrote) -> CancelReport | None:
    job_id = doc.id
    if doc.finishing and not d.goes_back_to_queue(doc):
        res = doc.result or {}
        return CancelReport(job_id, "finishing", v, f"{job_id}: already finished ({res.get('outcome')}); its record "
                            "is being written; nothing written")
    if doc.cancelling:
        ours = _ours(doc, wrote)
        if d.decided(doc):
            settle(store, doc, version, writer=by, now=now)
        elif ours is not None:  # ours landed (its answer was lost): write what came after it
            create(store, keys.terminal("cancelled", job_id), d.terminal_doc(doc, now=now, nonce=new_nonce(), writer=by))
        if ours is not None:
            return ours
        return CancelReport(job_id, "already_cancelling", v, f"{job_id}: already being cancelled")
    moved = d.cancelling_doc(doc, by=by, reason=reason, now=now, nonce=new_nonce())
    if doc.finishing:
        report = CancelReport(job_id, "cancelled_finishing", v, f"{job_id}: cancelled; {_ended_attempt(doc)}; it "
                              "will not run again")
    else:
        report = CancelReport(job_id, "cancelled_running", v, f"{job_id}: cancelled; {_who_stops(store, doc, now)}")
    wrote.append((moved.cancel_id, report))
    new_version = replace(store, keys.running(job_id), moved, version)[0]
    if new_version is None:
        return None  # the owner renewed or finished meanwhile: look again
    if doc.finishing:
        settle(store, moved, new_version, writer=by, now=now, taken=True)  # nothing runs: finish the move now
    else:
        create(store, keys.terminal("cancelled", job_id), d.terminal_doc(moved, now=now, nonce=new_nonce(), writer=by))
    return report


def _ended_attempt(doc: d.Job) -> str:
    """A finishing move that was sending the job back to the queue, in words (what the cancel stopped)."""
    where = doc.instance_ref or "its host"
    if doc.requeue:
        return (f"its worker on {where} had been judged lost and the job was being requeued (a process of it still "
                "running there is stopped when that agent speaks again)")
    res = doc.result or {}
    error = (res.get("error") or {}).get("message") or res.get("outcome")
    return f"attempt {d.attempt_of(doc)} had ended on {where} ({error}) and its retry was being queued"


def _who_stops(store: ObjectStore, doc: d.Job, now: float) -> str:
    """Who will stop the job's processes, as far as the owner's agents/ record tells."""
    import json

    from ..core.admission import is_live, silent_for

    where = doc.instance_ref or "its host"
    try:
        record = json.loads(store.get(keys.agent(doc.owner or "-")).data)
    except (StoreError, ValueError):
        record = None
    if isinstance(record, dict) and is_live(record, now) and not record.get("stopping"):
        return f"its process group on {where} is stopped at its agent's next tick"
    silent = silent_for(record, now) if isinstance(record, dict) else None
    heard = f"has not been heard from for {silent:.0f} s" if silent is not None else "has no live record"
    return (f"its agent {doc.owner} on {where} {heard}: a process of it still running there is stopped when "
            "that agent speaks again or another agent starts on that host; the reaper settles the job once the "
            "agent's lease promise has passed")


def _cancel_queued(store, v, queued, queued_version, *, by, reason, now, wrote) -> CancelReport | None:
    """Cancelling a queued job takes its claim slot (create-if-absent on running/), so no agent can start
    it afterwards; then the move is settled like any other."""
    tomb = d.cancel_tombstone(queued, by=by, reason=reason, now=now, nonce=new_nonce())
    report = CancelReport(queued.id, "cancelled_queued", v, f"{queued.id}: cancelled {_while_queued(queued)}")
    wrote.append((tomb.cancel_id, report))
    version = create(store, keys.running(queued.id), tomb)
    if version is None:
        return None  # an agent claimed it first (cancel the running job instead), or our tombstone was settled
    if stale_claim(store, queued) == "terminal":
        give_back(store, tomb, version, writer=by, now=now)
        return None  # it ended meanwhile: say so
    settle(store, tomb, version, writer=by, now=now, taken=True, terminal_checked=True,
           queue_entry=(queued, queued_version))
    return report


def _while_queued(queued: d.Job) -> str:
    """What the cancel of a queued job stopped, in words: a job that never ran, or one waiting to run again."""
    last = queued.last_attempt or {}
    where = last.get("instance_ref") or "a host"
    since = f" from {last['started_at']}" if last.get("started_at") else ""
    attempt = d.attempt_of(queued)
    if queued.requeues and queued.requeued_from and queued.requeue_reason:
        return (f"while queued for attempt {attempt}: attempt {attempt - 1} ran on {where}{since} until its worker was "
                f"judged lost ({queued.requeue_reason}); a process of it still running there is stopped when that "
                "agent speaks again; it will not run again")
    if queued.failures:
        error = ((queued.last_result or {}).get("error") or {}).get("message") or "it failed"
        return (f"while waiting for attempt {attempt}: attempt {attempt - 1} ran on {where}{since} and ended ({error}); "
                "it will not run again")
    return "before it started"
