"""The detached supervisor: `jobman __supervise JOB_ID`, one per job, in its own session.

This module is its half of the handoff (seed 000): it reads the launch credential on stdin, claims
the job, writes one acknowledgement on stdout and detaches. From then on it owns the job: it renews
its lease and decides eligibility (dependencies, not-before, retry delay, concurrency slot) in
jobman.eligibility, and runs each attempt in its own session with output straight into a per-attempt
log file, enforcing the timeout and the log cap, in jobman.attempt.
"""
import os
import sys
import time

from runkit import proc
from runkit.hashing import sha256
from runkit.ids import is_uuid, uuid7

from . import faults, home as homes
from .dbretry import FIRST_BACKOFF, MAX_BACKOFF, DatabaseGone, Retrier, file_identity, jitter
from .errors import JobmanError
from .store import queries, schema, transitions
from .supervisor_log import log as _log

CREDENTIAL_BYTES = 32
EXIT_REFUSED = 3
# SQLite's own busy wait (it sleeps and retries inside the call) covers the ordinary few milliseconds
# of another writer's transaction; longer trouble comes back to our retry layer, which logs it and
# lets the supervisor go on supervising meanwhile.
BUSY_TIMEOUT_MS = 1_000
CLAIM_GRACE = 1.0  # seconds past the claim deadline a claim is still tried (the transaction refuses it)
MAX_CLAIM_WAIT = 60.0  # while even the deadline cannot be read


def main(args: list[str]) -> int:
    if len(args) != 1 or not is_uuid(args[0]):
        sys.stderr.write("jobman __supervise: private command; it takes exactly one job id and nothing else\n")
        return 2
    job_id = args[0]
    home = homes.home_dir()
    path = homes.db_path(home)
    # `jobman run` starts us before it commits the job (jobman.launch): open the database meanwhile if it is
    # there (the first job of a home creates it), and claim nothing before the credential has come.
    conn = None
    if os.path.exists(path):
        try:
            conn = _connect(path)
        except JobmanError:
            conn = None
    supervisor_id = uuid7()
    me = proc.self_identity()
    credential = _read_credential()
    if len(credential) != CREDENTIAL_BYTES:
        sys.stderr.write("jobman __supervise: refused: no launch credential on stdin\n")
        return EXIT_REFUSED
    if conn is None:
        try:
            conn = _connect(path)
        except JobmanError as e:
            sys.stderr.write(f"jobman __supervise: refused: {e}\n")
            return EXIT_REFUSED
    store = Retrier(conn, path, _log)
    faults.hit("supervisor:before_claim")
    faults.hit_once("supervisor:one_dies_before_claim")
    if faults.active("supervisor:late_claim"):
        _sleep_past_deadline(conn, job_id)
    try:
        state = _claim(store, job_id, sha256(credential), supervisor_id, me)
    except (transitions.ClaimRefused, DatabaseGone) as e:
        sys.stderr.write(f"jobman __supervise: refused: {e}\n")
        return EXIT_REFUSED
    del credential
    faults.hit("supervisor:after_claim")
    _acknowledge(job_id, supervisor_id)
    _detach(home, job_id)
    # What the owner needs from here on is loaded once `jobman run` has its answer: not on its clock.
    import gc

    from .eligibility import Supervisor
    from .model import JobState

    gc.freeze()  # what start-up made lives as long as we do: no collection need ever walk it again
    return Supervisor(store, home, job_id, supervisor_id, JobState.from_row(state)).run()


