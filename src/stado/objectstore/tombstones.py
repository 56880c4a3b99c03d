"""A conditional delete for a backend whose client cannot send one (GCS through obstore): tombstones.

delete_if_match(key, version) first replaces the object with a tombstone by put_if_match on `version`
(so it fails, changing nothing, when the key moved on), then deletes the key. Between the two requests
the tombstone stands in the key's place, and nothing can take that place from it:

- get() reports a tombstone as NotFound, so no caller ever learns its version, and no put_if_match can
  replace it; put_if_absent fails on it (the key exists); stado never writes a shared key with put().
- so only the writer that made the tombstone removes it, and its unconditional delete can only remove
  its own tombstone, never an object written later.

A tombstone whose put landed though its answer was lost (the retry is refused: the version moved on) is told
by its random bytes, read back, and deleted as planned. The price: a writer that dies between the two requests
leaves the tombstone standing, and the key cannot be created again until it is removed. `stado doctor` lists such keys and `stado repair ID` removes them
(an operator's decision: a writer that is only slow would then delete whatever is there next).
"""
import builtins
from collections.abc import Iterator

from .base import Blob, Entry, NotFound, ObjectStore, PreconditionFailed, StoreError, StoreUnavailable, Version

MAGIC = b"\x00stado-tombstone\x00"


def is_tombstone(data: bytes) -> bool:
    return data.startswith(MAGIC)


class TombstoneDeletes(ObjectStore):
    """Wraps a store whose backend has no conditional delete; every other verb goes straight through."""

    emulated_conditional_delete = True

    def __init__(self, inner: ObjectStore):
        self.inner, self.url = inner, inner.url
        self.unique_versions = getattr(inner, "unique_versions", True)
        self.provider = getattr(inner, "provider", None)

    def get(self, key: str) -> Blob:
        blob = self.inner.get(key)
        if is_tombstone(blob.data):
            raise NotFound(key)
        return blob

    def head(self, key: str) -> Entry:
        entry = self.inner.head(key)
        if entry.size <= len(MAGIC) + 16 and is_tombstone(self.inner.get(key).data):
            raise NotFound(key)
        return entry

    def put_if_absent(self, key: str, data: bytes) -> Version:
        return self.inner.put_if_absent(key, data)

    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        return self.inner.put_if_match(key, data, version)

    def put(self, key: str, data: bytes) -> Version:
        return self.inner.put(key, data)

    def put_chunks(self, key: str, chunks) -> Version:
        return self.inner.put_chunks(key, chunks)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_if_match(self, key: str, version: Version) -> bool:
        import os

        stone = MAGIC + os.urandom(8).hex().encode()
        try:
            self.inner.put_if_match(key, stone, version)
        except (PreconditionFailed, StoreUnavailable) as refused:
            # A put tried again after its answer was lost meets its own tombstone, which would otherwise stand
            # in the key's place for good: its random bytes tell it from anyone else's.
            try:
                ours = self._holds(key, stone)
            except StoreError:
                raise refused from None
            if not ours:
                if isinstance(refused, StoreUnavailable):
                    raise
                return False
        self.inner.delete(key)
        return True

    def _holds(self, key: str, stone: bytes) -> bool:
        try:
            return self.inner.get(key).data == stone
        except NotFound:
            return False

    def list(self, prefix: str) -> Iterator[Entry]:
        return self.inner.list(prefix)

    def list_page(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> "builtins.list[Entry]":
        return self.inner.list_page(prefix, start_after=start_after, limit=limit)

    def tombstones(self, prefix: str) -> "builtins.list[Entry]":
        """Tombstones standing under `prefix` (left by a writer that died between its two requests)."""
        found = []
        for entry in self.inner.list(prefix):
            if entry.size > len(MAGIC) + 16:
                continue
            try:
                if is_tombstone(self.inner.get(entry.key).data):
                    found.append(entry)
            except NotFound:
                continue
        return found

    def close(self) -> None:
        self.inner.close()
