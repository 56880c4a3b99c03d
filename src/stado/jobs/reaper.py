"""Telling a dead worker from a live one (docs/stado.md, "Liveness"), and recovering what dead ones left.

A running job is alive while the promise its worker wrote holds. The promise is judged by the store's clock,
the one clock the fleet shares (storeclock.py): the running document's own write time (`modified`, the store's)
plus the lease its worker promised (`lease_seconds`, a duration the worker measured on one clock), against the
store's time now. So no host's wall clock decides: a worker whose clock runs an hour ahead is reaped as soon
as any other, and a reaper whose clock is off reaps no sooner nor later. Once the promise has passed,
two writes still prove it alive, each judged by the store's own `modified`: the pulse at
status/<id>/heartbeat newer than the promise (the renewal is failing, not the worker), or a blob under
status/<id>/checkpoints/ newer than the promise (a big checkpoint upload starves the renewal while the job
demonstrably works). Only a job whose promise passed with neither write after it is reaped: requeued once
with `worker lease expired`, failed on the second expiry. A job with no promise (written by a stado from before
promises) is kept and counted as unpromised: nothing says when it should have spoken.

The reaper's move is a move like any other (jobs.py): a put-if-match of its decision on the version it
read, so a renewal that lands first wins and the reaper's move is refused.
"""
from dataclasses import dataclass, field

from ..core import documents as d
from ..core import keys
from ..store.cas import new_nonce, replace
from ..core.errors import CorruptDocument
from . import settle
from .common import running_records
from ..objectstore.base import NotFound, ObjectStore
from ..core.problems import CORRUPT, Problem
from ..store.storeclock import StoreClock

REQUEUE_BUDGET = 1          # requeued once after a lost worker, failed on the second loss
LEASE_EXPIRED = "worker lease expired"
# Slack on a promise: the store stamps writes in whole seconds on S3, and a measurement of its clock is good to
# half a round trip (added to this: StoreClock.uncertainty).
DEFAULT_MARGIN = 2.0
# A pulse or a checkpoint proves its worker alive for at least this long from its own time (evidence_window).
EVIDENCE_FLOOR = 30.0

ALIVE = ("promise", "pulse", "checkpoint", "watch", "unpromised")


class Watch:
    """How long this reaper has seen each running document unchanged, on its own monotonic clock.

    A second guard beside the store's clock: an expired verdict also needs the document seen unchanged for its
    promised lease (`lease_seconds`) plus the margin, so that a measurement of the store's clock gone wrong
    never requeues a live job on its own. A reaper that has just started therefore waits one lease before it
    reaps anything. Each sighting is timed around its own read: first seen when the read answered, seen again
    when the next read was asked, so a reaper stalled mid-pass never counts its stall as time watched."""

    def __init__(self):
        self._seen: dict[str, tuple[object, float]] = {}
        # The document last read at each job's key, with its version: a record listed again at that version is not
        # read again (a dead worker's record is watched for a whole lease before it is reaped: one GET, not one a pass).
        self.read: dict[str, tuple[d.Job, object]] = {}

    def unchanged_for(self, job_id: str, version, asked: float, answered: float | None = None) -> float:
        """Seconds the document has certainly been at `version`: from the first read that returned it (when it
        answered) to this read (when it was asked)."""
        seen = self._seen.get(job_id)
        if seen is None or seen[0] != version:
            self._seen[job_id] = (version, asked if answered is None else answered)
            return 0.0
        return max(0.0, asked - seen[1])

    def keep(self, job_ids) -> None:
        """Forget documents no longer in running/ (their next one starts a new watch)."""
        for job_id in set(self._seen) - set(job_ids):
            del self._seen[job_id]
        for job_id in set(self.read) - set(job_ids):
            del self.read[job_id]


