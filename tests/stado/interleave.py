"""A store wrapper with the same interface that parks one caller at a chosen request, so a test can drive
the library's steps in the order it chooses (the way the issue-8 races were found by hand).

    store = Interleave(inner)
    gate = store.hold("settler", "get", "running/<id>.json")    # park the thread named "settler" after it
    t = threading.Thread(target=..., name="settler"); t.start()
    gate.wait_reached()            # it has read the document and is parked
    ...                            # the other side moves
    gate.release(); t.join()

A gate fires once, in the named thread only, `after` the request (default) or `before` it. With
`crash=True` the parked thread instead raises Crashed at that point: a process that died there.
"""
import threading

from stado.objectstore.base import ObjectStore

WAIT = 60.0


class Crashed(BaseException):
    """Raised in a thread whose gate says it crashes there (BaseException: no `except Exception` hides it)."""


class Gate:
    def __init__(self, thread: str, verb: str, key: str, when: str, crash: bool):
        self.thread, self.verb, self.key, self.when, self.crash = thread, verb, key, when, crash
        self.fired = False
        self._reached, self._released = threading.Event(), threading.Event()

    def matches(self, verb: str, key: str, when: str) -> bool:
        return (not self.fired and threading.current_thread().name == self.thread and when == self.when
                and verb == self.verb and key == self.key)

    def park(self) -> None:
        self.fired = True
        if self.crash:
            self._reached.set()
            raise Crashed(f"{self.thread} crashed {self.when} {self.verb} {self.key}")
        self._reached.set()
        if not self._released.wait(WAIT):
            raise AssertionError(f"{self.thread}: never released at {self.verb} {self.key}")

    def wait_reached(self) -> None:
        if not self._reached.wait(WAIT):
            raise AssertionError(f"{self.thread} never reached {self.when} {self.verb} {self.key}")

    def release(self) -> None:
        self._released.set()


class Interleave(ObjectStore):
    def __init__(self, inner: ObjectStore):
        self.inner, self.url = inner, inner.url
        self.unique_versions = getattr(inner, "unique_versions", True)
        self.gates: list[Gate] = []
        self.log: list[tuple[str, str, str]] = []  # (thread, verb, key) of every request, in order
        self._lock = threading.Lock()

    def hold(self, thread: str, verb: str, key: str, *, when: str = "after", crash: bool = False) -> Gate:
        gate = Gate(thread, verb, key, when, crash)
        self.gates.append(gate)
        return gate

    def _gate(self, verb: str, key: str, when: str) -> None:
        with self._lock:
            gate = next((g for g in self.gates if g.matches(verb, key, when)), None)
        if gate is not None:
            gate.park()

    def _call(self, verb: str, key: str, fn):
        self._gate(verb, key, "before")
        with self._lock:
            self.log.append((threading.current_thread().name, verb, key))
        try:
            return fn()
        finally:
            self._gate(verb, key, "after")

    def get(self, key):
        return self._call("get", key, lambda: self.inner.get(key))

    def head(self, key):
        return self._call("head", key, lambda: self.inner.head(key))

    def put_if_absent(self, key, data):
        return self._call("put_if_absent", key, lambda: self.inner.put_if_absent(key, data))

    def put_if_match(self, key, data, version):
        return self._call("put_if_match", key, lambda: self.inner.put_if_match(key, data, version))

    def put(self, key, data):
        return self._call("put", key, lambda: self.inner.put(key, data))

    def delete(self, key):
        return self._call("delete", key, lambda: self.inner.delete(key))

    def delete_if_match(self, key, version):
        return self._call("delete_if_match", key, lambda: self.inner.delete_if_match(key, version))

    def list_page(self, prefix, *, start_after=None, limit=1000):
        return self._call("list_page", prefix, lambda: self.inner.list_page(prefix, start_after=start_after,
                                                                               limit=limit))

    def list(self, prefix):
        return self._call("list", prefix, lambda: list(self.inner.list(prefix)))

    def close(self):
        self.inner.close()
