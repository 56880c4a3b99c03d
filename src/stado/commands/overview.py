"""What `stado status` shows: every job by state, the pause record, live agents, and problems
(corrupt or unexpected documents), read without writing anything."""
import json
from dataclasses import dataclass, field

from runkit.core.ids import is_uuid

from ..core import documents as d
from ..core import keys
from ..core.errors import CorruptDocument, JobNotFound
from ..core.admission import NO_AGENT, is_live, silent_for, unschedulable, waiting_reason
from ..store.cas import read
from ..queue.pause import pause_record
from ..objectstore.base import NotFound, ObjectStore


@dataclass
class Overview:
    jobs: list[d.JobView] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # jobs by the state they resolved to
    corrupt: int = 0  # jobs with records but none readable (each one listed under problems)
    hidden: int = 0  # finished jobs beyond the limit, counted but not read
    problems: list[str] = field(default_factory=list)
    promise_passed: dict[str, float] = field(default_factory=dict)  # running job id -> seconds since its promise
    paused: dict | None = None
    agents: list[dict] = field(default_factory=list)  # live agents' records
    stale_agents: list[dict] = field(default_factory=list)  # records of agents silent for too long (dead?)
    unschedulable: dict[str, str] = field(default_factory=dict)  # queued job id -> why no live agent fits
    waiting: dict[str, str] = field(default_factory=dict)  # queued job id -> why it waits (agents full, none live)
    no_agent: bool = False  # jobs are queued and no live agent serves the queue
    gone_agents: list[dict] = field(default_factory=list)  # records of agents silent longer than the agents window
    agents_window: float | None = None  # seconds: agents silent longer are listed under gone_agents (None: never)
    show_gone: bool = False  # whether `stado status` lists gone_agents (--all-agents) or only counts them
    selected: str | None = None  # the filters (--state, --name) the jobs were chosen by, in words
    matched: int = 0  # jobs the filters kept


AGENTS_WINDOW = 3600.0  # seconds an agent silent that long stays listed (as stale) before it counts as gone


def overview(store: ObjectStore, *, finished_limit: int | None = 20, now: float,
             state: str | None = None, name: str | None = None, all_agents: bool = False,
             agents_window: float | None = AGENTS_WINDOW) -> Overview:
    """One LIST per prefix, then one GET per job shown (the record that states its truth). `now` judges
    whether agents' records are recent enough to count them live. `state` and `name` (a glob) keep the jobs that
    match (queue.selection's filters; every finished job is read for them when they may choose one); agents silent
    longer than `agents_window` are counted as gone (listed with `all_agents`)."""

    from ..queue.selection import check_filters, described

    check_filters(state, name)
    out = Overview(agents_window=agents_window, show_gone=all_agents)
    if state in ("queued", "running"):
        finished_limit = 0  # no finished job can match: counted from the listing, not read
    elif state is not None or name is not None:
        finished_limit = None
    present, by_state = listed(store, out)
    # Finished jobs beyond the limit are counted from the listing (they are not read); every other job is
    # counted once it resolved, so a job whose only record is corrupt is counted apart, not as queued.
    counts: dict[str, int] = {}
    finished = sorted((i for s in keys.TERMINAL_STATES for i in by_state.get(s, [])), reverse=True)
    shown_finished = set(finished if finished_limit is None else finished[:finished_limit])
    out.hidden = len(finished) - len(shown_finished)
    for job_id in sorted(present):
        states = present[job_id]
        if states[0] in keys.TERMINAL_STATES and job_id not in shown_finished:
            counts[states[0]] = counts.get(states[0], 0) + 1
            continue
        met = len(out.problems)
        view = d.resolve(job_id, job_records(store, job_id, states, out))
        corrupt = len(out.problems) > met  # records, none readable: each is listed under problems
        if view is not None:
            view.also = [s for s in states if s != view.state]
        else:
            # Every record listed was gone (or unreadable) when read: the job may have moved on meanwhile (a move
            # writes its new record before it deletes the old one). Read it again, terminal first, as any reader
            # of one job does.
            view, damaged = _read_again(store, job_id, states, out)
            corrupt = corrupt or damaged
        if view is not None:
            out.jobs.append(view)
            counts[view.state] = counts.get(view.state, 0) + 1
        elif corrupt:
            out.corrupt += 1
    out.counts = counts
    out.paused = pause_record(store)
    agent_records(store, out, now)
    _notes(out, now, lambda job_id: present[job_id][0] if present.get(job_id) else None)
    if state is not None or name is not None:
        _keep(out, state, name)
        out.selected = described([], state, name)
    return out


