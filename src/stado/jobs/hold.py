"""Holding a queued job (`stado job hold`, like Slurm's `scontrol hold`) and releasing it.

A hold is a field of the job's queue entry, `held: {by, at}`, written with put-if-match on the version read, then
copied to the claim-order index entry (a plain put, as every index write is). Agents read the index entry when its
version changes, see the hold and skip the job until the entry changes again: a held job costs an agent nothing
per poll. The claim stays exactly-once because the queue entry's version decides: a claim deletes the entry it
was claimed from with delete-if-match on the version it read, and a hold replaces that version. Whichever lands
first wins: a hold after the claim's delete finds the entry gone (the job is running: the hold says so and writes
nothing); a claim whose delete finds the entry held gives its claim back before starting anything
(jobs.claiming.verify_claim). A release drops the field the same way; the entry keeps its id, so the job keeps its
place in the claim order (priority, then creation)."""
from runkit.core.records import record

from ..core import documents as d
from ..core import keys
from ..store.cas import new_nonce, read, replace
from ..core.errors import StadoError
from ..queue.lookup import find, view
from ..objectstore.base import ObjectStore
from ..queue.readyindex import index
from .common import CONFLICT_RETRIES


class NotQueued(StadoError):
    """Only a queued job can be held or released (exit 1: the job had moved on; nothing was written)."""

    exit_code = 1


class HoldReport(record("HoldReport", "job_id changed doc message")):
    """What hold/release did: `changed` False when the job was already so (nothing written); `doc` its queue entry."""

    __slots__ = ()


def hold(store: ObjectStore, selector: str, *, by: str, now: float) -> HoldReport:
    return _set(store, selector, held=True, by=by, now=now)


def release(store: ObjectStore, selector: str, *, by: str, now: float) -> HoldReport:
    return _set(store, selector, held=False, by=by, now=now)


def _set(store: ObjectStore, selector: str, *, held: bool, by: str, now: float) -> HoldReport:
    job_id = find(store, selector)
    verb = "hold" if held else "release"
    for _ in range(CONFLICT_RETRIES):
        seen = view(store, job_id)
        found = read(store, keys.queued(job_id), job_id) if seen.state == d.QUEUED else None
        if found is None:
            raise NotQueued(_not_queued(seen, verb))
        queued, version = found
        if bool(queued.held) == held:
            was = queued.held or {}
            said = (f"job {job_id} was already held by {was.get('by')} at {was.get('at')}" if held
                    else f"job {job_id} was not held; nothing changed")
            return HoldReport(job_id, False, queued, said)
        t = now
        new = (d.held_doc if held else d.released_doc)(queued, by=by, now=t, nonce=new_nonce())
        written, _ = replace(store, keys.queued(job_id), new, version)
        if written is None:
            continue  # claimed, cancelled, requeued or held meanwhile: look again
        index(store, new)  # agents see the change at their next poll (the index entry is what they read)
        said = (f"job {job_id} held: no agent claims it until `stado job release {job_id}`" if held
                else f"job {job_id} released: it is claimed in its place in the queue again")
        return HoldReport(job_id, True, new, said)
    raise NotQueued(f"job {job_id} kept changing while trying to {verb} it; nothing was written: run it again")


def _not_queued(seen: d.JobView, verb: str) -> str:
    done = "held" if verb == "hold" else "released"
    if seen.state == d.RUNNING and seen.doc.cancelling:
        return f"job {seen.id} is being cancelled: only a queued job can be {done}; nothing was written"
    if seen.state == d.RUNNING:
        where = f" on {seen.doc.instance_ref}" if seen.doc.instance_ref else ""
        return (f"job {seen.id} is running{where}, not queued: only a queued job can be {done}"
                f"{' (stado cancel stops it)' if verb == 'hold' else ''}; nothing was written")
    return f"job {seen.id} has ended ({seen.state}): only a queued job can be {done}; nothing was written"
