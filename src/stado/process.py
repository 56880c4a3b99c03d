"""Starting a job's shell and stopping its process group (stado's own process code; the platform
primitives are runkit.proc's)."""
import os
import signal
import sys

from runkit import proc


def spawn_shell(command: str, env: dict[str, str], cwd: str, output_path: str) -> int:
    """Start `/bin/sh -c command` in its own session (so its process group id is its pid), in `cwd`,
    stdin from /dev/null, stdout and stderr appended straight to `output_path` (the job never blocks
    on, or gets SIGPIPE from, the agent). Every signal at its default in the child. Raises OSError."""
    out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    # posix_spawn has no working-directory action in Python 3.11: the agent is single-threaded, so it
    # changes its own directory around the spawn and goes back (every path it uses is absolute).
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chdir(cwd)
        try:
            return proc.spawn("/bin/sh", ["/bin/sh", "-c", command], env, stdin=null, stdout=out, stderr=out,
                              new_session=True)
        finally:
            os.fchdir(here)
    finally:
        for fd in (here, null, out):
            os.close(fd)


def group_alive(pgid: int) -> bool:
    """True while any process of the group exists (reap the leader first: a zombie still counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap(pid: int) -> tuple[int | None, int | None] | None:
    """(exit code, signal) once the child has ended, else None. Never blocks."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return (None, None)
    if done == 0:
        return None
    code = os.waitstatus_to_exitcode(status)
    return (code, None) if code >= 0 else (None, -code)


TERM, KILL = signal.SIGTERM, signal.SIGKILL


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux PR_SET_CHILD_SUBREAPER), so that
    when a job's shell dies first, the agent itself reaps what it left and a stopped group is really
    gone at once (not a set of zombies waiting for init). False where the platform has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(36, 1, 0, 0, 0) == 0  # 36 = PR_SET_CHILD_SUBREAPER


def reap_any() -> list[tuple[int, int | None, int | None]]:
    """(pid, exit code, signal) of every child that has ended, without blocking."""
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        code = os.waitstatus_to_exitcode(status)
        ended.append((pid, code, None) if code >= 0 else (pid, None, -code))
