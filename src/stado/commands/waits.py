"""Why a queued job is not claimed yet, as far as its own record and the queue tell (before the agents' room is
looked at, overview.waiting_now): the queue paused, the job held, its retry delay, a dependency or an input's
producer that has not ended. What `stado status ID`, `stado status`, `stado job watch` and their `--json` show."""
from runkit.core.printable import printable

from ..core import documents as d
from ..core import keys
from ..core.dependencies import FLAGS, edges, holds
from ..core.errors import CorruptDocument, JobNotFound
from ..objectstore.base import ObjectStore


def queued_reason(doc: d.Job, state_of, *, paused: dict | None, now: float) -> str | None:
    """The first reason the queued job `doc` waits, in words, or None (then it waits, if at all, for an agent with
    room). `state_of(job id)`: the state that job resolved to (queued, running or terminal), None when it has no
    record; `paused`: the pause record, or None; `now`: the store's time as the caller reads it."""
    if paused:
        why = f" ({printable(str(paused['reason']))})" if paused.get("reason") else ""
        return (f"the queue is paused by {paused.get('by')} at {paused.get('at')}{why}: agents claim nothing until "
                "`stado queue resume`")
    if doc.held:
        return f"held by {doc.held.get('by')}: `stado job release {doc.id}` lets it be claimed"
    wait = d.retry_waits(doc, now)
    if wait > 0:
        return (f"retry delay: attempt {d.attempt_of(doc)} may be claimed from {doc.retry_at} (in {wait:.0f} s), "
                f"after {doc.failures} failed attempt(s)")
    for condition, job in edges(doc.spec):
        state = state_of(job)
        if state is None:
            return f"dependency {job} ({FLAGS[condition]}) has no record (removed?): it waits for good"
        if state not in keys.TERMINAL_STATES:
            return f"dependency {job} ({FLAGS[condition]}) has not ended: it is {state}"
        if not holds(condition, state):
            return (f"dependency {job} ({FLAGS[condition]}) ended {state}: the next agent to look ends this job "
                    "dependency_failed")
    for ref in doc.spec.inputs:
        if ref.get("upload"):
            continue
        state = state_of(ref.get("job"))
        if state is not None and state not in keys.TERMINAL_STATES:
            return f"input {ref.get('job')}:{printable(str(ref.get('name')))}: its job has not ended: it is {state}"
    return None


def state_reader(store: ObjectStore):
    """state_of for queued_reason, read from the store (a few GETs per job depended on: one job's view)."""
    from ..queue.lookup import view

    def state_of(job_id: str) -> str | None:
        try:
            return view(store, job_id).state
        except JobNotFound:
            return None
        except CorruptDocument:
            return "corrupt (`stado status` lists it under problems)"
    return state_of
