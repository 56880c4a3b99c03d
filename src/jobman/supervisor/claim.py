"""The handoff, the supervisor's half (jobman.handoff.submit is the CLI's): `jobman __supervise JOB_ID` reads the launch
credential on stdin, claims the job, writes one acknowledgement on stdout and detaches. From then on it owns the
job (owner.Supervisor), whose modules are loaded only once `jobman run` has its answer. Where it may die and
what that leaves: docs/architecture.md, "The handoff's crash windows".
"""
import os
import sys
import time

from runkit.system import proc
from runkit.core.clock import SYSTEM, Clock
from runkit.core.hashing import sha256
from runkit.core.ids import is_uuid, uuid7

from ..core import faults
from ..core.home import Home
from ..store.trouble import DatabaseGone, PatientDatabase, connect
from ..core.errors import JobmanError
from ..store import queries, transitions
from .log import log as _log

CREDENTIAL_BYTES = 32
EXIT_REFUSED = 3
CLAIM_GRACE = 1.0  # seconds past the claim deadline a claim is still tried (the transaction refuses it)
MAX_CLAIM_WAIT = 60.0  # while even the deadline cannot be read


def main(args: list[str], clock: Clock = SYSTEM) -> int:
    if len(args) != 1 or not is_uuid(args[0]):
        sys.stderr.write("jobman __supervise: private command; it takes exactly one job id and nothing else\n")
        return 2
    job_id = args[0]
    home = Home.from_environ()
    path = home.db
    # `jobman run` starts us before it commits the job (jobman.handoff.launch): open the database meanwhile if it is
    # there (the first job of a home creates it), and claim nothing before the credential has come.
    conn = None
    if os.path.exists(path):
        try:
            conn = connect(path)
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
            conn = connect(path)
        except JobmanError as e:
            sys.stderr.write(f"jobman __supervise: refused: {e}\n")
            return EXIT_REFUSED
    store = PatientDatabase(conn, path, _log, clock)
    faults.hit("supervisor:before_claim")
    faults.hit_once("supervisor:one_dies_before_claim")
    if faults.active("supervisor:late_claim"):
        _sleep_past_deadline(conn, job_id, clock)
    try:
        state = claim(store, job_id, sha256(credential), supervisor_id, me, clock)
    except (transitions.ClaimRefused, DatabaseGone) as e:
        sys.stderr.write(f"jobman __supervise: refused: {e}\n")
        return EXIT_REFUSED
    del credential
    faults.hit("supervisor:after_claim")
    _acknowledge(job_id, supervisor_id)
    _detach(home, job_id)
    # What the owner needs from here on is loaded once `jobman run` has its answer: not on its clock.
    import gc

    from ..core.model import JobState
    from .owner import Supervisor

    gc.freeze()  # what start-up made lives as long as we do: no collection need ever walk it again
    return Supervisor(store, home, job_id, supervisor_id, JobState.from_row(state), clock=clock).run()


def claim(store: PatientDatabase, job_id: str, credential_hash: bytes, supervisor_id: str, me, clock: Clock = SYSTEM,
          sleep=time.sleep):
    """The claim, retried through storage trouble until its deadline (after which it cannot succeed); the
    job's state as claimed. Raises ClaimRefused (and DatabaseGone)."""
    give_up = clock.wall() + MAX_CLAIM_WAIT  # until the deadline itself can be read
    while True:
        ok, value = store.try_once("claim the job", transitions.claim, job_id, credential_hash, supervisor_id,
                                   me.pid, me.start_time, me.boot_id, clock.wall())
        if ok:
            return value
        found, deadline = store.try_once("read the claim deadline", queries.claim_deadline, job_id)
        if found and deadline is not None:
            give_up = deadline + CLAIM_GRACE
        if clock.wall() + value > give_up:
            raise transitions.ClaimRefused(f"could not claim job {job_id} before its deadline: {store.reason}")
        sleep(value)


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


def _sleep_past_deadline(conn, job_id: str, clock: Clock) -> None:
    deadline = queries.claim_deadline(conn, job_id)
    if deadline:
        time.sleep(max(0.0, deadline - clock.wall()) + 0.05)


def _acknowledge(job_id: str, supervisor_id: str) -> None:
    from ..handoff.ack import encode as encode_ack

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


def _detach(home: Home, job_id: str) -> None:
    """Close the launch pipes and send our own stderr to the job's supervisor log."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        os.makedirs(home.job_logs(job_id), mode=0o700, exist_ok=True)
        log = os.open(home.supervisor_log(job_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        log = os.dup(null)  # a full or read-only home: the job goes on, unlogged
    os.close(null)
    os.dup2(log, 2)
    os.close(log)
    os.chdir("/")
