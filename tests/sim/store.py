"""The store every simulated actor uses: the in-memory backend behind a wrapper with the ObjectStore
interface that hands each request to the scheduler before it runs.

The scheduler decides the request's fate: it runs (OK); it fails before it reaches the store (FAIL:
StoreUnavailable, nothing written); or it lands and its answer is lost (LOST: written, then
StoreUnavailable). The wrapper also keeps what the invariants need: which generation of each job every
actor has seen (read or written), so a delete or overwrite of a generation its writer never saw (a stale
writer) is caught at the request that does it.
"""
from runkit.core import jsonfast
from runkit.core.clock import Clock
from stado.core import keys
from stado.objectstore.base import AlreadyExists, NotFound, ObjectStore, PreconditionFailed, StoreError
from stado.objectstore.memory import MemoryStore

from . import invariants

# Job records: the keys whose documents carry the job's generation.
JOB_PREFIXES = (keys.QUEUE, keys.RUNNING, keys.COMPLETED, keys.FAILED, keys.CANCELLED)


def job_of(key: str) -> str | None:
    for prefix in JOB_PREFIXES:
        if key.startswith(prefix):
            return keys.job_id_of(key, prefix)
    return None


class StoreServerClock(Clock):
    """The store server's clock: the simulated time, without any host's skew (what it stamps `modified` with)."""

    __slots__ = ("sim",)

    def __init__(self, sim):
        self.sim = sim

    def wall(self) -> float:
        return self.sim.now

    def monotonic(self) -> float:
        return self.sim.now


class SimBackend(MemoryStore):
    """The in-memory backend, plus a look that is not a request (for the invariants)."""

    def peek(self, key: str):
        """(data, version) at the key, or None. Not a store request: the scheduler never sees it."""
        found = self._objects.get(key)
        return None if found is None else found[:2]


