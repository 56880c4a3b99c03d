"""A store wrapper with the same interface that counts requests by kind (PUT, GET, LIST, DELETE), what
object stores bill for. Used by bench/stado_bench.py and the tests that bound an idle agent's cost."""
import threading

from .base import ObjectStore

KINDS = ("PUT", "GET", "LIST", "DELETE")


def _billed(method: str, kind: str):
    """The wrapper's `method`: count one `kind` request on the key, then forward the call."""
    def forward(self, key, *args, **kwargs):
        self._count(kind, key)
        return getattr(self.inner, method)(key, *args, **kwargs)

    forward.__name__ = method
    return forward


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

    # One request of the billed kind each; a HEAD is billed as a GET-class request.
    get = _billed("get", "GET")
    head = _billed("head", "GET")
    get_range = _billed("get_range", "GET")
    put_if_absent = _billed("put_if_absent", "PUT")
    put_if_match = _billed("put_if_match", "PUT")
    put = _billed("put", "PUT")
    put_chunks = _billed("put_chunks", "PUT")
    delete = _billed("delete", "DELETE")
    delete_if_match = _billed("delete_if_match", "DELETE")

    def list_page(self, prefix, *, start_after=None, limit=1000):
        self._count("LIST", prefix)
        return self.inner.list_page(prefix, start_after=start_after, limit=limit)

    def list(self, prefix):
        self._count("LIST", prefix)
        return iter(list(self.inner.list(prefix)))

    def ring(self, topic):  # a local signal, not a request
        self.inner.ring(topic)

    def wake_fd(self, topic):
        return self.inner.wake_fd(topic)

    def close(self):
        self.inner.close()
