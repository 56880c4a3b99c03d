"""The decisions about a job's documents: each write a move makes (queued, claimed, renewed, finishing,
cancelled, reaped, requeued, repaired), built from the document it replaces; pure, time and nonces are arguments."""
from ..dependencies import retry_delay, retryable
from .records import (CANCELLED, CANCELLING, ERROR_CLASSES, FAILED, FINISHING, Job, MAX_ERROR_MESSAGE, OUTCOMES, QUEUED, RUNNING, RUNNING_PHASE, SCHEMA, iso, next_doc, parse_iso)


# -- submission ---------------------------------------------------------------------------------------

RERUN_INPUTS = ("original", "fresh")  # a rerun's inputs: the producers the original read, or resolved again


def queued_doc(job_id: str, spec: dict, *, now: float, submitter: str, nonce: str,
               rerun_of: str | None = None, rerun_inputs: str | None = None, schedule: dict | None = None) -> Job:
    """A job's first record. `schedule`: the schedule and fire time it was submitted for."""
    doc = {"schema": SCHEMA, "id": job_id, "state": QUEUED, "generation": 1, "nonce": nonce,
           "written_at": iso(now), "written_by": submitter, "spec": spec, "submitted_at": iso(now),
           "submitted_by": submitter, "rerun_of": rerun_of, "requeues": 0, "failures": 0}
    if rerun_of is not None:
        assert rerun_inputs in RERUN_INPUTS, rerun_inputs
        doc["rerun_inputs"] = rerun_inputs
    if schedule is not None:
        doc["schedule"] = schedule
    return Job(doc)


def same_submission(doc: Job, first: Job) -> bool:
    """Whether `doc`, any record of a job, comes from the submission whose first record is `first`: every later
    record of the job keeps the id and who submitted it when (a reader of its own submit's answer that was lost
    tells its job by these, whatever moves it has made since)."""
    return (doc.id == first.id and doc.raw.get("submitted_at") == first.raw.get("submitted_at")
            and doc.raw.get("submitted_by") == first.raw.get("submitted_by"))


def held_doc(queued: Job, *, by: str, now: float, nonce: str) -> Job:
    """The queue entry of a held job (`stado job hold`): the same entry with `held` (who, when), a new generation
    and nonce. Written with put-if-match on the entry's version, so a claim that read the entry before finds its
    delete of that version refused and gives the claim back: the entry's version decides which came first."""
    return next_doc(queued, state=QUEUED, now=now, nonce=nonce, writer=by, held={"by": by, "at": iso(now)})


def released_doc(queued: Job, *, by: str, now: float, nonce: str) -> Job:
    """The queue entry of a held job released: `held` gone; the entry keeps its id, hence its place in the claim order."""
    return next_doc(queued, state=QUEUED, now=now, nonce=nonce, writer=by, drop=("held",))


# -- claim and renewal ---------------------------------------------------------------------------------

def claim_doc(queued: Job, *, agent_id: str, instance_ref: str, now: float, lease_expires_at: float,
              nonce: str, owner_process: dict | None = None) -> Job:
    """The running document a claim creates. `claim` names this attempt for its whole life; `claimed_from`
    is the queue document's nonce, which tells a leftover queue entry (already claimed) from a newer one.
    `owner_process`: who the claiming agent is on its host (pid, start time, boot id, pid namespace, machine id), so
    that an agent starting on that host later tells a live owner from a gone one whatever work root it uses."""
    return next_doc(queued, state=RUNNING, now=now, nonce=nonce, writer=agent_id, phase=RUNNING_PHASE,
                 drop=("held", "retry_at"),
                 owner=agent_id, instance_ref=instance_ref, claim=nonce, claimed_from=queued.nonce,
                 claimed_at=iso(now), started_at=iso(now), lease_expires_at=iso(lease_expires_at),
                 lease_seconds=_lease_seconds(now, lease_expires_at), process=None, result=None, cancel=None,
                 owner_process=owner_process)


def _lease_seconds(now: float, lease_expires_at: float) -> float:
    """The promise as a duration: both ends read from the writer's one clock, so no offset between clocks enters
    it (the reaper's watch measures it on its own monotonic clock)."""
    return round(max(0.0, lease_expires_at - now), 3)


def renewed_doc(running: Job, *, now: float, lease_expires_at: float, nonce: str, started_at: float | None = None,
                process: dict | None = None) -> Job:
    fields: dict = {"lease_expires_at": iso(lease_expires_at), "lease_seconds": _lease_seconds(now, lease_expires_at)}
    if started_at is not None:
        fields["started_at"] = iso(started_at)
    if process is not None:
        fields["process"] = process
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=running.owner, **fields)


def taken_doc(running: Job, *, writer: str, now: float, nonce: str) -> Job:
    """The same running document, its generation moved on by a writer about to finish its move: every
    other writer holding the version it read is fenced from here on (see jobs.settle)."""
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=writer, settled_by=writer)


