"""Reading a job: every record it has, the one that states its truth, and finding it by id or name."""
from runkit.core.ids import hyphenated, is_uuid

from ..core import documents as d
from ..core import keys
from ..store.cas import read
from ..core.errors import BadInput, CorruptDocument, JobNotFound
from ..objectstore.base import NotFound, ObjectStore, Version
from ..core.spec import check_name

LIFECYCLE = ("queued", "running") + keys.TERMINAL_STATES
_HEX = frozenset("0123456789abcdef")


def records(store: ObjectStore, job_id: str, corrupt: list | None = None,
            states: tuple = LIFECYCLE) -> dict[str, tuple[d.Job, Version]]:
    """Every record the job has, by state (normally one; two while a move is under way).

    Read in lifecycle order (queued, running, terminal): every move writes its new record before it
    deletes the old one, so a job that moves on between two reads is found in the later state. (Which
    record wins is decided afterwards, terminal first, by documents.resolve.)

    A corrupt record raises CorruptDocument, unless `corrupt` is a list: then it is appended there and
    the job is resolved from the records that can be read (readers report it; writers must not guess).
    `states`: a tail of the lifecycle, for a caller that has just read the states before it."""
    found = {}
    for state in states:
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


def terminal_records(store: ObjectStore, job_id: str) -> dict[str, tuple[d.Job, Version]]:
    """The job's terminal records (final once written; normally none or one). CorruptDocument if one
    cannot be read: something terminal was written there, and no writer may decide on a guess."""
    found = {}
    for state in keys.TERMINAL_STATES:
        got = read(store, keys.terminal(state, job_id), job_id)
        if got is not None:
            found[state] = got
    return found


# The order a reader reads a job's records in, and after each record found, the records it reads besides before
# it stops (what `terminal` and `moving` need): the record that decides comes first, so a job that ran once costs
# a reader one GET. A completed record decides alone: it is written only by the settle of a decided outcome, so
# no running/ record beside it stands for a process that may run (one there is the end of that move, or a claim
# made on a stale read that starts nothing: neither makes the job move again).
_READ_ORDER = keys.TERMINAL_STATES + ("running", "queued")
_ALSO_READ = {"completed": (), "failed": ("running",), "cancelled": ("running",), "running": ("queued",), "queued": ()}


def _deciding_records(store: ObjectStore, job_id: str, corrupt: list) -> dict[str, tuple[d.Job, Version]]:
    """The records a reader needs, terminal first: the first record found (completed, failed, cancelled, running,
    queued), and the ones that tell whether it still moves (_ALSO_READ). A job that moves on between two reads
    (moves write their new record before deleting the old) is found in its later state, or, having left every
    state read so far for a later one, not found at all: view() then reads again."""
    found: dict[str, tuple[d.Job, Version]] = {}

    def get(state: str) -> None:
        try:
            got = read(store, keys.state_key(state, job_id), job_id)
        except CorruptDocument as e:
            corrupt.append(e)
            return
        if got is not None:
            found[state] = got

    for state in _READ_ORDER:
        get(state)
        if state in found:
            if state == d.CANCELLED and found[state][0].owner is None:
                return found  # cancelled while queued (a tombstone's record): no process of it was ever started
            for other in _ALSO_READ[state]:
                get(other)
            return found
    return found


def view(store: ObjectStore, job_id: str) -> d.JobView:
    """The job as readers show it. Corrupt records are skipped and listed in the view's `problems`; a job
    with nothing but corrupt records raises the first one's CorruptDocument."""
    for _ in range(3):  # a move can slip between reads (past every state read so far): look again
        corrupt: list[CorruptDocument] = []
        recs = _deciding_records(store, job_id, corrupt)
        v = d.resolve(job_id, {state: doc for state, (doc, _) in recs.items()})
        if v is not None:
            v.problems = [str(e) for e in corrupt]
            return v
        if corrupt:
            raise corrupt[0]
    raise JobNotFound(f"no job {job_id}: check the id with `stado status`")


MIN_PREFIX = 6  # characters of an id prefix a lookup takes (hyphens not counted), as jobman's
_PREFIX_SHOWN = 5  # candidates an ambiguous prefix names


