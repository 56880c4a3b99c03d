"""The handoff: commit the job, then launch its supervisor and have it claim the job.

    resolve spec -> one transaction (job, state, edges, job_submitted) -> launch `jobman __supervise ID`
    (credential on its stdin) -> read one acknowledgement -> print the id

`jobman run` starts the supervisor's process before the transaction (jobman.handoff.launch): it waits for its
credential, written only after the commit, so the launch the handoff orders after the commit, the handing of
the credential that lets it claim, still comes after it. No lock is held across the launch. If the
acknowledgement does not arrive intact, the database is read again on a fresh connection before any
failure is reported: a committed claim means success. If no claim is found, a guarded update makes a
late claim impossible, and only then is the launch error reported. Where either process may die and what
the database then holds: docs/architecture.md, "The handoff's crash windows".
"""
import os
import select
import time

from runkit.core.clock import SYSTEM
from runkit.core.hashing import sha256
from runkit.core.ids import uuid7

from . import ack
from ..core import faults
from .launch import Launch
from ..store import database, queries, transitions
from ..store.trouble import TroubleCaught
from ..core.errors import Conflict, LaunchError

CREDENTIAL_BYTES = 32
CLAIM_SETTLES = 2.0  # past the claim deadline, no claim can commit (a claim may wait out its 1 s busy timeout)
_HANDOFF_SIGNALS = ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT")


def _ignore_interrupts() -> None:
    # From the commit until the id is printed, an interrupt, a hang-up or a closed terminal must not
    # abandon a job whose ownership is being transferred. (_signal: the signal package's enums cost
    # every submission ~3 ms.)
    # A submission made from a worker thread (`jobman ui` restarting a job) cannot change dispositions, and must
    # not: they are its server's, whose Ctrl-C must still stop it; Python raises ValueError there.
    import _signal  # type: ignore[import-not-found]  # CPython's C module: no stubs

    for name in _HANDOFF_SIGNALS:
        try:
            _signal.signal(getattr(_signal, name), _signal.SIG_IGN)
        except ValueError:
            return


def submit(conn, db_file: str, spec: dict, dependencies: list[tuple[str, str]], launch: Launch | None = None) -> dict:
    """Submit a job and hand it to its supervisor. launch: a supervisor started already for the job's id
    (jobman.handoff.launch), waiting for its credential. Returns {"id", "handle", "name", "supervisor_id",
    "reconciled"}."""
    credential = os.urandom(CREDENTIAL_BYTES)
    if launch is None:
        launch = Launch(uuid7())
    job_id = launch.job_id
    faults.pause("cli:before_commit")
    try:
        with TroubleCaught(conn, "cannot submit", "nothing was submitted"):
            # The submission's time (and so its claim deadline) is read once the write lock is held.
            spec = transitions.submit(conn, job_id=job_id, spec=spec, dependencies=dependencies,
                                      credential_hash=sha256(credential), clock=SYSTEM,
                                      before_commit=_ignore_interrupts)
    except BaseException:
        launch.abandon()
        raise
    faults.hit("cli:after_commit")
    faults.linger("cli:slow_after_commit")
    try:
        launch.hand(credential, spec["claim_deadline"])
        supervisor_id = launch.wait_for_ack()
        reconciled = False
    except (LaunchError, ack.BadAck, OSError) as e:
        supervisor_id = _reconcile_launch(db_file, job_id, str(e))
        reconciled = True
    faults.hit("cli:after_ack")
    return {"id": job_id, "handle": spec["handle"], "name": spec["name"], "supervisor_id": supervisor_id,
            "reconciled": reconciled}


# A batch (jobman run --array/--from): each job gets the handoff of one, but they are committed a few at a
# time (one synced commit each) and their supervisors start side by side (each start is a Python
# interpreter's: mostly CPU). A few in flight keep two cores busy; more only queue up on the database's
# write lock, where SQLite's busy handler sleeps in steps of milliseconds while the lock is free again
# (10,000 jobs into a paused group on the 2-core VM: window 48, chunk 16: 127-133 s with 15% of the CPU
# idle; window 8, chunk 4: 115.5 s, 8% idle and 5% less CPU per job).
BATCH_CHUNK = 4
BATCH_WINDOW = 8


