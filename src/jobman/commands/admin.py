"""Administration: concurrency groups (set, list, rm) and prune, one function per command as in jobman.commands.api."""
import os
import time

from runkit.system import proc

from ..handoff import doorbell
from .api import State
from ..core.errors import BadInput, NotFound
from ..store import database, groups, pruning, queries, transitions

MAX_GROUP_LIMIT = 1_000_000  # slots of one group; more is a typo (and SQLite's INTEGER has a bound)


def group_set(name: str, limit: int, environ=os.environ) -> dict:
    from ..handoff.spec import check_group_name

    check_group_name(name)
    if not 0 <= limit <= MAX_GROUP_LIMIT:
        raise BadInput(f"bad limit {limit}: use 0 (paused) up to {MAX_GROUP_LIMIT}")
    st = State(environ)
    transitions.set_group_limit(st.conn, name, limit)
    # Waiting jobs see a new limit without resubmission: wake those that may now start.
    doorbell.ring_all(st.home, queries.able_waiters(st.conn, name, queries.free_slots(st.conn, name), proc.verify))
    return group_list(environ, only=name)[0]


def group_list(environ=os.environ, only: str | None = None) -> list[dict]:
    st = State(environ, create=False, reading=True)
    if st.conn is None:  # nothing submitted yet: the default group, as the first submission will create it
        if only not in (None, database.DEFAULT_GROUP):
            return []
        return [{"name": database.DEFAULT_GROUP, "limit": database.default_group_limit(), "paused": False,
                 "running": 0, "waiting": 0}]
    st.reconcile()
    rows = queries.groups(st.conn, only)
    return [{"name": r["name"], "limit": r["slot_limit"], "paused": r["paused_at"] is not None,
             "running": r["running"], "waiting": r["waiting"]} for r in rows]


def group_pause(name: str, paused: bool, now: float, environ=os.environ) -> dict:
    """Pause a group (it starts no new job; running ones go on; its limit is kept) or resume it, and wake the
    waiters a resumed group has room for. {name, limit, paused, running, waiting, changed}."""
    st = State(environ, create=False)
    changed = None if st.conn is None else groups.set_paused(st.conn, name, paused, now)
    if changed is None:
        raise NotFound(f"no group {name!r}: see jobman group list")
    if not paused:
        doorbell.ring_all(st.home, queries.able_waiters(st.conn, name, queries.free_slots(st.conn, name), proc.verify))
    return {**group_list(environ, only=name)[0], "changed": changed}


def group_remove(name: str, environ=os.environ) -> None:
    st = State(environ, create=False)
    if name == database.DEFAULT_GROUP:
        raise BadInput(f"the {database.DEFAULT_GROUP} group cannot be removed (jobman group set {name} --limit 0 pauses it)")
    if st.conn is None or not transitions.remove_group(st.conn, name):
        jobs = 0 if st.conn is None else queries.jobs_in_group(st.conn, name)
        if not jobs:
            raise NotFound(f"no group {name!r}: see jobman group list")
        raise BadInput(f"group {name!r} still has {jobs} job(s), finished ones included; jobman prune removes "
                       f"finished jobs, jobman cancel stops the others")


def prune(environ=os.environ, older_than: float = 0.0, only_succeeded: bool = False,
          jobs: list[str] | None = None, selection=None) -> list[dict]:
    """Remove finished jobs (and their logs) that finished more than `older_than` seconds ago (only those
    that succeeded, if asked): the `jobs` named (all of them or none) and those the selection matches, or with
    neither every one. Never an unfinished job, nor one an unfinished job depends on, nor a lost job whose target
    still holds a slot: a selection leaves those out. Returns [{"id", "handle"}] of the jobs removed."""
    import shutil

    st = State(environ, create=False)
    if st.conn is None:
        if jobs or selection:
            st.choose(jobs or [], selection)
        return []
    st.reconcile()
    cutoff = time.time() - older_than
    only = None
    if jobs or selection:
        among = (f"{pruning.PRUNABLE} AND s.finished_at <= {cutoff!r}"
                 + (" AND s.outcome = 'succeeded'" if only_succeeded else ""), "finished job that may be removed")
        only = st.choose(jobs or [], selection, among)
    removed, kept = pruning.prune(st.conn, cutoff, only_succeeded, only)
    if kept:
        job_id, phase, slot_held = kept[0]
        why = (f"it is {phase}: jobman cancel stops it first" if phase != "finished" else
               "its processes still hold a slot (lost): jobman cancel stops them first" if slot_held else
               "an unfinished job depends on it, or it is newer than --older-than or did not succeed")
        raise BadInput(f"job {queries.handle_of(st.conn, job_id) or job_id} cannot be pruned: {why}; nothing was "
                       "removed")
    for job_id, _ in removed:
        shutil.rmtree(st.home.job_logs(job_id), ignore_errors=True)
        try:
            os.unlink(st.home.bell(job_id))
        except FileNotFoundError:
            pass
    return [{"id": job_id, "handle": handle} for job_id, handle in removed]