def _keep(out: Overview, state: str | None, name: str | None) -> None:
    """Only the jobs the filters match (after the notes: why a job waits depends on every running job)."""
    from fnmatch import fnmatchcase

    out.jobs = [v for v in out.jobs if (state is None or v.state == state)
                and (name is None or fnmatchcase(v.doc.spec.name or "", name))]
    kept = {v.id for v in out.jobs}
    for notes in (out.unschedulable, out.waiting, out.promise_passed):
        for job_id in [j for j in notes if j not in kept]:
            del notes[job_id]
    out.no_agent = out.no_agent and any(v.state == "queued" for v in out.jobs)
    out.matched = len(out.jobs)


def listed(store: ObjectStore, out: Overview) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(job id -> the states it has records in, terminal first; state -> the ids whose truth it holds), from one
    LIST per prefix (`stado status` and the dashboard read this way)."""
    present = _listed(store, out)
    by_state: dict[str, list[str]] = {}
    for job_id, states in present.items():
        by_state.setdefault(states[0], []).append(job_id)
    return present, by_state


def _listed(store: ObjectStore, out: Overview) -> dict[str, list[str]]:
    """job id -> the states it has records in, terminal first (the documented order readers resolve in)."""
    present: dict[str, list[str]] = {}
    # Listed in lifecycle order, so a job that moves on between two listings (new record first, old one
    # deleted after) is seen in the later state rather than in neither. running/ (a few keys: one per busy slot)
    # is listed before queue/ as well as after it: a job that moves back to the queue (a retry, a requeue) while
    # queue/ is listed is in running/ before it and in queue/ after, and one claimed while queue/ is listed is in
    # running/ after it; only a job moving twice while queue/ is listed could be missed, and it is then in the
    # next look.
    for state in ("running", "queued", "running") + keys.TERMINAL_STATES:
        prefix = keys.STATE_PREFIXES[state]
        for entry in store.list(prefix):
            job_id = keys.job_id_of(entry.key, prefix)
            if job_id is None or not is_uuid(job_id):
                problem = f"{entry.key}: unexpected key under {prefix}: not a job document; ignored"
                if problem not in out.problems:
                    out.problems.append(problem)
                continue
            states = present.setdefault(job_id, [])
            if state not in states:
                states.append(state)
    resolution = keys.TERMINAL_STATES + ("running", "queued")
    for states in present.values():
        states.sort(key=resolution.index)
    return present


def job_records(store: ObjectStore, job_id: str, states: list[str], out: Overview) -> dict[str, d.Job]:
    """The records to resolve the job from: the first readable one states its truth; after a terminal one,
    running/ (if listed) tells whether the job still moves (a cancelled job whose processes are being stopped)."""
    records, first = {}, None
    for state in states:
        if first is not None and not (state == "running" and first in keys.TERMINAL_STATES):
            continue
        try:
            found = read(store, keys.state_key(state, job_id), job_id)
        except CorruptDocument as e:
            out.problems.append(f"{e}: agents skip it; `stado repair {job_id}` clears it")
            continue
        if found is not None:
            records[state] = found[0]
            first = first or state
    return records


def _read_again(store: ObjectStore, job_id: str, listed_as: list[str], out: Overview) -> tuple[d.JobView | None, bool]:
    """A job whose listed records were all gone when read: (its view now, False) (lookup.view: terminal first, read
    again while it moves), or (None, whether it is corrupt) with a problem saying why: a corrupt record, or no
    record left, which no move of stado's makes (every move writes its new record before deleting the old)."""
    from ..queue.lookup import view

    try:
        return view(store, job_id), False
    except CorruptDocument as e:
        problem = f"{e}: agents skip it; `stado repair {job_id}` clears it"
        if problem not in out.problems:  # the same record, met by the first read too
            out.problems.append(problem)
        return None, True
    except JobNotFound:
        out.problems.append(f"{job_id}: listed under {', '.join(keys.STATE_PREFIXES[s] for s in listed_as)} but no "
                            "record of it was left to read (removed by hand?)")
        return None, False


def agent_records(store: ObjectStore, out: Overview, now: float) -> None:
    for entry in store.list(keys.AGENTS):
        try:
            record = json.loads(store.get(entry.key).data)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            if is_live(record, now):
                out.agents.append(record)
            else:
                silent = silent_for(record, now)
                stale = dict(record, silent_for=None if silent is None else round(silent, 1))
                gone = out.agents_window is not None and (silent is None or silent > out.agents_window)
                (out.gone_agents if gone else out.stale_agents).append(stale)
        except (ValueError, NotFound):  # an agent record is advisory: a bad one is reported, never fatal
            out.problems.append(f"{entry.key}: unreadable agent record")


