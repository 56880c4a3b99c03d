"""Each slot's renewals, on a thread of their own beside the agent's loop.

A renewal is the promise a worker makes to the fleet: it must land within --poll-seconds of the last one, plus
what the worker measured of its own lateness. The loop also claims, reaps, fires schedules and settles ended jobs,
and each of those waits on the store: with answers taking seconds (a store under load, a slow link), renewals queued
behind them came late, promises passed, live jobs were requeued and outcomes held in memory were thrown away. Here
they wait on nothing but their own requests.

The thread renews each slot that is due (SlotRunner.renew, under the slot's lock: a slot whose record the loop is
writing is tried again shortly), and hands a refused renewal (another writer moved the record) to the loop, which
meets it on its next tick (SlotRunner._overtaken) and is woken for it. The simulator runs the same passes as an
actor of its own, so the loop and the renewals interleave there as they do here.
"""
import threading

from ..core.brief import brief
from .runner import SlotRunner

RETRY_BUSY = 0.05  # a slot whose lock the loop holds is tried again this soon


class Renewals:
    __slots__ = ("runner", "slots", "_wake", "_stop", "_thread")

    def __init__(self, runner: SlotRunner, slots: dict):
        self.runner = runner
        self.slots = slots  # the agent's own dict of slots (job id -> Slot), read here, changed by the loop
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    def due(self) -> float:
        """When the next renewal falls due, on the agent's monotonic clock (inf: none)."""
        return min((slot.renew_due for slot in list(self.slots.values()) if self.runner.renewable(slot)),
                   default=float("inf"))

    def run_due(self) -> float:
        """Renew every slot that is due. Returns when the next one falls due."""
        ctx = self.runner.ctx
        soonest = float("inf")
        for slot in list(self.slots.values()):
            if not self.runner.renewable(slot):
                continue
            if ctx.clock.monotonic() < slot.renew_due:
                soonest = min(soonest, slot.renew_due)
                continue
            if not self._renew(slot):
                soonest = min(soonest, ctx.clock.monotonic() + RETRY_BUSY)
                continue
            soonest = min(soonest, slot.renew_due)
        return soonest

    def _renew(self, slot) -> bool:
        """One renewal of the slot: its claim read under the slot's lock, the requests made without it (the loop may
        settle the slot meanwhile: then this renewal's answer is stale, and dropped), the answer recorded under it
        again, or handed to the loop when it holds the lock then. False when the loop held the lock to begin with."""
        ctx = self.runner.ctx
        if not slot.lock.acquire(blocking=False):
            return False
        try:
            if not self.runner.renewable(slot):  # the loop may have settled it before the lock was free
                return True
            held = (slot.doc, slot.version)
            slot.renewing = True
        finally:
            slot.lock.release()
        try:
            outcome = self.runner.renewal(slot, held)
        finally:
            slot.renewing = False
        if outcome[0] == "error":
            ctx.log(f"{slot.job_id}: renewal failed ({type(outcome[1]).__name__}: {brief(str(outcome[1]), 200)}); "
                    f"trying again in {ctx.cfg.poll_seconds:g} s (the pulse says the worker lives)")
        if not slot.lock.acquire(blocking=False):
            slot.renewed = (held, outcome)  # the loop records it on its next tick, which this wakes
            ctx.notify()
            return True
        try:
            refused = self.runner.apply_renewal(slot, held, outcome)
            if refused is not None:
                slot.overtaken = (refused.current, refused.version)
                ctx.notify()  # the loop meets it at once
        finally:
            slot.lock.release()
        if slot.retick:  # the loop passed this slot by while it was locked here: its tick is due now
            slot.retick = False
            ctx.notify()
        return True

    # -- the thread --------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stado-renewals", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A slot was added or changed: look at the due times again."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        clock = self.runner.ctx.clock
        while not self._stop:
            try:
                soonest = self.run_due()
            except Exception as e:  # a bug here must not stop every renewal: said, and tried again
                self.runner.ctx.log(f"renewals: unexpected {type(e).__name__}: {brief(str(e), 200)}; going on")
                soonest = clock.monotonic() + 1.0
            # Woken when a slot is added (wake); the poll bounds the wait should a wake be missed.
            self._wake.wait(max(0.0, min(soonest - clock.monotonic(), self.runner.ctx.cfg.poll_seconds)))
            self._wake.clear()
