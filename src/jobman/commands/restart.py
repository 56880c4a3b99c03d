"""`jobman restart [JOB...] [--state S] [--group G] [--name GLOB] [--with-dependents] [--include-started]`: the same
specifications again, as new jobs.

Every job chosen (the JOBs named, and the finished jobs that the selectors match and nobody has restarted yet) is
submitted again as a new job, in submission order, and the dependency edges among the chosen jobs are re-wired to
the new ids: an edge to a job that is not restarted keeps its old job. So a pipeline lost at a reboot (every
waiting job found `lost` once its lease ran out) comes back whole with one command, `jobman restart --state lost`.
A lost job that had started may have done part of its work: a selector takes one only with --include-started
(a JOB named is taken as asked). With --with-dependents, the jobs that never ran because of a chosen one (ended
dependency_failed, or lost before they started), and in turn because of those, come too.

Each new job records what it restarts (`restart_of` in its spec and in its job_submitted event). They are
submitted as a batch is (jobman.handoff.submit.submit_batch): each with its own handoff, a few commits at a time.
"""
import os

from runkit.core.jsonfast import loads

from ..core import scheduling
from ..store import queries
from ..core.errors import BadInput


def restart(selector: str, with_dependents: bool = False, environ=os.environ) -> list[dict]:
    """Submit one job (and its failed dependents) again (the dashboard's restart). Returns
    [{"restarts", "id", "handle", "name"}]; a job that could not be submitted raises BadInput."""
    done = restart_jobs([selector], with_dependents=with_dependents, environ=environ)
    if done["failures"]:
        raise BadInput(done["failures"][0][2])
    return done["jobs"]


# What restart takes of the jobs a selection matches: the finished ones nobody has restarted yet.
RESTARTABLE = (f"s.phase = 'finished' AND NOT {queries.RESTARTED}", "finished job not restarted yet")


def restart_jobs(selectors: list[str], *, selection=None, with_dependents: bool = False,
                 include_started: bool = False, environ=os.environ, emit=None) -> dict:
    """Submit the chosen jobs again (see the module). emit(result): each job as it is handed over, in order.
    Returns {"jobs": [{"restarts", "id", "handle", "name"}], "chosen": n, "left_out": lost jobs that had started,
    left out, "depend_on_lost": restarted jobs with an edge to a lost job that is not restarted, "failures",
    "stopped_at", "interrupted" (these three as jobman.handoff.submit.submit_batch says, their indexes into "handles": the
    old jobs' handles in the order they were submitted)}."""
    from runkit.core.ids import uuid7

    from .api import State
    from ..handoff.submit import submit_batch

    st = State(environ, create=False)
    named = [st.resolve(s) for s in selectors]
    st.reconcile()
    for selector, job_id in zip(selectors, named):
        state = queries.load_state(st.conn, job_id)
        if state["phase"] != "finished":
            raise BadInput(f"job {selector} is {state['phase']}: restart takes a finished job (jobman cancel it "
                           f"first, or jobman wait for it)")
    chosen = dict.fromkeys(named)
    left_out = 0
    for job_id in st.choose([], selection, RESTARTABLE) if selection else ():
        state = queries.load_state(st.conn, job_id)
        if state["outcome"] == "lost" and state["attempts"] and not include_started:
            left_out += 1  # it may have done part of its work: only when asked
            continue
        chosen.setdefault(job_id)
    if with_dependents:
        for job_id in list(chosen):
            for dependent in failed_because_of(st.conn, job_id):
                chosen.setdefault(dependent)
    order = queries.submitted_order(st.conn, chosen)  # what a job depends on was submitted before it
    new_ids = {old: uuid7() for old in order}
    items, depend_on_lost = [], 0
    for old in order:
        spec = _spec(st.conn, old)
        deps = []
        for edge in spec.pop("dependencies", []):
            if edge["job"] not in new_ids and _outcome(st.conn, edge["job"]) == "lost":
                depend_on_lost += 1
            deps.append((new_ids.get(edge["job"], edge["job"]), edge["condition"]))
        spec["restart_of"] = old
        items.append((spec, deps, new_ids[old]))
    results: list[dict] = []

    def handed_over(result: dict) -> None:
        old = order[result["index"]]
        view = {"restarts": old, "id": result["id"], "handle": result["handle"], "name": result["name"]}
        results.append(view)
        if emit is not None:
            emit(view)

    outcome = submit_batch(st.conn, st.db_file, items, handed_over) if items else \
        {"failures": [], "stopped_at": None, "interrupted": False}
    return {"jobs": results, "chosen": len(order), "left_out": left_out, "depend_on_lost": depend_on_lost,
            "failures": outcome["failures"], "stopped_at": outcome["stopped_at"],
            "interrupted": outcome["interrupted"], "handles": [queries.handle_of(st.conn, old) for old in order]}


def _outcome(conn, job_id: str) -> str | None:
    state = queries.load_state(conn, job_id)
    return None if state is None else state["outcome"]


def failed_because_of(conn, job_id: str) -> list[str]:
    """The jobs that never ran because of job_id (ended dependency_failed: its outcome broke their condition; or
    lost before they started, its supervisor gone while it waited, as at a reboot), directly or through each
    other, in submission order (a job is always submitted after what it depends on)."""
    found, frontier = {}, [job_id]
    while frontier:
        target = frontier.pop()
        outcome = queries.load_state(conn, target)["outcome"]
        for dependent, condition, submitted_at, their_outcome in queries.failed_dependents(conn, target):
            if dependent in found:
                continue
            if their_outcome == "lost" or not scheduling.condition_holds(condition, outcome):
                found[dependent] = submitted_at
                frontier.append(dependent)
    return sorted(found, key=lambda job: (found[job], job))


def _spec(conn, job_id: str) -> dict:
    try:
        spec = loads(queries.spec_json(conn, job_id))
        _ = spec["argv"], spec["env"]  # a KeyError here: the stored spec lacks them
    except (ValueError, KeyError, TypeError) as e:
        raise BadInput(f"job {job_id} cannot be restarted: its stored specification is unreadable ({e})") from None
    return spec
