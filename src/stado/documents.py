"""Job documents and the decisions about them (pure: no I/O, time and nonces are arguments).

Every document carries `generation` (bumped by each write of the job, so no two writes are
byte-identical and a stale writer is fenced) and the writer's `nonce` (so a writer whose retried
request may have landed can read back and recognise its own write). The spec travels in every
document, so any one record answers every question about the job.

States are the key prefixes (queued, running, completed, failed, cancelled). A running document
also has a `phase`: `running`, `finishing` (the outcome is decided and fenced; the terminal record
is being written) or `cancelling` (an operator cancelled it; the owner stops the process group).
`outcome` is separate from `state`, and `terminal` is decided here, from TERMINAL_STATES.

`decode` turns the stored JSON into a Job: a slotted record whose properties name every field the code reads
(the stored JSON is kept whole in `raw`, so a document is written back byte for byte as it was read, fields
of other writers included). No module but this one reads a job document by a string key, and the state and
phase names are spelled here alone (QUEUED ..., RUNNING_PHASE, FINISHING, CANCELLING). A Job also reads as a
mapping of its stored fields (`job["phase"]`, `job.get(...)`): for tests and for views that show the stored
form as it is; the library's own decisions use the properties.
"""
import time

from runkit import jsonfast

from .errors import CorruptDocument
from .keys import TERMINAL_STATES

SCHEMA = 1
QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED = "queued", "running", "completed", "failed", "cancelled"
STATES = (QUEUED, RUNNING) + TERMINAL_STATES
# A running document's phase: its process runs; its outcome is decided and being recorded; it is being cancelled.
RUNNING_PHASE, FINISHING, CANCELLING = "running", "finishing", "cancelling"
PHASES = (RUNNING_PHASE, FINISHING, CANCELLING)
# Outcomes, and the bounded set of error classes a failed record may carry.
OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled")
ERROR_CLASSES = ("exit_code", "signal", "timeout", "cost_cap", "spawn_error", "input_unavailable",
                 "worker_lease_expired", "internal")
MAX_ERROR_MESSAGE = 300


def iso(t: float) -> str:
    """Unix seconds -> '2026-11-30T12:34:56.789Z' (UTC, millisecond precision)."""
    whole = int(t)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((t - whole) * 1000):03d}Z"


def parse_iso(text: str | None) -> float | None:
    if not text:
        return None
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


