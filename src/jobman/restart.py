"""`jobman restart JOB [--with-dependents]`: the same specification again, as a new job.

The new job records what it restarts (`restart_of` in its spec and in its job_submitted event). With
--with-dependents, the jobs that ended dependency_failed because of it (and, in turn, because of
those) are submitted again too, their edges to restarted jobs re-wired to the new ids, in submission
order, so that fixing one step of a DAG and running the rest again is one command.
"""
import os

from runkit.jsonfast import loads

from . import scheduling
from .store import queries
from .errors import BadInput


def restart(selector: str, with_dependents: bool = False, environ=os.environ) -> list[dict]:
    """Submit the job (and its failed dependents) again. Returns [{"restarts", "id", "handle", "name"}]."""
    from .api import State
    from .submit import submit

    st = State(environ, create=False)
    job_id = st.resolve(selector)
    st.reconcile()
    state = queries.load_state(st.conn, job_id)
    if state["phase"] != "finished":
        raise BadInput(f"job {selector} is {state['phase']}: restart takes a finished job (jobman cancel it first, "
                       f"or jobman wait for it)")
    chosen = [job_id] + (failed_because_of(st.conn, job_id) if with_dependents else [])
    new_ids: dict[str, str] = {}
    results = []
    for old in chosen:
        spec = _spec(st.conn, old)
        deps = [(new_ids.get(edge["job"], edge["job"]), edge["condition"]) for edge in spec.pop("dependencies", [])]
        spec["restart_of"] = old
        done = submit(st.conn, st.db_file, spec, deps)
        new_ids[old] = done["id"]
        results.append({"restarts": old, "id": done["id"], "handle": done["handle"], "name": done["name"]})
    return results


def failed_because_of(conn, job_id: str) -> list[str]:
    """The jobs that ended dependency_failed because of job_id, directly or through each other, in
    submission order (a job is always submitted after what it depends on)."""
    found, frontier = {}, [job_id]
    while frontier:
        target = frontier.pop()
        outcome = queries.load_state(conn, target)["outcome"]
        for dependent, condition, submitted_at in queries.failed_dependents(conn, target):
            if dependent not in found and not scheduling.condition_holds(condition, outcome):
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
