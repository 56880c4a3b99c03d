"""Keeping a log file that a target appends to directly within a size cap, newest output kept.

The target holds the file open with O_APPEND and never waits for us. Where the filesystem can
(ext4, xfs), the oldest bytes are cut with fallocate(FALLOC_FL_COLLAPSE_RANGE): the target's next
append lands at the new end, nothing is copied and nothing is lost in a race. Elsewhere we fall
back to copy-then-truncate: the newest part is copied aside, the file truncated, and the copy
written back (output appended during those steps may be lost; it is counted as dropped). Either
way the number of dropped bytes is returned so the caller can record it and readers can mark it.
"""
import os

FALLOC_FL_COLLAPSE_RANGE = 0x08
# After a cut, keep the newest half of the cap. A cut costs a write-back of what is kept (the
# filesystem flushes before it shifts extents), so fewer, larger cuts cost less in all.
KEEP_FRACTION = 0.5


class LogCap:
    def __init__(self, path: str, limit: int):
        self.path, self.limit = path, limit
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self.dropped = 0
        self._collapse_ok = True
        self._block = max(os.fstat(self.fd).st_blksize, 4096)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def enforce(self) -> int:
        """Cut the file back under the cap if it grew past it. Returns the bytes dropped by this call."""
        if self.limit <= 0:
            return 0
        size = self.size()
        if size <= self.limit:
            return 0
        cut = size - int(self.limit * KEEP_FRACTION)
        if self._collapse_ok:
            aligned = cut - cut % self._block
            if aligned > 0 and self._collapse(aligned):
                self.dropped += aligned
                return aligned
        return self._copy_truncate(cut)

    def _collapse(self, length: int) -> bool:
        from runkit.proc import _libc_handle
        import ctypes

        libc = _libc_handle()
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
        if libc.fallocate(self.fd, FALLOC_FL_COLLAPSE_RANGE, 0, length) == 0:
            return True
        self._collapse_ok = False  # EOPNOTSUPP (tmpfs, btrfs, NFS, ...): copy from now on
        return False

    def _copy_truncate(self, cut: int) -> int:
        size = self.size()
        keep = os.pread(self.fd, size - cut, cut) if size > cut else b""
        before = self.size()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, keep, 0)  # the target's O_APPEND writes from now on land after this
        dropped = before - len(keep)
        self.dropped += dropped
        return dropped

    def close(self) -> None:
        os.close(self.fd)
