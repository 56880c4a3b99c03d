"""In-memory backend for unit tests: one process, thread-safe, versions from a counter. Its `modified` stamps are
its clock's (the host's unless given: the simulator and the in-process tests give the store a clock of its own)."""
import itertools
import threading
from collections.abc import Iterator

from runkit.core.clock import SYSTEM, Clock

from .base import (AlreadyExists, Blob, Entry, NotFound, ObjectStore, PreconditionFailed, Version, check_key, check_range, dir_prefix)


class MemoryStore(ObjectStore):
    def __init__(self, url: str = "memory://", clock: Clock = SYSTEM):
        self.url, self.clock = url, clock
        self._lock = threading.Lock()
        self._objects: dict[str, tuple[bytes, Version, float]] = {}
        self._counter = itertools.count(1)

    def _new_version(self) -> Version:
        n = str(next(self._counter))
        return Version(etag=n, generation=n)

    def _stored(self, key: str) -> tuple[bytes, Version, float]:
        check_key(key)
        with self._lock:
            try:
                return self._objects[key]
            except KeyError:
                raise NotFound(key) from None

    def get(self, key: str) -> Blob:
        data, version, _ = self._stored(key)
        return Blob(data, version)

    def head(self, key: str) -> Entry:
        data, version, modified = self._stored(key)
        return Entry(key, version, len(data), modified)

    def get_range(self, key: str, start: int, length: int) -> Blob:
        check_range(start, length)
        data, version = self.get(key)
        return Blob(data[start:start + length], version)

    def put_if_absent(self, key: str, data: bytes) -> Version:
        check_key(key)
        with self._lock:
            if key in self._objects:
                raise AlreadyExists(key)
            version = self._new_version()
            self._objects[key] = (bytes(data), version, self.clock.wall())
            return version

    def put_if_match(self, key: str, data: bytes, version: Version) -> Version:
        check_key(key)
        with self._lock:
            current = self._objects.get(key)
            if current is None or current[1] != version:
                raise PreconditionFailed(key)
            new = self._new_version()
            self._objects[key] = (bytes(data), new, self.clock.wall())
            return new

    def put(self, key: str, data: bytes) -> Version:
        check_key(key)
        with self._lock:
            version = self._new_version()
            self._objects[key] = (bytes(data), version, self.clock.wall())
            return version

    def delete(self, key: str) -> None:
        check_key(key)
        with self._lock:
            self._objects.pop(key, None)

    def delete_if_match(self, key: str, version: Version) -> bool:
        check_key(key)
        with self._lock:
            current = self._objects.get(key)
            if current is None or current[1] != version:
                return False
            del self._objects[key]
            return True

    def list(self, prefix: str) -> Iterator[Entry]:
        prefix = dir_prefix(prefix)
        with self._lock:
            items = sorted((k, v) for k, v in self._objects.items() if k.startswith(prefix))
        for key, (data, version, modified) in items:
            yield Entry(key, version, len(data), modified)
