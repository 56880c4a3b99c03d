"""Where jobman keeps its state: $JOBMAN_HOME, else $XDG_STATE_HOME/jobman, else ~/.local/state/jobman."""
import os

from .errors import BadInput


def home_dir(env=os.environ) -> str:
    home = env.get("JOBMAN_HOME")
    if home:
        home = os.path.abspath(home)
    else:
        state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        home = os.path.join(state, "jobman")
    if os.path.exists(home) and not os.path.isdir(home):
        raise BadInput(f"the jobman home {home} is a file, not a directory: set JOBMAN_HOME to a directory")
    return home


def ensure_home(home: str) -> str:
    """Create the state directory (0700) and check that it is writable; raise BadInput if not.
    A directory jobman creates is made 0700 whatever the umask; one the user made is left as it is."""
    try:
        if not os.path.isdir(home):
            os.makedirs(os.path.dirname(home), exist_ok=True)
            try:
                os.mkdir(home, 0o700)
                os.chmod(home, 0o700)  # mkdir's mode passes through the umask
            except FileExistsError:
                pass  # made meanwhile by another jobman (or the user): not ours to change
        os.makedirs(os.path.join(home, "logs"), mode=0o700, exist_ok=True)
        os.makedirs(os.path.join(home, "bells"), mode=0o700, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create the jobman state directory {home}: {e.strerror}; "
                       f"set JOBMAN_HOME to a writable directory") from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise BadInput(f"the jobman state directory {home} is not writable; set JOBMAN_HOME to a writable directory")
    return home


def db_path(home: str) -> str:
    return os.path.join(home, "jobman.db")


def job_log_dir(home: str, job_id: str) -> str:
    return os.path.join(home, "logs", job_id)


# The names of an attempt's log files, in one place: the supervisor writes them, `jobman logs` and
# `jobman show` read them. An attempt records its output log's path; the rest derive from it.

def attempt_log_path(home: str, job_id: str, attempt: int) -> str:
    """Where attempt `attempt` writes its output (stdout, and stderr unless kept separate)."""
    return os.path.join(home, "logs", job_id, f"attempt-{attempt}.log")


def stderr_log_path(log_path: str) -> str:
    """The separate stderr log of the attempt whose output log is `log_path` (attempt-N.stderr.log)."""
    return log_path[:-len(".log")] + ".stderr.log"


def cut_path(log_path: str) -> str:
    """Where the log cap tells readers how much it cut from the front of `log_path` (see runkit.system.logcap)."""
    return log_path + ".cut"


def supervisor_log_path(home: str, job_id: str) -> str:
    return os.path.join(home, "logs", job_id, "supervisor.log")


def bell_path(home: str, job_id: str) -> str:
    return os.path.join(home, "bells", f"{job_id}.fifo")
