"""The object-store interface every backend implements, with its error contract.

Keys are '/'-separated relative paths (``queue/<id>.json``). A backend moves bytes; it knows
nothing of jobs. Documents written by stado carry their own ``generation`` and writer ``nonce``
(see stado.jobs), because some S3-compatible servers reuse an MD5 ETag for identical bytes.
"""
import builtins

from runkit.core.records import record

TYPE_CHECKING = False  # collections.abc imports collections: the annotations are the type checker's alone
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


DEFAULT_STALL_TIMEOUT = None  # off: a transfer that stops moving stays visible until it is cancelled


class StoreError(Exception):
    """Root of every object-store failure."""


class NotFound(StoreError):
    """The key does not exist."""


class AlreadyExists(StoreError):
    """put_if_absent found the key present. After a retried request this may be our own write:
    callers read the document back and compare their nonce."""


class PreconditionFailed(StoreError):
    """put_if_match: the key changed since `version` was read, or it is gone."""


class StoreUnavailable(StoreError):
    """The backend could not be reached (network, server down, bucket missing)."""


class StoreUnwell(StoreUnavailable):
    """The store failed in a way that passes, on every try the client's bound allowed: it answered that it is
    overloaded or unwell (500, 502, 503, 504, 429, 408: SlowDown, ServerBusy, ...), dropped the connection or cut
    its answer short, gave no answer in time, or refused the connection (a server restarting). Trying again later
    may succeed; a write whose answer was lost may have landed (callers read back, as for AlreadyExists)."""


class AccessDenied(StoreError):
    """The backend refused the credentials."""


class ConfigError(StoreError):
    """The store cannot be opened as configured (STADO_CONFIG, URL, options). The message is one line
    that names the problem and what to do."""


class InvalidKey(StoreError, ValueError):
    """A key or prefix that is not a clean relative path, or that a backend cannot hold."""


def check_key(key: str) -> str:
    """Return `key` if it is a '/'-separated relative path with no empty, '.' or '..' segment.
    Every backend applies the same rule, so a key that works on one works on all."""
    if not isinstance(key, str) or not key:
        raise InvalidKey(f"object key must be a non-empty string, not {key!r}")
    if "\0" in key or any(part in ("", ".", "..") for part in key.split("/")):
        raise InvalidKey(f"object key {key!r} must be a relative path with no empty, '.' or '..' segment")
    return key


def dir_prefix(prefix: str) -> str:
    """The listing prefix as a directory: '' (everything) or 'seg/.../'. 'queue' and 'queue/' both mean
    the whole segment, so neither matches 'queue2/...' (obstore lists this way on every backend)."""
    if prefix == "":
        return ""
    return check_key(prefix[:-1] if prefix.endswith("/") else prefix) + "/"


def check_range(start: int, length: int) -> None:
    if start < 0 or length < 1:
        raise ValueError(f"a range needs start >= 0 and length >= 1, not start={start} length={length}")


# runkit.core.records rather than typing.NamedTuple (typing costs every `stado submit` ~7 ms to import) or
# collections.namedtuple (2 ms).

class Version(record("Version", "etag generation", defaults=(None,))):
    """What a conditional write must present: the ETag (str or None), and the generation where the
    backend has one (GCS needs it as ``version``). Opaque to callers; compare versions only for equality."""

    __slots__ = ()


class Entry(record("Entry", "key version size modified")):
    """One listed object: key (str), version (Version), size (bytes), modified (unix seconds, from the
    backend's clock)."""

    __slots__ = ()


class Blob(record("Blob", "data version")):
    """An object's bytes and its Version."""

    __slots__ = ()