class Record:
    """A stored document read through named properties; `raw` is its JSON object, whole."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict):
        self.raw = raw

    def __getitem__(self, name: str):
        return self.raw[name]

    def get(self, name: str, default=None):
        return self.raw.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.raw

    def keys(self):
        """With __getitem__, what dict(record, field=...) needs: a plain copy of the stored form."""
        return self.raw.keys()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self.raw == other.raw
        return self.raw == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a document is a value that changes with every write

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"


def _field(name: str, default=None) -> property:
    return property(lambda self: self.raw.get(name, default), doc=f"the stored `{name}`")


class Spec(Record):
    """What the job runs and what it needs (stado.spec.JobSpec is how a submission builds it)."""

    __slots__ = ()
    command: str = _field("command")  # type: ignore[assignment]
    name: str | None = _field("name")  # type: ignore[assignment]
    capabilities: list = _field("capabilities", ())  # type: ignore[assignment]
    providers: list = _field("providers", ())  # type: ignore[assignment]
    spot: str = _field("spot", "allow")  # type: ignore[assignment]
    cost_cap: float | None = _field("cost_cap")  # type: ignore[assignment]
    cost_cap_advisory: bool = _field("cost_cap_advisory", False)  # type: ignore[assignment]
    timeout: float | None = _field("timeout")  # type: ignore[assignment]

    @property
    def priority(self) -> int:
        return self.raw.get("priority") or 0

    @property
    def cores(self) -> int:
        return int(self.raw.get("cores") or 1)

    @property
    def memory(self) -> int:
        return int(self.raw.get("memory") or 0)

    @property
    def accelerators(self) -> int:
        return int(self.raw.get("accelerators") or 0)

    @property
    def retries(self) -> int:
        return int(self.raw.get("retries") or 0)

    @property
    def inputs(self) -> list[dict]:
        return self.raw.get("inputs") or []


class Job(Record):
    """A job document: the record of one of its states (queue/, running/ or a terminal prefix)."""

    __slots__ = ()
    id: str = _field("id")  # type: ignore[assignment]
    state: str = _field("state")  # type: ignore[assignment]
    generation: int = _field("generation", 0)  # type: ignore[assignment]
    nonce: str = _field("nonce")  # type: ignore[assignment]
    phase: str | None = _field("phase")  # type: ignore[assignment]
    owner: str | None = _field("owner")  # type: ignore[assignment]
    instance_ref: str | None = _field("instance_ref")  # type: ignore[assignment]
    claim: str | None = _field("claim")  # type: ignore[assignment]
    claimed_from: str | None = _field("claimed_from")  # type: ignore[assignment]
    claimed_at: str | None = _field("claimed_at")  # type: ignore[assignment]
    started_at: str | None = _field("started_at")  # type: ignore[assignment]
    finished_at: str | None = _field("finished_at")  # type: ignore[assignment]
    lease_expires_at: str | None = _field("lease_expires_at")  # type: ignore[assignment]
    lease_seconds: float | None = _field("lease_seconds")  # type: ignore[assignment]
    process: dict | None = _field("process")  # type: ignore[assignment]
    result: dict | None = _field("result")  # type: ignore[assignment]
    cancel: dict | None = _field("cancel")  # type: ignore[assignment]
    reaped: dict | None = _field("reaped")  # type: ignore[assignment]
    requeue: bool | None = _field("requeue")  # type: ignore[assignment]
    requeued_from: str | None = _field("requeued_from")  # type: ignore[assignment]
    requeue_reason: str | None = _field("requeue_reason")  # type: ignore[assignment]
    last_attempt: dict | None = _field("last_attempt")  # type: ignore[assignment]
    last_result: dict | None = _field("last_result")  # type: ignore[assignment]
    settled_by: str | None = _field("settled_by")  # type: ignore[assignment]
    written_by: str | None = _field("written_by")  # type: ignore[assignment]
    written_at: str | None = _field("written_at")  # type: ignore[assignment]
    submitted_at: str | None = _field("submitted_at")  # type: ignore[assignment]
    rerun_of: str | None = _field("rerun_of")  # type: ignore[assignment]
    outcome: str | None = _field("outcome")  # type: ignore[assignment]
    exit_code: int | None = _field("exit_code")  # type: ignore[assignment]
    signal: int | None = _field("signal")  # type: ignore[assignment]
    error: dict | None = _field("error")  # type: ignore[assignment]
    cancelled_by: str | None = _field("cancelled_by")  # type: ignore[assignment]
    rerun_inputs: str | None = _field("rerun_inputs")  # type: ignore[assignment]
    cost_usd: float | None = _field("cost_usd")  # type: ignore[assignment]
    schedule: dict | None = _field("schedule")  # type: ignore[assignment]
    held: dict | None = _field("held")  # type: ignore[assignment]  # a queue entry's hold: who, when (stado job hold)
    owner_process: dict | None = _field("owner_process")  # type: ignore[assignment]  # the owner agent, on its host

    @property
    def spec(self) -> Spec:
        return Spec(self.raw.get("spec") or {})

    @property
    def requeues(self) -> int:
        return self.raw.get("requeues") or 0

    @property
    def failures(self) -> int:
        return self.raw.get("failures") or 0

    @property
    def handbacks(self) -> int:
        return self.raw.get("handbacks") or 0

    @property
    def cancel_id(self) -> str | None:
        """The id of the cancel this record carries (the canceller knows its own by it)."""
        return (self.raw.get("cancel") or {}).get("id")

    @property
    def cancelling(self) -> bool:
        return self.raw.get("phase") == CANCELLING

    @property
    def finishing(self) -> bool:
        return self.raw.get("phase") == FINISHING

    @property
    def running_phase(self) -> bool:
        return self.raw.get("phase") == RUNNING_PHASE

    def with_(self, **fields) -> "Job":
        """The same document with these fields set (a new record: documents are values)."""
        return Job({**self.raw, **fields})


def encode(doc: "Record | dict") -> bytes:
    return jsonfast.dumps(doc.raw if isinstance(doc, Record) else doc, sort_keys=True).encode()


def decode(key: str, data: bytes, job_id: str | None = None) -> Job:
    """A stored job document, or CorruptDocument naming what is wrong with it."""
    return Job(_checked(key, data, job_id))


def _checked(key: str, data: bytes, job_id: str | None) -> dict:
    try:
        doc = jsonfast.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        from .brief import brief

        raise CorruptDocument(key, f"not JSON: {brief(str(e), 80)}") from None
    if not isinstance(doc, dict):
        raise CorruptDocument(key, "not a JSON object")
    for name, kind in (("id", str), ("generation", int), ("nonce", str), ("state", str), ("spec", dict)):
        if not isinstance(doc.get(name), kind):
            raise CorruptDocument(key, f"missing or bad field {name!r}")
    if doc["state"] not in STATES:
        raise CorruptDocument(key, f"unknown state {doc['state']!r}")
    if job_id is not None and doc["id"] != job_id:
        raise CorruptDocument(key, f"holds job {doc['id']!r}, not {job_id!r}")
    if not isinstance(doc["spec"].get("command"), str):
        raise CorruptDocument(key, "spec has no command")
    wrong = _wrong_field(doc)
    if wrong:
        raise CorruptDocument(key, f"field {wrong!r} has a value of another type")
    return doc


_TEXT, _INT, _NUM, _OBJ, _LIST = (str, type(None)), (int,), (int, float, type(None)), (dict, type(None)), (list,)
# The fields every reader relies on, by type (absent is fine: older documents lack some).
_FIELDS = {"written_at": _TEXT, "written_by": _TEXT, "submitted_at": _TEXT, "submitted_by": _TEXT, "rerun_of": _TEXT,
           "rerun_inputs": _TEXT,
           "requeues": _INT, "failures": _INT, "handbacks": _INT, "phase": _TEXT, "owner": _TEXT, "instance_ref": _TEXT, "claim": _TEXT,
           "claimed_at": _TEXT, "started_at": _TEXT, "finished_at": _TEXT, "lease_expires_at": _TEXT,
           "lease_seconds": _NUM, "process": _OBJ, "result": _OBJ, "cancel": _OBJ, "outcome": _TEXT,
           "last_attempt": _OBJ,
           "exit_code": (int, type(None)), "signal": (int, type(None)), "cost_usd": _NUM, "cancelled_by": _TEXT,
           "held": _OBJ, "owner_process": _OBJ}
_SPEC = {"name": _TEXT, "priority": _INT, "capabilities": _LIST, "cores": _INT, "memory": (int, type(None)),
         "accelerators": _INT, "providers": _LIST, "spot": (str,), "cost_cap": _NUM, "timeout": _NUM,
         "retries": _INT, "inputs": _LIST, "cost_cap_advisory": (bool,)}


def _wrong_field(doc: dict) -> str | None:
    """The first field whose value has a type no reader expects (valid JSON written by hand, or by a
    foreign writer), or None."""
    for fields, where, prefix in ((_FIELDS, doc, ""), (_SPEC, doc["spec"], "spec.")):
        for name, kinds in fields.items():
            if name in where and not isinstance(where[name], kinds):
                return prefix + name
    spec = doc["spec"]
    for name in ("capabilities", "providers"):
        if not all(isinstance(x, str) for x in spec.get(name) or ()):
            return f"spec.{name}"
    if not all(isinstance(i, dict) and isinstance(i.get("job"), str) and isinstance(i.get("name"), str)
               for i in spec.get("inputs") or ()):
        return "spec.inputs"
    res = doc.get("result")
    if res is not None and (not isinstance(res.get("outcome"), str) or not _error_shaped(res.get("error"))):
        return "result"
    if not _error_shaped(doc.get("error")):  # a terminal record carries its result at the top
        return "error"
    return None


def _error_shaped(error) -> bool:
    return error is None or (isinstance(error, dict) and isinstance(error.get("class"), str)
                             and isinstance(error.get("message"), str))


def _raw(doc: "Record | dict") -> dict:
    return doc.raw if isinstance(doc, Record) else doc


def _next(doc: "Job | dict", *, state: str, now: float, nonce: str, writer: str | None, drop: tuple = (),
          **fields) -> Job:
    """The document's next write: `fields` set, the attempt's `drop`ped, a new generation, nonce and writer."""
    new = dict(_raw(doc))
    new.update(fields)
    new.update(state=state, generation=new["generation"] + 1, nonce=nonce, written_at=iso(now), written_by=writer)
    for name in drop:
        new.pop(name, None)
    return Job(new)


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
    return _next(queued, state=QUEUED, now=now, nonce=nonce, writer=by, held={"by": by, "at": iso(now)})


def released_doc(queued: Job, *, by: str, now: float, nonce: str) -> Job:
    """The queue entry of a held job released: `held` gone; the entry keeps its id, hence its place in the claim order."""
    return _next(queued, state=QUEUED, now=now, nonce=nonce, writer=by, drop=("held",))


# -- claim and renewal ---------------------------------------------------------------------------------

def claim_doc(queued: Job, *, agent_id: str, instance_ref: str, now: float, lease_expires_at: float,
              nonce: str, owner_process: dict | None = None) -> Job:
    """The running document a claim creates. `claim` names this attempt for its whole life; `claimed_from`
    is the queue document's nonce, which tells a leftover queue entry (already claimed) from a newer one.
    `owner_process`: who the claiming agent is on its host (pid, start time, boot id, pid namespace, machine id), so
    that an agent starting on that host later tells a live owner from a gone one whatever work root it uses."""
    return _next(queued, state=RUNNING, now=now, nonce=nonce, writer=agent_id, phase=RUNNING_PHASE, drop=("held",),
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
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=running.owner, **fields)


def taken_doc(running: Job, *, writer: str, now: float, nonce: str) -> Job:
    """The same running document, its generation moved on by a writer about to finish its move: every
    other writer holding the version it read is fenced from here on (see jobs.settle)."""
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=writer, settled_by=writer)


def reaped_cancel_doc(running: Job, *, writer: str, now: float, nonce: str) -> Job:
    """A reaper's take of a cancel whose owner stopped speaking past its promise: the same judgement as its
    requeue verdict (no process of the attempt runs any more), written as the cancel's outcome, so the move is
    decided and any settler finishes it should this one stop short (not only a reaper a lease later)."""
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=writer, settled_by=writer,
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
    """A failed attempt is retried while the spec's retry budget lasts. Timeouts and input or spawn
    problems are not retried: running the same thing again would end the same way."""
    if res["outcome"] != "failed" or (res["error"] or {}).get("class") not in ("exit_code", "signal"):
        return False
    return doc.failures < doc.spec.retries


def finishing_doc(running: Job, res: dict, *, now: float, nonce: str) -> Job:
    """The fenced decision: written with put_if_match on the running document, so a cancel that moved
    the document first wins, and every reader (and the next pass) sees the outcome before the terminal
    record exists."""
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=running.owner, phase=FINISHING,
                 result=res, finished_at=iso(now))


def cancelling_doc(running: Job, *, by: str, reason: str | None, now: float, nonce: str) -> Job:
    """A cancel of a claimed job. Over a running attempt, its owner stops the process group and settles it; over
    a finishing move that would send the job back to the queue (its attempt had ended: the decided `result`
    stays), nothing runs, and any writer settles it. `cancel.id` lets the canceller know its own cancel in the
    terminal record, whoever wrote that."""
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=by, phase=CANCELLING,
                 cancel={"by": by, "at": iso(now), "reason": reason, "id": nonce})


def cancel_tombstone(queued: Job, *, by: str, reason: str | None, now: float, nonce: str) -> Job:
    """Cancelling a queued job takes the claim slot (create-if-absent on running/) so that no agent can
    claim it afterwards: the one-winner primitive is what makes 'a queued job never starts' hold."""
    return _next(queued, state=RUNNING, now=now, nonce=nonce, writer=by, phase=CANCELLING, owner=None,
                 instance_ref=None, claim=nonce, claimed_from=queued.nonce, claimed_at=None, started_at=None,
                 lease_expires_at=None, process=None, result=None,
                 cancel={"by": by, "at": iso(now), "reason": reason, "id": nonce})


def terminal_doc(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """The terminal record for a running document whose phase decided the outcome."""
    if doc.cancelling:
        cancel = doc.cancel or {}
        fields = dict(result("cancelled"), cancelled_by=cancel.get("by"), cancel_reason=cancel.get("reason"),
                      finished_at=iso(now))
        return _next(doc, state=CANCELLED, now=now, nonce=nonce, writer=writer, **fields)
    res = doc.result
    assert doc.finishing and res, "terminal_doc needs a decided outcome"
    return _next(doc, state=terminal_state_of(res), now=now, nonce=nonce, writer=writer,
                 finished_at=doc.finished_at or iso(now), **res)


def reaped_doc(running: Job, *, now: float, nonce: str, writer: str, reason: str, requeue: bool) -> Job:
    """The reaper's fenced decision on a job whose worker stopped speaking (or was replaced): put-if-match
    on the running document, so a renewal that landed first wins. The job goes back to the queue once
    (`requeue`), and fails with error class worker_lease_expired on the next such loss."""
    res = result("failed", error_class="worker_lease_expired", message=reason)
    return _next(running, state=RUNNING, now=now, nonce=nonce, writer=writer, phase=FINISHING, result=res,
                 finished_at=iso(now), requeue=requeue, reaped={"by": writer, "at": iso(now), "reason": reason})


def _last_attempt(doc: Job) -> dict:
    """Where and when the attempt that just ended ran (what a later reader, a cancel say, can tell its user)."""
    return {"owner": doc.owner, "instance_ref": doc.instance_ref, "started_at": doc.started_at}


def requeued_after_loss(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """Back to the queue after a lost worker: the requeues counter moves, the failed-attempts one does not."""
    return _next(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, requeues=doc.get("requeues", 0) + 1,
                 last_result=doc.result, requeued_from=doc.claim, last_attempt=_last_attempt(doc),
                 requeue_reason=(doc.reaped or {}).get("reason"), drop=_ATTEMPT_FIELDS + ("requeue", "reaped"))


def returned_doc(doc: Job, *, now: float, nonce: str, writer: str, handed_back: bool = False) -> Job:
    """Back to the queue from a claim that never started its process (it could not tell whether its claim
    was genuine): no counter moves. `handed_back`: its draining agent gave it back (`handbacks` counts those, so
    the next attempt's output is not written over what this one said)."""
    fields = {"handbacks": doc.get("handbacks", 0) + 1} if handed_back else {}
    return _next(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, requeued_from=doc.claim,
                 drop=_ATTEMPT_FIELDS + ("requeue", "reaped"), **fields)


_ATTEMPT_FIELDS = ("phase", "owner", "owner_process", "instance_ref", "claim", "claimed_from", "claimed_at", "started_at",
                   "lease_expires_at", "process", "result", "cancel", "finished_at", "settled_by", "ledger_cleared")


def requeued_after_failure(doc: Job, *, now: float, nonce: str, writer: str) -> Job:
    """Back to the queue for another attempt: the failed-attempts counter moves, the lost-worker
    counter (requeues) does not."""
    return _next(doc, state=QUEUED, now=now, nonce=nonce, writer=writer, failures=doc.get("failures", 0) + 1,
                 last_result=doc.result, requeued_from=doc.claim, last_attempt=_last_attempt(doc),
                 drop=_ATTEMPT_FIELDS + ("requeue", "reaped", "requeue_reason"))


def repaired_doc(job_id: str, key: str, *, why: str, size: int, evidence: str, by: str, now: float, nonce: str) -> Job:
    """The failed record `stado repair` writes for a job whose only record was corrupt, so the job never vanishes:
    what was wrong, and the start of what was there (`evidence`, base64)."""
    doc = {"schema": SCHEMA, "id": job_id, "state": FAILED, "generation": 1, "nonce": nonce,
           "written_at": iso(now), "written_by": by, "spec": {"command": "(unknown: its only record was corrupt)"},
           "finished_at": iso(now), "repaired": {"key": key, "reason": why, "bytes": size,
                                                   "first_bytes_base64": evidence}}
    doc.update(result("failed", error_class="internal", message=f"{key} was corrupt ({why}); cleared by stado repair"))
    return Job(doc)


# -- what readers show ---------------------------------------------------------------------------------

class JobView:
    """A job as readers resolve it: terminal records first (in TERMINAL_STATES order), then running,
    then queued. `also` lists the other records found (a move still under way).

    `terminal` means the job has stopped moving: a terminal record, and no process of it that may still
    run. A running job cancelled has its cancelled/ record at once, but until its agent has seen its
    process group gone and deleted running/ (phase `cancelling`, an owner), `stopping` names that phase
    and the job is not terminal yet."""

    __slots__ = ("id", "state", "doc", "also", "problems", "stopping")

    def __init__(self, id: str, state: str, doc: Job, also: list[str] | None = None, stopping: str | None = None):
        self.id, self.state, self.doc, self.also = id, state, doc, list(also or ())
        self.problems: list[str] = []  # corrupt records of this job that readers skipped
        self.stopping = stopping

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES and self.stopping is None

    @property
    def phase(self) -> str | None:
        if self.state == RUNNING:
            return self.doc.phase
        return self.stopping

    @property
    def outcome(self) -> str | None:
        return self.doc.outcome if self.state in TERMINAL_STATES else None


def process_may_run(running: Job) -> bool:
    """Whether a running document still stands for a process its agent has not seen gone: it has an owner
    (a cancel tombstone has none: nothing ever started) and no outcome decided yet (a `result` is written
    only once the process group is gone: 'finishing', or a cancel that overtook a finishing move)."""
    return running.owner is not None and not running.finishing and running.result is None


def decided(running: Job) -> bool:
    """Whether the running document's move is decided, so that any writer may finish it (settle): an outcome
    ('finishing'), or a cancel that no process of the job can outlive (a tombstone, or a cancel of a job whose
    attempt had ended). A cancel of a running process is its owner's to finish once it has seen the group gone
    (or the reaper's, once the owner's promise has passed)."""
    return running.finishing or (running.cancelling and not process_may_run(running))


def goes_back_to_queue(running: Job) -> bool:
    """Whether a finishing document's decision sends the job back to the queue (a requeue after a lost worker, or
    a retry the spec allows), rather than to a terminal record."""
    res = running.result
    return running.finishing and bool(running.requeue or (res and retry_earned(running, res)))


def resolve(job_id: str, records: dict[str, Job]) -> JobView | None:
    """Pick the record that states the job's truth from those present (state -> document)."""
    for state in TERMINAL_STATES + (RUNNING, QUEUED):
        if state in records:
            stopping = None
            if state in TERMINAL_STATES and RUNNING in records and process_may_run(records[RUNNING]):
                stopping = records[RUNNING].phase or RUNNING_PHASE
            return JobView(job_id, state, records[state], [s for s in records if s != state], stopping)
    return None


def status_json(view: JobView) -> dict:
    """What `stado machine status` prints: state, terminal and outcome kept apart."""
    d = view.doc
    spec = d.get("spec", {})
    ended = view.state in TERMINAL_STATES
    res = d.raw if ended else (d.result or {}) if view.phase == FINISHING else {}
    return {
        "id": view.id, "name": spec.get("name"), "state": view.state, "terminal": view.terminal,
        "outcome": view.outcome, "phase": view.phase,
        "exit_code": res.get("exit_code"), "signal": res.get("signal"), "error": res.get("error"),
        "submitted_at": d.get("submitted_at"), "claimed_at": d.get("claimed_at"), "started_at": d.get("started_at"),
        "finished_at": d.get("finished_at") if ended else None,
        "lease_expires_at": d.get("lease_expires_at") if view.state == RUNNING else None,
        "owner": d.get("owner"), "instance_ref": d.get("instance_ref"),
        "requeues": d.get("requeues", 0), "failures": d.get("failures", 0), "handbacks": d.get("handbacks", 0),
        "generation": d.get("generation"), "rerun_of": d.get("rerun_of"), "rerun_inputs": d.get("rerun_inputs"),
        "command": spec.get("command"),
        "cancelled_by": d.get("cancelled_by"), "cost_usd": res.get("cost_usd"), "moving": view.also,
        "held": d.get("held") if view.state == QUEUED else None,
        "problems": view.problems, "schedule": d.get("schedule"),
    }
