"""One function per command. Each opens the state, runs a cheap reconcile pass (but `run`: see run()), does
its work and returns plain data; jobman.cli parses arguments and renders what comes back."""
from runkit.core.jsonfast import loads as json_loads
import os
import time

from runkit.system import proc, trees

from ..handoff import doorbell
from ..core.home import Home
from ..store import selectors
from ..store import database, queries, transitions
from ..core.errors import BadInput, JobmanError, NotFound
from runkit.core.outcomes import exit_status

READING_BUSY_TIMEOUT_MS = 2_000  # a reading command's reconcile pass waits this long for the write lock
LIST_FINISHED = 100  # finished jobs `jobman list` shows by default
LIST_WAITING = 100  # ... and waiting ones (a sweep keeps thousands waiting); every other unfinished one is shown


def _note(message: str) -> None:
    import sys

    sys.stderr.write(f"jobman: note: {message}\n")


class State:
    """An open jobman home: its directory and a database connection. A reading command's state
    (reading=True) opens a read-only or full home too, and skips the reconcile pass, with one notice,
    when that pass cannot write."""

    def __init__(self, environ=os.environ, create: bool = True, reading: bool = False, notify=_note):
        self.home = Home.from_environ(environ)
        self.db_file = self.home.db
        self.conn = None
        self.reading, self.notify = reading, notify
        self.skipped: str | None = None
        if create:
            self.create()
        elif os.path.exists(self.db_file):
            self.conn = database.connect(self.db_file, create=False, read_only_fallback=reading,
                                       busy_timeout_ms=READING_BUSY_TIMEOUT_MS if reading else database.BUSY_TIMEOUT_MS)
        else:
            database.refuse_if_it_existed(self.db_file)  # "no jobs" would be a lie

    def create(self) -> None:
        """Make the home and its database if they are missing (a command about to write)."""
        self.home.ensure()
        if self.conn is None:
            self.conn = database.connect(self.db_file)

    def reconcile(self) -> list:
        """The cheap reconcile pass; skipped (once noted) when the database cannot be written now."""
        if self.conn is None:
            return []
        from . import reconcile  # (not on the path of `jobman run`, which runs no pass)

        from ..store.trouble import TroubleCaught

        with TroubleCaught(self.conn) as caught:
            return reconcile.run(self.conn, self.home, time.time())
        if self.skipped is None:
            self.notify(f"skipped the reconcile pass: {caught.reason} ({caught.error}); what is shown may be stale")
        self.skipped = caught.reason
        return []

    def resolve(self, selector: str) -> str:
        if self.conn is None:
            raise NotFound(f"no job matches {selector!r}: no job has been submitted yet")
        return selectors.resolve(self.conn, selector)

    def choose(self, named: list[str], selection: selectors.Selection | None,
               among: tuple[str, str] = ("1", "job")) -> list[str]:
        """The jobs a command acts on (jobman.store.selectors.choose): the JOBs named, then those the selection
        takes of the jobs the command can act on (`among`)."""
        if self.conn is None:
            what = repr(named[0]) if named else (selection.words() if selection else "")
            raise NotFound(f"no job matches {what}: no job has been submitted yet")
        return selectors.choose(self.conn, named, selection, among)


def run(spec: dict, dependencies: list[tuple[str, str]], environ=os.environ, launch=None) -> dict:
    """Submit one job (jobman.handoff.submit). launch: its supervisor, started already (jobman.handoff.launch)."""
    from ..handoff.submit import submit

    # No reconcile pass here: it would be a courtesy to other jobs, on the clock of every submission of a
    # sweep, and while any job waits, the holder of its lease round runs the pass when something is due
    # (jobman.supervisor.lease_round); reading commands run it too.
    st = State(environ, create=False, notify=lambda message: None)
    if st.conn is None:
        # No database yet: refuse what cannot be accepted before anything is created. Only the default
        # group exists and no selector resolves (the submit transaction checks both again).
        if spec["group"] != database.DEFAULT_GROUP:
            raise transitions.no_such_group(spec["group"])
        for selector, _ in dependencies:
            st.resolve(selector)
    st.create()
    return submit(st.conn, st.db_file, spec, dependencies, launch)