def submit_batch(conn, db_file: str, items: list[tuple], emit, whole: bool = False) -> dict:
    """Submit the jobs [(spec, dependencies)] in order, each with its own handoff (an item (spec, dependencies,
    job_id) brings its own id: a restart re-wires the edges among its jobs to ids it has chosen beforehand). emit(result) is called
    for every job handed over, in order (result as submit() returns it, plus "index", its place in
    `items`). An interrupt (Ctrl-C, a hang-up) or a failed handoff stops the batch: nothing more is
    committed, the handoffs of the jobs committed already are finished (each ends owned, or
    submission_failed, as one job's would), and the rest is never submitted. Returns {"submitted": n,
    "failures": [(index, job_id, message)], "stopped_at": index of the first job never committed, or None,
    "interrupted": bool}. whole: commit every job in one transaction (a pipeline: all of it or nothing), its
    supervisors all launched at once."""
    from collections import deque

    stop: list[bool] = []
    inflight: deque[list] = deque()  # [index, job_id, stored spec, Launch or the LaunchError that prevented it]
    failures: list[tuple] = []
    submitted, next_item = 0, 0
    while True:
        room = BATCH_WINDOW - len(inflight)
        if next_item < len(items) and not stop and not failures and room > 0:
            chunk = items[next_item:] if whole else items[next_item:next_item + min(BATCH_CHUNK, room)]
            handed, refused = _commit_chunk(conn, chunk, next_item == 0, stop)
            if refused is not None:
                failures.append((next_item, None, refused))
                continue
            inflight.extend([next_item + offset, *rest] for offset, *rest in handed)
            next_item += len(chunk)
            continue
        if not inflight:
            break
        _read_acks([entry[3] for entry in inflight if isinstance(entry[3], Launch) and not entry[3].done])
        while inflight and (not isinstance(inflight[0][3], Launch) or inflight[0][3].done):
            index, job_id, spec, launch = inflight.popleft()
            result = _hand_over(db_file, job_id, spec, launch)
            if isinstance(result, str):
                failures.append((index, job_id, result))
                continue
            submitted += 1
            emit(dict(result, index=index))
            faults.hit("cli:after_ack")
    return {"submitted": submitted, "failures": failures,
            "stopped_at": next_item if next_item < len(items) else None, "interrupted": bool(stop)}


def _commit_chunk(conn, chunk: list[tuple], first_chunk: bool, stop: list) -> tuple[list, str | None]:
    """Commit one chunk of a batch and hand each of its jobs to a supervisor: ([[offset in the chunk, job id, stored
    spec, Launch or the LaunchError that prevented it], ...], None), or ([], why nothing of it was committed). The
    first chunk's trouble refuses the batch (raised); a later chunk's failure, of any kind, ends it there."""
    jobs = [(item[2] if len(item) > 2 else uuid7(), os.urandom(CREDENTIAL_BYTES), item[0], item[1]) for item in chunk]
    if first_chunk:
        faults.pause("cli:before_commit")
    first = ("cannot submit", "nothing was submitted") if first_chunk else (None, None)
    try:
        with TroubleCaught(conn, *first) as caught:
            stored = transitions.submit_many(  # (timed once the write lock is held, as submit())
                conn, [(job_id, spec, deps, sha256(cred)) for job_id, cred, spec, deps in jobs], SYSTEM,
                before_commit=(lambda: _catch_interrupts(stop)) if first_chunk else None)
    except Exception as e:
        if first_chunk:
            raise
        database.rollback(conn)
        return [], f"cannot submit: {e}"
    if caught.reason is not None:
        return [], f"cannot submit: {caught.reason}"
    faults.hit("cli:after_commit")
    handed = []
    for offset, ((job_id, cred, _, _), spec) in enumerate(zip(jobs, stored)):
        launch = Launch(job_id)
        try:
            launch.hand(cred, spec["claim_deadline"])
        except LaunchError as e:
            handed.append([offset, job_id, spec, e])
        else:
            handed.append([offset, job_id, spec, launch])
    return handed, None


