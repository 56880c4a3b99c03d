"""The rest of what jobman and stado ask of the host: a directory watched for writes (inotify), names claimed
in the abstract socket namespace, the physical memory, and log-file hole punching (fallocate).
"""
import os

from .proc import libc_handle, require_proc


# Linux fallocate(2) modes (linux/falloc.h).
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE, _FALLOC_FL_COLLAPSE_RANGE = 0x01, 0x02, 0x08


def watch_directory(path: str) -> int | None:
    """A non-blocking, close-on-exec fd that turns readable when a file in the directory `path` is created, written
    and closed, renamed into it or touched (Linux inotify); None where that cannot be had (no inotify, no such
    directory, the watch limit reached): the caller then polls. Read it empty with `drain`."""
    IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x4, 0x8, 0x80, 0x100
    IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
    try:
        libc = libc_handle()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(path), IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0:
        os.close(fd)
        return None
    return fd


def claim_name(name: str):
    """A socket bound to `name` in this machine's abstract socket namespace (per network namespace): held while the
    socket is open, and let go by the kernel when its process dies however it dies, as an flock is. Raises OSError
    (EADDRINUSE) if another process holds that very name. The caller keeps the socket."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind("\0" + name)
    except OSError:
        sock.close()
        raise
    return sock


def names_claimed(prefix: str) -> list[str]:
    """The abstract socket names held on this machine (its network namespace) that start with `prefix`."""
    require_proc()
    try:
        with open("/proc/net/unix") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith("@" + prefix):
            found.append(fields[7][1:])
    return found


def physical_memory() -> int | None:
    """This host's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def collapse_range(fd: int, offset: int, length: int) -> bool:
    """Remove `length` bytes at `offset` from the file, moving what follows down (whole blocks; ext4, xfs):
    whether it was done (False where the filesystem or the system cannot)."""
    return _fallocate(fd, _FALLOC_FL_COLLAPSE_RANGE, offset, length)


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the file's bytes from `offset` for `length` in place, its size and offsets unchanged (tmpfs, btrfs,
    ext4, ...): whether it was done."""
    return _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)


def _fallocate(fd: int, flags: int, offset: int, length: int) -> bool:
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = libc_handle()
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    return libc.fallocate(fd, flags, offset, length) == 0
