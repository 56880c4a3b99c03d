"""The supervisor once it owns its job: it keeps its lease, sleeps on its doorbell, and decides when
the job may start (dependencies, not-before, retry delay, a concurrency slot), then hands each attempt
to jobman.attempt. The launch and the claim before it are in jobman.supervisor.
"""
import os
import select
import sys
import time

from runkit import proc
from runkit.durations import format_time

from . import doorbell, faults, home as homes, reconcile, scheduling
from .attempt import Attempt
from .dbretry import DatabaseGone, Retrier, jitter
from .errors import Conflict
from .lease_keeping import LeaseKeeping
from .model import JobSpec, JobState, Snapshot
from .store import queries, transitions
from .supervisor_log import log


# How the lean form execs back into the supervisor (jobman.supervisor.resume), as `jobman run` starts it.
RESUME = ("import sys; sys.path.insert(0, {path!r}); from jobman.supervisor import resume;"
          " sys.exit(resume(sys.argv[2:]))")


class Fenced(Exception):
    """This supervisor no longer owns the job (finished by someone else, or another owner)."""


class Supervisor(LeaseKeeping):
    log = staticmethod(log)

    def __init__(self, store: Retrier, home: str, job_id: str, supervisor_id: str, state: JobState,
                 bell_fd: int | None = None):
        """bell_fd: back from the lean form (jobman.lean), with the doorbell it kept open meanwhile."""
        self.db, self.home, self.job_id, self.supervisor_id = store, home, job_id, supervisor_id
        self.rev = state.revision
        self.lease = state.lease_duration
        self.renew_every = state.renew_interval
        self.poll_every = state.poll_interval
        self.group = state.group_name
        self.renewed_at = time.time()
        self.next_renew = self.renewed_at + self._renew_gap()
        self.next_reconcile = 0.0
        self.next_file_check = 0.0
        self.dirty = False
        self.waiting = None  # (waiting_for, detail, until) last written
        self.subreaper = False
        self.spec = None
        self.bell = None
        self.target = None  # pid of the running target, until it is reaped
        self.in_line = False  # asleep in _wait: the lease round keeps the lease, not this process alone
        self.holds_round = False  # this supervisor renews every waiting job's lease (renewal_round)
        self.look_due = False  # a waiter's fallback poll is due: _wait takes its turn (_take_turn)
        self.snap = None  # the snapshot _loop read last
        self.suspects = set()  # as the round's holder: waiters whose reason to wait had gone at the last round
        self.rang = set()  # ... and those it rang at the last round
        self.next_slot_look = 0.0  # ... and when it may next look for what is left of a lost job's target
        self.bell_fd = bell_fd
        self.resumed = bell_fd is not None
        if self.resumed:
            # Why the job waits is recorded already; a look at the round is due (the lean form made none).
            self.waiting = (state.waiting_for, state.wait_detail, state.wait_until)
            self.look_due = True
        self.lean_failed = False

    def _renew_gap(self) -> float:
        # Jittered, so that the renewals of thousands of supervisors never line up.
        return jitter(self.renew_every, 0.8, 1.0)

    # --- ownership ------------------------------------------------------------------------------

    def run(self, first: Snapshot | None = None) -> int:
        """first: a snapshot just read (by a supervisor back from its lean form)."""
        if not self.resumed:
            log(f"supervisor {self.supervisor_id} (pid {os.getpid()}) owns job {self.job_id}")
        self.poller = select.poll()
        self._open_bell()
        try:
            try:
                self.spec = JobSpec.from_json(self.db.call("read the job's specification", queries.spec_json,
                                                           self.job_id))
            except (ValueError, KeyError, TypeError) as e:
                self._finish("failed", f"the stored job specification is unreadable: {e}")
                return 1
            self._loop(first)
            if self.spec.data.get("on_finish"):
                from .hooks import run_on_finish

                run_on_finish(self.db, self.home, self.job_id, self.spec.data, log)
            return 0
        except Fenced as e:
            log(f"no longer the owner of the job ({e}); exiting without touching it")
            self._leave_line()
            return 0
        except DatabaseGone as e:
            self._abandon(str(e))
            return 0
        except Exception:
            import traceback

            log("supervisor error:\n" + traceback.format_exc())
            return 1
        finally:
            if self.bell is not None:
                self.bell.close()

    def _open_bell(self) -> None:
        try:
            if self.bell_fd is not None:
                fd, self.bell_fd = self.bell_fd, None
                self.bell = doorbell.Doorbell.adopt(self.home, self.job_id, fd)
                self.bell.drain()  # what rang it is in the snapshot read after this
            else:
                self.bell = doorbell.Doorbell(self.home, self.job_id)
        except OSError as e:  # a full disk has no room for the FIFO: the fallback poll must do
            if self.bell is None and not getattr(self, "_bell_error", None):
                log(f"cannot make the doorbell ({e.strerror}): polling every {self._poll_gap():.1f}s until it can")
            self._bell_error = e
            return
        self.poller.register(self.bell.fd, select.POLLIN)

    def _poll_gap(self) -> float:
        return self.poll_every if self.bell is not None else min(self.poll_every, self.renew_every)

    def _abandon(self, reason: str) -> None:
        """The database at our path is not the one we own the job in: claim nothing, write nothing more,
        and leave the target (if one runs) to finish on its own."""
        if self.target is None:
            log(f"{reason}: this supervisor no longer claims job {self.job_id}; no target was running; exiting")
            return
        log(f"{reason}: this supervisor no longer claims job {self.job_id} and writes nothing more to any "
             f"database; its target (pid {self.target}) is left to finish")
        status = proc.wait_child(self.target)
        if status is not None:
            code, sig = proc.describe_status(status)
            log(f"the target (pid {self.target}) ended with "
                 + (f"exit code {code}" if sig is None else f"signal {proc.signal_name(sig)}") + "; not recorded")

    def refresh(self):
        state = JobState.from_row(self.db.call("reload the job's state", queries.load_state, self.job_id))
        self._check_owner(state)
        self.rev = state.revision
        return state

    def _check_owner(self, state) -> None:
        if state is None:
            raise Fenced("the job record is gone")
        if state.supervisor_id != self.supervisor_id:
            raise Fenced(f"owned by supervisor {state.supervisor_id}")
        if state.phase == "finished":
            raise Fenced(f"finished {state.outcome} by another process")

    def idle(self, until: float, pidfd: int | None = None, on_renewal: bool = False) -> str:
        """Sleep until `until`, a doorbell ring or the target's exit, renewing the lease on time.
        on_renewal: `until` is no deadline, so wake at the first renewal from then on instead (a
        fallback poll then costs no wake-up of its own). Returns "bell", "exit" or "time"."""
        while True:
            now = time.time()
            if now >= self.next_renew:
                if self.in_line and not self.holds_round:  # a waiter's renewal time is its fallback poll
                    self.look_due = True
                    return "time"
                self._keep_lease(now)
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
                        self._hold_round(time.time())
            if not on_renewal and time.time() >= until:  # on_renewal: the renewal first, at the loop's top
                return "time"

    def pause(self, seconds: float) -> None:
        """How a write waiting out storage trouble pauses: idling, so the lease keeps being renewed."""
        self.idle(time.time() + seconds)

    # --- waiting until eligible ---------------------------------------------------------------------

    def _loop(self, first: Snapshot | None = None) -> None:
        while True:
            now = time.time()
            if first is not None:
                snap, first = first, None
                self.snap = snap
            else:
                snap = self.snap = Snapshot.from_row(self.db.call("read the job's state", queries.snapshot,
                                                                  self.job_id, now, pause=self.pause))
            self._check_owner(snap)
            self.rev = snap.revision
            if snap.deps_stale and self._settle(now):
                continue
            if snap.cancel_requested_at is not None:
                self._finish("cancelled", "cancelled before it ran" if snap.attempts == 0
                             else f"cancelled while waiting for attempt {snap.attempts + 1}")
                return
            verdict, detail = scheduling.dependency_verdict(snap.deps)
            if verdict == "impossible":
                self._finish("dependency_failed", detail)
                return
            if verdict == "wait":
                self._wait("dependencies", detail, None, now)
                continue
            retry_at = snap.wait_until if snap.waiting_for == "retry" else None
            gate, until = scheduling.time_verdict(self.spec.not_before, retry_at, now)
            if gate != "ready":
                label = "not before" if gate == "not_before" else "retry delay until"
                self._wait(gate, f"{label} {format_time(until)}",
                           until, now, keep_detail=gate == "retry")
                continue
            if snap.held_at is not None:  # after the time gates, so a held retry keeps its delay
                self._wait("held", "held (jobman release JOB lets it go on)", None, now)
                continue
            if self._take_slot(snap, now):
                return

    def _take_slot(self, snap, now: float) -> bool:
        """Start an attempt if the group has room for this job now; else wait. True when the job is finished."""
        limit, held = snap.slot_limit or 0, snap.slots_held
        if limit <= held and not snap.holders_stale:  # no slot free, none about to be: the line can wait
            self._wait("slot", self._full(limit), None, now)
            return False
        front = self.db.call("read the front of the line", queries.front_of_line, self.group,
                             max(limit - held, 1), pause=self.pause)
        me = (self.job_id, snap.priority, snap.submitted_at)
        if self._blocked_by_the_dead(snap, front, me, now) and self._settle(now):
            return False
        if scheduling.slot_verdict(limit, held, front, me):
            number = snap.attempts + 1
            log_path = homes.attempt_log_path(self.home, self.job_id, number)
            try:
                rev = self.db.call("take a slot", transitions.try_begin_attempt, self.job_id, self.rev, number,
                                   log_path, now, pause=self.pause)
            except Conflict:
                return False
            if rev is not None:
                self.rev = rev
                self.waiting = None
                self._leave_line()
                return Attempt(self, number, log_path).run()
        self._wait("slot", self._full(limit), None, now)
        return False

    def _full(self, limit: int) -> str:
        return f"group {self.group} is paused (limit 0)" if limit == 0 else f"group {self.group} is full (limit {limit})"

    def _blocked_by_the_dead(self, snap, front: list, me: tuple, now: float) -> bool:
        """Whether something that stands in this job's way looks abandoned: a job ahead in line past its
        lease, or (for the jobs at the front only, so that one dead holder does not send the whole
        line to reconcile) a slot holder past its lease or finished while holding its slot."""
        if any(row[0] != self.job_id and row[3] is not None and row[3] < now for row in front):
            return True
        at_front = scheduling.ahead_of(front, me) < max(len(front), 1)  # in the front rows, or no line at all
        return bool(snap.holders_stale) and at_front

    def _settle(self, now: float) -> bool:
        """Run the reconciliation pass ourselves (nobody may be running commands), at most once per
        renewal interval. Whether it changed anything."""
        if now < self.next_reconcile:
            return False
        self.next_reconcile = now + self.renew_every
        ok, changes = self.db.try_once("settle abandoned jobs", reconcile.run, self.home, now)
        return bool(ok and changes)

    def _wait(self, waiting_for: str, detail: str, until: float | None, now: float, keep_detail=False) -> None:
        """Record why the job waits (if that changed), then sleep until something may have changed."""
        current = (waiting_for, detail, until)
        if current != self.waiting:
            state = JobState.from_row(self.db.call("reload the job's state", queries.load_state, self.job_id,
                                                   pause=self.pause))
            self._check_owner(state)
            if keep_detail and state.waiting_for == waiting_for:
                current = self.waiting = (waiting_for, state.wait_detail, until)
            else:
                try:
                    self.rev = self.db.call("record why the job waits", transitions.set_waiting, self.job_id,
                                            state.revision, waiting_for, detail, until, now,
                                            announce=state.waiting_for != waiting_for, pause=self.pause)
                except Conflict:
                    return
                self.waiting = current
                if waiting_for in ("slot", "held"):  # in line, or out of it: those behind may now start
                    self.wake_slot_waiters()
        if self.bell is None:
            self._open_bell()
        # The fallback poll: long, jittered, and made at a lease renewal (the doorbell is what wakes a
        # waiter in time); never more often than the poll interval. The holder of the lease round wakes
        # every renewal interval; a waiter that does not sleeps until its fallback poll, in its lean form
        # (jobman.lean) unless it is about to need Python again (_lean_wake).
        self.in_line = True
        lean_wake = self._lean_wake(until, now)
        if self.look_due or lean_wake is not None:
            self._take_turn(now, self.snap)  # the round first: its holder stays in Python form
        if lean_wake is not None and not self.holds_round and self.db.since is None:  # (trouble: retry in Python)
            self._turn_lean(lean_wake)  # returns only if it could not
        wake = now + jitter(self._poll_gap(), 1.0, 1.5) if self.holds_round else max(now, self.next_renew)
        try:
            if until is not None and until < wake:
                self.idle(until)
            else:
                self.idle(wake, on_renewal=True)
        finally:
            self.in_line = False

    # --- the lean form (jobman.lean) ------------------------------------------------------------------

    def _lean_wake(self, until: float | None, now: float) -> float | None:
        """When the job would next need its supervisor by the clock, if it may wait in the lean form until
        then: not if it holds the lease round (or may take it: _wait looks first), has waits for the
        database still to record, has no doorbell, or waits for a time closer than a renewal interval
        (cheaper in Python than two changes of form). None: it waits in Python form."""
        if (self.lean_failed or self.bell is None or self.holds_round or self.db.waits or self.db.since is not None
                or (until is not None and until - now < self.renew_every)):
            return None
        from . import lean

        if not lean.enabled():
            return None
        # The fallback poll of a lean waiter. It wakes to look at its job and at the lease round (it takes
        # the round up if its holder died): spread by the number of waiting jobs, so that all lean waiters
        # together wake about once per renewal interval however many they are, since a wake-up costs a
        # Python start (~20 ms of CPU). Counted here, not by the round: a count a round old would give the
        # first jobs of a burst of submissions short timers, and their wake-ups would all come together.
        ok, waiting = self.db.try_once("count the waiting jobs", queries.waiting_count)
        if not ok:
            return None
        fallback = now + jitter(max(self.poll_every, waiting * self.renew_every), 1.0, 1.5)
        return fallback if until is None else min(until, fallback)

    def _turn_lean(self, wake_at: float) -> None:
        """exec into the lean form (jobman.lean), which execs back into `__resume` when rung or at wake_at.
        Returns only if the exec failed; the supervisor then waits in Python form from now on."""
        from . import lean

        fd = self.bell.fd
        timeout = wake_at - time.time()
        dev, ino = self.db.identity
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        python = [sys.executable, "-I", "-S", "-c", RESUME.format(path=root), "__resume", self.job_id,
                  self.supervisor_id, f"{dev}:{ino}", str(fd)]
        faults.linger("supervisor:before_lean")
        try:
            os.set_blocking(fd, True)  # bash's read must block; the description is ours alone (O_RDWR)
            os.set_inheritable(fd, True)
            # The database's descriptors are close-on-exec: the exec closes them, and with them any lock a
            # statement not yet reset held (a read mark); no transaction is open between our writes.
            os.execve(lean.SHELL, lean.argv(timeout, fd, python), lean.environment(os.environ))
        except OSError as e:
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
            self.lean_failed = True
            log(f"cannot turn to the lean waiting form ({lean.SHELL}: {e.strerror or e}); waits in Python form")

    def _finish(self, outcome: str, detail: str) -> None:
        self._leave_line()
        self.record_waits()
        while True:
            try:
                self.rev = self.db.call("record that the job finished", transitions.finish, self.job_id, self.rev,
                                        outcome, time.time(), detail, pause=self.pause)
                break
            except Conflict:
                self.refresh()
        self.record_waits()
        log(f"job finished {outcome}: {detail}")
        self.wake_after_finish()

    def wake_after_finish(self) -> None:
        dependents = self.db.call("find the dependents to wake", queries.dependents_to_wake, self.job_id,
                                  give_up_after=self.lease)
        doorbell.ring_all(self.home, dependents or ())
        self.wake_slot_waiters()

    def wake_slot_waiters(self) -> None:
        """Ring as many of the group's line as there are free slots, in the order they may take one."""
        def first_waiters(conn):
            free = queries.free_slots(conn, self.group)
            return queries.slot_waiters(conn, self.group, free) if free else []

        doorbell.ring_all(self.home, self.db.call("find the waiters to wake", first_waiters,
                                                  give_up_after=self.lease) or ())
