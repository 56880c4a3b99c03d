"""The supervisor once it owns its job: the owner of everything the job's supervision holds, its state declared
here. It waits until the job may start (waiting.WaitLoop: Begin or Finish), runs each attempt (attempt.Attempt:
an AttemptEnd), and records what they decided, until the job is finished; its lease is kept meanwhile
(lease.Lease). The launch and the claim before it are in claim.py.
"""
import os

from runkit.system import proc
from runkit.core.clock import SYSTEM, Clock

from ..handoff import doorbell
from ..core import faults
from ..store.trouble import DatabaseGone, PatientDatabase
from ..core.errors import Conflict
from ..core.model import JobSpec, JobState, Snapshot
from ..store import queries, transitions
from .log import log
from .context import SupervisorContext
from .lease import Fenced, Lease
from .waiting import Finish, WaitLoop, wake_slot_waiters

TYPE_CHECKING = False  # (typing's, without importing typing)
if TYPE_CHECKING:
    from .attempt import Attempt, AttemptEnd


class Supervisor:
    def __init__(self, store: PatientDatabase, home: str, job_id: str, supervisor_id: str, state: JobState, *,
                 clock: Clock = SYSTEM, processes=None, bell_fd: int | None = None, log=log):
        """state: the job's as claimed (or as read back by a supervisor back from the lean form, which passes the
        doorbell it kept open meanwhile as bell_fd). processes: the process layer (processes.Processes)."""
        if processes is None:
            from .processes import Processes

            processes = Processes()
        self.ctx = SupervisorContext(db=store, home=home, job_id=job_id, supervisor_id=supervisor_id,
                                     group=state.group_name, lease_seconds=state.lease_duration,
                                     renew_every=state.renew_interval, poll_every=state.poll_interval, clock=clock,
                                     processes=processes, log=log)
        self.resumed = bell_fd is not None
        # A supervisor back from the lean form: why the job waits is recorded already, and a look at the lease
        # round is due (the lean form made none).
        self.lease = Lease(self.ctx, state.revision, bell_fd=bell_fd, look_due=self.resumed)
        self.spec: JobSpec | None = None  # read once it runs
        self.waits: WaitLoop | None = None
        self.attempt: Attempt | None = None  # the attempt running, if one is
        self.waited_for = (state.waiting_for, state.wait_detail, state.wait_until) if self.resumed else None

    def run(self, first: Snapshot | None = None) -> int:
        """Supervise the job to its end. first: a snapshot just read (by a supervisor back from its lean form)."""
        ctx, lease = self.ctx, self.lease
        if not self.resumed:
            ctx.log(f"supervisor {ctx.supervisor_id} (pid {os.getpid()}) owns job {ctx.job_id}")
        lease.open_bell()
        try:
            try:
                self.spec = JobSpec.from_json(ctx.db.call("read the job's specification", queries.spec_json,
                                                          ctx.job_id))
            except (ValueError, KeyError, TypeError) as e:
                self.finish("failed", f"the stored job specification is unreadable: {e}")
                return 1
            self.supervise(first)
            if self.spec.data.get("on_finish"):
                from .hooks import run_on_finish

                run_on_finish(ctx.db, ctx.home, ctx.job_id, self.spec.data, ctx.log)
            return 0
        except Fenced as e:
            ctx.log(f"no longer the owner of the job ({e}); exiting without touching it")
            lease.leave_line()
            return 0
        except DatabaseGone as e:
            self.abandon(str(e))
            return 0
        except Exception:
            import traceback

            ctx.log("supervisor error:\n" + traceback.format_exc())
            return 1
        finally:
            lease.close_bell()

    def supervise(self, first: Snapshot | None = None) -> None:
        """Wait, run an attempt, record its end; again while it earns a retry, until the job is finished."""
        assert self.spec is not None
        self.waits = WaitLoop(self.ctx, self.lease, self.spec, self.waited_for)
        while True:
            step = self.waits.until_eligible(first)
            first = None
            if isinstance(step, Finish):
                self.finish(step.outcome, step.detail)
                return
            from .attempt import Attempt  # (not loaded by a waiter back from its lean form until it starts one)

            self.attempt = Attempt(self.ctx, self.lease, self.spec, step.number, step.log_path)
            end = self.attempt.run()
            self.attempt = None
            if self.record(end):
                return

    # --- what the collaborators decided, recorded ------------------------------------------------------

    def record(self, end: "AttemptEnd") -> bool:
        """Record how an attempt ended: the next attempt scheduled, or the job finished. True when finished."""
        ctx, lease = self.ctx, self.lease
        now = ctx.clock.wall()
        retry_at = None if end.retry_in is None else now + end.retry_in  # from the end as written, to the float
        ctx.record_waits()
        while True:
            try:
                lease.moved(ctx.db.call(
                    "record the attempt's end", transitions.end_attempt, ctx.job_id, lease.revision, end.number,
                    now=now, exit_code=end.exit_code, signal=end.signal, attempt_outcome=end.attempt_outcome,
                    error=end.error, retry_at=retry_at, job_outcome=None if end.retried else end.job_outcome,
                    detail=end.detail, pause=lease.pause))
                break
            except Conflict:
                lease.refresh()
        ctx.record_waits()
        if end.retried:
            ctx.log(f"attempt {end.number} {end.attempt_outcome}; retry scheduled")
            wake_slot_waiters(ctx)
            return False
        ctx.log(f"job finished {end.job_outcome}" + (f": {end.detail}" if end.detail else ""))
        faults.hit("supervisor:before_wake")  # the outcome is committed; nobody has been rung
        self.wake_after_finish()
        return True

    def finish(self, outcome: str, detail: str) -> None:
        """Finish a job that runs no attempt (cancelled while waiting, a dependency failed, an unreadable spec)."""
        ctx, lease = self.ctx, self.lease
        lease.leave_line()
        ctx.record_waits()
        while True:
            try:
                lease.moved(ctx.db.call("record that the job finished", transitions.finish, ctx.job_id,
                                        lease.revision, outcome, ctx.clock.wall(), detail, pause=lease.pause))
                break
            except Conflict:
                lease.refresh()
        ctx.record_waits()
        ctx.log(f"job finished {outcome}: {detail}")
        self.wake_after_finish()

    def wake_after_finish(self) -> None:
        ctx = self.ctx
        dependents = ctx.db.call("find the dependents to wake", queries.dependents_to_wake, ctx.job_id,
                                 give_up_after=ctx.lease_seconds)
        doorbell.ring_all(ctx.home, dependents or ())
        wake_slot_waiters(ctx)

    def abandon(self, reason: str) -> None:
        """The database at our path is not the one we own the job in: claim nothing, write nothing more,
        and leave the target (if one runs) to finish on its own."""
        ctx = self.ctx
        target = self.attempt.target if self.attempt is not None else None
        if target is None:
            ctx.log(f"{reason}: this supervisor no longer claims job {ctx.job_id}; no target was running; exiting")
            return
        ctx.log(f"{reason}: this supervisor no longer claims job {ctx.job_id} and writes nothing more to any "
                f"database; its target (pid {target}) is left to finish")
        status = ctx.processes.wait_child(target)
        if status is not None:
            code, sig = proc.describe_status(status)
            ctx.log(f"the target (pid {target}) ended with "
                    + (f"exit code {code}" if sig is None else f"signal {proc.signal_name(sig)}") + "; not recorded")