def reaped_cancel_doc(running: Job, *, writer: str, now: float, nonce: str) -> Job:
    """A reaper's take of a cancel whose owner stopped speaking past its promise: the same judgement as its
    requeue verdict (no process of the attempt runs any more), written as the cancel's outcome, so the move is
    decided and any settler finishes it should this one stop short (not only a reaper a lease later)."""
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=writer, settled_by=writer,
                 result=result("cancelled"))


def attempt_of(doc: Job) -> int:
    """The attempt a claim of this document starts: 1, plus one for every failed attempt, requeue and hand-back
    before."""
    return 1 + int(doc.failures) + int(doc.requeues) + int(doc.handbacks)


def is_leftover_queue_entry(queued: Job, running: Job) -> bool:
    """True when `queued` is the very entry `running` was claimed from (the claim landed but the agent
    stopped before deleting it), or a second copy of it: the same move back to the queue (`requeued_from`,
    the attempt it ended) written again by a settler that was overtaken after the first copy was claimed.
    Anything else (a newer queue document) is not ours to delete."""
    if running.claimed_from == queued.nonce:
        return True
    return queued.requeued_from is not None and queued.requeued_from == running.requeued_from


# -- outcomes ------------------------------------------------------------------------------------------

def result(outcome: str, *, exit_code: int | None = None, signal: int | None = None,
           error_class: str | None = None, message: str | None = None) -> dict:
    assert outcome in OUTCOMES, outcome
    assert error_class is None or error_class in ERROR_CLASSES, error_class
    error = None
    if error_class is not None:
        error = {"class": error_class, "message": (message or "")[:MAX_ERROR_MESSAGE]}
    return {"outcome": outcome, "exit_code": exit_code, "signal": signal, "error": error}


def classify_exit(exit_code: int | None, signal: int | None, *, timed_out: bool, timeout: float | None) -> dict:
    """The outcome of a process that ended (pure)."""
    if timed_out:
        return result("timed_out", exit_code=exit_code, signal=signal, error_class="timeout",
                      message=f"ran longer than its timeout of {timeout:g} s; its process group was stopped")
    if exit_code == 0:
        return result("succeeded", exit_code=0)
    if signal is not None:
        return result("failed", signal=signal, error_class="signal", message=f"killed by signal {signal}")
    return result("failed", exit_code=exit_code, error_class="exit_code", message=f"exited with status {exit_code}")


def terminal_state_of(res: dict) -> str:
    return {"succeeded": "completed", "cancelled": "cancelled"}.get(res["outcome"], "failed")


def retry_earned(doc: Job, res: dict) -> bool:
    """A failed attempt is retried while the spec's retry budget lasts, if its exit is one the spec retries
    (--retryable-exit-code). Timeouts and input or spawn problems are not retried: running the same thing again
    would end the same way."""
    if res["outcome"] != "failed" or (res["error"] or {}).get("class") not in ("exit_code", "signal"):
        return False
    return doc.failures < doc.spec.retries and retryable(doc.spec, res.get("exit_code"))


def retry_waits(queued: Job, now: float) -> float:
    """Seconds a retry's queue entry still waits for its --retry-delay at `now` (the store's time), 0 once it may be
    claimed. An unreadable `retry_at` waits for nothing: a job is never kept from running by a bad stamp."""
    try:
        at = parse_iso(queued.retry_at)
    except (TypeError, ValueError):
        at = None
    return 0.0 if at is None else max(0.0, at - now)


def finishing_doc(running: Job, res: dict, *, now: float, nonce: str) -> Job:
    """The fenced decision: written with put_if_match on the running document, so a cancel that moved
    the document first wins, and every reader (and the next pass) sees the outcome before the terminal
    record exists."""
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=running.owner, phase=FINISHING,
                 result=res, finished_at=iso(now))


def cancelling_doc(running: Job, *, by: str, reason: str | None, now: float, nonce: str) -> Job:
    """A cancel of a claimed job. Over a running attempt, its owner stops the process group and settles it; over
    a finishing move that would send the job back to the queue (its attempt had ended: the decided `result`
    stays), nothing runs, and any writer settles it. `cancel.id` lets the canceller know its own cancel in the
    terminal record, whoever wrote that."""
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=by, phase=CANCELLING,
                 cancel={"by": by, "at": iso(now), "reason": reason, "id": nonce})


def cancel_tombstone(queued: Job, *, by: str, reason: str | None, now: float, nonce: str) -> Job:
    """Cancelling a queued job takes the claim slot (create-if-absent on running/) so that no agent can
    claim it afterwards: the one-winner primitive is what makes 'a queued job never starts' hold."""
    return next_doc(queued, state=RUNNING, now=now, nonce=nonce, writer=by, phase=CANCELLING, owner=None,
                 instance_ref=None, claim=nonce, claimed_from=queued.nonce, claimed_at=None, started_at=None,
                 lease_expires_at=None, process=None, result=None,
                 cancel={"by": by, "at": iso(now), "reason": reason, "id": nonce})