def promise_of(doc: d.Job, modified: float | None = None) -> float | None:
    """When the job's worker said it would speak again: by the store's clock, the document's write time
    (`modified`) plus its promised lease (a lease it does not state is none: the promise ran out as it was
    written); for a caller that knows no write time, its `lease_expires_at`. None if it carries no promise."""
    try:
        written = d.parse_iso(doc.lease_expires_at)
    except (TypeError, ValueError):
        written = None
    if written is None:
        return None
    if modified is None:
        return written
    lease = doc.lease_seconds
    return modified + (lease if isinstance(lease, (int, float)) and not isinstance(lease, bool) else 0.0)


def liveness(doc: d.Job, *, now: float, pulse_at: float | None = None, checkpoint_at: float | None = None,
             margin: float = DEFAULT_MARGIN, modified: float | None = None) -> str:
    """The verdict on a running document (pure): 'promise' (it holds), 'pulse' or 'checkpoint' (passed, but
    that write came after it), 'unpromised' (no promise to judge), or 'expired'. `now`, `modified` (the
    document's write time), `pulse_at` and `checkpoint_at` are all the store's time."""
    promise = promise_of(doc, modified)
    if promise is None:
        return "unpromised"
    if now <= promise + margin:
        return "promise"
    window = evidence_window(doc)
    if pulse_at is not None and pulse_at > promise and now <= pulse_at + window + margin:
        return "pulse"
    if checkpoint_at is not None and checkpoint_at > promise and now <= checkpoint_at + window + margin:
        return "checkpoint"
    return "expired"


def evidence_window(doc: d.Job) -> float:
    """How long a pulse or a checkpoint newer than the passed promise keeps the job alive from its own time: the
    lease its worker promised, and never less than EVIDENCE_FLOOR. A live worker whose renewals fail pulses
    again at every attempt; a worker that died right after its last pulse is reaped once that window is past
    too (the rule "a pulse newer than the passed promise", read literally, would keep it forever)."""
    lease = doc.lease_seconds
    lease = lease if isinstance(lease, (int, float)) and not isinstance(lease, bool) else 0.0
    return max(lease, EVIDENCE_FLOOR)


def evidence(store: ObjectStore, job_id: str) -> tuple[float | None, float | None]:
    """(the pulse's last_modified, the newest checkpoint's last_modified), by the store's clock."""
    try:
        pulse_at = store.head(keys.heartbeat(job_id)).modified
    except NotFound:
        pulse_at = None
    checkpoint_at = max((e.modified for e in store.list(keys.checkpoint_prefix(job_id))), default=None)
    return pulse_at, checkpoint_at


def judge(store: ObjectStore, doc: d.Job, *, now: float, margin: float = DEFAULT_MARGIN,
          watched: float | None = None, modified: float | None = None) -> str:
    """liveness() with the evidence read from the store, only when the promise has passed (a job whose
    promise holds costs no request). `watched`: how long the caller's Watch has seen this very version;
    'watch' (alive) while that is shorter than the promised lease plus the margin."""
    verdict = liveness(doc, now=now, margin=margin, modified=modified)
    if verdict != "expired":
        return verdict
    lease = doc.lease_seconds
    if watched is not None and isinstance(lease, (int, float)) and watched <= lease + margin:
        return "watch"
    pulse_at, checkpoint_at = evidence(store, doc.id)
    return liveness(doc, now=now, pulse_at=pulse_at, checkpoint_at=checkpoint_at, margin=margin, modified=modified)


def lapse(store: ObjectStore, doc: d.Job, version, *, writer: str, reason: str, now: float) -> d.Job | None:
    """Settle a running document whose worker is gone: requeued within the budget, else failed
    (worker_lease_expired). A document already being cancelled just settles as cancelled. Returns the new
    record; None when another writer (a renewal, a cancel, another reaper) moved the document first."""
    if doc.cancelling:
        moved = d.reaped_cancel_doc(doc, writer=writer, now=now, nonce=new_nonce())
    else:
        requeue = doc.requeues < REQUEUE_BUDGET
        moved = d.reaped_doc(doc, now=now, nonce=new_nonce(), writer=writer, reason=reason, requeue=requeue)
    new_version, _ = replace(store, keys.running(doc.id), moved, version)
    if new_version is None:
        return None
    return settle(store, moved, new_version, writer=writer, now=now, taken=True)


