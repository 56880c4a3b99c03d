"""Whether a store keeps the promises stado's exactly-once rests on, and `stado doctor`'s other checks.

A store that ignores conditions (an S3-compatible server that accepts If-None-Match and If-Match and
writes anyway, or a proxy in front of an honest one that drops the headers) would let two agents claim
one job. Every agent probes its own path to the store each time it starts, before it claims anything: a
create-if-absent on a key that exists, a put-if-match and a delete-if-match with a stale version must each
be refused. No verdict is taken from another process: the answer depends on the whole path (endpoint,
proxies, the client's settings), and two agents with the same store URL may reach it by different paths.
The probe costs seven requests, and agents start rarely. The latest verdict is kept under control/, with
what was probed, for `stado doctor` and people to read; nothing decides on it.

A store that is only briefly unwell at that moment (it answers 503 SlowDown, drops connections, does not answer,
refuses connections while it restarts) is waited for, a bounded time, rather than taken for a dead one: each
request is already tried again within the client's bound (objectstore/retries.py), and ensure_safe asks again
past that, for up to `wait` seconds.
"""
import json
import os
import time

from runkit.core.clock import Clock


from ..core import documents as d
from ..core.errors import StadoError
from .storeclock import StoreClock
from ..objectstore.base import AlreadyExists, NotFound, ObjectStore, PreconditionFailed, StoreError, StoreUnwell

VERDICT_KEY = "control/store-check.json"
# How long an agent at start waits for a store that fails in a way that passes, and the longest pause between asks.
WAIT = 60.0
MAX_PAUSE = 10.0


class UnsafeStore(StadoError):
    """The store does not honour a condition stado relies on."""

    exit_code = 4


def missing_guarantees(store: ObjectStore) -> list[str]:
    """What the store failed to refuse, in words (empty: it honours every condition)."""
    key = f"control/probe/{os.urandom(8).hex()}"
    missing = []
    first = _probe_body(1)
    try:
        store.put_if_absent(key, first)
    except AlreadyExists:
        _ours_or_raise(store, key, first)  # a client retry of a create that landed meets its own write
    try:
        try:
            store.put_if_absent(key, _probe_body(2))
            missing.append("create-if-absent (a second create of an existing key was accepted)")
        except AlreadyExists:
            pass
        old = store.get(key).version
        third = _probe_body(3)
        try:
            store.put_if_match(key, third, old)
        except PreconditionFailed:
            _ours_or_raise(store, key, third)
        try:
            store.put_if_match(key, _probe_body(4), old)
            missing.append("compare-and-swap (a write with a stale version was accepted)")
        except PreconditionFailed:
            pass
        if store.delete_if_match(key, old):
            missing.append("conditional delete (a delete with a stale version removed the object)")
    finally:
        try:
            store.delete(key)
        except StoreError:
            pass
    return missing


def _ours_or_raise(store: ObjectStore, key: str, body: bytes) -> None:
    """A conditional write refused: fine if what the key holds is exactly our body (the write landed and
    its retry was the one refused; the body's nonce tells it from any other writer's), else a store error."""
    try:
        if store.get(key).data == body:
            return
    except NotFound:
        pass
    raise StoreError(f"{key}: a conditional write of the store check was refused, and the key does not hold what "
                     "it wrote (another writer on control/probe/?)")


def _probe_body(n: int) -> bytes:
    return json.dumps({"probe": n, "nonce": os.urandom(8).hex()}).encode()  # unique bytes: no MD5 ETag repeats


def ensure_safe(store: ObjectStore, *, clock: "Clock | StoreClock", log=None, wait: float = WAIT) -> None:
    """Refuse (UnsafeStore, one line) a store that, along this process's own path to it, ignores a condition.

    A probe that fails with StoreUnwell (the store answered 5xx/429/408, dropped or did not answer a request, or
    refused the connection, on every try its client allowed) is made again, with pauses from 1 s doubling to 10 s,
    until `wait` seconds have passed since the first; `log` says once that it waits (what the store answered, for
    how long at most) and once that the store answered. Past `wait` the last StoreUnwell is raised (exit 4). Any
    other failure (AccessDenied, a ConfigError, a bucket that does not exist) and an unsafe verdict end it at once."""
    missing = _probe_waiting(store, log, wait)
    t = clock.wall()
    if missing:
        raise UnsafeStore(f"the store {_where(store)} does not honour {'; nor '.join(missing)}: two agents could run "
                          "one job; use a server (and a path to it: no proxy that drops headers) that enforces "
                          "If-None-Match, If-Match and conditional deletes (see `stado doctor`)")
    record = {"safe": True, "checked": t, "checked_at": d.iso(t), "store": store.url, "path": probed_path(store),
              "generation": 1, "nonce": os.urandom(12).hex()}
    try:
        store.put(VERDICT_KEY, d.encode(record))
    except StoreError:
        pass  # only a record for people to read: the probe itself has passed
    if log is not None:
        log(f"store {_where(store)} honours create-if-absent, compare-and-swap and conditional delete")


def _probe_waiting(store: ObjectStore, log, wait: float) -> list[str]:
    """missing_guarantees(store), asked again while the store is unwell, for up to `wait` seconds."""
    from ..core.brief import brief

    started = time.monotonic()
    pause = 1.0
    waited = False
    while True:
        try:
            missing = missing_guarantees(store)
        except StoreUnwell as unwell:
            left = wait - (time.monotonic() - started)
            if left <= 0:
                if not waited:
                    raise
                raise StoreUnwell(f"{unwell}; waited {time.monotonic() - started:.0f} s for it at the agent's "
                                  "start") from unwell
            if not waited and log is not None:
                log(f"{brief(str(unwell), 300)}; waiting up to {wait:g} s for the store before giving up")
            waited = True
            time.sleep(min(pause, left))  # the wait itself: a store that is unwell is asked again later
            pause = min(pause * 2, MAX_PAUSE)
            continue
        if waited and log is not None:
            log(f"the store {_where(store)} answered after {time.monotonic() - started:.1f} s of waiting")
        return missing


def _where(store: ObjectStore) -> str:
    return getattr(store, "where", None) or store.url


def probed_path(store: ObjectStore) -> dict:
    """What the probe went through: the endpoint, and the proxy settings the client reads from the environment."""
    path = {"where": _where(store), "host": os.uname().nodename}
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        value = os.environ.get(name) or os.environ.get(name.upper())
        if value:
            path[name] = value.split("@")[-1]  # never a proxy's credentials
    return path