def terminal_doc(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """The terminal record for a running document whose phase decided the outcome."""
    if doc.cancelling:
        cancel = doc.cancel or {}
        fields = dict(result("cancelled"), cancelled_by=cancel.get("by"), cancel_reason=cancel.get("reason"),
                      finished_at=iso(now))
        return next_doc(doc, state=CANCELLED, now=now, nonce=nonce, writer=writer, **fields)
    res = doc.result
    assert doc.finishing and res, "terminal_doc needs a decided outcome"
    return next_doc(doc, state=terminal_state_of(res), now=now, nonce=nonce, writer=writer,
                 finished_at=doc.finished_at or iso(now), **res)


def reaped_doc(running: Job, *, now: float, nonce: str, writer: str, reason: str, requeue: bool) -> Job:
    """The reaper's fenced decision on a job whose worker stopped speaking (or was replaced): put-if-match
    on the running document, so a renewal that landed first wins. The job goes back to the queue once
    (`requeue`), and fails with error class worker_lease_expired on the next such loss."""
    res = result("failed", error_class="worker_lease_expired", message=reason)
    return next_doc(running, state=RUNNING, now=now, nonce=nonce, writer=writer, phase=FINISHING, result=res,
                 finished_at=iso(now), requeue=requeue, reaped={"by": writer, "at": iso(now), "reason": reason})


def _last_attempt(doc: Job) -> dict:
    """Where and when the attempt that just ended ran (what a later reader, a cancel say, can tell its user)."""
    return {"owner": doc.owner, "instance_ref": doc.instance_ref, "started_at": doc.started_at}


def requeued_after_loss(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """Back to the queue after a lost worker: the requeues counter moves, the failed-attempts one does not."""
    return next_doc(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, requeues=doc.get("requeues", 0) + 1,
                 last_result=doc.result, requeued_from=doc.claim, last_attempt=_last_attempt(doc),
                 requeue_reason=(doc.reaped or {}).get("reason"), drop=_ATTEMPT_FIELDS + ("requeue", "reaped"))


def returned_doc(doc: Job, *, now: float, nonce: str, writer: str, handed_back: bool = False) -> Job:
    """Back to the queue from a claim that never started its process (it could not tell whether its claim
    was genuine): no counter moves. `handed_back`: its draining agent gave it back (`handbacks` counts those, so
    the next attempt's output is not written over what this one said)."""
    fields = {"handbacks": doc.get("handbacks", 0) + 1} if handed_back else {}
    return next_doc(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, requeued_from=doc.claim,
                 drop=_ATTEMPT_FIELDS + ("requeue", "reaped"), **fields)


_ATTEMPT_FIELDS = ("phase", "owner", "owner_process", "instance_ref", "claim", "claimed_from", "claimed_at", "started_at",
                   "lease_expires_at", "process", "result", "cancel", "finished_at", "settled_by", "ledger_cleared")


def requeued_after_failure(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """Back to the queue for another attempt: the failed-attempts counter moves, the lost-worker
    counter (requeues) does not. With a --retry-delay, `retry_at`: no claim before then, counted from the time the
    owner decided the outcome (`finished_at`, on the store's time as the owner counts it), whoever settles the
    move, so the delay holds whatever agent claims next and whichever writer finished the move."""
    delay = retry_delay(doc.spec, doc.failures)
    fields = {}
    if delay > 0:
        decided = parse_iso(doc.finished_at) if doc.finished_at else None
        fields["retry_at"] = iso((now if decided is None else decided) + delay)
    return next_doc(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, failures=doc.get("failures", 0) + 1,
                 last_result=doc.result, requeued_from=doc.claim, last_attempt=_last_attempt(doc),
                 drop=_ATTEMPT_FIELDS + ("requeue", "reaped", "requeue_reason") + (() if fields else ("retry_at",)),
                 **fields)


def repaired_doc(job_id: str, key: str, *, why: str, size: int, evidence: str, by: str, now: float, nonce: str) -> Job:
    """The failed record `stado repair` writes for a job whose only record was corrupt, so the job never vanishes:
    what was wrong, and the start of what was there (`evidence`, base64)."""
    doc = {"schema": SCHEMA, "id": job_id, "state": FAILED, "generation": 1, "nonce": nonce,
           "written_at": iso(now), "written_by": by, "spec": {"command": "(unknown: its only record was corrupt)"},
           "finished_at": iso(now), "repaired": {"key": key, "reason": why, "bytes": size,
                                                   "first_bytes_base64": evidence}}
    doc.update(result("failed", error_class="internal", message=f"{key} was corrupt ({why}); cleared by stado repair"))
    return Job(doc)


