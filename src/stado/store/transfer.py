"""Moving large objects without a clock ending the transfer (the rule: no timer ends a transfer; a fetch that
stops moving stays visible as stalled in the job's output, and is ended by cancelling the job by name).

A download reads its object in ranges (ObjectStore.get_range) sized to about a second of what the link
carries, so no single request has to carry the whole object within the store client's request timeout.
Each range is appended to a partial file; a range that fails is tried again, smaller, from where the
transfer stopped, and a later attempt resumes from the partial file (a sidecar names the object and the
version its bytes came from; another version starts again at zero). A transfer ends only when it is
done or cancelled (the job cancelled by name, Ctrl-C of `stado results`), or, where a stall limit is set
(STADO_CONFIG stall_timeout; off by default), once it has moved no bytes for that long (TransferStalled).
One that stops moving is shown stalled, with the bytes so far and how long it has not moved (Progress).

Work runs on a Worker thread so that its owner stays responsive: the agent's loop keeps renewing
leases and honours SIGTERM, the CLI prints progress. A worker blocked in a request that stopped moving
is abandoned by its owner's check(): it writes nothing more, and ends when the store client gives up
on that request.
"""
import hashlib
import json
import os
import threading
import time

from runkit.system.durable import fsync_dir

from ..core.errors import ChecksumMismatch, TransferStalled
from ..objectstore.base import AccessDenied, ConfigError, InvalidKey, NotFound, ObjectStore, StoreError, Version

FIRST_RANGE = 1 << 20
MIN_RANGE = 64 << 10
MAX_RANGE = 64 << 20
RANGE_SECONDS = 1.0  # aim: one range per second of what the link carries (less with a short stall window)
# Ranges are sized to a second of the link: two seconds without a byte is a transfer that has stopped moving.
STALLED_AFTER = 2 * RANGE_SECONDS
PERMANENT = (NotFound, AccessDenied, ConfigError, InvalidKey)  # trying again cannot help

_path_locks: dict[str, threading.Lock] = {}
_path_locks_guard = threading.Lock()


class Cancelled(Exception):
    """The owner gave up on this work (a stall, a cancel); raised inside the worker only."""


class Progress:
    """Bytes moved so far, and when bytes last moved (monotonic): what a stall is judged by."""

    def __init__(self, total: int = 0):
        self.total, self.done = total, 0
        self.resumed = 0  # bytes an earlier attempt had fetched, taken up again
        self.started = self.moved_at = time.monotonic()
        self.cancelled = threading.Event()

    def moved(self, n: int) -> None:
        self.done += n
        self.moved_at = time.monotonic()

    def idle_for(self, now: float) -> float:
        return now - self.moved_at

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def stalled_for(self) -> float | None:
        """Seconds without a byte moved, once that is long enough to call the transfer stalled; else None."""
        idle = self.idle_for(time.monotonic())
        return idle if idle >= STALLED_AFTER else None

    def describe(self) -> str:
        stalled = self.stalled_for()
        if stalled is not None:
            return f"stalled at {human(self.done)} of {human(self.total)}: no bytes moved for {stalled:.0f} s"
        rate = (self.done - self.resumed) / max(time.monotonic() - self.started, 1e-3)
        return f"{human(self.done)} of {human(self.total)} ({human(rate)}/s)"


class Worker:
    """Runs fn(progress) on a daemon thread. check() -> 'running' | 'done' | 'failed' | 'stalled'; with a
    stall limit, a worker whose progress has not moved for stall_seconds is abandoned and reported stalled
    (without one it runs until it is done, fails or is cancelled)."""

    def __init__(self, fn, progress: Progress, *, stall_seconds: float | None, name: str, notify=None):
        self.progress, self.stall_seconds, self.notify = progress, stall_seconds, notify
        self.result = None
        self.error: BaseException | None = None
        self._fn = fn
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "Worker":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = self._fn(self.progress)
        except BaseException as e:  # reported to the owner by check(); a worker thread has no one else to tell
            if self.error is None:  # a stall the owner declared keeps its message
                self.error = e
        self._finished.set()
        if self.notify is not None:
            self.notify()

    def cancel(self) -> None:
        self.progress.cancelled.set()

    def wait(self, timeout: float) -> bool:
        return self._finished.wait(timeout)

    def check(self) -> str:
        if self._finished.is_set():
            if self.error is None:
                return "done"
            return "stalled" if isinstance(self.error, (TransferStalled, Cancelled)) else "failed"
        if self.stall_seconds is not None and self.progress.idle_for(time.monotonic()) > self.stall_seconds:
            self.cancel()
            self.error = TransferStalled(f"no bytes moved for {self.stall_seconds:g} s after "
                                         f"{human(self.progress.done)} of {human(self.progress.total)}")
            return "stalled"
        return "running"


