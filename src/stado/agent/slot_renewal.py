"""Renewing a slot's claim, and meeting a refusal: the renewal (a compare-and-swap with a fresh promise, then the
pulse), made by the agent's renewals' thread (renewals.py) without the slot's lock so that a slow answer never holds
the loop's own writes; what came of it, recorded in the slot under its lock; and what it means when another writer
moved the record (a cancel, the reaper, a take-over), re-adoption included. SlotRunner (runner.py) is one; how a
slot is stopped is the runner's.
"""
from ..core import documents as d, keys
from .. import jobs
from ..core.errors import CorruptDocument
from ..objectstore.base import StoreError
from ..store.cas import read
from . import keeper_link
from .slot import Phase, Slot, Stop, promised_until

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .context import AgentContext

UNANSWERED_KEPT = 8  # renewals with an error for an answer its keeper is told of (one a poll: far past any promise)


def _readopted_words(slot: Slot, ran: float) -> str:
    """What re-adoption found: a process still running here, or one that had ended here (its outcome held)."""
    if not slot.gone:
        return (f"already running here as process group {slot.pgid} for {ran:.0f} s: its lease lapsed while it ran "
                "and it was put back in the queue")
    code, sig = slot.exit or (None, None)
    how = f"exit {code}" if sig is None and code is not None else f"signal {sig}" if sig is not None else "unknown"
    return (f"its command had ended here ({how}) but its outcome was not recorded yet when its lease lapsed and it "
            "was put back in the queue")


