"""The process table: every process id, and of each its owner, start-up environment, open paths and command
line (runkit.system.envfind builds its searches on these). Empty or None where it cannot be read.
"""
import os


def pids() -> list[int]:
    """Every process id on this host (empty where the process table cannot be read)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def owner_uid(pid: int) -> int | None:
    """The user id a process runs as, or None if it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def environ_of(pid: int) -> bytes | None:
    """The environment the process was started with (NUL-separated NAME=value), or None if it is gone or not
    this user's."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return None


def paths_held(pid: int) -> list[str] | None:
    """The process's working directory and the paths of its open files (what lsof lists), or None if it is
    gone or not this user's."""
    base = f"/proc/{pid}"
    try:
        paths = [os.readlink(f"{base}/cwd")]
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            paths.append(os.readlink(f"{base}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return paths


def command_line(pid: int) -> str | None:
    """The process's command line, its arguments joined by spaces, or None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
