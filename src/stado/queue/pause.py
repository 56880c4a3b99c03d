"""The queue pause (`stado queue pause|resume`): only claiming stops; submissions go on."""

from ..core import documents as d
from ..core import keys
from ..store.cas import new_nonce
from ..objectstore.base import AlreadyExists, NotFound, ObjectStore
from .submission import whoami


def pause(store: ObjectStore, *, by: str | None = None, reason: str | None = None,
          now: float) -> tuple[dict, bool]:
    """(the pause record, whether it was already paused)."""
    t = now
    record = {"paused": True, "by": by or whoami(), "at": d.iso(t), "reason": reason, "generation": 1,
              "nonce": new_nonce()}
    try:
        store.put_if_absent(keys.QUEUE_PAUSE, d.encode(record))
        return record, False
    except AlreadyExists:
        current = pause_record(store)
        if current is None:
            return pause(store, by=by, reason=reason, now=now)
        return current, current.get("nonce") != record["nonce"]


def resume(store: ObjectStore) -> dict | None:
    """The pause record that was lifted, or None if the queue was not paused."""
    record = pause_record(store)
    if record is not None:
        store.delete(keys.LEGACY_QUEUE_PAUSE)  # first: an agent copying it finds it gone and withdraws its copy
        store.delete(keys.QUEUE_PAUSE)
    return record


def pause_record(store: ObjectStore) -> dict | None:
    """The queue's pause record (the one in the claim-order index, else one an older stado wrote under control/), or
    None when the queue is not paused."""
    for key in (keys.QUEUE_PAUSE, keys.LEGACY_QUEUE_PAUSE):
        try:
            return read_record(store.get(key).data)
        except NotFound:
            continue
    return None


def adopt_legacy(store: ObjectStore) -> bool:
    """A pause record an older stado wrote under control/ (agents now see the pause in their listing of ready/ and
    look nowhere else), copied where they see it. The old record stays for agents of that version; `stado queue
    resume` removes both. Run by agents at start and on their slow cadence. True when it found one.

    A resume may land between the read and the copy: the old record is then read again after the copy, and a copy
    whose original is gone is withdrawn (at its own version: a pause written since stays)."""
    try:
        data = store.get(keys.LEGACY_QUEUE_PAUSE).data
    except NotFound:
        return False
    try:
        copied = store.put_if_absent(keys.QUEUE_PAUSE, data)
    except AlreadyExists:
        # Our own copy whose answer was lost (a retried create meets it), or another agent's copy of the same old
        # record: either is a copy, withdrawn below if its original is gone. A pause written since stays.
        try:
            blob = store.get(keys.QUEUE_PAUSE)
        except NotFound:
            return True
        if blob.data != data:
            return True
        copied = blob.version
    try:
        store.head(keys.LEGACY_QUEUE_PAUSE)
    except NotFound:
        store.delete_if_match(keys.QUEUE_PAUSE, copied)
        return False
    return True


def read_record(data: bytes) -> dict:
    import json

    try:
        record = json.loads(data)
    except ValueError:
        record = None
    # An unreadable pause record still pauses: stopping claims is the safe reading of it.
    return record if isinstance(record, dict) else {"paused": True, "by": "?", "at": "?", "reason": "unreadable record"}