class SimStore(ObjectStore):
    url = "sim://memory"

    def __init__(self, sim, backend: SimBackend):
        self.sim, self.inner = sim, backend

    # -- the five verbs ---------------------------------------------------------------------------------

    def get(self, key):
        actor, fate = self._begin("get", key)
        try:
            blob = self.inner.get(key)
        except NotFound:
            actor.versions.pop(key, None)
            return self._end(actor, fate, "get", key, "NotFound", error=NotFound(key))
        self._saw(actor, key, blob.version)
        return self._end(actor, fate, "get", key, f"v{blob.version.etag}", value=blob)

    def put_if_absent(self, key, data):
        actor, fate = self._begin("put_if_absent", key)
        if actor.ignores_conditions:
            invariants.unsafe_write(self.sim, actor, "put_if_absent", key)
            version = self.inner.put(key, data)  # a path that drops If-None-Match: the create overwrites
            self._wrote(actor, key, data, version, created=True)
            return self._end(actor, fate, "put_if_absent", key, f"created v{version.etag} (condition dropped)",
                             value=version)
        try:
            version = self.inner.put_if_absent(key, data)
        except AlreadyExists as e:
            return self._end(actor, fate, "put_if_absent", key, "AlreadyExists", error=e)
        self._wrote(actor, key, data, version, created=True)
        return self._end(actor, fate, "put_if_absent", key, f"created v{version.etag}", value=version)

    def put_if_match(self, key, data, version):
        actor, fate = self._begin("put_if_match", key)
        if actor.ignores_conditions:
            invariants.unsafe_write(self.sim, actor, "put_if_match", key)
            new = self.inner.put(key, data)  # a path that drops If-Match
            self._wrote(actor, key, data, new)
            return self._end(actor, fate, "put_if_match", key, f"v{new.etag} (condition dropped)", value=new)
        try:
            new = self.inner.put_if_match(key, data, version)
        except PreconditionFailed as e:
            return self._end(actor, fate, "put_if_match", key, f"PreconditionFailed (had v{version.etag})", error=e)
        self._wrote(actor, key, data, new)
        return self._end(actor, fate, "put_if_match", key, f"v{version.etag} -> v{new.etag}", value=new)

    def put(self, key, data):
        actor, fate = self._begin("put", key)
        invariants.before_overwrite(self.sim, actor, key, "put")
        version = self.inner.put(key, data)
        if key.startswith(keys.STATUS) and key.endswith("/heartbeat"):
            self.sim.pulsed[key.split("/")[1]] = self.sim.now
        self._wrote(actor, key, data, version)
        return self._end(actor, fate, "put", key, f"v{version.etag}", value=version)

    def delete(self, key):
        actor, fate = self._begin("delete", key)
        found = self.inner.peek(key)
        invariants.before_overwrite(self.sim, actor, key, "delete")
        if found is not None and key.startswith(keys.RUNNING):
            invariants.running_removed(self.sim, actor, key, self.document(*found))
        self.inner.delete(key)
        actor.versions.pop(key, None)
        if found is not None:
            self.sim.deleted = True  # only a delete can leave a job with no record: check after this step
        return self._end(actor, fate, "delete", key, f"deleted v{found[1].etag}" if found else "absent", value=None)

    def delete_if_match(self, key, version):
        actor, fate = self._begin("delete_if_match", key)
        found = self.inner.peek(key)
        if actor.ignores_conditions and found is not None:
            invariants.unsafe_write(self.sim, actor, "delete_if_match", key)
            version = found[1]  # a path that drops the condition deletes whatever is there
        removed = self.inner.delete_if_match(key, version)
        if removed:
            if key.startswith(keys.RUNNING):
                invariants.running_removed(self.sim, actor, key, self.document(*found))
            actor.versions.pop(key, None)
            self.sim.deleted = True  # only a delete can leave a job with no record: check after this step
        result = (f"deleted v{version.etag}" if removed else
                  f"refused (had v{version.etag}, " + (f"key at v{found[1].etag})" if found else "key absent)"))
        return self._end(actor, fate, "delete_if_match", key, result, value=removed)

    def list_page(self, prefix, *, start_after=None, limit=1000):
        actor, fate = self._begin("list_page", prefix)
        entries = self.inner.list_page(prefix, start_after=start_after, limit=limit)
        return self._end(actor, fate, "list_page", prefix, f"{len(entries)} entries", value=entries)

    def list(self, prefix):
        actor, fate = self._begin("list", prefix)
        entries = list(self.inner.list(prefix))
        return iter(self._end(actor, fate, "list", prefix, f"{len(entries)} entries", value=entries))

    def __getattr__(self, name):
        """A verb this wrapper does not know yet (one a later change adds to the interface, such as a
        conditional delete) still goes through the scheduler, with the same faults."""
        target = getattr(self.inner, name)
        if name.startswith("_") or not callable(target):
            return target

        def verb(key, *args, **kwargs):
            actor, fate = self._begin(name, key)
            try:
                value = target(key, *args, **kwargs)
            except StoreError as e:
                return self._end(actor, fate, name, key, type(e).__name__, error=e)
            return self._end(actor, fate, name, key, "ok", value=value)

        return verb

    # -- bookkeeping ------------------------------------------------------------------------------------

    def _begin(self, verb: str, key: str):
        actor, fate = self.sim.request(verb, key)
        if fate == "fail":
            from .world import unavailable

            self.sim.trace.request(actor, verb, key, "unavailable (did not land)")
            raise unavailable(verb, key, landed=False)
        return actor, fate

    def _end(self, actor, fate, verb, key, result, *, value=None, error=None):
        if fate == "lost":
            from .world import unavailable

            self.sim.trace.request(actor, verb, key, f"{result}; answer lost")
            raise unavailable(verb, key, landed=True)
        self.sim.trace.request(actor, verb, key, result)
        if error is not None:
            raise error
        return value

    def document(self, data: bytes, version) -> dict:
        """The decoded job document with this version (decoded once per version)."""
        docs = self.sim.documents
        doc = docs.get(version)
        if doc is None:
            try:
                doc = jsonfast.loads(data)
            except ValueError:
                doc = None
            docs[version] = doc = doc if isinstance(doc, dict) else {}
        return doc

    def generation(self, key: str, data: bytes | None, version) -> int | None:
        """The generation of the job document with this version."""
        if data is None and version not in self.sim.documents:
            return None
        gen = self.document(data, version).get("generation")
        return gen if isinstance(gen, int) else None

    def _saw(self, actor, key: str, version) -> None:
        job = job_of(key)
        if job is None:
            return
        actor.versions[key] = version
        found = self.inner.peek(key)
        gen = self.generation(key, found[0] if found else None, version)
        if gen is not None and gen > actor.seen.get(job, 0):
            actor.seen[job] = gen

    def _wrote(self, actor, key: str, data: bytes, version, *, created: bool = False) -> None:
        job = job_of(key)
        if job is None:
            return
        actor.versions[key] = version
        gen = self.generation(key, data, version)
        if gen is not None and gen > actor.seen.get(job, 0):
            actor.seen[job] = gen
        if key.startswith(keys.RUNNING):
            invariants.running_written(self.sim, self.document(data, version))
        invariants.record_time(self.sim, actor, key, self.document(data, version))
        invariants.record_written(self.sim, actor, key, job, data, version, created)
