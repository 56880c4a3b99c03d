"""A real store behind a script of faults, for the windows of a submit, a cancel and a reader (same interface as
the store it wraps, as tests/stado/faulty.py's wrappers).

    store = Scripted(real)
    store.on("put_if_absent", "queue/", lose=1)          # the next create under queue/ lands, its answer is lost
    store.on("put", "ready/", fail=1)                    # the next index write fails before reaching the store
    store.on("get", "queue/", before=lambda key: ...)    # something moves the job just before that GET
    store.on("list", "queue/", after=lambda: ...)        # ... or right after a LIST of queue/ has been answered
    store.down(); store.up()                             # every call fails while down
    store.down(calls=3)                                  # ... the next three calls only

A failure is StoreUnavailable with no cause: what a store of this host raises (the local directory's calls have
returned once they raise: nothing of them is in flight, which is what the submit's read-back relies on)."""
from stado.objectstore.base import ObjectStore, StoreUnavailable

VERBS = ("get", "head", "get_range", "put_if_absent", "put_if_match", "put", "delete", "delete_if_match", "list",
         "list_page")


class _Rule:
    def __init__(self, verb, prefix, lose, fail, before, after, times):
        self.verb, self.prefix, self.lose, self.fail = verb, prefix, lose, fail
        self.before, self.after, self.times = before, after, times


class Scripted(ObjectStore):
    def __init__(self, inner: ObjectStore):
        self.inner, self.url = inner, inner.url
        self.rules: list[_Rule] = []
        self.is_down = False
        self.down_for: int | None = None  # calls left to fail, when down for a count of calls
        self.calls: list[tuple[str, str]] = []  # (verb, key or prefix) of every call, in order

    def on(self, verb: str, prefix: str, *, lose: int = 0, fail: int = 0, before=None, after=None, times: int = 1):
        assert verb in VERBS, verb
        self.rules.append(_Rule(verb, prefix, lose, fail, before, after, times))
        return self

    def down(self, calls: int | None = None) -> None:
        self.is_down, self.down_for = True, calls

    def up(self) -> None:
        self.is_down, self.down_for = False, None

    def _call(self, verb: str, key: str, call):
        self.calls.append((verb, key))
        if self.is_down:
            if self.down_for is not None:
                self.down_for -= 1
                if self.down_for <= 0:
                    self.up()
            raise StoreUnavailable(f"cannot reach the store ({verb} {key}: down)")
        rule = next((r for r in self.rules if r.verb == verb and key.startswith(r.prefix)
                     and (r.lose or r.fail or (r.times and (r.before or r.after)))), None)
        if rule is None:
            return call()
        if rule.fail:
            rule.fail -= 1
            raise StoreUnavailable(f"connection reset before {verb} {key} was sent")
        if rule.before is not None:
            rule.times -= 1
            rule.before(key)
        result = call()
        if verb in ("list",):
            result = list(result)  # answered whole, before anything moves
        if rule.after is not None:
            rule.times -= 1
            rule.after()
        if rule.lose:
            rule.lose -= 1
            raise StoreUnavailable(f"connection reset after {verb} {key} was answered")
        return result

    def get(self, key):
        return self._call("get", key, lambda: self.inner.get(key))

    def head(self, key):
        return self._call("head", key, lambda: self.inner.head(key))

    def get_range(self, key, start, length):
        return self._call("get_range", key, lambda: self.inner.get_range(key, start, length))

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

    def list(self, prefix):
        return iter(self._call("list", prefix, lambda: self.inner.list(prefix)))

    def list_page(self, prefix, *, start_after=None, limit=1000):
        return self._call("list_page", prefix, lambda: self.inner.list_page(prefix, start_after=start_after,
                                                                            limit=limit))
