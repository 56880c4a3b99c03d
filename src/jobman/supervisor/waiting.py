"""The wait loop: from the claim (or a finished attempt that earns a retry) to the start of the next attempt.
It reads the job's snapshot, decides in order (cancel, dependencies, the not-before time and a retry's delay, a
hold, a concurrency slot), records why the job waits, and sleeps (in the lease's idle, or in the lean form).
It returns what it decided for the owner to do: Begin an attempt (its slot taken) or Finish the job.
"""
import os

from ..handoff import doorbell
from ..core import faults, scheduling
from ..core.home import Home
from ..store.trouble import jitter
from ..core.errors import Conflict
from ..core.model import JobSpec, JobState, Snapshot
from ..store import queries, transitions
from .context import SupervisorContext
from .lease import Lease


class Begin:
    """The slot is taken and attempt `number` is recorded as started: run it, writing to `log_path`."""

    __slots__ = ("number", "log_path")

    def __init__(self, number: int, log_path: str):
        self.number, self.log_path = number, log_path


class Finish:
    """The job ends without another attempt (cancelled while waiting, a dependency that can never hold)."""

    __slots__ = ("outcome", "detail")

    def __init__(self, outcome: str, detail: str):
        self.outcome, self.detail = outcome, detail


class WaitLoop:
    def __init__(self, ctx: SupervisorContext, lease: Lease, spec: JobSpec,
                 waiting: tuple[str | None, str | None, float | None] | None = None):
        """waiting: why the job waits as recorded already (a supervisor back from its lean form)."""
        self.ctx, self.lease, self.spec = ctx, lease, spec
        self.waiting = waiting  # (waiting_for, detail, until) last written
        self.snap: Snapshot | None = None  # the snapshot read last
        self.lean_failed = False

    def until_eligible(self, first: Snapshot | None = None) -> Begin | Finish:
        """first: a snapshot just read (by a supervisor back from its lean form)."""
        ctx, lease = self.ctx, self.lease
        while True:
            now = ctx.clock.wall()
            if first is not None:
                snap, first = first, None
            else:
                snap = Snapshot.from_row(ctx.db.call("read the job's state", queries.snapshot, ctx.job_id, now,
                                                     pause=lease.pause))
            self.snap = snap
            lease.check_owner(snap)
            lease.moved(snap.revision)
            if snap.deps_stale and lease.settle(now):
                continue
            if snap.cancel_requested_at is not None:
                return Finish("cancelled", "cancelled before it ran" if snap.attempts == 0
                              else f"cancelled while waiting for attempt {snap.attempts + 1}")
            verdict, detail = scheduling.dependency_verdict(snap.deps)
            if verdict == "impossible":
                return Finish("dependency_failed", detail or "")
            if verdict == "wait":
                self._wait("dependencies", detail or "", None, now)
                continue
            retry_at = snap.wait_until if snap.waiting_for == "retry" else None
            gate, until = scheduling.time_verdict(self.spec.not_before, retry_at, now)
            if gate != "ready":
                from runkit.core.durations import format_time  # (only a job that waits for a time needs it)

                label = "not before" if gate == "not_before" else "retry delay until"
                self._wait(gate, f"{label} {format_time(until)}", until, now, keep_detail=gate == "retry")
                continue
            if snap.held_at is not None:  # after the time gates, so a held retry keeps its delay
                self._wait("held", "held (jobman release JOB lets it go on)", None, now)
                continue
            begun = self._take_slot(snap, now)
            if begun is not None:
                return begun

    def _take_slot(self, snap: Snapshot, now: float) -> Begin | None:
        """Take a slot and begin an attempt if the group has room for this job now; else wait."""
        ctx, lease = self.ctx, self.lease
        limit, held = snap.slot_limit or 0, snap.slots_held
        if limit <= held and not snap.holders_stale:  # no slot free, none about to be: the line can wait
            self._wait("slot", self._full(limit), None, now)
            return None
        me = (ctx.job_id, snap.priority, snap.submitted_at)
        front, passed = self._front(max(limit - held, 1), me)
        if self._blocked_by_the_dead(snap, front + passed, me, now) and lease.settle(now):
            return None
        if scheduling.slot_verdict(limit, held, front, me):
            number = snap.attempts + 1
            log_path = Home(ctx.home).attempt_log(ctx.job_id, number)
            try:
                rev = ctx.db.call("take a slot", transitions.try_begin_attempt, ctx.job_id, lease.revision, number,
                                  log_path, now, frozenset((row[0], row[4]) for row in passed), pause=lease.pause)
            except Conflict:
                return None
            if rev is not None:
                lease.moved(rev)
                self.waiting = None
                lease.leave_line()
                return Begin(number, log_path)
        self._wait("slot", self._full(limit), None, now)
        return None

    def _front(self, count: int, me: tuple) -> tuple[list, list]:
        """The first `count` of the line that may take a slot, and the waiters ahead of this job stepped over: a
        waiter whose supervisor is stopped (SIGSTOP, a debugger) or dead cannot take a slot, and must not hold the
        line while it cannot (those behind it would wait as long); it keeps its place, and takes a slot at its
        turn once it is awake again. The transaction that takes the slot steps over the same ones, unless they
        have moved since."""
        ctx = self.ctx
        passed: list = []
        while True:
            front = ctx.db.call("read the front of the line", queries.front_of_line, ctx.group, count,
                                frozenset((row[0], row[4]) for row in passed), pause=self.lease.pause)
            ahead = front[:scheduling.ahead_of(front, me)]  # (the line's order: those before this job)
            unable = [row for row in ahead if not ctx.processes.verify(row[5], row[6], row[7], awake=True)]
            if not unable:
                return front, passed
            passed += unable

    def _full(self, limit: int) -> str:
        group = self.ctx.group
        if self.snap is not None and self.snap.group_paused:
            return f"group {group} is paused (jobman group resume {group})"
        return f"group {group} is paused (limit 0)" if limit == 0 else f"group {group} is full (limit {limit})"

    def _blocked_by_the_dead(self, snap: Snapshot, front: list, me: tuple, now: float) -> bool:
        """Whether something that stands in this job's way looks abandoned: a job ahead in line past its
        lease, or (for the jobs at the front only, so that one dead holder does not send the whole
        line to reconcile) a slot holder past its lease or finished while holding its slot."""
        if any(row[0] != self.ctx.job_id and row[3] is not None and row[3] < now for row in front):
            return True
        at_front = scheduling.ahead_of(front, me) < max(len(front), 1)  # in the front rows, or no line at all
        return bool(snap.holders_stale) and at_front

    def _wait(self, waiting_for: str, detail: str, until: float | None, now: float, keep_detail=False) -> None:
        """Record why the job waits (if that changed), then sleep until something may have changed."""
        ctx, lease = self.ctx, self.lease
        current: tuple[str | None, str | None, float | None] = (waiting_for, detail, until)
        if current != self.waiting:
            state = JobState.from_row(ctx.db.call("reload the job's state", queries.load_state, ctx.job_id,
                                                  pause=lease.pause))
            lease.check_owner(state)
            if keep_detail and state.waiting_for == waiting_for:
                current = self.waiting = (waiting_for, state.wait_detail, until)
            else:
                try:
                    lease.moved(ctx.db.call("record why the job waits", transitions.set_waiting, ctx.job_id,
                                            state.revision, waiting_for, detail, until, now,
                                            announce=state.waiting_for != waiting_for, pause=lease.pause))
                except Conflict:
                    return
                self.waiting = current
                if waiting_for in ("slot", "held"):  # in line, or out of it: those behind may now start
                    wake_slot_waiters(ctx)
        if lease.bell is None:
            lease.open_bell()
        # The fallback poll: long, jittered, and made at a lease renewal (the doorbell is what wakes a
        # waiter in time); never more often than the poll interval. The holder of the lease round wakes
        # every renewal interval; a waiter that does not sleeps until its fallback poll, in its lean form
        # (jobman.supervisor.lean) unless it is about to need Python again (_lean_wake).
        lease.join_line()
        lean_wake = self._lean_wake(until, now)
        if lease.look_due or lean_wake is not None:
            lease.take_turn(now, self.snap)  # the round first: its holder stays in Python form
        if lean_wake is not None and not lease.holds_round and ctx.db.since is None:  # (trouble: retry in Python)
            self._turn_lean(lean_wake)  # returns only if it could not
        wake = now + jitter(lease.poll_gap(), 1.0, 1.5) if lease.holds_round else max(now, lease.next_renew)
        try:
            if until is not None and until < wake:
                lease.idle(until)
            else:
                lease.idle(wake, on_renewal=True)
        finally:
            lease.step_out()

    # --- the lean form (jobman.supervisor.lean) ------------------------------------------------------------------

    def _lean_wake(self, until: float | None, now: float) -> float | None:
        """When the job would next need its supervisor by the clock, if it may wait in the lean form until
        then: not if it holds the lease round (or may take it: _wait looks first), has waits for the
        database still to record, has no doorbell, or waits for a time closer than a renewal interval
        (cheaper in Python than two changes of form). None: it waits in Python form."""
        ctx, lease = self.ctx, self.lease
        if (self.lean_failed or lease.bell is None or lease.holds_round or ctx.db.waits or ctx.db.since is not None
                or (until is not None and until - now < ctx.renew_every)):
            return None
        if not ctx.processes.lean_enabled():
            return None
        # The fallback poll of a lean waiter. It wakes to look at its job and at the lease round (it takes
        # the round up if its holder died): spread by the number of waiting jobs, so that all lean waiters
        # together wake about once per renewal interval however many they are, since a wake-up costs a
        # Python start (~20 ms of CPU). Counted here, not by the round: a count a round old would give the
        # first jobs of a burst of submissions short timers, and their wake-ups would all come together.
        ok, waiting = ctx.db.try_once("count the waiting jobs", queries.waiting_count)
        if not ok:
            return None
        fallback = now + jitter(max(ctx.poll_every, waiting * ctx.renew_every), 1.0, 1.5)
        return fallback if until is None else min(until, fallback)

    def _turn_lean(self, wake_at: float) -> None:
        """exec into the lean form (jobman.supervisor.lean), which execs back into `__resume` when rung or at wake_at.
        Returns only if the exec failed; the supervisor then waits in Python form from now on."""
        from . import lean
        from .lean_return import resume_argv

        ctx, bell = self.ctx, self.lease.bell
        assert bell is not None and ctx.db.identity is not None
        fd = bell.fd
        timeout = wake_at - ctx.clock.wall()
        python = resume_argv(ctx.job_id, ctx.supervisor_id, ctx.db.identity, fd)
        faults.linger("supervisor:before_lean")
        try:
            os.set_blocking(fd, True)  # bash's read must block; the description is ours alone (O_RDWR)
            os.set_inheritable(fd, True)
            # The database's descriptors are close-on-exec: the exec closes them, and with them any lock a
            # statement not yet reset held (a read mark); no transaction is open between our writes.
            ctx.processes.exec(lean.SHELL, lean.argv(timeout, fd, python), lean.environment(os.environ))
        except OSError as e:
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
            self.lean_failed = True
            ctx.log(f"cannot turn to the lean waiting form ({lean.SHELL}: {e.strerror or e}); waits in Python form")


def wake_slot_waiters(ctx: SupervisorContext) -> None:
    """Ring as many of the group's line as there are free slots, in the order they may take one (a stopped or dead
    waiter stepped over: it cannot answer)."""
    def first_waiters(conn):
        free = queries.free_slots(conn, ctx.group)
        return queries.able_waiters(conn, ctx.group, free, ctx.processes.verify) if free else []

    doorbell.ring_all(ctx.home, ctx.db.call("find the waiters to wake", first_waiters,
                                            give_up_after=ctx.lease_seconds) or ())