def _catch_interrupts(stop: list) -> None:
    # From a batch's first commit on, an interrupt or a hang-up stops the batch rather than the process:
    # the handoffs under way are finished first.
    import _signal  # (no stubs: the type checker says so once, above)

    for name in _HANDOFF_SIGNALS:
        try:
            _signal.signal(getattr(_signal, name), lambda signum, frame: stop.append(signum))
        except ValueError:
            return  # a worker thread (`jobman ui` restarting jobs): the dispositions are its server's


def _read_acks(launches: list) -> None:
    """Wait until at least one of the launches has more of its acknowledgement (or a deadline passed)."""
    if not launches:
        return
    poller = select.poll()
    by_fd = {}
    for launch in launches:
        poller.register(launch.fd, select.POLLIN)
        by_fd[launch.fd] = launch
    soonest = min(launch.give_up_at for launch in launches) - time.time()
    ready = poller.poll(max(0, int(soonest * 1000) + 1))
    for fd, _ in ready:
        by_fd[fd].read()
    if not ready:
        for launch in launches:
            if time.time() >= launch.give_up_at:
                launch.read()


def _hand_over(db_file: str, job_id: str, spec: dict, launch) -> dict | str:
    """A batch job's handoff, once its acknowledgement is in (or its launch failed): the result of submit(),
    or the message of a job that was not handed over (it is submission_failed by then)."""
    try:
        if isinstance(launch, LaunchError):
            raise launch
        try:
            supervisor_id, reconciled = launch.supervisor_id(), False
        finally:
            launch.close()
    except (LaunchError, ack.BadAck, OSError) as e:
        try:
            supervisor_id, reconciled = _reconcile_launch(db_file, job_id, str(e)), True
        except LaunchError as refused:
            return str(refused)
    return {"id": job_id, "handle": spec["handle"], "name": spec["name"], "supervisor_id": supervisor_id,
            "reconciled": reconciled}


def _record_reconciled(conn, job_id: str, reason: str) -> None:
    """The job's events say that its handover was read from the database, and why (its supervisor owns
    it: a note that cannot be written now changes nothing)."""
    with TroubleCaught(conn):
        transitions.add_attempt_note(conn, job_id, "acknowledgement_rejected", time.time(), reason=reason)


def _reconcile_launch(db_file: str, job_id: str, reason: str) -> str:
    """The acknowledgement did not arrive intact. Decide from the database, on a fresh connection:
    a committed claim means the job was handed over; otherwise make a late claim impossible first."""
    conn = database.connect(db_file, create=False)
    try:
        while True:
            state = queries.load_state(conn, job_id)
            if state["supervisor_id"] is not None and state["phase"] != "submitting":
                _record_reconciled(conn, job_id, reason)
                return state["supervisor_id"]
            if state["phase"] != "submitting":
                raise LaunchError(f"job {job_id} was not handed over: {reason}; it ended "
                                  f"{state['outcome']} ({state['detail']})")
            try:
                with TroubleCaught(conn) as caught:
                    transitions.fail_submission(conn, job_id, state["revision"], time.time(),
                                                f"launch failed: {reason}")
            except Conflict:
                continue  # the claim landed after all: read it back
            if caught.reason is not None:
                wait = state["claim_deadline"] + CLAIM_SETTLES - time.time()
                if wait > 0:  # a claim could still land: let the deadline pass, then read again
                    time.sleep(wait)
                    continue
                # Past its claim deadline no claim can land any more, so the job can never run: the next
                # reconcile pass that can write finishes it submission_failed.
                raise LaunchError(f"the supervisor did not claim job {job_id}: {reason}; nothing will run (it "
                                  f"could not be recorded as submission_failed yet: {caught.reason})") from caught.error
            raise LaunchError(f"the supervisor did not claim job {job_id}: {reason}; nothing will run "
                              f"(recorded as submission_failed)")
    finally:
        conn.close()
