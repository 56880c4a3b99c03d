"""Store wrappers with the same interface that inject faults (STYLE habit 10), for the unit tests."""
from stado.objectstore.base import AlreadyExists, ObjectStore, PreconditionFailed, StoreUnavailable


class LostResponses(ObjectStore):
    """Performs each conditional write, then reports it failed, as a client whose response was lost and
    whose retried request found its own write would: the case the writer's nonce exists for."""

    def __init__(self, inner: ObjectStore, times: int = 1):
        self.inner, self.url, self.times = inner, inner.url, times

    def get(self, key):
        return self.inner.get(key)

    def head(self, key):
        return self.inner.head(key)

    def list_page(self, prefix, *, start_after=None, limit=1000):
        return self.inner.list_page(prefix, start_after=start_after, limit=limit)

    def get_range(self, key, start, length):
        return self.inner.get_range(key, start, length)

    def put_if_absent(self, key, data):
        self.inner.put_if_absent(key, data)
        if self.times > 0:
            self.times -= 1
            raise AlreadyExists(key)
        return self.inner.get(key).version

    def put_if_match(self, key, data, version):
        self.inner.put_if_match(key, data, version)
        if self.times > 0:
            self.times -= 1
            raise PreconditionFailed(key)
        return self.inner.get(key).version

    def put(self, key, data):
        return self.inner.put(key, data)

    def delete(self, key):
        self.inner.delete(key)

    def delete_if_match(self, key, version):
        return self.inner.delete_if_match(key, version)

    def list(self, prefix):
        return self.inner.list(prefix)


class DroppedCreates(LostResponses):
    """A connection reset during create-if-absent: the first `times` creates either land and then fail
    (`landed=True`) or fail before reaching the store (`landed=False`); both raise StoreUnavailable."""

    def __init__(self, inner: ObjectStore, times: int = 1, landed: bool = True):
        super().__init__(inner, times)
        self.landed = landed

    def put_if_absent(self, key, data):
        if self.times > 0:
            self.times -= 1
            if self.landed:
                self.inner.put_if_absent(key, data)
            raise StoreUnavailable(f"connection reset while creating {key}")
        return self.inner.put_if_absent(key, data)


class DroppedMatches(LostResponses):
    """A connection reset during put-if-match: the first `times` land and then raise StoreUnavailable."""

    def put_if_match(self, key, data, version):
        written = self.inner.put_if_match(key, data, version)
        if self.times > 0:
            self.times -= 1
            raise StoreUnavailable(f"connection reset while replacing {key}")
        return written


class FailingReads(LostResponses):
    """Reads of keys under `prefix` fail with StoreUnavailable the first `times` times (a store that is
    away for a moment); every other call goes through to the real store."""

    def __init__(self, inner: ObjectStore, prefix: str, times: int = 1):
        super().__init__(inner, 0)
        self.prefix, self.failures = prefix, times

    def get(self, key):
        self._fail(key)
        return self.inner.get(key)

    def get_range(self, key, start, length):
        self._fail(key)
        return self.inner.get_range(key, start, length)

    def _fail(self, key):
        if key.startswith(self.prefix) and self.failures > 0:
            self.failures -= 1
            raise StoreUnavailable(f"connection reset while reading {key}")
        return self.inner.get(key)


class IgnoresConditions(ObjectStore):
    """A server that accepts If-None-Match and If-Match and writes anyway (what stado must refuse to use).
    `ignore` names which conditions it drops: "create", "match", "delete"."""

    def __init__(self, inner: ObjectStore, ignore=("create", "match", "delete")):
        self.inner, self.url, self.ignore = inner, inner.url, set(ignore)

    def get(self, key):
        return self.inner.get(key)

    def put_if_absent(self, key, data):
        return self.inner.put(key, data) if "create" in self.ignore else self.inner.put_if_absent(key, data)

    def put_if_match(self, key, data, version):
        return self.inner.put(key, data) if "match" in self.ignore else self.inner.put_if_match(key, data, version)

    def put(self, key, data):
        return self.inner.put(key, data)

    def delete(self, key):
        self.inner.delete(key)

    def delete_if_match(self, key, version):
        if "delete" in self.ignore:
            self.inner.delete(key)
            return True
        return self.inner.delete_if_match(key, version)

    def list(self, prefix):
        return self.inner.list(prefix)