def resume(args: list[str]) -> int:
    """`__resume JOB_ID SUPERVISOR_ID DB_DEV:DB_INO BELL_FD`: a supervisor back from its lean waiting form
    (jobman.lean), in the same process, with a fresh interpreter. Nothing is taken from the arguments on
    trust: the job is this process's only if the database at its path is still the file it claimed the
    job in, and the job's record names this supervisor id and this very process (pid and start time)."""
    faults.linger("supervisor:after_wake")
    try:
        job_id, supervisor_id, db_file, fd = args
        identity = tuple(int(n) for n in db_file.split(":"))
        fd = int(fd)
        if not (is_uuid(job_id) and is_uuid(supervisor_id) and len(identity) == 2):
            raise ValueError
    except ValueError:
        _log(f"jobman __resume: private command; refused arguments {args!r}")
        return 2
    home = homes.home_dir()
    path = homes.db_path(home)
    try:
        conn = _reconnect(path, identity)
    except DatabaseGone as e:
        _log(f"{e}: this supervisor no longer claims job {job_id}; no target was running; exiting")
        return 0
    store = Retrier(conn, path, _log)
    store.identity = identity
    from .eligibility import Supervisor
    from .model import Snapshot

    me = proc.self_identity()
    snap = Snapshot.from_row(store.call("read the job's state", queries.snapshot, job_id, time.time()))
    mine = snap is not None and (snap.supervisor_id, snap.supervisor_pid, snap.supervisor_start_time,
                                 snap.supervisor_boot_id) == (supervisor_id, me.pid, me.start_time, me.boot_id)
    if not mine or snap.phase == "finished":
        why = ("the job record is gone" if snap is None else f"finished {snap.outcome} by another process"
               if mine else f"owned by supervisor {snap.supervisor_id} (pid {snap.supervisor_pid})")
        _log(f"back from the lean form, no longer the owner of job {job_id} ({why}); exiting without touching it")
        return 0
    import gc

    gc.freeze()
    return Supervisor(store, home, job_id, supervisor_id, snap, bell_fd=fd).run(first=snap)


def _connect(path: str):
    conn = schema.connect(path, create=False, busy_timeout_ms=BUSY_TIMEOUT_MS)
    conn.relax()
    trace = os.environ.get("JOBMAN_TEST_QUERY_LOG")
    if trace:  # the tests count what an idle supervisor asks of the database
        log = open(trace, "a", buffering=1)
        pid = os.getpid()
        conn.set_trace_callback(lambda sql: log.write(f"{time.time():.3f} {pid} {' '.join(sql.split())[:80]}\n"))
    return conn


def _reconnect(path: str, identity: tuple[int, int]):
    """Open the database again after the lean form, waiting out storage trouble (the job goes on waiting
    meanwhile, its lease kept by the round); DatabaseGone if the file at the path is another one now."""
    backoff, noted = FIRST_BACKOFF, False
    while True:
        if file_identity(path) != identity:
            raise DatabaseGone(f"the database file {path} was deleted or replaced while the job waited")
        try:
            conn = _connect(path)
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


def _claim(store: Retrier, job_id: str, credential_hash: bytes, supervisor_id: str, me):
    """The claim, retried through storage trouble until its deadline (after which it cannot succeed)."""
    give_up = time.time() + MAX_CLAIM_WAIT  # until the deadline itself can be read
    while True:
        ok, value = store.try_once("claim the job", transitions.claim, job_id, credential_hash, supervisor_id,
                                   me.pid, me.start_time, me.boot_id, time.time())
        if ok:
            return value
        found, deadline = store.try_once("read the claim deadline", queries.claim_deadline, job_id)
        if found and deadline is not None:
            give_up = deadline + CLAIM_GRACE
        if time.time() + value > give_up:
            raise transitions.ClaimRefused(f"could not claim job {job_id} before its deadline: {store.reason}")
        time.sleep(value)


def _read_credential() -> bytes:
    data = b""
    while len(data) < CREDENTIAL_BYTES + 1:
        try:
            chunk = os.read(0, CREDENTIAL_BYTES + 1 - len(data))
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _sleep_past_deadline(conn, job_id: str) -> None:
    deadline = queries.claim_deadline(conn, job_id)
    if deadline:
        time.sleep(max(0.0, deadline - time.time()) + 0.05)


def _acknowledge(job_id: str, supervisor_id: str) -> None:
    from .ack import encode as encode_ack

    data = encode_ack(job_id, supervisor_id)
    if faults.active("supervisor:bad_ack"):
        data = data.replace(b"}", b',"extra":true}')
    elif faults.active("supervisor:big_ack"):
        data = b"{" + b" " * 200_000 + b"}"
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
    except OSError:
        pass  # the CLI is gone or stopped reading: ownership is committed, so the job goes on


def _detach(home: str, job_id: str) -> None:
    """Close the launch pipes and send our own stderr to the job's supervisor log."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        os.makedirs(homes.job_log_dir(home, job_id), mode=0o700, exist_ok=True)
        log = os.open(homes.supervisor_log_path(home, job_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        log = os.dup(null)  # a full or read-only home: the job goes on, unlogged
    os.close(null)
    os.dup2(log, 2)
    os.close(log)
    os.chdir("/")
