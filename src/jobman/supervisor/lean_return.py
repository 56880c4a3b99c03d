"""`jobman __resume`: a supervisor back from its lean waiting form (jobman.supervisor.lean), in the same process with a
fresh interpreter. The lean form execs into RESUME; nothing is taken from its arguments on trust."""
import os
import sys
import time

from runkit.core.clock import SYSTEM, Clock
from runkit.core.ids import is_uuid

from ..core import faults
from ..core.home import Home
from ..store.trouble import FIRST_BACKOFF, MAX_BACKOFF, DatabaseGone, PatientDatabase, connect, file_identity, jitter
from ..core.errors import JobmanError
from ..store import queries
from .log import log as _log

# How the lean form execs back into the supervisor (resume below), as `jobman run` starts it (jobman.handoff.launch).
RESUME = ("import sys; sys.path.insert(0, {path!r}); from jobman.supervisor import resume;"
          " sys.exit(resume(sys.argv[2:]))")


def resume_argv(job_id: str, supervisor_id: str, db_identity: tuple[int, int], bell_fd: int) -> list[str]:
    """The command the lean form execs back into: `python -I -S -c RESUME __resume JOB SUPERVISOR DEV:INO FD`."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # src/, above jobman/
    dev, ino = db_identity
    return [sys.executable, "-I", "-S", "-c", RESUME.format(path=root), "__resume", job_id, supervisor_id,
            f"{dev}:{ino}", str(bell_fd)]


def resume(args: list[str], clock: Clock = SYSTEM, processes=None) -> int:
    """`__resume JOB_ID SUPERVISOR_ID DB_DEV:DB_INO BELL_FD`: a supervisor back from its lean waiting form
    (jobman.supervisor.lean), in the same process, with a fresh interpreter. Nothing is taken from the arguments on
    trust: the job is this process's only if the database at its path is still the file it claimed the
    job in, and the job's record names this supervisor id and this very process (pid and start time)."""
    faults.linger("supervisor:after_wake")
    try:
        job_id, supervisor_id, db_file, fd_text = args
        dev, ino = (int(n) for n in db_file.split(":"))
        fd = int(fd_text)
        if not (is_uuid(job_id) and is_uuid(supervisor_id)):
            raise ValueError
    except ValueError:
        _log(f"jobman __resume: private command; refused arguments {args!r}")
        return 2
    home = Home.from_environ()
    path = home.db
    try:
        conn = _reconnect(path, (dev, ino))
    except DatabaseGone as e:
        _log(f"{e}: this supervisor no longer claims job {job_id}; no target was running; exiting")
        return 0
    store = PatientDatabase(conn, path, _log, clock)
    store.identity = (dev, ino)
    from ..core.model import Snapshot
    from .owner import Supervisor
    from .processes import Processes

    processes = processes or Processes()
    me = processes.identity()
    snap = Snapshot.from_row(store.call("read the job's state", queries.snapshot, job_id, clock.wall()))
    mine = snap is not None and (snap.supervisor_id, snap.supervisor_pid, snap.supervisor_start_time,
                                 snap.supervisor_boot_id) == (supervisor_id, me.pid, me.start_time, me.boot_id)
    if not mine or snap.phase == "finished":
        why = ("the job record is gone" if snap is None else f"finished {snap.outcome} by another process"
               if mine else f"owned by supervisor {snap.supervisor_id} (pid {snap.supervisor_pid})")
        _log(f"back from the lean form, no longer the owner of job {job_id} ({why}); exiting without touching it")
        from ..handoff import doorbell

        doorbell.discard(home, job_id, fd)
        return 0
    import gc

    gc.freeze()
    return Supervisor(store, home, job_id, supervisor_id, snap, clock=clock, processes=processes,
                      bell_fd=fd).run(first=snap)


def _reconnect(path: str, identity: tuple[int, int]):
    """Open the database again after the lean form, waiting out storage trouble (the job goes on waiting
    meanwhile, its lease kept by the round); DatabaseGone if the file at the path is another one now."""
    backoff, noted = FIRST_BACKOFF, False
    while True:
        if file_identity(path) != identity:
            raise DatabaseGone(f"the database file {path} was deleted or replaced while the job waited")
        try:
            conn = connect(path)
        except JobmanError as e:
            if not noted:
                _log(f"waiting for the database: cannot open it again: {e}; retrying with backoff")
                noted = True
            time.sleep(jitter(backoff))
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        if file_identity(path) == identity:
            if noted:
                _log("the database opens again")
            return conn
        conn.close()


