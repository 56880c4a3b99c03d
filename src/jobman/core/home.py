"""Where jobman keeps its state: $JOBMAN_HOME, else $XDG_STATE_HOME/jobman, else ~/.local/state/jobman.

A Home is that directory's path (a str, so that it goes wherever a path goes) and where each of its files is. The
environment is read once, at the edge (Home.from_environ: a command's State, a supervisor's start); everything
after is given the Home.
"""
import os

from .errors import BadInput


class Home(str):
    """A jobman home: its directory, and the path of each file in it."""

    __slots__ = ()

    @classmethod
    def from_environ(cls, env=os.environ) -> "Home":
        home = env.get("JOBMAN_HOME")
        if home:
            home = os.path.abspath(home)
        else:
            state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
            home = os.path.join(state, "jobman")
        if os.path.exists(home) and not os.path.isdir(home):
            raise BadInput(f"the jobman home {home} is a file, not a directory: set JOBMAN_HOME to a directory")
        return cls(home)

    def ensure(self) -> "Home":
        """Create the state directory (0700) and check that it is writable; raise BadInput if not. A directory
        jobman creates is made 0700 whatever the umask; one the user made is left as it is."""
        try:
            if not os.path.isdir(self):
                os.makedirs(os.path.dirname(self), exist_ok=True)
                try:
                    os.mkdir(self, 0o700)
                    os.chmod(self, 0o700)  # mkdir's mode passes through the umask
                except FileExistsError:
                    pass  # made meanwhile by another jobman (or the user): not ours to change
            os.makedirs(os.path.join(self, "logs"), mode=0o700, exist_ok=True)
            os.makedirs(os.path.join(self, "bells"), mode=0o700, exist_ok=True)
        except OSError as e:
            raise BadInput(f"cannot create the jobman state directory {self}: {e.strerror}; "
                           f"set JOBMAN_HOME to a writable directory") from None
        if not os.access(self, os.W_OK | os.X_OK):
            raise BadInput(f"the jobman state directory {self} is not writable; set JOBMAN_HOME to a writable "
                           "directory")
        return self

    @property
    def db(self) -> str:
        return os.path.join(self, "jobman.db")

    def job_logs(self, job_id: str) -> str:
        """The directory of a job's logs."""
        return os.path.join(self, "logs", job_id)

    def attempt_log(self, job_id: str, attempt: int) -> str:
        """Where attempt `attempt` writes its output (stdout, and stderr unless kept separate)."""
        return os.path.join(self, "logs", job_id, f"attempt-{attempt}.log")

    def supervisor_log(self, job_id: str) -> str:
        return os.path.join(self, "logs", job_id, "supervisor.log")

    def bell(self, job_id: str) -> str:
        """The job's doorbell (handoff.doorbell): a FIFO its supervisor listens on."""
        return os.path.join(self, "bells", f"{job_id}.fifo")


# The names of an attempt's other log files, from its output log's path (Home.attempt_log), which the attempt records:
# the supervisor writes them, `jobman logs` and `jobman show` read them.

def stderr_log_path(log_path: str) -> str:
    """The separate stderr log of the attempt whose output log is `log_path` (attempt-N.stderr.log)."""
    return log_path[:-len(".log")] + ".stderr.log"


def cut_path(log_path: str) -> str:
    """Where the log cap tells readers how much it cut from the front of `log_path` (see runkit.system.logcap)."""
    return log_path + ".cut"