def run_batch(jobs: list[tuple], emit, environ=os.environ, whole: bool = False) -> dict:
    """Submit a batch (jobman.handoff.submit.submit_batch: items (spec, dependencies) or (spec, dependencies, id));
    emit(result) for each job handed over, in order. whole: in one transaction (a pipeline)."""
    from ..handoff.submit import submit_batch

    st = State(environ, create=False, notify=lambda message: None)
    if st.conn is None:
        spec, dependencies = jobs[0][:2]
        if spec["group"] != database.DEFAULT_GROUP:
            raise transitions.no_such_group(spec["group"])
        for selector, _ in dependencies:
            st.resolve(selector)
    st.create()
    st.reconcile()
    return submit_batch(st.conn, st.db_file, jobs, emit, whole)


# --- reading --------------------------------------------------------------------------------------

def jobs_of(rows) -> list:
    """model.Job records of store rows (the model is loaded by the commands that read, not by `run`)."""
    from ..core.model import Job

    return [Job.from_row(row) for row in rows]


def job_view(job) -> dict:
    """The public, JSON-ready form of a job (a model.Job)."""
    spec, corrupt = spec_of(job)
    finished = job.finished
    return {
        "id": job.job_id,
        "handle": job.handle,
        "name": job.name,
        "state": job.outcome if finished else job.phase,
        "phase": job.phase,
        "outcome": job.outcome,
        "group": job.group_name,
        "priority": job.priority,
        "command": spec.get("argv"),
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "attempts": job.attempts,
        "exit_code": job.exit_code,
        "signal": proc.signal_name(job.exit_signal),
        "waiting_for": job.waiting_for,
        "wait_detail": job.wait_detail,
        "wait_until": job.wait_until,
        "held": job.held_at is not None and not finished,
        "detail": job.detail,
        "cancel_reason": job.cancel_reason,
        "restarted_as": [{"id": i, "handle": h} for i, h in json_loads(job.restarted_as or "[]")],
        "exit_status": exit_status(job.outcome, job.exit_code, job.exit_signal) if finished else None,
        **({"corrupt": corrupt} if corrupt else {}),
    }


def spec_of(job) -> tuple[dict, str | None]:
    """The stored spec, or ({}, what is wrong with it): one damaged record must not hide the others."""
    try:
        spec = json_loads(job.spec)
        if not isinstance(spec, dict) or not isinstance(spec.get("argv"), list):
            raise ValueError("not a job specification")
        return spec, None
    except (ValueError, TypeError) as e:
        return {}, f"the stored job specification is unreadable ({e})"


def list_jobs(environ=os.environ, *, active_only: bool = False, limit: int | None = None,
              everything: bool = False, states=(), group: str | None = None, name: str | None = None,
              hide_restarted: bool = False) -> dict:
    """{"jobs": views newest first, "not_shown": {"waiting": n, "finished": n} older jobs left out, and "lost_note"
    when lost jobs wait for a restart (listing.lost_note)}. By
    default every unfinished job but waiting ones, the newest LIST_WAITING waiting ones and the newest
    LIST_FINISHED finished ones; `active_only`: every unfinished job; `limit`: the newest `limit` jobs;
    `everything`: all of them. states / group / name (a glob): only the jobs that match; hide_restarted: not the
    jobs that have been restarted."""
    st = State(environ, create=False, reading=True)
    if st.conn is None:
        return {"jobs": [], "not_shown": {"waiting": 0, "finished": 0}}
    st.reconcile()
    from . import listing

    capped = not (limit or active_only or everything)
    return listing.read(st.conn, active_only=active_only, limit=limit, finished=None if everything else LIST_FINISHED,
                        waiting=LIST_WAITING if capped else None, where=queries.list_filter(states, group, name, hide_restarted),
                        count_rest=capped)