@dataclass
class ReapSummary:
    requeued: int = 0
    failed: int = 0
    cancelled: int = 0
    settled: int = 0            # decided moves (finishing, cancel tombstones) finished on the way
    alive: dict = field(default_factory=lambda: dict.fromkeys(ALIVE, 0))
    lost_race: int = 0          # renewed (or moved) between our read and our write: theirs stands
    here: int = 0               # settled by the caller's restart check on its own host (reap's `here`)
    lines: list = field(default_factory=list)     # what it did, one line each
    problems: list = field(default_factory=list)  # what it could not decide on (Problem), skipped

    @property
    def reaped(self) -> int:
        return self.requeued + self.failed + self.cancelled

    def as_json(self) -> dict:
        return {"reaped": self.reaped, "requeued": self.requeued, "failed": self.failed, "cancelled": self.cancelled,
                "settled": self.settled, "alive_by_promise": self.alive["promise"],
                "alive_by_pulse": self.alive["pulse"], "alive_by_checkpoint": self.alive["checkpoint"],
                "alive_by_watch": self.alive["watch"], "unpromised": self.alive["unpromised"],
                "lost_race": self.lost_race, "settled_here": self.here}

    def line(self) -> str:
        return (f"reaped {self.reaped} (requeued {self.requeued}, failed {self.failed}, cancelled {self.cancelled}); "
                f"alive by pulse {self.alive['pulse']}, alive by checkpoint {self.alive['checkpoint']}, "
                f"watched for less than a lease {self.alive['watch']}, unpromised {self.alive['unpromised']}; "
                f"promise holds {self.alive['promise']}" + (f"; settled on this host {self.here}" if self.here else ""))


def reap(store: ObjectStore, *, writer: str, now: float, margin: float = DEFAULT_MARGIN,
         skip: frozenset = frozenset(), watch: Watch | None = None, clock: StoreClock,
         here=None) -> ReapSummary:
    """One pass over running/: finish decided moves, reap jobs whose worker is gone. `clock`: the store's clock as
    the caller measured it (its uncertainty widens the margin; the watch is timed on its host's monotonic clock);
    `now`: the store's time the pass judges by, read on `clock`. `skip`: job ids the caller itself runs (an agent never reaps
    its own slots: its renewal speaks for them). `watch`: kept by a caller that reaps again and again (an agent),
    so that no clock alone ever decides (Watch). `here(doc, version)`: an agent's own host judged by what it can see
    on the machine (takeover.settle_here): called for a record whose promise has passed, before it is lapsed; True
    when the agent settled it itself (the restart check), False to lapse it by the promise."""
    margin += clock.uncertainty  # (an unmeasured clock: none)
    out = ReapSummary()
    listed = []
    # Its own slots' records are not even read (their renewals speak for them), nor a record it read at the version listed.
    known = None if watch is None else watch.read
    records = running_records(store, skip, known=known)
    listing_asked = clock.monotonic()  # no later than the LIST that saw each record (pages come later, not sooner)
    while True:
        asked = clock.monotonic()
        item = next(records, None)
        if item is None:
            break
        job_id, found, corrupt, entry = item
        answered = clock.monotonic()
        listed.append(job_id)
        if job_id in skip:
            continue
        if corrupt is not None:
            out.problems.append(Problem(CORRUPT, job_id, f"{corrupt}: skipped (`stado repair {job_id}` clears it)"))
            continue
        try:
            if found is not None:
                if known is not None and known.get(job_id) is found:
                    asked = listing_asked  # seen unchanged by the LIST, not by a read now: timed from the LIST's start
                elif known is not None:
                    known[job_id] = found
                watched = None if watch is None else watch.unchanged_for(job_id, found[1], asked, answered)
                # A version other than the one listed was written after the LIST: its promise is fresh.
                modified = entry.modified if found[1] == entry.version else now
                _one(store, *found, out=out, writer=writer, now=now, margin=margin, watched=watched,
                     modified=modified, here=here)
        except CorruptDocument as e:  # a record its move meets (a terminal record, a queue entry)
            out.problems.append(Problem(CORRUPT, job_id, f"{e}: skipped (`stado repair {job_id}` clears it)"))
    if watch is not None:
        watch.keep(listed)
    return out