class ObjectStore:
    """Six verbs, each with its error contract. Implementations must be safe to use from several
    processes at once (the local directory backend included).

    Every verb may also raise StoreUnavailable (backend unreachable), AccessDenied (credentials
    refused) and InvalidKey (see check_key). The Version a write returns equals the one a later get
    or list reports for that write, so a writer can chain compare-and-swaps without re-reading."""

    url: str = ""
    # How this process reaches the store, for messages: the URL, and the endpoint where one is configured.
    where: str | None = None
    # False where a version is a content hash (S3-compatible ETags are the body's MD5): writing identical
    # bytes again revives a stale version, so a stale put_if_match succeeds (ABA). Writers that rely on
    # put_if_match must make every write's bytes unique; stado's documents carry a generation and a nonce.
    unique_versions: bool = True
    # A transfer (a large get_range series) that moves no bytes for this long is ended, when STADO_CONFIG sets a
    # stall_timeout (off by default: stado ends a transfer by name, not by a clock). Read by whoever opens the
    # store, not by wrappers.
    stall_timeout: float | None = DEFAULT_STALL_TIMEOUT

    def get(self, key: str) -> Blob:
        """The object's bytes and version. Raises NotFound."""
        raise NotImplementedError

    def head(self, key: str) -> Entry:
        """The object's listing entry (version, size, and `modified` by the store's own clock: what the
        reaper judges pulses and checkpoints by) without its bytes. Raises NotFound. This default lists
        the key's directory; backends ask for the one object."""
        parent = key.rpartition("/")[0]
        for entry in self.list(parent):
            if entry.key == key:
                return entry
        raise NotFound(key)

    def get_range(self, key: str, start: int, length: int) -> Blob:
        """Up to `length` bytes of the object from byte `start`, with the object's version: fewer at its
        end, none when `start` is at or past the end. Raises NotFound, and ValueError for a negative
        `start` or a `length` under 1. Large objects are read in ranges so that a transfer resumes where
        it stopped and no single request has to carry the whole object. This default reads the whole
        object with get() (a wrapper that does not override it keeps working); backends read only the
        range."""
        check_range(start, length)
        blob = self.get(key)
        return Blob(blob.data[start:start + length], blob.version)

    def put_if_absent(self, key: str, data: bytes) -> Version:
        """Create the key; exactly one of several concurrent creators succeeds. Raises AlreadyExists."""
        raise NotImplementedError

    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        """Replace the key only if it still has `version`. Raises PreconditionFailed (also when the key is gone)."""
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> Version:
        """Unconditional write. Only for keys a single writer owns (output chunks, artifacts, heartbeats)."""
        raise NotImplementedError

    def put_chunks(self, key: str, chunks: "Iterable[bytes]") -> Version:
        """put() of a body given in pieces (a large file, read as it goes up): backends stream it, never
        holding it whole. This default joins the pieces and calls put(), so a wrapper that does not
        override it keeps working (holding the body once)."""
        return self.put(key, b"".join(chunks))

    def delete(self, key: str) -> None:
        """Remove the key; a missing key is not an error (deletes are idempotent). Only for keys a single
        writer owns: a key that other writers may create again is removed with delete_if_match."""
        raise NotImplementedError

    def delete_if_match(self, key: str, version: Version) -> bool:
        """Remove the key only if it still has `version`. True when this call removed it; False when the
        key is gone or holds another version. A stale writer's delete therefore never removes a newer
        object written at the same key. Backends whose API lacks a conditional delete emulate it
        (objectstore.tombstones) rather than fall back to an unconditional one.

        False says that `version` no longer stands at the key, not who removed it: a cloud store tries a
        request again when its answer is lost (retries.py), and when the first try had landed, the next one
        is refused, so this very call may have removed it. Callers read what stands before they act on a
        False (stado's moves do: see jobs/), and never take it for "the object is still there"."""
        raise NotImplementedError

    def list(self, prefix: str) -> "Iterator[Entry]":
        """Objects under `prefix`, whole segments only (see dir_prefix; '' lists everything), at any depth,
        in key order, with keys relative to the store (a URL prefix is never part of them)."""
        raise NotImplementedError

    def list_page(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> "builtins.list[Entry]":
        """At most `limit` entries of list(prefix), in key order, starting after the key `start_after`: one
        request of a cloud backend (S3 lists 1,000 keys a page), whatever the prefix holds beyond it. A poll
        that reads a window of the queue costs the same with ten jobs queued or a hundred thousand."""
        out = []
        for entry in self.list(prefix):
            if start_after is not None and entry.key <= start_after:
                continue
            out.append(entry)
            if len(out) >= limit:
                break
        return out

    def ring(self, topic: str) -> None:
        """Tell the processes of this host that wait on `topic` (wake_fd) that it changed. A no-op unless the backend
        can (the local directory); never raises: a lost ring costs a waiter its next poll, nothing else."""

    def wake_fd(self, topic: str) -> int | None:
        """A descriptor that turns readable after a ring(topic) by any process of this host (read it empty with
        runkit.system.proc.drain; the caller closes it), or None: the backend cannot ring, and the caller polls."""
        return None

    def close(self) -> None:
        pass