class SlotRenewal:
    """The renewal half of SlotRunner; `ctx` is the agent's context, `stop` the runner's."""

    ctx: "AgentContext"
    if TYPE_CHECKING:
        def stop(self, slot: Slot, why: str) -> None: ...

    @staticmethod
    def renewable(slot: Slot) -> bool:
        """Whether the slot's claim is renewed: a cancelled or taken-over job is no longer ours to renew, nor an
        unknown claim (its version is read first), nor one whose refused renewal the loop has not met yet. A slot
        being settled is renewed until its outcome is recorded (the loop holds its lock while it writes it)."""
        return (slot.stop not in (Stop.CANCEL, Stop.LOST) and slot.version is not None and slot.overtaken is None
                and slot.phase != Phase.DONE and not slot.renewing and slot.renewed is None)

    def renew(self, slot: Slot) -> "jobs.Overtaken | None":
        """Renew the slot's claim (a compare-and-swap with a fresh promise), then the pulse. Returns the refusal
        (another writer moved the record: a cancel, the reaper) for the caller to meet (_overtaken), or None. The
        caller holds the slot's lock. StoreError goes to the caller, after the pulse that says the renewal fails."""
        held = (slot.doc, slot.version)
        return self.apply_renewal(slot, held, self.renewal(slot, held), raise_errors=True)

    def renewal(self, slot: Slot, held: tuple) -> tuple:
        """The renewal of the claim `held` (doc, version) and its pulse, touching nothing of the slot's but its
        keeper's promise file (told of the renewal in flight): its renewals' thread makes it without the slot's
        lock, so that a slow answer never holds the loop's own writes. Returns what came of it, for apply_renewal:
        (kind, value, began, ended, due, base), kind one of "renewed" (doc, version), "refused" (Overtaken), "error"
        and "corrupt" (the exception); `due`: when it was due; `base`: the version its last attempt was written on
        (a renewal that found its own earlier write landed writes on top of that one, not on `held`)."""
        ctx = self.ctx
        doc, version = held
        due, began, now = slot.renew_due, ctx.clock.monotonic(), ctx.clock.wall()
        bases, nonces = [version], []

        def attempting(new: d.Job, base) -> None:
            bases.append(base)
            nonces.append(new.nonce)
            keeper_link.tell(self.ctx, slot, trying=new, base=base)

        try:
            got = jobs.renew(ctx.store, doc, version, lease_expires_at=ctx.lease.promise(now), now=now,
                             process=slot.process if doc.process is None else None, on_attempt=attempting)
        except CorruptDocument as e:
            return "corrupt", e, began, ctx.clock.monotonic(), due, bases[-1]
        except StoreError as e:
            slot.unanswered = (*slot.unanswered, *nonces)[-UNANSWERED_KEPT:]  # told its keeper with the pulse
            self._pulse(slot, doc, renewed=False)  # the renewal is failing, not the worker: say so
            return "error", e, began, ctx.clock.monotonic(), due, bases[-1]
        ended = ctx.clock.monotonic()
        if isinstance(got, jobs.Overtaken):
            self._pulse(slot, doc, renewed=False)
            return "refused", got, began, ended, due, bases[-1]
        self._pulse(slot, got[0], renewed=True)
        return "renewed", got, began, ended, due, bases[-1]

    def apply_renewal(self, slot: Slot, held: tuple, outcome: tuple, *, raise_errors: bool = False):
        """What a renewal of the claim `held` (the slot's doc and version when it began) came to, recorded in the
        slot (its caller holds the lock). A renewal whose slot was written meanwhile (the loop settled it, took the
        job back, or renewed it itself) changes nothing: its answer is stale; unless it was written on top of what
        the slot holds now (it found the loop's renewal landed and renewed on it): then it is the newest write, the
        one its keeper must know to judge whether anyone else moved the record. Returns the refusal to meet, or
        None."""
        ctx = self.ctx
        kind, value, began, ended, due, base = outcome
        slot.renew_due = ended + ctx.cfg.poll_seconds
        if kind == "error":
            if raise_errors:
                raise value
            return None
        if slot.version != held[1] and not (kind == "renewed" and slot.version == base):
            return None
        if kind == "corrupt":
            # Someone wrote over the running record: the renewal's compare-and-swap lost, so the job is no
            # longer ours to run, and what holds its key cannot be read to learn why.
            ctx.log(f"{slot.job_id}: {value}; the job is no longer ours: {slot.stopping_words}")
            self.stop(slot, Stop.LOST)
            return None
        ctx.lease.observed(due, began, ended)  # monotonic: a wall-clock jump is no late renewal
        slot.renew_took = ended - began
        if kind == "refused":
            return value
        slot.doc, slot.version = value
        slot.promised_until = promised_until(slot.doc, began)
        slot.unanswered = ()  # what landed before this is no longer the record
        keeper_link.tell(self.ctx, slot)
        return None

    def _pulse(self, slot: Slot, doc: d.Job, *, renewed: bool) -> None:
        began = self.ctx.clock.monotonic()
        try:
            jobs.pulse(self.ctx.store, doc, renewed=renewed, now=self.ctx.clock.wall())
            if not renewed:  # a pulse after a failed renewal is what may keep the job alive: its keeper hears of it
                slot.pulsed = began
                keeper_link.tell(self.ctx, slot)
        except StoreError:
            pass  # the next renewal attempt writes the next pulse

    def _overtaken(self, slot: Slot, current: d.Job | None, version=None) -> None:
        """Another writer moved the running document: a cancel, or the reaper (then the job may be ours to
        take back: re-adoption)."""
        if current is not None and current.cancelling and current.claim == slot.doc.claim:
            slot.doc = current  # a cancel of this very attempt (another claim's cancel is that claim's owner's)
            slot.cancel_seen = None if version is None else (current, version)  # its settle takes it at that version
            return self.stop(slot, Stop.CANCEL)
        if current is not None and current.reaped and current.claim == slot.doc.claim:
            return  # the reaper's move is under way: look again on the next tick
        if (current is not None and current.finishing and current.claim == slot.doc.claim
                and current.written_by == self.ctx.agent_id):
            return  # this agent's own decision on the slot (a renewal met it): its settle finishes the move
        if slot.process and (current is None or current.claim != slot.doc.claim):
            # Its process runs here, or ended here with an outcome not recorded yet: the job is taken back (the
            # one process it had goes on, or its outcome is recorded), or who took it first is said.
            return self._readopt(slot)
        try:
            cancelled = current is None and read(self.ctx.store, keys.terminal("cancelled", slot.job_id)) is not None
        except CorruptDocument:
            cancelled = False
        if cancelled:
            return self.stop(slot, Stop.CANCEL)
        self.ctx.log(f"{slot.job_id}: its running record was taken over or removed; {slot.stopping_words}")
        self.stop(slot, Stop.LOST)

    def _readopt(self, slot: Slot) -> None:
        """Re-adoption: a job requeued while this worker still runs its process is not started a second time."""
        ctx = self.ctx
        began, now = ctx.clock.monotonic(), ctx.clock.wall()
        try:
            got = jobs.readopt(ctx.store, slot.doc, agent_id=ctx.agent_id, instance_ref=ctx.instance_ref,
                               lease_expires_at=ctx.lease.promise(now), now=now, owner_process=ctx.identity,
                               ended=slot.gone)
        except jobs.Unverified as unsure:  # whether its create landed is told on the next tick
            slot.doc, slot.version, slot.verify = unsure.doc, unsure.version, (unsure.queued, unsure.queued_version)
            return
        ran = ctx.clock.monotonic() - slot.started_mono
        if got.doc is not None:
            slot.doc, slot.version = got.doc, got.version
            slot.promised_until = promised_until(got.doc, began)
            slot.unanswered = ()
            keeper_link.tell(self.ctx, slot)
            ctx.log(f"{slot.job_id}: {_readopted_words(slot, ran)}; " + (
                "its outcome is recorded and nothing is started again" if slot.gone else
                "the running process took the job back and no second process was started"))
            return
        ctx.log(f"{slot.job_id}: {_readopted_words(slot, ran)}, but {got.why} first; " + (
            "its outcome is not recorded" if slot.gone else f"{slot.stopping_words}, and nothing is started"))
        self.stop(slot, Stop.CANCEL if got.cancelled else Stop.LOST)
