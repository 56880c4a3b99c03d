"""S3 (and S3-compatible servers), Azure Blob and GCS through obstore, with real conditional writes.

put_if_absent sends a create (S3/Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``);
put_if_match sends the version read earlier (S3/Azure ``If-Match: <etag>``, GCS
``x-goog-if-generation-match: <generation>``). A failed request is tried again by one policy
(retries.py), so an AlreadyExists or PreconditionFailed after a retry may be the caller's own write
having landed: stado's documents carry a nonce for that (see base.py). Each call's first try goes
through obstore, which tries again by itself on most failures (retries.py says which it leaves); the
tries this module adds go through a second client with no retries of its own (`_once`), so that every
try counts against the one bound. The conditional DELETE is sent by signed_delete.py.

obstore is imported only when a cloud store is opened: the CLI pays nothing for it otherwise.
The functions above the class are pure, so GCS's rules are unit-tested without a server.
"""
import builtins
import time

from .base import (AlreadyExists, Blob, Entry, NotFound, ObjectStore, PreconditionFailed, StoreError, Version, check_key, check_range, dir_prefix)
from .cloud_errors import Translated, is_panic, translate
from .native import obstore
from .retries import Budget, read_failure
from .signed_delete import send_conditional_delete

# typing, re and collections cost a cloud command's start-up: re is imported where an error is read, and the
# annotations are read by the type checker alone.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any

PROVIDERS = ("s3", "azure", "gcs")
PART_SIZE = 5 * 1024 * 1024
def version_from_meta(meta: "Mapping[str, Any]") -> Version:
    """Keep both fields obstore reports: S3 and Azure guard writes with the ETag, GCS with the generation
    (obstore's ``version``)."""
    etag, generation = meta.get("e_tag"), meta.get("version")
    # Azure lists ETags bare but returns them quoted from GET and PUT: one spelling keeps versions comparable.
    if etag is not None and not etag.startswith(('"', 'W/"')):
        etag = f'"{etag}"'
    return Version(etag, None if generation is None else str(generation))


