"""The exit status of a process that is not our child (stado's take-over after a crash): a pidfd pinned to
that exact process, read once it has ended (PIDFD_GET_INFO, Linux 6.15+), or /proc while it is a zombie.
"""
import os

from .proc import stat


# struct pidfd_info (linux/pidfd.h, Linux 6.15+): mask u64 @0 ... exit_code s32 @60; 64 bytes in all.
_PIDFD_GET_INFO = 0xC040FF0B  # _IOWR(0xFF, 11, struct pidfd_info)


_PIDFD_INFO_EXIT = 1 << 3


_STAT_EXIT_CODE = 49  # /proc/PID/stat field 52 (Linux 3.5+), counted from the field after the command name's ')'


def pin_child(pid: int) -> int | None:
    """A pidfd on a child this process has just started and not yet waited for (so the pid is still that child),
    or None where there are no pidfds. Close it with os.close."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def exit_watch(pid: int, start_time: int) -> int | None:
    """A pidfd pinned to that exact process (an identity check right after opening it), from which
    exit_status_of() can later read how it ended though another process reaps it; None if it is gone or is
    someone else now. Close it with os.close."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None
    st = stat(pid)
    if st is None or st.start_time != start_time:
        os.close(pidfd)
        return None
    return pidfd


def exit_status_of(pidfd: int, pid: int, start_time: int) -> int | None:
    """The wait status of the process exit_watch() pinned, once it has ended: from its pidfd once its parent
    has reaped it (Linux 6.15+), or from /proc while it is still a zombie. None while it runs, or where the
    kernel keeps neither."""
    # Zombie, then pidfd again: reaped between the first two looks, it has left /proc for the pidfd.
    for look in (_pidfd_exit, _zombie_exit, _pidfd_exit):
        status = look(pidfd, pid, start_time)
        if status is not None:
            return status
    return None


def _pidfd_exit(pidfd: int, pid: int, start_time: int) -> int | None:
    import fcntl
    import struct

    info = bytearray(64)
    struct.pack_into("<Q", info, 0, _PIDFD_INFO_EXIT)
    try:
        fcntl.ioctl(pidfd, _PIDFD_GET_INFO, info, True)
    except OSError:
        return None  # an older kernel: no exit information on pidfds
    if struct.unpack_from("<Q", info, 0)[0] & _PIDFD_INFO_EXIT:
        return struct.unpack_from("<i", info, 60)[0]
    return None


def _zombie_exit(pidfd: int, pid: int, start_time: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if rest[0] != b"Z" or int(rest[19]) != start_time or len(rest) <= _STAT_EXIT_CODE:
        return None
    return int(rest[_STAT_EXIT_CODE])
