"""The only module that knows key names. Every other module asks here.

Layout (one backend, whatever it is, holds the same keys):

    queue/<id>.json          pending: the submission ledger
    ready/<rank>-<id>        the claim order index: a copy of each queued document, listed by priority
                             (rank = 1000 - priority, four digits) then creation time; the ledger stays queue/
    running/<id>.json        in flight: owner, instance_ref, lease; also a cancel tombstone
    completed/<id>.json      terminal: succeeded
    failed/<id>.json         terminal: unsuccessful, with a bounded error classification
    cancelled/<id>.json      terminal: the durable operator cancellation record
    status/<id>/heartbeat    the pulse written after each lease renewal
    status/<id>/output/<attempt>-<n>   redacted output of each attempt, in numbered chunks
    status/<id>/manifest.json      result manifest: artifact names, sizes, SHA-256
    status/<id>/artifacts/<name>   the artifacts themselves
    status/<id>/uploads/<name>     local files `stado submit --upload` sent as inputs (size, SHA-256 in the spec)
    status/<id>/checkpoints/...    a job's checkpoint prefix (evidence of life for the reaper)
    names/<name>/<id>        display-name index: newest id wins
    control/queue-pause.json the queue pause record (who, when, why)
    agents/<agent-id>.json   each live agent: host, slots, capabilities, last seen
    schedules/<name>.json    a cron schedule: expression, zone, spec, paused, last fire time dealt with
    submit-keys/<key>.json   `stado submit --key KEY`: the job that key submitted, its first record and the hash
                             of the request, written before the job (create-if-absent: one job per key)
"""
QUEUE = "queue/"
READY = "ready/"
PRIORITY_HIGHEST = 1000
RUNNING = "running/"
COMPLETED = "completed/"
FAILED = "failed/"
CANCELLED = "cancelled/"
STATUS = "status/"
NAMES = "names/"
AGENTS = "agents/"
SCHEDULES = "schedules/"
SUBMIT_KEYS = "submit-keys/"
# The pause record lives in the claim-order index, sorting before every job entry ('!' < '0'), so the LIST each
# claim pass makes anyway shows whether the queue is paused: no request of its own unless it is.
QUEUE_PAUSE = "ready/!pause.json"
LEGACY_QUEUE_PAUSE = "control/queue-pause.json"  # where stado kept it until 2026-12-01 (still honoured, see pause.py)

# Readers resolve several terminal records in this documented order: the first one present wins.
TERMINAL_STATES = ("completed", "failed", "cancelled")
STATE_PREFIXES = {"queued": QUEUE, "running": RUNNING, "completed": COMPLETED, "failed": FAILED,
                  "cancelled": CANCELLED}
_SUFFIX = ".json"


def state_key(state: str, job_id: str) -> str:
    return f"{STATE_PREFIXES[state]}{job_id}{_SUFFIX}"


def queued(job_id: str) -> str:
    return state_key("queued", job_id)


def running(job_id: str) -> str:
    return state_key("running", job_id)


def terminal(state: str, job_id: str) -> str:
    assert state in TERMINAL_STATES, state
    return state_key(state, job_id)


def job_id_of(key: str, prefix: str) -> str | None:
    """The id in '<prefix><id>.json', or None if the key is not shaped like a job document."""
    if not key.startswith(prefix) or not key.endswith(_SUFFIX):
        return None
    job_id = key[len(prefix):-len(_SUFFIX)]
    return job_id if job_id and "/" not in job_id else None


def status_prefix(job_id: str) -> str:
    """Everything a job leaves besides its state records: pulse, output, artifacts, checkpoints, uploads."""
    return f"{STATUS}{job_id}/"


def heartbeat(job_id: str) -> str:
    """The pulse, rewritten after every renewal attempt (the reaper reads its last_modified)."""
    return status_prefix(job_id) + "heartbeat"


def output_prefix(job_id: str) -> str:
    """The job's output chunks, every attempt's (output_chunk)."""
    return status_prefix(job_id) + "output/"


def output_chunk(job_id: str, seq: int, attempt: int = 1) -> str:
    # Zero-padded so that listing order is attempt order, then chunk order. Every attempt keeps its own.
    return f"{output_prefix(job_id)}{attempt:04d}-{seq:08d}"


def chunk_seq(key: str) -> tuple[int, int] | None:
    """(attempt, chunk number) of an output chunk's key (a bare number: attempt 1, as stado wrote before)."""
    tail = key.rsplit("/", 1)[-1]
    attempt, sep, seq = tail.partition("-")
    if not sep:
        return (1, int(tail)) if tail.isdigit() else None
    return (int(attempt), int(seq)) if attempt.isdigit() and seq.isdigit() else None


def manifest(job_id: str) -> str:
    """The result manifest: the job's artifacts with their sizes and hashes, written after them."""
    return status_prefix(job_id) + "manifest.json"


def artifact(job_id: str, name: str) -> str:
    """One file the job produced, as the manifest lists it."""
    return f"{status_prefix(job_id)}artifacts/{name}"


def upload(job_id: str, name: str) -> str:
    """A local file `stado submit --upload` sent as an input of job_id (or of every job of its batch)."""
    return f"{status_prefix(job_id)}uploads/{name}"


def checkpoint_prefix(job_id: str) -> str:
    """Blobs the job saves while it runs (`stado checkpoint put`); a newer one keeps it alive for the reaper."""
    return status_prefix(job_id) + "checkpoints/"


def name_prefix(name: str) -> str:
    """Every job ever submitted under a name, an entry each holding its id (ids sort by creation: newest last)."""
    return f"{NAMES}{name}/"


def name_entry(name: str, job_id: str) -> str:
    """One job's entry under its name (name_prefix)."""
    return name_prefix(name) + job_id


def agent(agent_id: str) -> str:
    """An agent's record: its host, slots and resources, rewritten while it lives."""
    return f"{AGENTS}{agent_id}.json"


def schedule(name: str) -> str:
    """A cron schedule: its zone, its job spec, whether it is paused, and `last_fired`."""
    return f"{SCHEDULES}{name}.json"


def schedule_name(key: str) -> str:
    """The name a schedule's key stands for (the inverse of schedule())."""
    name = key[len(SCHEDULES):] if key.startswith(SCHEDULES) else key
    return name[:-len(".json")] if name.endswith(".json") else name


def ready(priority: int, job_id: str) -> str:
    """The job's entry in the claim-order index: listing ready/ gives the highest priority first, then the
    oldest (ids sort by creation time)."""
    return f"{READY}{PRIORITY_HIGHEST - int(priority):04d}-{job_id}"


def job_id_of_ready(key: str) -> str | None:
    if not key.startswith(READY):
        return None
    rank, sep, job_id = key[len(READY):].partition("-")
    return job_id if sep and rank.isdigit() and len(rank) == 4 and "/" not in job_id else None


def submit_key(key: str) -> str:
    """The record of an idempotency key (`stado submit --key`): which job it submitted, with that job's first
    record, so that a later run with the same key finishes a submission stopped between the two writes."""
    return f"{SUBMIT_KEYS}{key}{_SUFFIX}"