def _notes(out: Overview, now: float, state_of) -> None:
    """What `stado status` says beside a job: a running one's passed promise, a queued one no agent can run, or why
    a queued one waits (its retry delay, a dependency or an input's producer, from the listing's states: no read;
    the pause is said once, above the table)."""
    from .waits import queued_reason

    for view in out.jobs:
        if view.state == "running" and d.process_may_run(view.doc):
            try:
                promise = d.parse_iso(view.doc.lease_expires_at)
            except (TypeError, ValueError):
                promise = None
            if promise is not None and now > promise:
                out.promise_passed[view.id] = now - promise  # until it is reaped or speaks again
    held = held_by_agent(view for view in out.jobs if view.state == "running")
    for view in out.jobs:
        if view.state == "queued":
            reason = unschedulable(view.doc.spec, out.agents, now)
            if reason:
                out.unschedulable[view.id] = reason
                continue
            waits = queued_reason(view.doc, state_of, paused=None, now=now) or waiting_reason(
                view.doc.spec, out.agents, held, now)
            if waits == NO_AGENT:
                out.no_agent = True
            elif waits:
                out.waiting[view.id] = waits
    for record in out.agents:  # slot use and last sign of life as the running records tell them, not the record's
        mine = held.get(str(record.get("agent")), [])
        record["running_now"] = len(mine)
        record["seen_ago"] = seen_ago(record, [v for v in out.jobs if v.state == "running"], now)


def held_by_agent(running) -> dict[str, list]:
    """Agent id -> the specs of the jobs its running records name it the owner of."""
    held: dict[str, list] = {}
    for view in running:
        if view.doc.owner and d.process_may_run(view.doc):
            held.setdefault(str(view.doc.owner), []).append(view.doc.spec)
    return held


def seen_ago(record: dict, running, now: float) -> float | None:
    """Seconds since the agent last spoke: its record's last_seen, or a renewal of a job it runs (every poll), the
    later."""
    silent = silent_for(record, now)
    for view in running:
        if view.doc.owner == record.get("agent"):
            try:
                written = d.parse_iso(view.doc.written_at)
            except (TypeError, ValueError):
                continue
            if written is not None and (silent is None or now - written < silent):
                silent = now - written
    return None if silent is None else max(0.0, silent)


def job_statuses(store: ObjectStore, selectors: list[str], *, state: str | None, name: str | None,
                 now: float) -> list[dict]:
    """`stado status JOB...`: each chosen job's status_json, its spec (secret-looking env values masked), its env,
    and, while it is queued, why it waits."""
    from ..core.documents import status_json
    from ..core.spec import shown_spec
    from ..queue.lookup import view
    from ..queue.selection import select

    found = []
    for job_id in select(store, selectors, state=state, name=name):
        v = view(store, job_id)
        data = dict(status_json(v), spec=shown_spec(v.doc.spec.raw))
        data["env"] = data["spec"].get("env")
        if v.state == "queued":
            data["waiting"] = why_queued(store, v.doc, now)
        found.append(data)
    return found


def waiting_now(store: ObjectStore, spec, now: float) -> str | None:
    """Why a queued job waits (admission.waiting_reason), read for one job: the agents' records, and the running
    records (one LIST each, a GET per record). None: an agent has room, or could not be told."""
    out = Overview()
    agent_records(store, out, now)
    for entry in store.list(keys.RUNNING):
        job_id = keys.job_id_of(entry.key, keys.RUNNING)
        if job_id is None:
            continue
        try:
            found = read(store, entry.key, job_id)
        except CorruptDocument:
            continue
        if found is not None:
            out.jobs.append(d.JobView(job_id, d.RUNNING, found[0]))
    return waiting_reason(spec, out.agents, held_by_agent(out.jobs), now)


def why_queued(store: ObjectStore, doc: d.Job, now: float) -> str | None:
    """Why a queued job waits, read for one job: the pause, its hold, its retry delay, its dependencies and inputs'
    producers (waits.queued_reason: a read of the pause record and a view of each job it names), else the agents'
    room (waiting_now). None: an agent has room for it now."""
    from ..queue.pause import pause_record
    from .waits import queued_reason, state_reader

    return (queued_reason(doc, state_reader(store), paused=pause_record(store), now=now)
            or waiting_now(store, doc.spec, now))


def output_since(store: ObjectStore, job_id: str, after: tuple[int, int]) -> list[tuple[tuple[int, int], bytes]]:
    """Output chunks after `after` ((attempt, chunk number)), in order."""
    chunks = []
    for entry in store.list(keys.output_prefix(job_id)):
        seq = keys.chunk_seq(entry.key)
        if seq is None or seq <= after:
            continue
        try:
            chunks.append((seq, store.get(entry.key).data))
        except NotFound:
            continue
    return sorted(chunks)
