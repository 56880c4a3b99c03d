"""Starting a job's shell and stopping its process group (stado's own process code; the platform
primitives are runkit.proc's)."""
import os
import signal

from runkit import proc


def spawn_shell(command: str, env: dict[str, str], cwd: str, output_path: str) -> int:
    """Start `/bin/sh -c command` in its own session (so its process group id is its pid), in `cwd`,
    stdin from /dev/null, stdout and stderr appended straight to `output_path` (the job never blocks
    on, or gets SIGPIPE from, the agent). Every signal at its default in the child. Raises OSError."""
    out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return proc.spawn("/bin/sh", ["/bin/sh", "-c", command], env, stdin=null, stdout=out, stderr=out,
                          new_session=True, cwd=cwd)
    finally:
        os.close(null)
        os.close(out)


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


def reap_any() -> list[tuple[int, int | None, int | None]]:
    """(pid, exit code, signal) of every child that has ended, without blocking."""
    return [(pid, *proc.describe_status(status)) for pid, status in proc.reap_children()]