def watch(worker: Worker, on_progress=None, every: float = 0.25):
    """Wait for a started worker in this thread, calling on_progress(progress, state) as it goes; its
    result, or its error raised here (TransferStalled when it stopped moving)."""
    while True:
        state = worker.check()
        if on_progress is not None:
            on_progress(worker.progress, state)
        if state == "done":
            return worker.result
        if state != "running":
            error = worker.error
            assert error is not None  # stalled or failed: check() keeps why
            raise TransferStalled("cancelled") if isinstance(error, Cancelled) else error
        worker.wait(every)


def progress_printer(stream, label: str, every: float = 0.25, stalled_hint: str = ""):
    """An on_progress for watch() that keeps one line on a terminal up to date: bytes so far, of how many, or
    that it has stopped moving and for how long (then `stalled_hint`: what the user can do)."""
    last = [0.0]

    def show(progress: Progress, state: str) -> None:
        now = time.monotonic()
        if state == "running" and now - last[0] < every:
            return
        last[0] = now
        hint = stalled_hint if state == "running" and progress.stalled_for() is not None else ""
        stream.write(f"\r\x1b[K{label}: {progress.describe()}{hint}" + ("" if state == "running" else f" {state}\n"))
        stream.flush()
    return show


def download(store: ObjectStore, key: str, partial: str, *, size: int, sha256: str | None,
             progress: Progress, stall_seconds: float | None) -> str:
    """Fetch `key` into the file `partial` (resuming what an earlier attempt left there) and check it
    against `size` and `sha256`. Returns `partial`, complete; ChecksumMismatch (and no file kept) when
    the bytes differ, TransferStalled when nothing moved for stall_seconds (if set: else a failing store is
    tried again until it answers or the owner cancels), NotFound, AccessDenied."""
    with _lock_for(partial):
        offset, version = _resume_point(partial, key, size, sha256)
    hasher = _hash_of(partial, offset)
    resumed = offset
    progress.moved(offset)
    progress.resumed += offset
    length, failures = FIRST_RANGE, 0
    # Progress is seen range by range: ranges short beside the stall window keep a slow link from looking
    # stalled while a range is on its way.
    range_seconds = RANGE_SECONDS if stall_seconds is None else min(RANGE_SECONDS, stall_seconds / 8)
    while offset < size:
        progress.check()
        began = time.monotonic()
        try:
            blob = store.get_range(key, offset, min(length, size - offset))
        except PERMANENT:
            raise
        except StoreError as e:
            if stall_seconds is not None and progress.idle_for(time.monotonic()) > stall_seconds:
                from ..core.brief import brief

                raise TransferStalled(f"no bytes moved for {stall_seconds:g} s after {human(offset)} of "
                                      f"{human(size)} (last error: {brief(str(e), 160)})") from None
            failures += 1
            length = max(MIN_RANGE, length // 4)
            progress.cancelled.wait(min(0.1 * 2 ** min(failures, 5), 2.0))
            continue
        if version is not None and blob.version != version:
            offset, hasher = _start_again(partial, progress, offset)  # the object was replaced: old bytes are void
            version = None
            continue
        if not blob.data:
            break  # shorter than its manifest says: told below
        with _lock_for(partial):
            progress.check()  # an abandoned worker writes nothing once its owner has moved on
            if version is None:
                version = blob.version
                _write_sidecar(partial, key, size, sha256, version)
            _append(partial, blob.data)
        hasher.update(blob.data)
        offset += len(blob.data)
        progress.moved(len(blob.data))
        failures = 0
        took = max(time.monotonic() - began, 1e-3)
        length = int(min(MAX_RANGE, max(MIN_RANGE, len(blob.data) / took * range_seconds, length // 2), length * 4))
    if _complete(partial, size=size, sha256=sha256, got=offset, digest=hasher.hexdigest(), resumed=resumed,
                 progress=progress):
        return partial
    # The bytes kept from before may be what is wrong (a crash mid-write): once more, from zero.
    return download(store, key, partial, size=size, sha256=sha256, progress=progress, stall_seconds=stall_seconds)


def _complete(partial: str, *, size: int, sha256: str | None, got: int, digest: str, resumed: int,
              progress: Progress) -> bool:
    """Whether the downloaded file is the object its manifest describes. If not, the file goes, and False
    (try again from zero) when part of it was resumed from an earlier attempt, else ChecksumMismatch."""
    if got == size == 0:
        _append(partial, b"")  # an empty object: an empty file
    if got == size and (sha256 is None or digest == sha256):
        return True
    discard(partial)
    if not resumed:
        raise ChecksumMismatch(f"expected {size} bytes sha256 {(sha256 or '?')[:12]}..., got {got} bytes sha256 "
                               f"{digest[:12]}...")
    progress.done -= got
    progress.resumed -= resumed
    return False


def upload_file(store: ObjectStore, key: str, path: str, *, piece: int = 1 << 20) -> tuple[int, str, int]:
    """Stream the file at `path` to `key` (ObjectStore.put_chunks: never held whole in memory), hashing
    the bytes as they go up. (size, SHA-256, permission bits) of exactly what was sent; an error reading
    the file is raised as itself, not as the store's."""
    hasher, sent, failed = hashlib.sha256(), [0], []
    with open(path, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode & 0o777

        def pieces():
            while True:
                try:
                    block = f.read(piece)
                except OSError as e:
                    failed.append(e)
                    raise
                if not block:
                    return
                hasher.update(block)
                sent[0] += len(block)
                yield block
        try:
            store.put_chunks(key, pieces())
        except BaseException:
            if failed:
                raise failed[0] from None
            raise
    return sent[0], hasher.hexdigest(), mode


def publish(partial: str, target: str, mode: int = 0o644) -> None:
    """Move a complete, verified partial file to its place (atomically) and forget its sidecar."""
    os.chmod(partial, mode)
    fd = os.open(partial, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, target)
    _unlink(partial + ".json")
    fsync_dir(os.path.dirname(os.path.abspath(target)))


def discard(partial: str) -> None:
    _unlink(partial)
    _unlink(partial + ".json")


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


# -- the partial file and its sidecar ---------------------------------------------------------------

def _lock_for(path: str) -> threading.Lock:
    with _path_locks_guard:
        return _path_locks.setdefault(path, threading.Lock())


def _resume_point(partial: str, key: str, size: int, sha256: str | None) -> tuple[int, tuple | None]:
    """Bytes already fetched for this object (and the version they came from), or (0, None)."""
    try:
        with open(partial + ".json") as f:
            side = json.load(f)
        have = os.stat(partial).st_size
    except (OSError, ValueError):
        discard(partial)
        return 0, None
    if (not isinstance(side, dict) or side.get("key") != key or side.get("size") != size
            or side.get("sha256") != sha256 or have > size or not isinstance(side.get("version"), list)):
        discard(partial)
        return 0, None
    return have, Version(*side["version"])


def _write_sidecar(partial: str, key: str, size: int, sha256: str | None, version) -> None:
    tmp = partial + ".json.tmp"
    with open(tmp, "w") as f:
        json.dump({"key": key, "size": size, "sha256": sha256, "version": list(version)}, f)
    os.replace(tmp, partial + ".json")


def _append(partial: str, data: bytes) -> None:
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _hash_of(partial: str, length: int):
    hasher = hashlib.sha256()
    if length:
        with open(partial, "rb") as f:
            while chunk := f.read(min(1 << 20, length)):
                hasher.update(chunk)
                length -= len(chunk)
    return hasher


def _start_again(partial: str, progress: Progress, offset: int):
    with _lock_for(partial):
        progress.check()
        discard(partial)
    progress.done -= offset
    return 0, hashlib.sha256()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
