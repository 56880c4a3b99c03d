"""Process trees: a process's descendants found, signalled and stopped, and an orphaned tree found again by
the session it was started in (what jobman's supervisor and stado's agent stop when a job ends or is
cancelled). Built on proc's identity and exact signalling; read from the process table in /proc.
"""
import os

from .proc import PROC_FS, Stat, boot_id, require_proc, signal_exact, stat


def all_stats() -> list[Stat]:
    require_proc()
    stats = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = stat(int(entry))
            if st is not None:
                stats.append(st)
    return stats


def children(pid: int) -> list[int] | None:
    """Direct children from /proc/PID/task/*/children (cheap: no scan of the whole process table);
    None where the kernel does not offer it."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None if not PROC_FS else []
    kids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(k) for k in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return kids


def descendants(root: int, stats: list[Stat] | None = None) -> list[Stat]:
    """Every live process below `root` (children, grandchildren, ...): by walking children lists where the
    kernel has them, else from one scan of the process table."""
    if stats is None and PROC_FS:
        found, frontier = [], [root]
        while frontier:
            kids = children(frontier.pop())
            if kids is None:
                break
            for kid in kids:
                st = stat(kid)
                if st is not None:
                    found.append(st)
                    frontier.append(kid)
        else:
            return found
    children_of: dict[int, list[Stat]] = {}
    for st in stats if stats is not None else all_stats():
        children_of.setdefault(st.ppid, []).append(st)
    found, frontier = [], [root]
    while frontier:
        for child in children_of.get(frontier.pop(), ()):
            found.append(child)
            frontier.append(child.pid)
    return found


def signal_tree(root: int, sig: int) -> int:
    """Signal every live descendant of `root`, each one identity-checked. Returns how many were signalled.
    A stopped process sent SIGTERM is continued after it (as systemd does), so that a job stopped with
    SIGSTOP stops at its cancel or timeout, not at the SIGKILL that follows."""
    count = 0
    for st in descendants(root):
        if st.alive and signal_exact(st.pid, st.start_time, sig):
            count += 1
            _continue_if_stopped(st, sig)
    return count


def _continue_if_stopped(st: Stat, sig: int) -> None:
    import signal

    if sig == signal.SIGTERM and st.state in ("T", "t"):
        signal_exact(st.pid, st.start_time, signal.SIGCONT)


def live_descendants(root: int) -> list[Stat]:
    return [st for st in descendants(root) if st.alive]


def orphaned_tree(pid: int | None, start_time: int | None, boot: str | None) -> list[Stat]:
    """The live processes of a target tree whose watcher is gone: the root itself if it still verifies,
    every member of the session and process group it led (a double fork keeps both, but its parent
    becomes init, so no walk of children finds it), and everything below those.

    POSIX forbids reusing a pid while a process group or session with that id exists, so members with
    that sid or pgid are ours, unless the pid now belongs to a different process (then our session
    ended before it was reused). Members must also have started no earlier than the root."""
    if pid is None or start_time is None or boot is None or pid <= 0 or boot != boot_id():
        return []
    root = stat(pid)
    if root is not None and root.start_time != start_time:
        return []  # the pid is someone else's now, so our session and group ended before that
    stats = all_stats()
    members = [st for st in stats if st.alive and (st.sid == pid or st.pgid == pid) and st.start_time >= start_time]
    found = {st.pid: st for st in members}
    for member in members:
        for below in descendants(member.pid, stats):
            if below.alive:
                found.setdefault(below.pid, below)
    return list(found.values())


def stop_orphaned_tree(pid: int, start_time: int, boot: str, grace: float, poll: float = 0.05) -> bool:
    """SIGTERM every process of orphaned_tree(), then SIGKILL what is left after `grace` seconds; every
    signal identity-checked. Returns whether anything was found to stop."""
    return stop_all(lambda: orphaned_tree(pid, start_time, boot), grace, poll)


def stop_all(find, grace: float, poll: float = 0.05) -> bool:
    """SIGTERM every process that find() returns (a list of Stat), then SIGKILL what it still returns
    after `grace` seconds, going round until it returns nothing (a process may fork while we kill);
    every signal pinned to the process's start time. Returns whether anything was found to stop."""
    import signal
    import time

    tree = find()
    if not tree:
        return False
    for st in tree:
        if signal_exact(st.pid, st.start_time, signal.SIGTERM):
            _continue_if_stopped(st, signal.SIGTERM)
    give_up = time.monotonic() + grace
    while (tree := find()) and time.monotonic() < give_up:
        time.sleep(poll)
    for _ in range(50):
        if not tree:
            break
        for st in tree:
            signal_exact(st.pid, st.start_time, signal.SIGKILL)
        time.sleep(poll)
        tree = find()
    return True