def wait(selector_list: list[str], environ=os.environ, timeout: float | None = None, progress=None,
         selection: selectors.Selection | None = None) -> dict:
    """Wait until every job is finished: the ones named, and every job of the home the selection matches,
    finished ones included (in submission order after the named ones), so that the answer is the same whenever
    it is asked until the jobs are pruned. A job the selection matches that has been restarted is answered by its
    restart (which the selection takes where it matches it), so a failure fixed and restarted no longer counts; a
    job named counts as itself. Returns {"jobs": [views], "exit_status": int, "timed_out": bool}. Each look reads
    only the jobs still unfinished."""
    st = State(environ, create=False, reading=True)
    ids = st.choose(selector_list, selection, (f"NOT {queries.RESTARTED}", "job that has not been restarted"))
    give_up = None if timeout is None else time.time() + timeout
    delay = 0.02
    started = time.time()
    pending = list(dict.fromkeys(ids))
    while True:
        st.reconcile()
        rows = jobs_of(queries.job(st.conn, i) for i in pending)
        pending = [r.job_id for r in rows if not r.finished]
        if not pending:
            break
        if give_up is not None and time.time() >= give_up:
            return {"jobs": [job_view(r) for r in jobs_of(queries.job(st.conn, i) for i in ids)], "exit_status": None,
                    "timed_out": True}
        if progress:
            progress(rows, time.time() - started)
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
    views = [job_view(r) for r in jobs_of(queries.job(st.conn, i) for i in ids)]
    status = next((v["exit_status"] for v in views if v["exit_status"] != 0), 0)
    return {"jobs": views, "exit_status": status, "timed_out": False}


def reconcile_now(environ=os.environ) -> list[dict]:
    def refuse(message):
        raise JobmanError(message.replace("skipped the reconcile pass", "cannot reconcile"))

    st = State(environ, create=False, reading=True, notify=refuse)
    return [{"id": job_id, "change": change} for job_id, change in st.reconcile()]


# --- changing ------------------------------------------------------------------------------------

# What cancel takes of the jobs a selection matches: the unfinished ones, and the lost ones whose processes live on.
CANCELLABLE = ("s.phase != 'finished' OR (s.outcome = 'lost' AND s.slot_held = 1)", "unfinished job")


def cancel(selector_list: list[str], environ=os.environ, wait_seconds: float | None = None,
           selection: selectors.Selection | None = None, reason: str | None = None) -> list[dict]:
    """Cancel the JOBs named and the unfinished jobs the selection matches; `reason` is kept with each cancel.
    [{"id", "handle", "outcome", "phase", "message", "done", "cancel_reason"}], one per job in order."""
    from ..core.model import JobState

    st = State(environ, create=False)
    ids = st.choose(selector_list, selection, CANCELLABLE)
    st.reconcile()
    results = []
    for job_id in ids:
        what, state = transitions.request_cancel(st.conn, job_id, time.time(), reason)
        state = JobState.from_row(state)
        if what == "requested":
            doorbell.ring(st.home, job_id)
        elif what == "cancelled":
            from .reconcile import wake_after

            wake_after(st.conn, st.home, job_id)
        results.append({"id": job_id, "result": what, "state": state})
    out = []
    for r in results:
        job_id, state = r["id"], r["state"]
        if r["result"] == "requested":
            state = _await_finish(st, job_id, wait_seconds)
        view = {"id": job_id, "handle": queries.handle_of(st.conn, job_id), "outcome": state.outcome,
                "phase": state.phase}
        if r["result"] == "finished" and state.outcome == "lost":
            view.update(_stop_lost_target(st, job_id))
        elif r["result"] == "finished":
            view["message"] = f"already finished: {state.outcome}"
        elif state.finished:
            view["message"] = "cancelled" if state.outcome == "cancelled" else f"finished {state.outcome}"
        else:
            view["message"] = "cancel requested; its supervisor will stop it"
        kept = queries.load_state(st.conn, job_id)["cancel_reason"]
        if kept and r["result"] != "finished":
            view["message"] += f" (reason: {kept})"
        view["cancel_reason"], view["done"] = kept, True
        out.append(view)
    return out


