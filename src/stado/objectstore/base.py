"""The object-store interface every backend implements, with its error contract.

Keys are '/'-separated relative paths (``queue/<id>.json``). A backend moves bytes; it knows
nothing of jobs. Documents written by stado carry their own ``generation`` and writer ``nonce``
(see stado.jobs), because some S3-compatible servers reuse an MD5 ETag for identical bytes.
"""
from typing import Iterator, NamedTuple


class StoreError(Exception):
    """Root of every object-store failure."""


class NotFound(StoreError):
    """The key does not exist."""


class AlreadyExists(StoreError):
    """put_if_absent found the key present. After a retried request this may be our own write:
    callers read the document back and compare their nonce."""


class PreconditionFailed(StoreError):
    """put_if_match/delete_if_match: the key changed since `version` was read, or it is gone."""


class StoreUnavailable(StoreError):
    """The backend could not be reached (network, server down, bucket missing)."""


class AccessDenied(StoreError):
    """The backend refused the credentials."""


class Version(NamedTuple):
    """What a conditional write must present: the ETag, and the generation where the backend has one
    (GCS needs it as ``version``). Opaque to callers; compare versions only for equality."""

    etag: str | None
    generation: str | None = None


class Entry(NamedTuple):
    """One listed object."""

    key: str
    version: Version
    size: int
    modified: float  # unix seconds, from the backend's clock


class Blob(NamedTuple):
    data: bytes
    version: Version


class ObjectStore:
    """Five verbs, each with its error contract. Implementations must be safe to use from several
    processes at once (the local directory backend included)."""

    url: str = ""

    def get(self, key: str) -> Blob:
        """The object's bytes and version. Raises NotFound."""
        raise NotImplementedError

    def put_if_absent(self, key: str, data: bytes) -> Version:
        """Create the key; exactly one of several concurrent creators succeeds. Raises AlreadyExists."""
        raise NotImplementedError

    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        """Replace the key only if it still has `version`. Raises PreconditionFailed (also when the key is gone)."""
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> Version:
        """Unconditional write. Only for keys a single writer owns (output chunks, artifacts, heartbeats)."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Remove the key; a missing key is not an error (deletes are idempotent)."""
        raise NotImplementedError

    def list(self, prefix: str) -> Iterator[Entry]:
        """Objects whose key starts with `prefix` (a whole path segment, ending in '/'), in key order."""
        raise NotImplementedError

    def close(self) -> None:
        pass
