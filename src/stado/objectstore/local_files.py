"""The files of the local-directory store (file.py): an object opened for reading, a staged write, a held lock, and
the small steps around them (its version, making it durable, the store's clock)."""
import os
import stat as stat_mod

from runkit.system.durable import fsync_dir, unlink_quietly

from .base import NotFound, StoreError, StoreUnavailable, Version

LOCK_WAIT = 30.0  # seconds a writer waits for a bucket lock before it names its holder (StoreUnavailable)
MISSING = (FileNotFoundError, NotADirectoryError)


class Opened:
    """(fd, its stat) of the regular file at a key, closed on leaving. (A class, not contextlib's decorator:
    contextlib and functools cost every `stado submit` about 1 ms to import.)"""

    __slots__ = ("path", "key", "fd")

    def __init__(self, path: str, key: str):
        self.path, self.key, self.fd = path, key, -1

    def __enter__(self) -> tuple[int, os.stat_result]:
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except MISSING:
            raise NotFound(self.key) from None
        try:
            st = os.fstat(self.fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise NotFound(self.key)
        except BaseException:
            os.close(self.fd)
            raise
        return self.fd, st

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def version_of(st: os.stat_result) -> Version:
    return Version(f"{st.st_ino:x}.{st.st_mtime_ns:x}.{st.st_size:x}")


def os_errors_reported(method):
    """A full disk or a permission problem is the store being unavailable, told in one line, not an OSError."""
    def verb(self, key, *args, **kwargs):
        try:
            return method(self, key, *args, **kwargs)
        except OSError as exc:
            raise StoreUnavailable(f"the local store {self.root} failed to {method.__name__} {key!r} "
                                   f"({exc.strerror or exc}): check the disk and the directory's permissions") from None
    verb.__name__, verb.__doc__ = method.__name__, method.__doc__
    return verb


class Held:
    """A held bucket lock: its fd, closed (which releases the flock) when the `with` block ends."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


class Staged:
    """An object's bytes in a temporary file, written and fsynced before its key's lock is taken; placed (stamped and
    renamed into objects/) under the lock; made durable after it. Removed on leaving if it was never placed."""

    __slots__ = ("path", "fd", "st", "placed")

    def __init__(self, directory: str, data):
        self.path = os.path.join(directory, f".tmp.{os.getpid()}.{os.urandom(8).hex()}")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.st: os.stat_result | None = None
        self.placed = False
        try:
            for chunk in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(self.fd, view):]
            os.fsync(self.fd)  # the bytes are on disk before any name points at them
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)
        if not self.placed:
            unlink_quietly(self.path)


def kernel_time_ns(directory: str) -> int:
    """The kernel's clock now, as it stamps a new file (an unnamed temporary one, gone when closed)."""
    fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)


def settle(path: str, staged: Staged) -> Version:
    """After the lock: make the placed file's version (its mtime, stamped under the lock) and its name durable
    before the write is acknowledged."""
    assert staged.st is not None  # (placed: stamped and stat'ed)
    os.fsync(staged.fd)
    fsync_dir_present(os.path.dirname(path))
    return version_of(staged.st)


def lock_wait_setting() -> float:
    raw = os.environ.get("STADO_FILE_LOCK_WAIT")
    try:
        return LOCK_WAIT if raw is None else max(0.0, float(raw))
    except ValueError:
        raise StoreError(f"STADO_FILE_LOCK_WAIT={raw!r} is not a number of seconds: set it to one (the "
                               f"default is {LOCK_WAIT:g}), or unset it") from None


def fsync_dir_present(directory: str) -> None:
    # Locks are per key, not per directory: another process's delete may prune a directory that just
    # became empty. Then nothing of ours is left in it to make durable.
    try:
        fsync_dir(directory)
    except FileNotFoundError:
        pass


def stat_or_none(path: str) -> os.stat_result | None:
    """The object file's stat, or None when there is no object (a directory of other keys is none)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except MISSING:
        return None
    return st if stat_mod.S_ISREG(st.st_mode) else None
