"""How a supervisor keeps its lease: alone while its job starts, runs or pauses, and through the lease
round while it waits (renewal_round: one waiting supervisor renews every waiting job's lease, the
others sleep until their fallback poll). A late renewal is always safe: reconciliation leaves a job
alone while its supervisor verifies as alive.

A mixin of jobman.eligibility.Supervisor, whose state it uses (db, job_id, rev, lease, next_renew, log...).
"""
import time

from runkit import proc

from . import doorbell, renewal_round
from .dbretry import DatabaseGone, jitter
from .errors import Conflict
from .store import lease_round, transitions


class LeaseKeeping:
    def _keep_lease(self, now: float) -> None:
        """Renewal time, for a supervisor that keeps its own lease or holds the lease round."""
        self._check_file(now)
        if self.in_line and self.holds_round:
            self._hold_round(now)
        else:
            self._renew(now)

    def _check_file(self, now: float) -> None:
        """Every poll interval: is the database file still the one we opened? (SQLite goes on writing
        happily into a deleted file.)"""
        if now >= self.next_file_check:
            self.next_file_check = now + self.poll_every
            self.db.check_file()

    def _take_turn(self, now: float, snap) -> None:
        """A waiter's fallback poll, from the snapshot just read: take the lease round up if nobody
        holds it any more, else renew its own lease only if the round has passed it over; then sleep
        until the next fallback poll."""
        self.look_due = False
        self._check_file(now)
        if snap.round_holder is None or snap.round_until < now or snap.round_holder == self.supervisor_id:
            self._hold_round(now)
            if self.holds_round:
                return
        elif snap.lease_expires_at is None or snap.lease_expires_at < now + self.renew_every:
            self._renew(now)
        self._renewed(now, now + jitter(self._poll_gap(), 1.0, 1.5))

    def _hold_round(self, now: float) -> None:
        """Run the lease round (renewal_round), or learn that another supervisor holds it."""
        ok, value = self.db.try_once("renew the waiting jobs' leases", renewal_round.run, self.supervisor_id,
                                     self.job_id, now, self.renew_every)
        if not ok:
            self.next_renew = now + value
            return
        if value is None:
            if self.holds_round:
                self.log("another supervisor holds the lease round now; this one renews only its own lease, "
                         "when needed")
                self.holds_round = False
                self.next_renew = now  # look at its own lease, as a waiter, at once
            return
        period, revision, look = value
        if not self.holds_round:
            self.log("holds the lease round: renews the lease of every waiting job whose supervisor is alive")
            self.holds_round = True
            self.suspects = set()
        if revision is not None:
            self.rev = revision
        self._renewed(now, now + jitter(period, 0.8, 1.0))
        self._look_after_the_line(now, look)

    def _look_after_the_line(self, now: float, look) -> None:
        """What the round saw beside the leases. A waiter whose reason to wait has gone is rung only once
        two rounds in a row have seen it so (its ring may be on its way); a peer that looks abandoned is
        left to the reconciliation pass (a lost job's slot at most once per poll interval: finding what is
        left of its target reads every process's environment)."""
        missed = look.gone & self.suspects
        self.suspects = look.gone
        if missed:
            doorbell.ring_all(self.home, missed)
            if missed != self.rang:
                self.log(f"rang {len(missed)} waiting job(s) whose reason to wait had gone for two rounds")
        self.rang = missed
        if look.lost_slots and now >= self.next_slot_look:
            self.next_slot_look = now + self.poll_every
            self._settle(now)
        elif look.settle:
            self._settle(now)

    def _renewed(self, now: float, next_renew: float) -> None:
        if self.db.waits:
            self.record_waits()
        self.renewed_at, self.next_renew = now, next_renew

    def _leave_line(self) -> None:
        """The job stops waiting: renew its own lease from now on, and hand the lease round on."""
        self.in_line = False
        now = time.time()
        self.next_renew = min(self.next_renew, now + self._renew_gap())
        self.renewed_at = now  # the round kept the lease while the job waited: no renewal of ours is late yet
        if not self.holds_round:
            return
        self.holds_round = False
        try:
            ok, candidates = self.db.try_once("hand the lease round on", lease_round.release, self.supervisor_id,
                                              self.job_id)
        except DatabaseGone:
            return  # nothing of ours is in the file at that path now: the round lapses there on its own
        for job_id, pid, start_time, boot in candidates if ok else ():
            if proc.verify(pid, start_time, boot, awake=True):
                doorbell.ring(self.home, job_id, doorbell.ROUND)  # its look finds nobody holding the round
                return

    def _renew(self, now: float) -> None:
        """Renew the lease, or, if the database cannot take it now, try again after a backoff: a late
        renewal is safe (reconciliation leaves a job alone while its supervisor verifies as alive)."""
        while True:
            try:
                ok, value = self.db.try_once("renew the lease", transitions.renew_lease, self.job_id,
                                             self.supervisor_id, self.rev, now + self.lease)
                break
            except Conflict:
                self.refresh()
                self.dirty = True  # something else changed the job (a cancel request, ...): look again
        if not ok:
            self.next_renew = now + value
            return
        self.rev = value
        if self.db.waits:
            self.record_waits()
        late = now - self.renewed_at - self.renew_every
        if late > self.renew_every:
            self.log(f"lease renewed {late:.1f}s late")
        self.renewed_at = now
        self.next_renew = now + self._renew_gap()

    def record_waits(self) -> None:
        """Record in the job's events how long the database kept this supervisor waiting (and why), now
        that it can be written; whatever cannot be written yet waits for the next renewal."""
        while self.db.waits:
            ok, _ = self.db.try_once("record a wait for the database", transitions.add_attempt_note, self.job_id,
                                     "database_waited", time.time(), **self.db.waits[0])
            if not ok:
                return
            self.db.waits.pop(0)
