"""flock(2) locks on open files: taken at once, or waited for no longer than a bound, and their holders named.

The kernel lets go of a lock when its holder dies, however it dies; it does not when its holder is stopped
(SIGSTOP, a debugger, a host swapping), and every other process that wants the lock then waits for as long as
that one is stopped. A bounded wait turns that into an error that names the process and its state.
"""
import os
import time

_STATES = {"T": "stopped", "t": "stopped by a debugger", "D": "waiting on the disk", "Z": "exiting"}


def lock_file(fd: int, *, exclusive: bool = True, wait: bool = True) -> bool:
    """Lock the open file for this process until unlock_file or close. Without wait, False at once if another
    holds it."""
    import fcntl

    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB)
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        return False
    return True


def unlock_file(fd: int) -> None:
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def lock_within(fd: int, seconds: float, *, exclusive: bool = True) -> bool:
    """Lock the open file, waiting at most `seconds` for whoever holds it (polled: a blocking flock cannot be
    bounded from a thread). False if it is still held then."""
    if lock_file(fd, exclusive=exclusive, wait=False):
        return True
    deadline, pause = time.monotonic() + seconds, 0.0005
    while True:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        if lock_file(fd, exclusive=exclusive, wait=False):
            return True
        if time.monotonic() >= deadline:
            return False
        pause = min(pause * 2, 0.02)


def holders(fd: int) -> list[int]:
    """The pids that hold a flock on the open file (from /proc/locks; empty where it cannot be read)."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    found = []
    try:
        with open("/proc/locks") as table:
            for line in table:
                words = line.split()
                if "FLOCK" in words and "->" not in words:  # (a "->" line is a waiter, not a holder)
                    at = words.index("FLOCK")
                    if len(words) > at + 4 and words[at + 4] == where and words[at + 3].isdigit():
                        found.append(int(words[at + 3]))
    except OSError:
        return []
    return found


def holder_words(fd: int) -> str:
    """Who holds the lock, in words: 'process 1234 (stopped)', or 'another process' where it cannot be told."""
    from . import proc

    named = []
    for pid in holders(fd):
        st = proc.stat(pid)
        state = _STATES.get(st.state, "running") if st is not None else "gone"
        named.append(f"process {pid} ({state})")
    return ", ".join(named) or "another process"
