"""A store wrapper with the same interface that counts requests by kind (PUT, GET, LIST, DELETE), what
object stores bill for. Used by bench/stado_bench.py and the tests that bound an idle agent's cost."""
import threading

from .objectstore.base import ObjectStore

KINDS = ("PUT", "GET", "LIST", "DELETE")


class MeteredStore(ObjectStore):
    def __init__(self, inner: ObjectStore):
        self.inner, self.url = inner, inner.url
        self.unique_versions = getattr(inner, "unique_versions", True)
        self.counts = dict.fromkeys(KINDS, 0)
        self.by_prefix: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _count(self, kind: str, key: str) -> None:
        top = key.split("/", 1)[0]
        with self._lock:
            self.counts[kind] += 1
            self.by_prefix[(kind, top)] = self.by_prefix.get((kind, top), 0) + 1

    def reset(self) -> None:
        with self._lock:
            self.counts = dict.fromkeys(KINDS, 0)
            self.by_prefix = {}

    def get(self, key):
        self._count("GET", key)
        return self.inner.get(key)

    def head(self, key):
        self._count("GET", key)  # billed as a GET-class request
        return self.inner.head(key)

    def get_range(self, key, start, length):
        self._count("GET", key)
        return self.inner.get_range(key, start, length)

    def put_if_absent(self, key, data):
        self._count("PUT", key)
        return self.inner.put_if_absent(key, data)

    def put_if_match(self, key, data, version):
        self._count("PUT", key)
        return self.inner.put_if_match(key, data, version)

    def put(self, key, data):
        self._count("PUT", key)
        return self.inner.put(key, data)

    def put_chunks(self, key, chunks):
        self._count("PUT", key)
        return self.inner.put_chunks(key, chunks)

    def delete(self, key):
        self._count("DELETE", key)
        self.inner.delete(key)

    def delete_if_match(self, key, version):
        self._count("DELETE", key)
        return self.inner.delete_if_match(key, version)

    def list_page(self, prefix, *, start_after=None, limit=1000):
        self._count("LIST", prefix)
        return self.inner.list_page(prefix, start_after=start_after, limit=limit)

    def list(self, prefix):
        self._count("LIST", prefix)
        return iter(list(self.inner.list(prefix)))

    def close(self):
        self.inner.close()
