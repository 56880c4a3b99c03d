"""The supervisor's hold on its job: the job's revision (every write of the supervisor names it), the lease,
renewed alone while the job starts, runs or pauses and through the lease round while it waits (lease_round:
one waiting supervisor renews every waiting job's lease, the others sleep until their fallback poll), the place
in the group's line, the doorbell the supervisor is rung on, and the sleep between (idle), during which the
lease is kept. A late renewal is always safe: reconciliation leaves a job alone while its supervisor verifies
as alive.
"""
from select import POLLIN

from ..handoff import doorbell
from ..store.trouble import DatabaseGone, jitter
from ..core.errors import Conflict
from ..core.model import JobState
from ..store import lease_round as round_records, queries, transitions
from . import lease_round
from .context import SupervisorContext


# How often the round's holder forgets the supervisors it watches whose jobs the round no longer covers (they
# started, or finished): in rounds.
PRUNE_EVERY = 32


class Fenced(Exception):
    """This supervisor no longer owns the job (finished by someone else, or another owner)."""


class Lease:
    def __init__(self, ctx: SupervisorContext, revision: int, *, bell_fd: int | None = None, look_due: bool = False):
        """bell_fd: the doorbell a supervisor back from the lean form kept open meanwhile; look_due: a look at the
        lease round is due before the first sleep (the lean form made none)."""
        self.ctx = ctx
        self.revision = revision    # the job's, as this supervisor last wrote or read it
        now = ctx.clock.wall()
        self.renewed_at = now
        self.next_renew = now + self.renew_gap()
        self.next_file_check = 0.0
        self.next_reconcile = 0.0
        self.dirty = False          # something else changed the job (a renewal met a conflict): look again
        self.in_line = False        # asleep in the wait loop: the lease round keeps the lease, not this process alone
        self.holds_round = False    # this supervisor renews every waiting job's lease (lease_round)
        self.deaths = None          # ... and watches their supervisors' ends with this (its process layer's watcher)
        self.term = None            # ... made whole at this term of the round (None: not yet)
        self.period: float | None = None  # ... and the round's period, as its last round found it
        self.rounds = 0
        self.look_due = look_due    # a waiter's fallback poll is due: the wait loop takes its turn (take_turn)
        self.suspects: set[str] = set()  # as the round's holder: waiters whose reason to wait had gone last round
        self.rang: set[str] = set()      # ... and those it rang at the last round
        self.next_slot_look = 0.0   # ... and when it may next look for what is left of a lost job's target
        self.poller = ctx.processes.poller()
        self.bell: doorbell.Doorbell | None = None
        self.bell_fd = bell_fd
        self.bell_error: OSError | None = None

    def renew_gap(self) -> float:
        # Jittered, so that the renewals of thousands of supervisors never line up.
        return jitter(self.ctx.renew_every, 0.8, 1.0)

    def poll_gap(self) -> float:
        ctx = self.ctx
        return ctx.poll_every if self.bell is not None else min(ctx.poll_every, ctx.renew_every)

    # --- ownership: the revision, fenced ------------------------------------------------------------

    def moved(self, revision: int) -> None:
        """A write of this supervisor's took the job to `revision`."""
        self.revision = revision

    def refresh(self) -> JobState:
        """The job's state, read again; Fenced if it is no longer this supervisor's."""
        ctx = self.ctx
        state = JobState.from_row(ctx.db.call("reload the job's state", queries.load_state, ctx.job_id))
        self.check_owner(state)
        self.revision = state.revision
        return state

    def check_owner(self, state) -> None:
        if state is None:
            raise Fenced("the job record is gone")
        if state.supervisor_id != self.ctx.supervisor_id:
            raise Fenced(f"owned by supervisor {state.supervisor_id}")
        if state.phase == "finished":
            raise Fenced(f"finished {state.outcome} by another process")

    # --- the doorbell and the sleep -----------------------------------------------------------------

    def open_bell(self) -> None:
        ctx = self.ctx
        try:
            if self.bell_fd is not None:
                fd, self.bell_fd = self.bell_fd, None
                self.bell = doorbell.Doorbell.adopt(ctx.home, ctx.job_id, fd)
                self.bell.drain()  # what rang it is in the snapshot read after this
            else:
                self.bell = doorbell.Doorbell(ctx.home, ctx.job_id)
        except OSError as e:  # a full disk has no room for the FIFO: the fallback poll must do
            if self.bell is None and self.bell_error is None:
                ctx.log(f"cannot make the doorbell ({e.strerror}): polling every {self.poll_gap():.1f}s until it can")
            self.bell_error = e
            return
        self.poller.register(self.bell.fd, POLLIN)

    def close_bell(self) -> None:
        if self.bell is not None:
            self.bell.close()

    def watch(self, fd: int) -> None:
        """Wake idle() when `fd` polls readable (a target's exit descriptor)."""
        self.poller.register(fd, POLLIN)

    def unwatch(self, fd: int) -> None:
        self.poller.unregister(fd)

    def idle(self, until: float, pidfd: int | None = None, on_renewal: bool = False) -> str:
        """Sleep until `until`, a doorbell ring or the target's exit, renewing the lease on time.
        on_renewal: `until` is no deadline, so wake at the first renewal from then on instead (a
        fallback poll then costs no wake-up of its own). Returns "bell", "exit" or "time"."""
        clock = self.ctx.clock
        while True:
            now = clock.wall()
            if now >= self.next_renew:
                if self.in_line and not self.holds_round:  # a waiter's renewal time is its fallback poll
                    self.look_due = True
                    return "time"
                self._keep(now)
            if self.dirty:
                self.dirty = False
                return "bell"
            if on_renewal and now >= until:
                return "time"
            end = self.next_renew if on_renewal else min(until, self.next_renew)
            timeout_ms = max(0, int((end - now) * 1000) + 1)
            for fd, _ in self.poller.poll(timeout_ms):
                if fd == pidfd:
                    return "exit"
                if self.bell is not None and fd == self.bell.fd:
                    if self.bell.drain() or not self.in_line:
                        return "bell"
                    if not self.holds_round:  # only the lease round, handed on by its holder: take it up
                        self._hold_round(clock.wall())
            if not on_renewal and clock.wall() >= until:  # on_renewal: the renewal first, at the loop's top
                return "time"

    def pause(self, seconds: float) -> None:
        """How a write waiting out storage trouble pauses: idling, so the lease keeps being renewed."""
        self.idle(self.ctx.clock.wall() + seconds)

    # --- renewal ------------------------------------------------------------------------------------

    def _keep(self, now: float) -> None:
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
            self.next_file_check = now + self.ctx.poll_every
            self.ctx.db.check_file()

    def _renew(self, now: float) -> None:
        """Renew the lease, or, if the database cannot take it now, try again after a backoff: a late
        renewal is safe (reconciliation leaves a job alone while its supervisor verifies as alive)."""
        ctx = self.ctx
        while True:
            try:
                ok, value = ctx.db.try_once("renew the lease", transitions.renew_lease, ctx.job_id,
                                            ctx.supervisor_id, self.revision, now + ctx.lease_seconds)
                break
            except Conflict:
                self.refresh()
                self.dirty = True  # something else changed the job (a cancel request, ...): look again
        if not ok:
            self.next_renew = now + value
            return
        self.revision = value
        if ctx.db.waits:
            ctx.record_waits()
        late = now - self.renewed_at - ctx.renew_every
        if late > ctx.renew_every:
            ctx.log(f"lease renewed {late:.1f}s late")
        self.renewed_at = now
        self.next_renew = now + self.renew_gap()

    def _renewed(self, now: float, next_renew: float) -> None:
        if self.ctx.db.waits:
            self.ctx.record_waits()
        self.renewed_at, self.next_renew = now, next_renew

    # --- the place in line and the lease round ------------------------------------------------------

    def join_line(self) -> None:
        """The job waits: from now on the lease round keeps its lease while it sleeps."""
        self.in_line = True

    def step_out(self) -> None:
        """Awake for a look at the job (still waiting): its own renewals are due again until it sleeps."""
        self.in_line = False

    def take_turn(self, now: float, snap) -> None:
        """A waiter's fallback poll, from the snapshot just read: take the lease round up if nobody
        holds it any more, else renew its own lease only if the round has passed it over; then sleep
        until the next fallback poll."""
        self.look_due = False
        self._check_file(now)
        if snap.round_holder is None or snap.round_until < now or snap.round_holder == self.ctx.supervisor_id:
            self._hold_round(now)
            if self.holds_round:
                return
        elif snap.lease_end is None or snap.lease_end < now + self.ctx.renew_every:
            self._renew(now)
        self._renewed(now, now + jitter(self.poll_gap(), 1.0, 1.5))

    def _hold_round(self, now: float) -> None:
        """Run the lease round (lease_round), or learn that another supervisor holds it."""
        ctx = self.ctx
        if self.deaths is None:
            self.deaths = ctx.processes.watcher()
        self.rounds += 1
        ok, value = ctx.db.try_once("renew the waiting jobs' leases", lease_round.run, ctx.supervisor_id,
                                    ctx.job_id, now, ctx.renew_every, ctx.processes.verify, self.deaths, self.term,
                                    self.rounds % PRUNE_EVERY == 0, self.period)
        if not ok:
            self.next_renew = now + value
            return
        if value is None:
            self._drop_watch()
            if self.holds_round:
                ctx.log("another supervisor holds the lease round now; this one renews only its own lease, "
                        "when needed")
                self.holds_round = False
                self.next_renew = now  # look at its own lease, as a waiter, at once
            return
        period, revision, look, self.term = value
        self.period = period
        if not self.holds_round:
            ctx.log("holds the lease round: renews the lease of every waiting job whose supervisor is alive")
            self.holds_round = True
            self.suspects = set()
        if revision is not None:
            self.revision = revision
        self._renewed(now, now + jitter(period, 0.8, 1.0))
        self._look_after_the_line(now, look)

    def _drop_watch(self) -> None:
        """No longer the round's holder: its watch of the waiters' ends goes (the descriptors, and the raised
        descriptor limit with them, before anything of this supervisor's is started)."""
        if self.deaths is not None:
            self.deaths.close()
            self.deaths, self.term, self.period = None, None, None

    def _look_after_the_line(self, now: float, look: lease_round.Look) -> None:
        """What the round saw beside the leases. A waiter whose reason to wait has gone is rung only once
        two rounds in a row have seen it so (its ring may be on its way); a peer that looks abandoned is
        left to the reconciliation pass (a lost job's slot at most once per poll interval: finding what is
        left of its target reads every process's environment)."""
        missed = look.gone & self.suspects
        self.suspects = look.gone
        if missed:
            doorbell.ring_all(self.ctx.home, missed)
            if missed != self.rang:
                self.ctx.log(f"rang {len(missed)} waiting job(s) whose reason to wait had gone for two rounds")
        passed_to = look.passed_to - self.rang  # (rung last round already: its look may be under way)
        if passed_to:
            doorbell.ring_all(self.ctx.home, passed_to)
            self.ctx.log(f"rang {len(passed_to)} waiting job(s) whose turn a stopped or dead waiter ahead could not "
                         f"take")
        self.rang = missed | look.passed_to
        if look.lost_slots and now >= self.next_slot_look:
            self.next_slot_look = now + self.ctx.poll_every
            self.settle(now)
        elif look.settle:
            self.settle(now)

    def settle(self, now: float) -> bool:
        """Run the reconciliation pass ourselves (nobody may be running commands), at most once per
        renewal interval. Whether it changed anything."""
        if now < self.next_reconcile:
            return False
        self.next_reconcile = now + self.ctx.renew_every
        from ..commands import reconcile  # (rarely needed: not loaded by every supervisor, nor at each return from lean)

        ok, changes = self.ctx.db.try_once("settle abandoned jobs", reconcile.run, self.ctx.home, now)
        return bool(ok and changes)

    def leave_line(self) -> None:
        """The job stops waiting: renew its own lease from now on, and hand the lease round on."""
        ctx = self.ctx
        self.in_line = False
        now = ctx.clock.wall()
        self.next_renew = min(self.next_renew, now + self.renew_gap())
        self.renewed_at = now  # the round kept the lease while the job waited: no renewal of ours is late yet
        self._drop_watch()
        if not self.holds_round:
            return
        self.holds_round = False
        try:
            ok, candidates = ctx.db.try_once("hand the lease round on", round_records.release, ctx.supervisor_id,
                                             ctx.job_id)
        except DatabaseGone:
            return  # nothing of ours is in the file at that path now: the round lapses there on its own
        for job_id, pid, start_time, boot in candidates if ok else ():
            if ctx.processes.verify(pid, start_time, boot, awake=True):
                doorbell.ring(ctx.home, job_id, doorbell.ROUND)  # its look finds nobody holding the round
                return
