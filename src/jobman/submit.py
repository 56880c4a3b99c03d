"""The handoff (seed 000): commit the job, then launch its supervisor and have it claim the job.

    resolve spec -> one transaction (job, state, edges, job_submitted) -> launch `jobman __supervise ID`
    (credential on its stdin) -> read one acknowledgement -> print the id

No lock is held across the launch. If the acknowledgement does not arrive intact, the database is
read again on a fresh connection before any failure is reported: a committed claim means success.
If no claim is found, a guarded update makes a late claim impossible, and only then is the launch
error reported.
"""
import os
import select
import sys
import time

from runkit import proc
from runkit.hashing import sha256
from runkit.ids import uuid7

from . import ack, faults
from .store import queries, schema, transitions
from .dbretry import trouble
from .errors import Conflict, JobmanError, LaunchError

CREDENTIAL_BYTES = 32
ACK_GRACE = 2.0  # seconds past the claim deadline to wait for an acknowledgement already on its way
CLAIM_SETTLES = 2.0  # past the claim deadline, no claim can commit (a claim may wait out its 1 s busy timeout)
_HANDOFF_SIGNALS = ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT")


def _ignore_interrupts() -> None:
    # From the commit until the id is printed, an interrupt, a hang-up or a closed terminal must not
    # abandon a job whose ownership is being transferred. (_signal: the signal package's enums cost
    # every submission ~3 ms.)
    # A submission made from a worker thread (`jobman ui` restarting a job) cannot change dispositions, and must
    # not: they are its server's, whose Ctrl-C must still stop it; Python raises ValueError there.
    import _signal

    for name in _HANDOFF_SIGNALS:
        try:
            _signal.signal(getattr(_signal, name), _signal.SIG_IGN)
        except ValueError:
            return


def submit(conn, db_file: str, spec: dict, dependencies: list[tuple[str, str]]) -> dict:
    """Submit a job and hand it to its supervisor. Returns {"id", "handle", "name", "supervisor_id", "reconciled"}."""
    credential = os.urandom(CREDENTIAL_BYTES)
    job_id = uuid7()
    now = time.time()
    faults.pause("cli:before_commit")
    try:
        spec = transitions.submit(conn, job_id=job_id, spec=spec, dependencies=dependencies,
                                  credential_hash=sha256(credential), now=now, before_commit=_ignore_interrupts)
    except Exception as e:
        reason = trouble(e)
        if reason is None:
            raise
        schema.rollback(conn)
        raise JobmanError(f"cannot submit: {reason} ({e}); nothing was submitted") from None
    faults.hit("cli:after_commit")
    faults.linger("cli:slow_after_commit")
    deadline = now + spec["windows"]["claim"]
    try:
        supervisor_id = _launch(job_id, credential, deadline)
        reconciled = False
    except (LaunchError, ack.BadAck, OSError) as e:
        supervisor_id = _reconcile_launch(db_file, job_id, str(e))
        reconciled = True
    faults.hit("cli:after_ack")
    return {"id": job_id, "handle": spec["handle"], "name": spec["name"], "supervisor_id": supervisor_id,
            "reconciled": reconciled}


_SUPERVISE = "import sys; sys.path.insert(0, {path!r}); from jobman.supervisor import main; sys.exit(main(sys.argv[2:]))"


def _supervisor_argv(job_id: str) -> list[str]:
    """`python -I -S -c ... __supervise JOB_ID`: isolated from PYTHON* variables and the current
    directory, without site (the supervisor needs only the standard library and this package, whose
    directory is passed explicitly), which saves a fifth of its start-up."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-I", "-S", "-c", _SUPERVISE.format(path=package_root), "__supervise", job_id]


def _launch(job_id: str, credential: bytes, deadline: float) -> str:
    """Start the supervisor, hand it the credential, and return the supervisor id it acknowledges."""
    proc.ensure_std_fds()
    cred_r, cred_w = os.pipe()
    ack_r, ack_w = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        argv = _supervisor_argv(job_id)
        # A supervisor started from inside a job must not look like part of that job's processes.
        env = {k: v for k, v in os.environ.items() if k not in ("JOBMAN_JOB_ID", "JOBMAN_ATTEMPT")}
        pid = proc.spawn(argv[0], argv, env, stdin=cred_r, stdout=ack_w, stderr=null)
    except OSError as e:
        for fd in (cred_r, cred_w, ack_r, ack_w):
            os.close(fd)
        raise LaunchError(f"cannot start the supervisor: {e.strerror or e}") from None
    finally:
        os.close(null)
    os.close(cred_r)
    os.close(ack_w)
    try:
        try:
            os.write(cred_w, credential)
        except OSError:
            pass  # it died already: the acknowledgement read below finds out how far it got
        finally:
            os.close(cred_w)
        raw = _read_ack(ack_r, deadline + ACK_GRACE)
    finally:
        os.close(ack_r)
    try:
        return ack.decode(raw, job_id)
    except ack.BadAck as e:
        raise ack.BadAck(f"{e}{_exit_note(pid)}") from None


def _read_ack(fd: int, give_up_at: float) -> bytes:
    """Read until end-of-file, more than the size limit, or the deadline."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    while len(data) <= ack.ACK_MAX_BYTES:
        remaining = give_up_at - time.time()
        if remaining <= 0:
            raise LaunchError("the supervisor did not acknowledge its claim before the claim deadline")
        if not poller.poll(int(remaining * 1000) + 1):
            continue
        chunk = os.read(fd, ack.ACK_MAX_BYTES + 1 - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _exit_note(pid: int) -> str:
    try:
        status = proc.poll_child(pid)
    except ChildProcessError:
        return ""
    if status is None:
        return ""
    code, sig = proc.describe_status(status)
    return f" (the supervisor exited with {'code ' + str(code) if sig is None else proc.signal_name(sig)})"


def _record_reconciled(conn, job_id: str, reason: str) -> None:
    """The job's events say that its handover was read from the database, and why (its supervisor owns
    it: a note that cannot be written now changes nothing)."""
    try:
        transitions.add_attempt_note(conn, job_id, "acknowledgement_rejected", time.time(), reason=reason)
    except Exception as e:
        if trouble(e) is None:
            raise
        schema.rollback(conn)


def _reconcile_launch(db_file: str, job_id: str, reason: str) -> str:
    """The acknowledgement did not arrive intact. Decide from the database, on a fresh connection:
    a committed claim means the job was handed over; otherwise make a late claim impossible first."""
    conn = schema.connect(db_file, create=False)
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
                transitions.fail_submission(conn, job_id, state["revision"], time.time(),
                                            f"launch failed: {reason}")
            except Conflict:
                continue  # the claim landed after all: read it back
            except Exception as e:
                if trouble(e) is None:
                    raise
                wait = state["claim_deadline"] + CLAIM_SETTLES - time.time()
                if wait > 0:  # a claim could still land: let the deadline pass, then read again
                    time.sleep(wait)
                    continue
                # Past its claim deadline no claim can land any more, so the job can never run: the next
                # reconcile pass that can write finishes it submission_failed.
                raise LaunchError(f"the supervisor did not claim job {job_id}: {reason}; nothing will run (it "
                                  f"could not be recorded as submission_failed yet: {trouble(e)})") from None
            raise LaunchError(f"the supervisor did not claim job {job_id}: {reason}; nothing will run "
                              f"(recorded as submission_failed)")
    finally:
        conn.close()
