"""Local-directory backend: the embedded default (``file:///abs/path``), for one host.

Layout under the root directory::

    objects/<key>   the objects, one file each (what list walks)
    locks/NNN.lock  flock files, one per hash bucket of keys, outside the object tree
    tmp/            writes in progress, outside the object tree; renamed into objects/

Create-if-absent and compare-and-swap hold between processes because every write of a key
happens under an exclusive ``fcntl.flock`` on its bucket's lock file; reads take no lock,
since a file is replaced only by an atomic rename and never changed in place. The lock is held
only to check the condition, stamp the version and rename: the bytes are written and fsynced to
a temporary file before it, and the rename made durable after it, so a writer stopped (SIGSTOP,
a host swapping) is almost never stopped holding one. A writer that waits longer than
``lock_wait`` seconds (STADO_FILE_LOCK_WAIT, default 30) for one gets StoreUnavailable naming
the process that holds it and its state, not a wait for as long as that process is stopped.

flock is not reliable on NFS or other network filesystems: this backend is for one host.
Several hosts must share an object store (s3://, az://, gs://) instead.

Versions: ``<inode>.<mtime_ns>.<size>`` of the object file. Inode numbers are reused and
identical bytes give identical sizes, so each write sets the new file's mtime to a value
strictly above every mtime assigned before in its lock bucket (the last one is kept in the
lock file, which outlives deletes) and above the current file's. Two writes of one key
therefore never share a version, even with identical bytes or after a delete and re-create,
unless both the lock directory is wiped and the clock steps back. A filesystem that does not
keep nanosecond mtimes fails every write loudly rather than risking a repeated version.
"""
import builtins
import os
import time
import zlib

from runkit.system import filelocks, host
from runkit.system.durable import unlink_quietly

from .base import (AlreadyExists, Blob, Entry, InvalidKey, NotFound, ObjectStore, PreconditionFailed, StoreError, StoreUnavailable, Version, check_key, check_range, dir_prefix)
from .local_files import (MISSING, Held, Opened, Staged, fsync_dir_present, kernel_time_ns, lock_wait_setting, os_errors_reported, settle, stat_or_none, version_of)

TYPE_CHECKING = False  # collections.abc imports collections: the annotations are the type checker's alone
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

LOCK_BUCKETS = 1024        # bounds the lock directory; unrelated keys sharing a bucket only serialise
STALE_TMP_SECONDS = 3600   # a temporary file this old belongs to a writer that died