def update_mode(provider: str, version: Version) -> dict[str, str]:
    """obstore's ``mode`` for put_if_match: an UpdateVersion built only from the fields that are set
    (a None value makes obstore raise TypeError). GCS conditions on the generation alone and obstore
    refuses an update without it, so a GCS version without one cannot guard a write: that is reported
    as PreconditionFailed, which sends the caller back to re-read the key and get a full version."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}")
    mode = {}
    if version.etag is not None:
        mode["e_tag"] = version.etag
    if version.generation is not None:
        mode["version"] = version.generation
    if provider == "gcs":
        if version.generation is None or not version.generation.isdigit():
            raise PreconditionFailed("a GCS conditional write needs the object's generation; re-read the key")
    elif "e_tag" not in mode:
        raise PreconditionFailed(f"a {provider} conditional write needs the object's ETag; re-read the key")
    return mode


class CloudStore(ObjectStore):
    """One obstore store (S3Store, AzureStore or GCSStore, already scoped to its URL prefix). `once` builds the same
    store with no retries of its own, for the tries this class makes itself (see the module's docstring)."""

    def __init__(self, url: str, provider: str, store: "Any", where: str | None = None, timeout: float = 60.0, *,
                 max_retries: int = 4, retry_timeout: float = 20.0, once: "Callable[[], Any] | None" = None):
        self.url = url
        self._timeout = timeout
        self.max_retries, self.retry_timeout = max_retries, retry_timeout
        self.provider = provider
        # S3-compatible ETags are (usually) the body's MD5; Azure's and GCS's change on every write.
        self.unique_versions = provider != "s3"
        self._store = store
        self._make_once = once
        self._once_store: Any = None
        self._obs = obstore()
        self.where: str = where or url

    def _translated(self, key: str | None) -> "Translated":
        """Around every call into obstore: what it raises leaves as the store's error contract."""
        return Translated(self.provider, self.where, key)

    def _budget(self) -> Budget:
        return Budget(self.max_retries, self.retry_timeout, self._timeout)

    def _once(self) -> "Any":
        if self._once_store is None:
            self._once_store = self._store if self._make_once is None else self._make_once()
        return self._once_store

    def _call(self, key: str | None, op: "Callable[[Any], Any]", *, replayable: bool = True) -> "Any":
        """op(obstore's store), tried again by the policy (retries.py) until it succeeds or the bound is reached;
        what it raises last leaves translated. The first try goes through obstore's own retries (their count
        read from its error), the next ones through `_once`. `replayable=False`: a body that cannot be sent twice
        (a stream of chunks), tried once."""
        budget = self._budget()
        store = self._store
        while True:
            try:
                return op(store)
            except StoreError:
                raise
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    raise translate(exc, self.provider, self.where, key) from exc  # a panic; anything else goes on
                failure = read_failure(str(exc))
                budget.spend(1 + failure.retries)
                wait = budget.pause() if failure.transient and replayable else None
                if wait is None:
                    raise translate(exc, self.provider, self.where, key, budget) from exc
            time.sleep(wait)
            store = self._once()

    def get(self, key: str) -> Blob:
        check_key(key)

        def op(store):
            result = self._obs.get(store, key)
            return bytes(result.bytes()), result.meta

        data, meta = self._call(key, op)
        return Blob(data, version_from_meta(meta))

    def head(self, key: str) -> Entry:
        check_key(key)
        meta = self._call(key, lambda store: self._obs.head(store, key))
        return Entry(key, version_from_meta(meta), meta["size"], meta["last_modified"].timestamp())

    def get_range(self, key: str, start: int, length: int) -> Blob:
        check_key(key)
        check_range(start, length)

        def op(store):
            result = self._obs.get(store, key, options={"range": (start, start + length)})
            return bytes(result.bytes()), result.meta

        try:
            data, meta = self._call(key, op)
            return Blob(data, version_from_meta(meta))
        except NotFound:
            raise
        except StoreError as refused:
            # A range that starts at or past the end is refused (S3 and Azure answer 416, and obstore gives no
            # status to tell it by): the object's size says whether that is what happened.
            try:
                meta = self._call(key, lambda store: self._obs.head(store, key))
            except StoreError:
                raise refused from refused.__cause__  # what the range read met, not the HEAD
            if meta["size"] > start:
                raise
        return Blob(b"", version_from_meta(meta))

    def put_if_absent(self, key: str, data: bytes) -> Version:
        check_key(key)
        body = bytes(data)
        return version_from_meta(self._call(key, lambda store: self._obs.put(store, key, body, mode="create",
                                                                             use_multipart=False)))

    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        check_key(key)
        mode = update_mode(self.provider, version)
        body = bytes(data)
        try:
            return version_from_meta(self._call(key, lambda store: self._obs.put(store, key, body, mode=mode,
                                                                                 use_multipart=False)))
        except (NotFound, AlreadyExists) as gone:
            # A conditional update of a missing key is a failed precondition, whatever the server called it.
            raise PreconditionFailed(key) from gone

    def put(self, key: str, data: bytes) -> Version:
        check_key(key)
        # A large body goes up in parts of the smallest size S3 allows, one at a time, so that each request
        # carries 5 MiB, not the whole object, within the client's request timeout however slow the link.
        large = {"use_multipart": True, "chunk_size": PART_SIZE, "max_concurrency": 1} if len(data) > 2 * PART_SIZE \
            else {"use_multipart": False}
        body = bytes(data)
        return version_from_meta(self._call(key, lambda store: self._obs.put(store, key, body, **large)))

    def put_chunks(self, key: str, chunks) -> Version:
        """A body that fits in the single-request size goes up as put() does; a larger one in parts of
        PART_SIZE as the pieces arrive (at most a part and a piece held at once). Such a stream cannot be
        sent twice: its parts are tried again by obstore alone (a plain PUT each), the upload as a whole once."""
        import itertools

        check_key(key)
        chunks, head, held = iter(chunks), [], 0
        for chunk in chunks:
            head.append(chunk)
            held += len(chunk)
            if held > 2 * PART_SIZE:
                break
        else:
            return self.put(key, b"".join(head))
        return version_from_meta(self._call(key, lambda store: self._obs.put(
            store, key, itertools.chain(head, chunks), use_multipart=True, chunk_size=PART_SIZE, max_concurrency=1),
            replayable=False))

    def delete(self, key: str) -> None:
        check_key(key)
        try:
            self._call(key, lambda store: self._obs.delete(store, key))
        except NotFound:  # Azure reports a missing blob; deletes are idempotent
            pass

    def delete_if_match(self, key: str, version: Version) -> bool:
        """obstore has no conditional delete, but S3 and Azure honour If-Match on DELETE: the request is
        signed by obstore (a pre-signed URL, so the credentials stay in its hands) and sent here, tried
        again by the same policy as every other request. GCS needs the condition in a signed x-goog header,
        which obstore cannot sign: GCS stores emulate the delete with a tombstone (objectstore.tombstones)
        and never reach this method. False after a retry may be this call's own first try having landed
        (base.py says what callers make of a False)."""
        check_key(key)
        if self.provider == "gcs":
            raise StoreError("GCS stores delete conditionally through objectstore.tombstones; this is a bug")
        if version.etag is None:
            return False
        from datetime import timedelta

        def signed() -> str:
            with self._translated(key):
                return self._obs.sign(self._store, "DELETE", key, timedelta(minutes=5))

        budget = self._budget()
        status, body = send_conditional_delete(signed, version.etag, self._timeout, budget, self.where)
        if status in (200, 202, 204):
            return True
        if status in (404, 409, 412):
            return False
        raise translate(RuntimeError(f"HTTP error: status code: {status} {body}"), self.provider, self.where, key,
                        budget)

    def list_page(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> "builtins.list[Entry]":
        prefix = dir_prefix(prefix)
        offset = None if start_after is None else check_key(start_after)

        def op(store) -> "builtins.list[Entry]":
            out: list[Entry] = []
            # S3 and GCS start the listing after `offset` on the server; Azure's List Blobs has no such
            # parameter and starts at the prefix, so the keys up to it are skipped here (more pages there).
            for chunk in self._obs.list(store, prefix=prefix or None, offset=offset, chunk_size=limit):
                out += [Entry(m["path"], version_from_meta(m), m["size"], m["last_modified"].timestamp())
                        for m in chunk if offset is None or m["path"] > offset]
                if len(out) >= limit:
                    break
            return out[:limit]

        return self._call(None, op)

    def list(self, prefix: str) -> "Iterator[Entry]":
        """Every page as it comes; a page that fails is asked for again from after the last key given out, by the
        same policy as a single request (its bound counts the tries of the whole listing)."""
        prefix = dir_prefix(prefix)
        budget, store, after = self._budget(), self._store, None
        while True:
            try:
                for chunk in self._obs.list(store, prefix=prefix or None, offset=after):
                    for meta in chunk:
                        entry = Entry(meta["path"], version_from_meta(meta), meta["size"],
                                      meta["last_modified"].timestamp())
                        after = entry.key
                        yield entry
                return
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    if is_panic(exc):
                        raise translate(exc, self.provider, self.where, None) from exc
                    raise  # GeneratorExit (the caller stopped early), KeyboardInterrupt, ...
                failure = read_failure(str(exc))
                budget.spend(1 + failure.retries)
                wait = budget.pause() if failure.transient else None
                if wait is None:
                    raise translate(exc, self.provider, self.where, None, budget) from exc
            time.sleep(wait)
            store = self._once()
