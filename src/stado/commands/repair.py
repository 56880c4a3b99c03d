"""`stado repair ID`: clear a job's corrupt records (and, where deletes are emulated, tombstones left by a
writer that died), without losing the job. A corrupt record beside a readable one is removed (on the
version read: a record rewritten meanwhile is left alone); a corrupt record that is the job's only one
becomes a failed/ record that keeps its first bytes as evidence, so the job ends with a record that says
what happened instead of vanishing. Then any move the corrupt record held up is finished."""
import base64

from ..core import documents as d
from ..core import keys
from ..store.cas import create, new_nonce, read, remove
from ..core.errors import CorruptDocument
from ..queue.lookup import LIFECYCLE, find
from ..objectstore.base import NotFound, ObjectStore, PreconditionFailed

EVIDENCE_BYTES = 2048


def repair(store: ObjectStore, selector: str, *, by: str, now: float) -> list[str]:
    """Lines saying what was done (one line when there was nothing to do)."""
    t = now
    job_id = find(store, selector)
    lines = _clear_tombstones(store, job_id)
    raw, readable = {}, {}
    for state in LIFECYCLE:
        key = keys.state_key(state, job_id)
        try:
            blob = store.get(key)
        except NotFound:
            continue
        try:
            readable[state] = d.decode(key, blob.data, job_id)
        except CorruptDocument as e:
            raw[state] = (blob, str(e))
    only = not readable
    for state, (blob, why) in raw.items():
        key = keys.state_key(state, job_id)
        if only:
            only = False  # the first corrupt record becomes the job's failed/ record, keeping its evidence
            failed = _failed_record(job_id, key, blob.data, why, by=by, now=t)
            if state == "failed":  # replace it in place: the job is never without a record
                try:
                    store.put_if_match(key, d.encode(failed), blob.version)
                    lines.append(_recorded(job_id, key, blob.data, why))
                except PreconditionFailed:
                    lines.append(f"{job_id}: {key} changed while repairing it; left alone: run `stado repair "
                                 f"{job_id}` again")
                continue
            if create(store, keys.terminal("failed", job_id), failed) is None:
                lines.append(f"{job_id}: could not write its failed/ record; {key} left alone")
                continue
            lines.append(_recorded(job_id, key, blob.data, why))
        if remove(store, key, blob.version):
            lines.append(f"{job_id}: removed the corrupt {key} ({len(blob.data)} bytes)")
        else:
            lines.append(f"{job_id}: {key} changed while repairing it; left alone: run `stado repair {job_id}` again")
    lines += _finish_moves(store, job_id, by=by, now=t)
    return lines or [f"{job_id}: nothing to repair"]


def _recorded(job_id: str, key: str, data: bytes, why: str) -> str:
    return (f"{job_id}: its only record {key} was corrupt ({why}); recorded as failed (internal), with its first "
            f"{min(len(data), EVIDENCE_BYTES)} bytes kept as evidence")


def _failed_record(job_id: str, key: str, data: bytes, why: str, *, by: str, now: float) -> d.Job:
    evidence = base64.b64encode(data[:EVIDENCE_BYTES]).decode()
    return d.repaired_doc(job_id, key, why=why, size=len(data), evidence=evidence, by=by, now=now, nonce=new_nonce())


def _finish_moves(store: ObjectStore, job_id: str, *, by: str, now: float) -> list[str]:
    """A decided move (or a cancel of a queued job) that the corrupt record held up."""
    from ..jobs import settle

    found = read(store, keys.running(job_id), job_id)
    if found is None:
        return []
    doc, version = found
    if doc.finishing or (doc.cancelling and doc.owner is None):
        term = settle(store, doc, version, writer=by, now=now)
        if term is not None:
            return [f"{job_id}: finished its interrupted move to {term.state}"]
    return []


def _clear_tombstones(store: ObjectStore, job_id: str) -> list[str]:
    finder = getattr(store, "tombstones", None)
    inner = getattr(store, "inner", None)
    if finder is None or inner is None:
        return []
    lines = []
    wanted = {keys.state_key(state, job_id) for state in LIFECYCLE}
    for prefix in {keys.STATE_PREFIXES[state] for state in LIFECYCLE}:
        for entry in finder(prefix):
            if entry.key in wanted:
                inner.delete(entry.key)
                lines.append(f"{job_id}: removed the tombstone left standing at {entry.key}")
    return lines
