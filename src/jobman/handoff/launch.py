"""Starting a job's supervisor (`python -I -S -c ... __supervise JOB_ID`) and reading its acknowledgement:
the process side of the handoff (jobman.handoff.submit is the database side).

The supervisor's interpreter is started as soon as `jobman run` has read its options, while the CLI opens the
database and commits the job: a Python start is most of a submission's time, and it is spent meanwhile
rather than after the commit. The supervisor reads its credential on stdin before anything else, and the
credential is written only once the job is committed: the claim still follows the commit, no lock is held
across the process's creation, and every crash window ends as before (a CLI that dies before handing the
credential over leaves a supervisor that reads end-of-file and exits, refused, without opening the database).

Nothing here imports SQLite: `jobman run` starts the supervisor before it loads what the commit needs.
"""
import os
import select
import sys
import time

from runkit.system import proc

from ..core.errors import LaunchError

ACK_GRACE = 2.0  # seconds past the claim deadline to wait for an acknowledgement already on its way
_SUPERVISE = ("import sys; sys.path.insert(0, {path!r}); from jobman.supervisor import main;"
              " sys.exit(main(sys.argv[2:]))")


def supervisor_argv(job_id: str) -> list[str]:
    """`python -I -S -c ... __supervise JOB_ID`: isolated from PYTHON* variables and the current
    directory, without site (the supervisor needs only the standard library and this package, whose
    directory is passed explicitly), which saves a fifth of its start-up."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # src/
    return [sys.executable, "-I", "-S", "-c", _SUPERVISE.format(path=package_root), "__supervise", job_id]


class Launch:
    """One supervisor, started for `job_id` and waiting for its credential; then handed it (hand), and its
    acknowledgement read as it arrives (a batch reads many at once). A supervisor that cannot be started
    is a LaunchError raised by hand(), after the commit, where the handoff's failures are reconciled."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        self.give_up_at = 0.0  # until when the acknowledgement is waited for (set by hand)
        # The acknowledgement's read end, the credential's write end, the supervisor's pid: -1 once closed (or never
        # opened: the supervisor could not be started, and error says why).
        self.fd = self.cred_w = self.pid = -1
        self.raw, self.done = b"", False
        self.error: LaunchError | None = None
        proc.ensure_std_fds()
        cred_r, cred_w = os.pipe()
        ack_r, ack_w = os.pipe()
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            argv = supervisor_argv(job_id)
            # A supervisor started from inside a job must not look like part of that job's processes.
            env = {k: v for k, v in os.environ.items() if k not in ("JOBMAN_JOB_ID", "JOBMAN_ATTEMPT")}
            self.pid = proc.spawn(argv[0], argv, env, stdin=cred_r, stdout=ack_w, stderr=null, only_std_fds=True)
        except OSError as e:
            for fd in (cred_r, cred_w, ack_r, ack_w):
                os.close(fd)
            self.error = LaunchError(f"cannot start the supervisor: {e.strerror or e}")
            return
        finally:
            os.close(null)
        os.close(cred_r)
        os.close(ack_w)
        self.fd, self.cred_w = ack_r, cred_w

    def hand(self, credential: bytes, deadline: float) -> None:
        """Give the supervisor its credential (the job is committed): it claims the job before `deadline`."""
        self.give_up_at = deadline + ACK_GRACE
        if self.error is not None:
            raise self.error
        try:
            os.write(self.cred_w, credential)  # 32 bytes into an empty pipe: never blocks
        except OSError:
            pass  # it died already: the acknowledgement read below finds out how far it got
        finally:
            os.close(self.cred_w)
            self.cred_w = -1

    def abandon(self) -> None:
        """The job was not committed: the supervisor reads end-of-file instead of a credential, and exits."""
        if self.cred_w >= 0:
            os.close(self.cred_w)
            self.cred_w = -1
        self.close()

    def wait_for_ack(self) -> str:
        """Read the acknowledgement to its end; the supervisor id it gives (LaunchError, ack.BadAck)."""
        try:
            while not self.done:
                self.wait()
        finally:
            self.close()
        return self.supervisor_id()

    def wait(self) -> None:
        """Wait for more of the acknowledgement (one read), or for its deadline."""
        remaining = self.give_up_at - time.time()
        if remaining > 0:
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            if not poller.poll(int(remaining * 1000) + 1):
                return
        self.read()

    def read(self) -> None:
        """Read what has arrived (the descriptor is readable, or the deadline passed)."""
        from . import ack

        if time.time() >= self.give_up_at:
            self.error = LaunchError("the supervisor did not acknowledge its claim before the claim deadline")
            self.done = True
            return
        chunk = os.read(self.fd, ack.ACK_MAX_BYTES + 1 - len(self.raw))
        self.raw += chunk
        if not chunk or len(self.raw) > ack.ACK_MAX_BYTES:
            self.done = True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def supervisor_id(self) -> str:
        """The acknowledged supervisor id; LaunchError or ack.BadAck if there is none."""
        from . import ack

        if self.error is not None:
            raise self.error
        try:
            return ack.decode(self.raw, self.job_id)
        except ack.BadAck as e:
            raise ack.BadAck(f"{e}{_exit_note(self.pid)}") from None


def _exit_note(pid: int) -> str:
    try:
        status = proc.poll_child(pid)
    except ChildProcessError:
        return ""
    if status is None:
        return ""
    code, sig = proc.describe_status(status)
    return f" (the supervisor exited with {'code ' + str(code) if sig is None else proc.signal_name(sig)})"
