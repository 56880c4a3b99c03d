"""Which jobs a command that takes several acts on: the ids and names given (each found as `find` finds one), or,
with --state and --name GLOB, the jobs that match, read without writing anything.

Filters narrow: with jobs given, --state and --name keep those of them that match; without, they choose among every
job (a --name glob from the display-name index, one LIST of names/; a --state alone from that state's directory).
A job is judged by the state its records resolve to when read, so a job moving meanwhile is judged where it went."""
from fnmatch import fnmatchcase

from runkit.core.ids import is_uuid

from ..core import keys
from ..core.errors import BadInput, CorruptDocument, JobNotFound
from ..objectstore.base import ObjectStore
from .lookup import LIFECYCLE, find, view

STATES = LIFECYCLE  # what --state takes: queued, running, completed, failed, cancelled


def check_filters(state: str | None, name: str | None) -> None:
    if state is not None and state not in STATES:
        raise BadInput(f"bad --state {state!r}: use one of {', '.join(STATES)}")
    if name is not None and not name.strip():
        raise BadInput("--name takes a glob of job names, e.g. --name 'sweep-*'")


def described(selectors: list[str], state: str | None, name: str | None) -> str:
    """The selection in words, for the line that says it matched nothing."""
    words = []
    if selectors:
        words.append(", ".join(selectors))
    if state is not None:
        words.append(f"--state {state}")
    if name is not None:
        words.append(f"--name {name!r}")
    return " ".join(words)


def select(store: ObjectStore, selectors: list[str], *, state: str | None = None, name: str | None = None) -> list[str]:
    """The ids chosen, in the order given (ids sort by creation when found by a filter), each once. A selector that
    names no job raises JobNotFound (an ambiguous prefix BadInput) before anything is chosen; filters that keep no
    job raise JobNotFound saying what matched nothing."""
    check_filters(state, name)
    if not selectors and state is None and name is None:
        raise BadInput("give the jobs (ids or names), or choose them with --state STATE or --name GLOB")
    ids = list(dict.fromkeys(find(store, s) for s in selectors))
    if state is None and name is None:
        return ids
    candidates = ids if selectors else _candidates(store, state, name)
    chosen = [job_id for job_id in candidates if _matches(store, job_id, state, name)]
    if not chosen:
        raise JobNotFound(f"no job matches {described(selectors, state, name)}: see `stado status`")
    return chosen


def _candidates(store: ObjectStore, state: str | None, name: str | None) -> list[str]:
    found: set[str] = set()
    if name is not None:
        for entry in store.list(keys.NAMES):
            job_name, _, job_id = entry.key[len(keys.NAMES):].partition("/")
            if is_uuid(job_id) and fnmatchcase(job_name, name):
                found.add(job_id)
        return sorted(found)
    assert state is not None
    directory = keys.STATE_PREFIXES[state]
    for entry in store.list(directory):
        job_id = keys.job_id_of(entry.key, directory)
        if job_id is not None and is_uuid(job_id):
            found.add(job_id)
    return sorted(found)


def _matches(store: ObjectStore, job_id: str, state: str | None, name: str | None) -> bool:
    try:
        v = view(store, job_id)
    except (JobNotFound, CorruptDocument):
        return False  # a name entry whose job was never written, or one only `stado repair` can read
    if state is not None and v.state != state:
        return False
    return name is None or fnmatchcase(v.doc.spec.name or "", name)


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """id -> its shortest prefix (at least `least` characters) that no other id of `ids` shares: what a line shows
    of a job or an agent among others (a prefix of 6+ hex digits finds a job, as an id does)."""
    shown = {}
    for one in ids:
        size = least
        while size < len(one) and any(other != one and other.startswith(one[:size]) for other in ids):
            size += 1
        if one[size - 1:size] == "-":
            size += 1  # never end on a hyphen
        shown[one] = one[:size]
    return shown


def job_label(data: dict, short: str | None = None) -> str:
    """'name (short id)' of a job's status_json, or its short id alone."""
    job = short or data["id"]
    return f"{data['name']} ({job})" if data.get("name") else job