def find(store: ObjectStore, selector: str) -> str:
    """What the user typed -> the job's id: an exact id; else a display name (the newest job that has it); else a
    schedule's name (the newest job it fired); else a unique id prefix of at least 6 characters (hyphens optional).

    A prefix costs one LIST per state directory, each starting at the prefix (list_page's start_after) and a
    handful of keys long, whatever the directory holds. An ambiguous prefix is BadInput naming the candidates."""
    if is_uuid(selector):
        return selector
    lowered = selector.lower()
    if is_uuid(lowered):
        return lowered
    named = _newest_named(store, selector)
    if named is not None:
        return named
    compact = lowered.replace("-", "")
    hexish = bool(compact) and all(c in _HEX for c in compact)
    if hexish and len(compact) >= MIN_PREFIX and len(compact) <= 32:
        matches = with_prefix(store, hyphenated(compact))
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:_PREFIX_SHOWN]) + (" ..." if len(matches) > _PREFIX_SHOWN else "")
            raise BadInput(f"job id prefix {selector!r} is ambiguous: it matches {shown}; give more characters")
        raise JobNotFound(f"no job named {selector!r} and no job id starts with it: see `stado status`")
    if hexish and len(compact) < MIN_PREFIX:
        raise JobNotFound(f"no job named {selector!r}, and an id prefix needs at least {MIN_PREFIX} characters: "
                          "see `stado status`")
    try:
        check_name(selector)
    except BadInput:
        raise JobNotFound(f"{selector!r} is neither a job id, a job name nor an id prefix: see `stado status`") from None
    raise JobNotFound(f"no job named {selector!r}: see `stado status` for names and ids")


def _newest_named(store: ObjectStore, selector: str) -> str | None:
    """The newest job with this display name, else the newest job the schedule of this name fired."""
    try:
        check_name(selector)
    except BadInput:
        return None
    ids = [e.key.rsplit("/", 1)[-1] for e in store.list(keys.name_prefix(selector))]
    for job_id in sorted((i for i in ids if is_uuid(i)), reverse=True):  # ids sort by creation time: newest first
        if has_records(store, job_id):
            return job_id
        # A name entry whose job was never written (the submit stopped between its two writes): skip it.
    return _newest_fired(store, selector)


def _newest_fired(store: ObjectStore, name: str) -> str | None:
    """The job a schedule's latest fire time made (fired by an agent that wrote no name entry for it), if any."""
    from ..store.cas import read_json
    from .schedules import fire_job_id

    try:
        found = read_json(store, keys.schedule(name))
    except CorruptDocument:
        return None  # `stado schedule list` tells about it
    if found is None:
        return None
    doc = found[0]
    try:
        job_id = fire_job_id(doc, float(doc["last_fired"]))
    except (KeyError, TypeError, ValueError):
        return None  # never fired (or a damaged schedule: `stado schedule list` tells)
    return job_id if has_records(store, job_id) else None


def with_prefix(store: ObjectStore, prefix: str, limit: int = _PREFIX_SHOWN + 1) -> list[str]:
    """Ids of the jobs whose id starts with `prefix` (hyphenated as ids are), at most `limit`, in id order."""
    found: set[str] = set()
    for state in LIFECYCLE:
        directory = keys.STATE_PREFIXES[state]
        for entry in store.list_page(directory, start_after=directory + prefix, limit=limit):
            job_id = keys.job_id_of(entry.key, directory)
            if job_id is None or not job_id.startswith(prefix):
                break  # past the prefix: keys come in order
            found.add(job_id)
    return sorted(found)[:limit]


def has_records(store: ObjectStore, job_id: str) -> bool:
    """Whether any record of the job exists (readable or not: a corrupt one is still the job's). Read in lifecycle
    order, so a job moving on is found in its later state, and twice before saying no: a job sent back to the
    queue (a retry, a requeue) between the reads of queue/ and running/ is missed by one pass."""
    for _ in range(2):
        for state in LIFECYCLE:
            try:
                store.get(keys.state_key(state, job_id))
                return True
            except NotFound:
                continue
    return False
