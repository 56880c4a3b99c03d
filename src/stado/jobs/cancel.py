"""Cancellation: a queued job by a tombstone in running/ (the claim's one-winner primitive, so it never
starts), a running one by a put-if-match of phase `cancelling` that its agent sees at its next renewal."""
from collections import namedtuple

from .. import documents as d
from .. import keys
from ..cas import create, new_nonce, replace
from ..errors import Conflict, JobNotFound
from ..lookup import find, records
from ..objectstore.base import ObjectStore, StoreError
from .claim import give_back, stale_claim
from .common import CONFLICT_RETRIES, _now
from .moves import settle


class CancelReport(namedtuple("CancelReport", "job_id kind view message")):
    """What `stado cancel` did. kind: cancelled_queued | cancelled_running | already_cancelling |
    finishing | already_terminal; view: the job's JobView before; message: one line for the user."""

    __slots__ = ()


def cancel(store: ObjectStore, selector: str, *, by: str | None = None, reason: str | None = None,
           now: float | None = None) -> CancelReport:
    from ..submission import whoami

    by = by or whoami()
    job_id = find(store, selector)
    for _ in range(CONFLICT_RETRIES):
        t = _now(now)
        recs = records(store, job_id)
        v = d.resolve(job_id, {state: doc for state, (doc, _) in recs.items()})
        if v is None:
            raise JobNotFound(f"no job {selector}: check the id with `stado status`")
        if v.state in keys.TERMINAL_STATES:
            what = v.state if v.state == "cancelled" else f"{v.state} ({v.outcome})"
            if not v.terminal:
                what += f"; its process group on {recs['running'][0].get('instance_ref')} is being stopped"
            return CancelReport(job_id, "already_terminal", v, f"{job_id}: already {what}; nothing written")
        if v.state == "running":
            report = _cancel_running(store, v, *recs["running"], by=by, reason=reason, now=t)
        else:
            report = _cancel_queued(store, v, *recs["queued"], by=by, reason=reason, now=t)
        if report is not None:
            return report
    raise Conflict(f"{job_id}: the job kept changing while cancelling it; run `stado cancel {selector}` again")


def _cancel_running(store, v, doc, version, *, by, reason, now) -> CancelReport | None:
    job_id, phase = doc["id"], doc.get("phase")
    if phase == "finishing":
        res = doc.get("result") or {}
        return CancelReport(job_id, "finishing", v, f"{job_id}: already finished ({res.get('outcome')}); its record "
                            "is being written; nothing written")
    if phase == "cancelling":
        if doc.get("owner") is None:
            settle(store, doc, version, writer=by, now=now)
        return CancelReport(job_id, "already_cancelling", v, f"{job_id}: already being cancelled")
    moved = d.cancelling_doc(doc, by=by, reason=reason, now=now, nonce=new_nonce())
    if replace(store, keys.running(job_id), moved, version)[0] is None:
        return None  # the owner renewed or finished meanwhile: look again
    create(store, keys.terminal("cancelled", job_id), d.terminal_doc(moved, now=now, nonce=new_nonce(), writer=by))
    return CancelReport(job_id, "cancelled_running", v, f"{job_id}: cancelled; {_who_stops(store, doc, now)}")


def _who_stops(store: ObjectStore, doc: dict, now: float) -> str:
    """Who will stop the job's processes, as far as the owner's agents/ record tells."""
    import json

    from ..admission import is_live, silent_for

    where = doc.get("instance_ref") or "its host"
    try:
        record = json.loads(store.get(keys.agent(doc.get("owner") or "-")).data)
    except (StoreError, ValueError):
        record = None
    if isinstance(record, dict) and is_live(record, now) and not record.get("stopping"):
        return f"its process group on {where} is stopped at its agent's next tick"
    silent = silent_for(record, now) if isinstance(record, dict) else None
    heard = f"has not been heard from for {silent:.0f} s" if silent is not None else "has no live record"
    return (f"its agent {doc.get('owner')} on {where} {heard}: a process of it still running there is stopped when "
            "that agent speaks again or another agent starts on that host; the reaper settles the job once the "
            "agent's lease promise has passed")


def _cancel_queued(store, v, queued, queued_version, *, by, reason, now) -> CancelReport | None:
    """Cancelling a queued job takes its claim slot (create-if-absent on running/), so no agent can start
    it afterwards; then the move is settled like any other."""
    tomb = d.cancel_tombstone(queued, by=by, reason=reason, now=now, nonce=new_nonce())
    version = create(store, keys.running(queued["id"]), tomb)
    if version is None:
        return None  # an agent claimed it first: cancel the running job instead
    if stale_claim(store, queued) == "terminal":
        give_back(store, tomb, version, writer=by, now=now)
        return None  # it ended meanwhile: say so
    settle(store, tomb, version, writer=by, now=now, taken=True)
    return CancelReport(queued["id"], "cancelled_queued", v, f"{queued['id']}: cancelled before it started")
