"""`stado doctor`: is this store fit for stado? Reachable, credentials accepted, conditions honoured, clocks
agreeing with the store's, and what listing the queue costs. Each check gives a verdict and a detail."""
import time

from ..core import keys
from ..objectstore.base import AccessDenied, NotFound, ObjectStore, StoreError, StoreUnavailable
from ..store.guarantees import missing_guarantees
from ..store.storeclock import SKEW_BOUND, skew_words

SKEW_WARN = 2.0  # seconds: beyond this, worth fixing (S3's Last-Modified has 1 s resolution)
QUEUE_WARN = 10_000


def _check(name: str, ok: bool | None, detail: str) -> dict:
    """ok: True passed, False failed, None a warning."""
    return {"check": name, "verdict": "ok" if ok else ("warning" if ok is None else "failed"), "detail": detail}


def doctor(store: ObjectStore) -> dict:
    checks = [_reachable(store)]
    if checks[0]["verdict"] == "ok":
        for check in (_conditions, _clock, _queue_listing, _tombstones):
            try:
                found = check(store)
            except StoreError as e:
                found = _check(check.__name__.strip("_").replace("_", " "), False, f"{type(e).__name__}: {e}")
            if found is not None:
                checks.append(found)
    return {"store": store.url, "ok": all(c["verdict"] != "failed" for c in checks), "checks": checks}


def _reachable(store: ObjectStore) -> dict:
    began = time.monotonic()
    try:
        store.get("control/doctor-ping")
    except NotFound:
        pass
    except AccessDenied as e:
        return _check("credentials", False, str(e))
    except StoreUnavailable as e:
        return _check("reachable", False, str(e))
    return _check("reachable", True, f"a read answered in {1000 * (time.monotonic() - began):.0f} ms; "
                                     "credentials accepted")


def _conditions(store: ObjectStore) -> dict:
    missing = missing_guarantees(store)
    if missing:
        return _check("conditional writes", False, "does not honour " + "; nor ".join(missing))
    return _check("conditional writes", True, "create-if-absent, compare-and-swap and conditional delete all refuse "
                                              "a stale writer")


def _clock(store: ObjectStore) -> dict:
    key = "control/doctor-clock"
    before = time.time()
    store.put(key, str(before).encode())
    after = time.time()
    entry = next((e for e in store.list("control") if e.key == key), None)
    store.delete(key)
    if entry is None:
        return _check("clock skew", None, "the store did not list the object just written")
    skew = entry.modified - (before + after) / 2
    detail = f"this host's clock is {skew_words(skew)} (the write took {1000 * (after - before):.0f} ms)"
    if abs(skew) <= SKEW_WARN:
        return _check("clock skew", True, detail)
    if abs(skew) <= SKEW_BOUND:
        return _check("clock skew", None, detail + "; promises and fire times go by the store's clock, but run NTP on "
                                                   "every host")
    return _check("clock skew", False, detail + f", more than {SKEW_BOUND:.0f} s: an agent here refuses to fire "
                                                "schedules; fix this host's time (NTP), or the store's")


def _queue_listing(store: ObjectStore) -> dict:
    began = time.monotonic()
    count = sum(1 for _ in store.list(keys.QUEUE))
    seconds = time.monotonic() - began
    detail = f"{count} entries listed in {1000 * seconds:.0f} ms (about {max(1, -(-count // 1000))} request(s))"
    return _check("queue listing", True if count <= QUEUE_WARN else None,
                  detail + ("" if count <= QUEUE_WARN else "; every idle poll pays this"))


def _tombstones(store: ObjectStore) -> dict | None:
    finder = getattr(store, "tombstones", None)
    if finder is None:
        return None
    standing = [e.key for prefix in (keys.QUEUE, keys.RUNNING) for e in finder(prefix)]
    if not standing:
        return _check("tombstones", True, "conditional deletes are emulated with tombstones; none is left standing")
    return _check("tombstones", None, f"{len(standing)} left by writers that died mid-delete ({', '.join(standing[:5])}"
                                      f"{', ...' if len(standing) > 5 else ''}): `stado repair ID` removes them")
