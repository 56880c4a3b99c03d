"""A job document as a typed view (Document): the state and phase names, Spec and Job, encoding and decoding with every
field checked, and the next write of a document (next_doc)."""
import time

from runkit.core import jsonfast

from ..errors import CorruptDocument
from ..keys import TERMINAL_STATES

SCHEMA = 1
QUEUED, RUNNING, COMPLETED, FAILED, CANCELLED = "queued", "running", "completed", "failed", "cancelled"
STATES = (QUEUED, RUNNING) + TERMINAL_STATES
# A running document's phase: its process runs; its outcome is decided and being recorded; it is being cancelled.
RUNNING_PHASE, FINISHING, CANCELLING = "running", "finishing", "cancelling"
PHASES = (RUNNING_PHASE, FINISHING, CANCELLING)
# Outcomes, and the bounded set of error classes a failed record may carry.
OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled", "dependency_failed")
ERROR_CLASSES = ("exit_code", "signal", "timeout", "cost_cap", "spawn_error", "input_unavailable", "dependency",
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


class Document:
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
        if isinstance(other, Document):
            return self.raw == other.raw
        return self.raw == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a document is a value that changes with every write

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"


def _field(name: str, default=None) -> property:
    return property(lambda self: self.raw.get(name, default), doc=f"the stored `{name}`")


class Spec(Document):
    """What the job runs and what it needs (stado.core.spec.JobSpec is how a submission builds it)."""

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
    def env(self) -> tuple[tuple[str, str], ...]:
        """The variables `stado submit --env` set for the job, as (name, value) pairs sorted by name."""
        env = self.raw.get("env") or {}
        return tuple(sorted((k, v) for k, v in env.items() if isinstance(k, str) and isinstance(v, str)))

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

    # Dependencies (job ids, by condition) and the retry policy: absent from a job submitted without them.
    @property
    def after_success(self) -> list[str]:
        return self.raw.get("after_success") or []

    @property
    def after_failure(self) -> list[str]:
        return self.raw.get("after_failure") or []

    @property
    def after(self) -> list[str]:
        return self.raw.get("after") or []

    @property
    def retryable_exit_codes(self) -> list[int]:
        return self.raw.get("retryable_exit_codes") or []

    @property
    def retry_delay(self) -> float:
        return self.raw.get("retry_delay") or 0.0

    @property
    def retry_backoff(self) -> float:
        return self.raw.get("retry_backoff") or 1.0


class Job(Document):
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
    retry_at: str | None = _field("retry_at")  # type: ignore[assignment]  # a retry's entry: not claimed before

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


def encode(doc: "Document | dict") -> bytes:
    return jsonfast.dumps(doc.raw if isinstance(doc, Document) else doc, sort_keys=True).encode()


def decode(key: str, data: bytes, job_id: str | None = None) -> Job:
    """A stored job document, or CorruptDocument naming what is wrong with it."""
    return Job(_checked(key, data, job_id))


def _checked(key: str, data: bytes, job_id: str | None) -> dict:
    try:
        doc = jsonfast.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        from ..brief import brief

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
           "held": _OBJ, "owner_process": _OBJ, "retry_at": _TEXT, "dependency": _OBJ}
_SPEC = {"name": _TEXT, "priority": _INT, "capabilities": _LIST, "cores": _INT, "memory": (int, type(None)),
         "accelerators": _INT, "providers": _LIST, "spot": (str,), "cost_cap": _NUM, "timeout": _NUM,
         "retries": _INT, "inputs": _LIST, "cost_cap_advisory": (bool,), "env": _OBJ, "after_success": _LIST,
         "after_failure": _LIST, "after": _LIST, "retryable_exit_codes": _LIST, "retry_delay": _NUM,
         "retry_backoff": _NUM}


def _wrong_field(doc: dict) -> str | None:
    """The first field whose value has a type no reader expects (valid JSON written by hand, or by a
    foreign writer), or None."""
    for fields, where, prefix in ((_FIELDS, doc, ""), (_SPEC, doc["spec"], "spec.")):
        for name, kinds in fields.items():
            if name in where and not isinstance(where[name], kinds):
                return prefix + name
    spec = doc["spec"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in (spec.get("env") or {}).items()):
        return "spec.env"
    for name in ("capabilities", "providers", "after_success", "after_failure", "after"):
        if not all(isinstance(x, str) for x in spec.get(name) or ()):
            return f"spec.{name}"
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in spec.get("retryable_exit_codes") or ()):
        return "spec.retryable_exit_codes"
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


def raw_of(doc: "Document | dict") -> dict:
    return doc.raw if isinstance(doc, Document) else doc


def next_doc(doc: "Job | dict", *, state: str, now: float, nonce: str, writer: str | None, drop: tuple = (),
          **fields) -> Job:
    """The document's next write: `fields` set, the attempt's `drop`ped, a new generation, nonce and writer."""
    new = dict(raw_of(doc))
    new.update(fields)
    new.update(state=state, generation=new["generation"] + 1, nonce=nonce, written_at=iso(now), written_by=writer)
    for name in drop:
        new.pop(name, None)
    return Job(new)