def _await_finish(st: State, job_id: str, wait_seconds: float | None):
    from ..core.model import JobState

    spec = json_loads(queries.spec_json(st.conn, job_id))
    limit = wait_seconds if wait_seconds is not None else spec.get("kill_after", 10.0) + 5.0
    give_up = time.time() + limit
    while True:
        state = JobState.from_row(queries.load_state(st.conn, job_id))
        if state.finished or time.time() >= give_up:
            return state
        time.sleep(0.02)
        st.reconcile()


def _stop_lost_target(st: State, job_id: str) -> dict:
    """`jobman cancel` on a lost job: stop what is left of its target, each process identified by pid and
    start time (the recorded tree, and every process carrying the job's id in its environment)."""
    from . import targets

    attempt = queries.last_attempt(st.conn, job_id)
    alive = targets.processes(job_id, attempt)
    if not alive:
        if attempt is None:
            return {"message": "lost before any target process was started: nothing to stop"}
        if attempt["pid"] is None:
            return {"message": "lost before its target was recorded, and no process carries its job id: "
                               "nothing to stop"}
        return {"message": f"lost; nothing of its target tree is alive: pid {attempt['pid']} no longer exists or that "
                           f"pid is now another process, so nothing was signalled"}
    spec = json_loads(queries.spec_json(st.conn, job_id))
    pids = [p.pid for p in alive]
    trees.stop_all(lambda: targets.processes(job_id, attempt), grace=spec.get("kill_after", 10.0))
    transitions.add_attempt_note(st.conn, job_id, "lost_target_stopped", time.time(), pid=pids[0],
                                 processes=len(pids))
    st.reconcile()  # its slot can be released now
    return {"message": f"lost; its target tree (pid {', '.join(map(str, pids))}) was still alive and has been "
                       f"stopped; the outcome stays lost"}


def _log_target(selector: str | None, environ) -> tuple[State, str]:
    """The state and the job whose logs are asked for (selector None: the newest job)."""
    st = State(environ, create=False, reading=True)
    job_id = queries.newest_job(st.conn) if selector is None and st.conn is not None else None
    if selector is None and job_id is None:
        raise NotFound("no job has been submitted yet, so there are no logs to show")
    if job_id is None:
        assert selector is not None  # (refused just above)
        job_id = st.resolve(selector)
    st.reconcile()
    return st, job_id


def logs(selector: str | None, environ=os.environ, *, attempt: int | None = None, stderr: bool = False,
         tail: int | None = None, follow: bool = False, out=None) -> dict:
    """`jobman logs` (selector None: the newest job). With `out` (a binary stream) the output is written
    there, and with `follow` streamed until the job ends: returns {"id", "exit_status"} (the job's, when
    followed; else 0) and "note" when the job has no output yet. Without `out`: the output as data,
    {"id", "state", "attempts": [one entry per attempt]}."""
    from . import logs as reading

    st, job_id = _log_target(selector, environ)
    if out is None:
        state = queries.load_state(st.conn, job_id)
        return {"id": job_id, "state": state["outcome"] or state["phase"],
                "attempts": reading.collect(st.conn, job_id, attempt=attempt, stderr=stderr, tail=tail)}
    if follow:
        status = reading.follow(st.conn, job_id, attempt=attempt, stderr=stderr, tail=tail, out=out,
                                reconcile=st.reconcile)
        return {"id": job_id, "exit_status": status}
    if reading.read(st.conn, job_id, attempt=attempt, stderr=stderr, tail=tail, out=out):
        return {"id": job_id, "exit_status": 0}
    state = queries.load_state(st.conn, job_id)
    if attempt is not None and state["attempts"]:
        raise BadInput(f"job {job_id} has no attempt {attempt} (it has {state['attempts']})")
    where = state["wait_detail"] or state["waiting_for"] or state["outcome"] or state["phase"]
    return {"id": job_id, "exit_status": 0, "note": f"job {job_id} has not started, so it has no output yet ({where})"}
