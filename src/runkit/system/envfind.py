"""Finding processes by what /proc shows of them, when no recorded identity leads to them: a variable
in their environment, or a path they hold (their working directory or an open file).

The variable is the way to a job's processes when its supervisor died before recording the target, or a
descendant double-forked and started a session of its own: every target starts with its job's id in
its environment (JOBMAN_JOB_ID) and its descendants inherit it, whatever they do with sessions.

What a process shows of itself comes from runkit.system.proc (on Linux, /proc/PID/environ, the environment it was
started with, and /proc/PID/cwd, fd/); only this user's processes are looked at.
"""
import os

from .proc import Stat, stat
from .proctable import environ_of, owner_uid, paths_held, pids


def processes_with(name: str, values=None) -> dict[str, list[Stat]]:
    """Live processes of this user (this process excepted) whose environment has `name`, grouped by
    its value; only the values in `values` when given. One scan of the process table."""
    found: dict[str, list[Stat]] = {}
    prefix = name.encode() + b"="
    wanted = None if values is None else {v.encode() for v in values}
    me, uid = os.getpid(), os.getuid()
    for pid in pids():
        if pid == me or owner_uid(pid) != uid:
            continue
        environ = environ_of(pid)
        if environ is None:
            continue  # gone meanwhile, or not readable (another user, a kernel thread)
        value = _value_of(environ, prefix)
        if value is None or (wanted is not None and value not in wanted):
            continue
        st = stat(pid)
        if st is not None and st.alive:
            found.setdefault(value.decode(errors="replace"), []).append(st)
    return found


def environ_value(pid: int, name: str) -> str | None:
    """The value of `name` in the environment process `pid` was started with; None if absent or unreadable."""
    environ = environ_of(pid)
    value = None if environ is None else _value_of(environ, name.encode() + b"=")
    return None if value is None else value.decode(errors="replace")


def _value_of(environ: bytes, prefix: bytes) -> bytes | None:
    if environ.startswith(prefix):
        start = len(prefix)
    else:
        at = environ.find(b"\0" + prefix)
        if at < 0:
            return None
        start = at + 1 + len(prefix)
    end = environ.find(b"\0", start)
    return environ[start:] if end < 0 else environ[start:end]


def using_path(directory: str) -> list[int]:
    """Pids of live processes (of this user: others' cannot be read) whose working directory or an open
    file lies in `directory` or below it: what `lsof +D` would list (empty where the process table cannot be
    read)."""
    root = os.path.realpath(directory)
    inside = root.rstrip("/") + "/"
    found = []
    for pid in pids():
        paths = paths_held(pid)
        if paths is None:  # gone meanwhile, or another user's
            continue
        if any(p == root or p.startswith(inside) for p in paths):
            st = stat(pid)
            if st is not None and st.alive:
                found.append(pid)
    return found
