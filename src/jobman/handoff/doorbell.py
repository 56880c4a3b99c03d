"""Per-job doorbells: a FIFO each waiting supervisor listens on, rung by whoever changes something it
waits for (a dependency finished, a slot freed, a limit changed, a cancel requested).

A ring carries no data and may be lost (the supervisor was busy, the FIFO is full): the supervisor
re-reads the database after every ring, and a slow poll guarantees progress if a ring is missed.
"""
import errno
import os

from runkit.system import proc

from ..core.home import Home

ROUND = b"R"


class Doorbell:
    """The listening end, owned by one supervisor."""

    def __init__(self, home: str, job_id: str, fd: int | None = None):
        self.path = Home(home).bell(job_id)
        if fd is not None:
            self.fd = fd
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.mkfifo(self.path, 0o600)
        # O_RDWR keeps a writer open ourselves, so the FIFO never reports end-of-file between rings.
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)

    @classmethod
    def adopt(cls, home: str, job_id: str, fd: int) -> "Doorbell":
        """The doorbell a supervisor kept open across its lean form (jobman.supervisor.lean), if `fd` is still that
        FIFO at its path; else a new one (whoever rings the job opens the path). Raises OSError as
        __init__ does."""
        path = Home(home).bell(job_id)
        try:
            mine, there = os.fstat(fd), os.stat(path)
            if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                os.set_inheritable(fd, False)  # nothing the supervisor starts from now on gets it
                os.set_blocking(fd, False)
                return cls(home, job_id, fd)
        except OSError:
            pass
        try:
            os.close(fd)
        except OSError:
            pass
        return cls(home, job_id)

    def drain(self) -> bool:
        """Empty the FIFO; whether any ring was more than a hand-off of the lease round."""
        return proc.drain(self.fd).strip(ROUND) != b""

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass  # gone already, or the home turned read-only: nothing rings a FIFO nobody reads
        os.close(self.fd)


def discard(home: str, job_id: str, fd: int) -> None:
    """Close a doorbell kept open across the lean form by a supervisor that leaves (its job finished meanwhile), and
    remove the FIFO if it is still that one: nothing will listen on it again."""
    path = Home(home).bell(job_id)
    try:
        mine, there = os.fstat(fd), os.stat(path)
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            os.unlink(path)
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def remove(home: str, job_id: str) -> None:
    """Remove the FIFO of a job whose supervisor is gone (found lost): nothing will listen on it again."""
    try:
        os.unlink(Home(home).bell(job_id))
    except OSError:
        pass


def ring(home: str, job_id: str, what: bytes = b"!") -> bool:
    """Wake that job's supervisor if it listens; never blocks, never fails. what=ROUND asks it only to
    look at the lease round (whose holder has stopped waiting), not to look at its job again."""
    try:
        fd = os.open(Home(home).bell(job_id), os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # no FIFO (not listening yet, or gone) or no reader (ENXIO)
    try:
        os.write(fd, what)
        return True
    except OSError as e:
        return e.errno == errno.EAGAIN  # full: a ring is already pending
    finally:
        os.close(fd)


def ring_all(home: str, job_ids) -> None:
    for job_id in job_ids:
        ring(home, job_id)