class FileStore(ObjectStore):
    def __init__(self, root: str, url: str | None = None, lock_wait: float | None = None):
        self.root = os.path.abspath(root)
        self.url = url or f"file://{self.root}"
        self.lock_wait = lock_wait if lock_wait is not None else lock_wait_setting()
        self._objects = os.path.join(self.root, "objects")
        self._locks = os.path.join(self.root, "locks")
        self._tmp = os.path.join(self.root, "tmp")
        self._wake = os.path.join(self.root, "wake")  # ring(topic) touches wake/<topic>; wake_fd watches it
        self._quiet_names: dict[str, tuple[int, list[str]]] = {}  # list_page's names of a directory at rest
        try:
            for path in (self.root, self._objects, self._locks, self._tmp, self._wake):  # private to this user
                os.makedirs(path, mode=0o700, exist_ok=True)
            self._kernel_at = (kernel_time_ns(self._tmp), time.monotonic_ns())
        except OSError as exc:
            raise StoreUnavailable(f"cannot use {self.root} as the stado store ({exc.strerror}): "
                                   "choose a writable directory (STADO_CONFIG url = \"file:///...\")") from None
        self._sweep_tmp()

    def ring(self, topic: str) -> None:
        """Touch wake/<topic> (an open and a close, no data): every agent watching wake/ with inotify wakes at once."""
        try:
            os.close(os.open(os.path.join(self._wake, topic), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError:
            pass  # the waiters poll all the same

    def wake_fd(self, topic: str) -> int | None:
        return host.watch_directory(self._wake)

    def _now_ns(self) -> int:
        """The store's clock: the kernel's, which stamps every mtime here, read once at open and counted on from
        there on the monotonic clock. Never this process's wall clock, which may be off (a host's clock set
        wrong, or a program run under libfaketime): every object's `modified` comes from here, and it is the
        fleet's one clock (stado.store.storeclock). Its coarse tick makes it a few milliseconds early, at most."""
        return self._kernel_at[0] + (time.monotonic_ns() - self._kernel_at[1])

    # -- reads: no lock; a rename swaps whole files, so an open fd sees one version --------------

    def _opened(self, key: str) -> "Opened":
        """`with self._opened(key) as (fd, st)`: the regular file at key, open; NotFound if there is none."""
        return Opened(self._path(key), key)

    @os_errors_reported
    def get(self, key: str) -> Blob:
        with self._opened(key) as (fd, st):
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        return Blob(b"".join(chunks), version_of(st))

    @os_errors_reported
    def head(self, key: str) -> Entry:
        st = stat_or_none(self._path(key))
        if st is None:
            raise NotFound(key)
        return Entry(key, version_of(st), st.st_size, st.st_mtime_ns / 1e9)

    @os_errors_reported
    def get_range(self, key: str, start: int, length: int) -> Blob:
        check_range(start, length)
        with self._opened(key) as (fd, st):
            chunks, at, end = [], start, min(start + length, st.st_size)
            while at < end and (chunk := os.pread(fd, min(end - at, 1 << 24), at)):
                chunks.append(chunk)
                at += len(chunk)
        return Blob(b"".join(chunks), version_of(st))

    @os_errors_reported
    def list(self, prefix: str) -> "Iterator[Entry]":
        found = []
        for key in sorted(self._names_under(dir_prefix(prefix))[0]):
            st = stat_or_none(os.path.join(self._objects, key))
            if st is not None:  # deleted since the scan: as if listed a moment later
                found.append(Entry(key, version_of(st), st.st_size, st.st_mtime_ns / 1e9))
        return iter(found)

    def list_page(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> "builtins.list[Entry]":
        """As the interface says; the walk reads names only (the directory entries' types come with them) and
        stats just the page it returns, so a page of a 100,000-entry prefix costs a name scan, not 100,000
        stats."""
        import bisect
        import heapq
        from itertools import islice

        prefix = dir_prefix(prefix)
        names, ordered = self._names_under(prefix)
        candidates: Iterable[str]
        if ordered:
            candidates = islice(names, 0 if start_after is None else bisect.bisect_right(names, start_after), None)
        else:
            names = [key for key in names if start_after is None or key > start_after]
            candidates = heapq.nsmallest(limit, names) if len(names) > 4 * limit else sorted(names)
        page = []
        for key in candidates:
            st = stat_or_none(os.path.join(self._objects, key))
            if st is not None:  # deleted since the scan: as if listed a moment later
                page.append(Entry(key, version_of(st), st.st_size, st.st_mtime_ns / 1e9))
                if len(page) == limit:
                    break
        if len(page) < limit and not ordered and len(names) > 4 * limit:
            # Some were deleted meanwhile: a short page would read as the end of the listing; fill it the slow way.
            return ObjectStore.list_page(self, prefix, start_after=start_after, limit=limit)
        return page

    def _names_under(self, prefix: str) -> "tuple[builtins.list[str], bool]":
        """Every object key under `prefix`, from the directory entries' names and types (no stat per entry).
        A flat directory at rest (unmodified for a second before the scan began, by the store's clock: its mtime,
        coarse-grained, cannot hide a change made after the scan) is remembered, and scanned again only once it
        changes."""
        top = os.path.join(self._objects, prefix)
        try:
            mtime = os.stat(top).st_mtime_ns
        except OSError:
            mtime = None
        cached = self._quiet_names.get(prefix)
        if cached is not None and mtime is not None and cached[0] == mtime:
            return cached[1], True
        began = self._now_ns()
        names, pending, flat = [], [prefix], True
        while pending:
            rel_dir = pending.pop()
            try:
                with os.scandir(os.path.join(self._objects, rel_dir)) as it:
                    for item in it:
                        key = rel_dir + item.name
                        try:
                            if item.is_dir(follow_symlinks=False):
                                pending.append(key + "/")
                                flat = False
                            elif item.is_file(follow_symlinks=False):
                                names.append(key)
                        except FileNotFoundError:
                            continue
            except MISSING:
                continue
        if flat and mtime is not None and began - mtime > 1_000_000_000:
            names.sort()
            self._quiet_names[prefix] = (mtime, names)
            return names, True
        return names, False

    # -- writes: under the key's bucket lock --------------------------------------------------------

    @os_errors_reported
    def put_if_absent(self, key: str, data: bytes) -> Version:
        path = self._path(key)
        with Staged(self._tmp, data) as staged:
            with self._lock(key) as lock:
                current = stat_or_none(path)
                if current is not None:
                    raise AlreadyExists(key)
                self._place(key, path, staged, lock, current)
            return settle(path, staged)

    @os_errors_reported
    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        path = self._path(key)
        with Staged(self._tmp, data) as staged:
            with self._lock(key) as lock:
                current = stat_or_none(path)
                if current is None or version_of(current) != version:
                    raise PreconditionFailed(key)
                self._place(key, path, staged, lock, current)
            return settle(path, staged)

    @os_errors_reported
    def put(self, key: str, data: bytes) -> Version:
        path = self._path(key)
        with Staged(self._tmp, data) as staged:
            with self._lock(key) as lock:
                self._place(key, path, staged, lock, stat_or_none(path))
            return settle(path, staged)

    @os_errors_reported
    def put_chunks(self, key: str, chunks) -> Version:
        return self.put(key, chunks)  # Staged writes the pieces to its temporary file as they come, unlocked

    @os_errors_reported
    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._lock(key):
            try:
                os.unlink(path)
            except (*MISSING, IsADirectoryError):
                return
        self._removed(path)

    @os_errors_reported
    def delete_if_match(self, key: str, version: Version) -> bool:
        path = self._path(key)
        with self._lock(key):
            current = stat_or_none(path)
            if current is None or version_of(current) != version:
                return False
            os.unlink(path)
        self._removed(path)
        return True

    # -- helpers ------------------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return os.path.join(self._objects, check_key(key))

    def _lock(self, key: str) -> "Held":
        """Open and flock the key's bucket lock file: `with self._lock(key) as fd:` holds it for the block."""
        bucket = zlib.crc32(key.encode()) % LOCK_BUCKETS
        return self._held_within(f"{bucket:03x}.lock", f"for {key!r}")

    def _held_within(self, name: str, what: str) -> "Held":
        """An exclusive flock on a lock file of locks/, waited for `lock_wait` seconds at most: past that,
        StoreUnavailable names who holds it."""
        fd = os.open(os.path.join(self._locks, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if not filelocks.lock_within(fd, self.lock_wait):
                raise StoreUnavailable(
                    f"the local store's lock {name} {what} has been held for {self.lock_wait:g} s by "
                    f"{filelocks.holder_words(fd)}: a stopped one holds it until it is resumed (kill -CONT) or "
                    "killed; then try again")
        except BaseException:
            os.close(fd)
            raise
        return Held(fd)

    def _flock(self, name: str, *, exclusive: bool, wait: bool) -> "Held | None":
        """Open and flock a lock file of the store's locks/ directory; None if `wait` is False and it is held."""
        fd = os.open(os.path.join(self._locks, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if not filelocks.lock_file(fd, exclusive=exclusive, wait=wait):
                os.close(fd)
                return None
        except BaseException:
            os.close(fd)
            raise
        return Held(fd)

    def _removed(self, path: str) -> None:
        """After an object's unlink (under its lock, released since): make it durable, and drop the directories it
        left empty."""
        parent = os.path.dirname(path)
        fsync_dir_present(parent)
        self._prune(parent)

    def _next_mtime(self, lock: int, current: os.stat_result | None) -> int:
        """The next write's mtime: the store's clock now (_now_ns), above every earlier mtime of the bucket."""
        raw = os.pread(lock, 8, 0)
        last = int.from_bytes(raw, "big") if len(raw) == 8 else 0
        mtime = max(self._now_ns(), last + 1, (current.st_mtime_ns + 1) if current else 0)
        os.pwrite(lock, mtime.to_bytes(8, "big"), 0)
        return mtime

    def _place(self, key: str, path: str, staged: Staged, lock: int, current: os.stat_result | None) -> None:
        """Under the key's lock: stamp the staged file with the bucket's next mtime (its version) and rename it to
        the key."""
        mtime = self._next_mtime(lock, current)
        os.utime(staged.fd, ns=(mtime, mtime))
        staged.st = stamped = os.fstat(staged.fd)
        if stamped.st_mtime_ns != mtime:
            raise StoreError(f"the filesystem under {self.root} does not keep nanosecond mtimes, so the local "
                             "store cannot version objects safely: put it on ext4, xfs, btrfs or tmpfs")
        parent = os.path.dirname(path)
        # A concurrent delete may prune an empty parent between our mkdir and rename, or a directory above
        # it between two of our mkdirs (control/ gone before control/probe/ is made): make them again. A
        # writer that keeps losing that race holds the pruning lock, which stops every pruner, and wins.
        for attempt in range(4):
            try:
                if attempt < 3:
                    self._make_dirs(key, parent)
                    os.rename(staged.path, path)
                else:
                    with self._hold_pruning_lock():
                        self._make_dirs(key, parent)
                        os.rename(staged.path, path)
                staged.placed = True
                return
            except FileNotFoundError:
                if attempt == 3:
                    raise StoreUnavailable(f"could not create the directory for {key!r} under {self.root}: "
                                           "is something else removing directories there?") from None
            except (IsADirectoryError, NotADirectoryError):
                raise InvalidKey(f"the local store cannot hold {key!r} beside keys under or above it") from None

    def _make_dirs(self, key: str, parent: str) -> None:
        if os.path.isdir(parent):
            return
        path = self._objects
        for part in key.split("/")[:-1]:
            above, path = path, os.path.join(path, part)
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue
            except NotADirectoryError:
                raise InvalidKey(f"the local store cannot hold {key!r}: a key above it is an object") from None
            fsync_dir_present(above)  # the new directory entry must survive a crash with the object in it

    def _hold_pruning_lock(self) -> "Held":
        """Pruners share the pruning lock and never wait for it; a writer that lost the mkdir race to them waits to
        hold it alone, which stops every pruner until its directories are made and its object is in them."""
        return self._held_within("pruning.lock", "for making directories")

    def _prune(self, directory: str) -> None:
        """Remove directories the delete left empty, up to objects/, so that status/<id>/ trees don't pile up."""
        held = self._flock("pruning.lock", exclusive=False, wait=False)
        if held is None:  # a writer is making directories: an empty one left now goes with a later delete
            return
        with held:
            while directory != self._objects and directory.startswith(self._objects):
                try:
                    os.rmdir(directory)
                except OSError:  # not empty (or already gone): a writer is using it
                    return
                directory = os.path.dirname(directory)

    def _sweep_tmp(self) -> None:
        """Remove temporary files a writer that died left (an hour old by the store's clock: a process whose own
        clock runs ahead must not take another writer's file in flight for one)."""
        cutoff = self._now_ns() / 1e9 - STALE_TMP_SECONDS
        try:
            with os.scandir(self._tmp) as it:
                stale = [item.path for item in it if item.stat(follow_symlinks=False).st_mtime < cutoff]
        except OSError:
            return
        for path in stale:
            unlink_quietly(path)
