"""Watching many processes for their end at once: a pidfd per process, all in one epoll set, so that asking
"which of these have ended?" costs one call however many are watched, and a recycled pid can never pass for
the process that had it (the pidfd is pinned to the process it was opened on, checked by start time).

Why: jobman's lease round must know, every renewal interval, that each waiting supervisor still lives;
reading /proc/PID/stat for each costs about 20 us, which at 10,000 waiting jobs is most of the round. A pidfd
turns readable when its process ends, and epoll reports only those.

Each pidfd is a file descriptor: a watch takes the soft RLIMIT_NOFILE up to the hard one as it needs, keeps
HEADROOM descriptors free for everything else the process opens, and gives the old soft limit back when
it is closed (so that nothing started afterwards inherits the raised one). Past that budget, or where there
are no pidfds (Linux before 5.3), `watch` says no and the caller falls back to looking itself.
"""
import os
import select

HEADROOM = 256


class DeathWatch:
    """Keys (the caller's names, e.g. job ids) watched for the end of a process each; several keys may watch
    one process, which then costs one descriptor."""

    def __init__(self):
        self._epoll: select.epoll | None = None
        self._fd_of: dict[object, int] = {}                 # key -> pidfd
        self._keys_of: dict[int, set] = {}                  # pidfd -> keys
        self._fd_by_process: dict[tuple[int, int], int] = {}  # (pid, start time) -> pidfd
        self._process_of: dict[int, tuple[int, int]] = {}
        self._saved_limit: tuple[int, int] | None = None
        self._full = False  # the budget is spent: no more pidfds until one is closed

    def __len__(self) -> int:
        return len(self._fd_of)

    def __contains__(self, key) -> bool:
        return key in self._fd_of

    def keys(self):
        return self._fd_of.keys()

    def watch(self, key, pid: int | None, start_time: int | None, boot: str | None) -> bool:
        """Watch that exact process (pid, start time and boot) under `key`; False if it is gone, is someone else
        now, or cannot be watched here (no pidfds, no descriptors left): the caller then looks for itself."""
        from .proc import boot_id

        if pid is None or start_time is None or pid <= 0 or boot != boot_id():
            return False
        if key in self._fd_of:
            return self._process_of[self._fd_of[key]] == (pid, start_time)
        fd = self._fd_by_process.get((pid, start_time))
        if fd is None:
            fd = self._open(pid, start_time)
            if fd is None:
                return False
        self._fd_of[key] = fd
        self._keys_of[fd].add(key)
        return True

    def ended(self) -> set:
        """The keys whose process has ended (or turned zombie) since it was watched. They stay watched, and keep
        being reported, until forgotten."""
        if self._epoll is None or not self._keys_of:
            return set()
        gone: set = set()
        for fd, _ in self._epoll.poll(0, len(self._keys_of)):
            gone |= self._keys_of.get(fd, set())
        return gone

    def forget(self, key) -> None:
        fd = self._fd_of.pop(key, None)
        if fd is None:
            return
        keys = self._keys_of[fd]
        keys.discard(key)
        if not keys:
            del self._keys_of[fd]
            del self._fd_by_process[self._process_of.pop(fd)]
            assert self._epoll is not None
            self._epoll.unregister(fd)
            os.close(fd)
            self._full = False

    def close(self) -> None:
        """Forget every key, close every descriptor, and give the soft descriptor limit back."""
        for fd in list(self._keys_of):
            os.close(fd)
        self._fd_of.clear()
        self._keys_of.clear()
        self._fd_by_process.clear()
        self._process_of.clear()
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None
        if self._saved_limit is not None:
            import resource

            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, self._saved_limit)
            except (ValueError, OSError):
                pass  # descriptors opened meanwhile by others may exceed it: the raised limit stays
            self._saved_limit = None
        self._full = False

    def _open(self, pid: int, start_time: int) -> int | None:
        if self._full or not hasattr(os, "pidfd_open") or not self._room():
            return None
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return None  # gone (ESRCH), or no pidfds in this kernel (ENOSYS)
        # Opened after the look the caller made: the process it names now is the one the start time names.
        if _start_time(pid) != start_time:
            os.close(fd)
            return None
        if self._epoll is None:
            self._epoll = select.epoll()
        self._epoll.register(fd, select.EPOLLIN)
        self._keys_of[fd] = set()
        self._fd_by_process[(pid, start_time)] = fd
        self._process_of[fd] = (pid, start_time)
        return fd

    def _room(self) -> bool:
        """Whether one more descriptor fits, HEADROOM kept free; raises the soft limit (up to the hard one) when
        it must."""
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        needed = len(self._keys_of) + HEADROOM + 64  # (the epoll set, the database, the doorbells and the rest)
        if needed <= soft:
            return True
        unlimited = hard == resource.RLIM_INFINITY
        if not unlimited and needed > hard:
            self._full = True
            return False
        if self._saved_limit is None:
            self._saved_limit = (soft, hard)
        # Raised in steps, so that a watch of 200 processes does not take the limit to a million.
        target = max(needed * 2, soft)
        if not unlimited:
            target = min(target, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            self._full = True
            return False
        return True


def _start_time(pid: int) -> int | None:
    from .proc import stat

    st = stat(pid)
    return st.start_time if st is not None and st.alive else None