def _one(store, doc, version, *, out: ReapSummary, writer: str, now: float, margin: float,
         watched: float | None, modified: float | None, here=None) -> None:
    job_id = doc.id
    if d.decided(doc):
        term = settle(store, doc, version, writer=writer, now=now)
        if term is not None:
            out.settled += 1
            out.lines.append(f"{job_id}: finished an interrupted move to {term.state}")
        return
    verdict = judge(store, doc, now=now, margin=margin, watched=watched, modified=modified)
    if verdict != "expired":
        out.alive[verdict] += 1
        return
    if here is not None and here(doc, version):
        # Its worker ran on the caller's host and is gone: a job whose command ended there, recorded or about to
        # be by its keeper, is recorded rather than run again, which the promise alone cannot know.
        out.here += 1
        return
    new = lapse(store, doc, version, writer=writer, reason=LEASE_EXPIRED, now=now)
    if new is None:
        out.lost_race += 1
        return
    promised = doc.lease_expires_at
    if new.state == "queued":
        out.requeued += 1
        out.lines.append(f"{job_id}: requeued ({LEASE_EXPIRED}: promised by {promised}, owner {doc.owner} on "
                         f"{doc.instance_ref}; requeue {new.requeues})")
    elif new.state == "cancelled" and doc.cancelling:
        out.cancelled += 1
        out.lines.append(f"{job_id}: cancelled (its agent {doc.owner} stopped speaking before it saw the cancel)")
    elif new.state == "cancelled":
        out.cancelled += 1
        out.lines.append(f"{job_id}: cancelled (a cancel landed while its requeue was being written)")
    else:
        out.failed += 1
        out.lines.append(f"{job_id}: failed ({LEASE_EXPIRED} again: promised by {promised}, owner "
                         f"{doc.owner} on {doc.instance_ref})")


def alive_on(store: ObjectStore, instance_ref: str, *, now: float, margin: float = DEFAULT_MARGIN,
             clock: StoreClock) -> list[tuple[str, str]]:
    """(job id, why) of every job alive on an instance by the reaper's rule, by the store's clock (`clock`, or
    `now`, the store's time): its promise holds ("promise"), a newer pulse or checkpoint ("pulse",
    "checkpoint"), or no promise at all ("unpromised"). A job being cancelled counts until it is settled; a
    running record that cannot be read counts too ("corrupt": its instance cannot be told). One LIST of
    running/, a GET per record, more only where a promise has passed."""
    margin += clock.uncertainty
    keeping = []
    for job_id, found, corrupt, entry in running_records(store):
        if corrupt is not None:
            keeping.append((job_id, "corrupt"))
            continue
        if found is None or found[0].instance_ref != instance_ref or not d.process_may_run(found[0]):
            continue
        modified = entry.modified if found[1] == entry.version else now
        verdict = judge(store, found[0], now=now, margin=margin, modified=modified)
        if verdict != "expired":
            keeping.append((job_id, verdict))
    return keeping


def instance_may_be_deleted(store: ObjectStore, instance_ref: str, *, now: float,
                            margin: float = DEFAULT_MARGIN, clock: StoreClock) -> tuple[bool, list[str]]:
    """The verdict a cloud provider's instance clean-up must ask before deleting a VM (`stado machine
    may-delete`): False while any job on it is alive (alive_on), with the jobs that keep it."""
    keeping = [f"{job_id} ({'its running record is corrupt: cannot tell' if why == 'corrupt' else f'alive by {why}'})"
               for job_id, why in alive_on(store, instance_ref, now=now, margin=margin, clock=clock)]
    return not keeping, keeping
