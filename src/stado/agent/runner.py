"""What the agent does with each of its slots (slot.py) every tick: launch it, renew it, stop it, and once its
process group is gone and its artifacts and output are up, settle it (slotend.finish).

A slot's life: claimed (and, if the claim could not be checked, held until it can) -> inputs fetched (on a JobIO
thread) -> its shell spawned -> renewed every poll (a compare-and-swap that also tells it of a cancel or a
reaper) -> stopped on cancel or timeout -> once its process group is gone and its artifacts and output are up,
settled and done. A slot whose lease lapsed while its process ran and whose job was put back in the queue takes
the job back (re-adoption, seed 003) instead of letting a second process start.

The runner is given the agent's context (context.py), never the agent: it moves slots through their phases and
the agent records what came of it (a slot DONE is dropped).
"""
import json
import os

from .. import documents as d
from .. import faults, jobs, keys
from ..admission import past_cap
from ..cas import read
from ..errors import CorruptDocument
from ..objectstore.base import StoreError
from . import slotend
from .context import AgentContext
from .environment import job_environment
from .processhost import KILL, TERM
from .slot import Phase, Slot, Stop, attempt_start, promised_until


class SlotRunner:
    __slots__ = ("ctx",)

    def __init__(self, ctx: AgentContext):
        self.ctx = ctx

    # -- start ----------------------------------------------------------------------------------------------

    def claimed(self, doc: d.Job, version, *, verify=None, claimed_mono: float | None = None) -> Slot:
        """A slot for a job just claimed (the agent records it, then calls begin). `claimed_mono`: when the claim's
        write began, on the agent's monotonic clock (its promise runs from then)."""
        ctx = self.ctx
        job_id = doc.id
        slot = Slot(doc, version, ctx.workspace.prepare(job_id, doc.started_at), verify=verify)
        slot.started_at = attempt_start(doc, ctx.clock.now())
        slot.started_mono = ctx.clock.monotonic()
        slot.renew_due = slot.started_mono + ctx.cfg.poll_seconds
        slot.promised_until = promised_until(doc, slot.started_mono if claimed_mono is None else claimed_mono)
        return slot

    def begin(self, slot: Slot, *, inputs_missing: str | None = None, draining: bool = False) -> None:
        """A slot just recorded: its inputs fetched and its process started, if it can be now."""
        ctx = self.ctx
        ctx.log(f"{slot.job_id}: claimed ({slot.doc.spec.command[:80]!r})")
        slot.io = ctx.new_io(slot.job_id, slot.job_dir, d.attempt_of(slot.doc))
        if inputs_missing:
            self.fail_before_start(slot, "input_unavailable", inputs_missing)
        else:
            self.launch(slot, draining=draining)

    def adopt(self, doc: d.Job, version, job_dir: str, *, ended=None) -> Slot:
        """A slot for a job the worker this agent replaced left on this host: its process (if any) is watched
        to its end, not spawned (takeover.py)."""
        ctx = self.ctx
        slot = Slot(doc, version, job_dir, process=doc.process, adopted=True)
        if ended is None:
            slot.phase = Phase.RUNNING
            slot.exit_watch = ctx.host.watch_exit(slot.process)
        else:
            slot.ended(ended)
        now, mono = ctx.clock.now(), ctx.clock.monotonic()
        slot.started_at = attempt_start(doc, now)
        slot.started_mono = mono - max(0.0, now - slot.started_at)
        slot.renew_due = mono + ctx.cfg.poll_seconds
        slot.promised_until = promised_until(doc, mono)
        slot.io = ctx.new_io(doc.id, job_dir, d.attempt_of(doc))
        return slot

    def launch(self, slot: Slot, *, draining: bool = False) -> None:
        """Fetch the job's inputs (on the slot's JobIO thread; called again until they are in), then spawn
        it. A fetch that stalls or meets a store error leaves the slot claimed and not started: the claim
        stays ours (renewed as usual) and a later tick resumes the fetch, so the job still starts once, here."""
        ctx = self.ctx
        if slot.verify is not None and not self._verified(slot):
            return
        if draining:
            return self.hand_back(slot)
        doc, job_id, job_dir = slot.doc, slot.job_id, slot.job_dir
        work = os.path.join(job_dir, "work")
        if slot.delivered is None:
            state, delivered = slot.io.inputs(doc.spec.inputs or [], work)
            if state == "failed":
                return self.fail_before_start(slot, "input_unavailable", delivered)
            if state != "done":
                slot.launch_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
                return
            slot.delivered = delivered
        if not self._still_ours(slot):
            return
        delivered = slot.delivered
        doc = slot.doc
        slot.phase = Phase.RUNNING
        inputs_json = json.dumps(delivered, sort_keys=True)
        inputs_file = ctx.workspace.inputs_file(job_dir, inputs_json)
        held = ctx.holdings.hold(job_id, doc.spec)  # CARGO_BUILD_JOBS and the accelerator variables name it
        # The record's own string (a float's round trip can move it a millisecond): it names the attempt in its
        # directory and in every process's environment, and the restart check and orphan pass match the two.
        started_at = doc.started_at or d.iso(slot.started_at)
        env = job_environment(ctx.job_env, stado_bin=ctx.workspace.stado_bin(job_dir), job_id=job_id,
                              started_at=started_at, inputs_json=inputs_json, inputs_file=inputs_file,
                              cores=held.cores, devices=held.devices if ctx.offer.devices else None)
        try:
            slot.process = ctx.host.spawn(doc.spec.command, env, job_dir, work, slot.io.output_path)
        except OSError as e:
            return self.fail_before_start(slot, "spawn_error", f"could not start /bin/sh: {e}")
        slot.started_mono = ctx.clock.monotonic()
        slot.process["started_at"] = d.iso(ctx.clock.now())  # the claim's started_at stays the attempt's start
        faults.point("spawned")
        ctx.log(f"{job_id}: started as process group {slot.pgid}")

    def _still_ours(self, slot: Slot) -> bool:
        """Just before its process starts: only on a promise with at least half a poll to run (an agent stopped
        past its promise, or a slot that waited for its inputs, renews first, so a job reaped, requeued or
        cancelled meanwhile is never started). Nothing reaches the store between this check and the spawn."""
        poll = self.ctx.cfg.poll_seconds
        if self._promise_left(slot) >= poll / 2:
            return True
        before = slot.version
        try:
            self.renew(slot)
        except StoreError as e:
            self.ctx.log(f"{slot.job_id}: could not renew its claim before starting it ({type(e).__name__}: "
                         f"{str(e)[:200]}); trying again on the next tick")
        if slot.stop is None and slot.version is not None and slot.version != before and \
                self._promise_left(slot) >= poll / 2:
            return True
        if slot.stop is None:
            slot.launch_due = self.ctx.clock.monotonic() + poll
        return False

    def _promise_left(self, slot: Slot) -> float:
        return slot.promised_until - self.ctx.clock.monotonic()

    def _verified(self, slot: Slot, running: bool = False) -> bool:
        """A claim held while its check failed: check again. True once it is known genuine. `running`: its
        process already runs (a re-adoption whose answer was lost): if the claim is not ours, it is stopped."""
        ctx = self.ctx
        assert slot.verify is not None
        try:
            genuine = jobs.verify_claim(ctx.store, slot.doc, slot.version, *slot.verify, writer=ctx.agent_id,
                                        now=ctx.clock.now())
        except StoreError as e:
            slot.launch_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
            ctx.log(f"{slot.job_id}: still cannot tell whether its claim is genuine ({type(e).__name__}: "
                    f"{str(e)[:200]}); checking again on the next tick")
            return False
        slot.verify = None
        if genuine is None and running:
            ctx.log(f"{slot.job_id}: taking the job back did not hold; stopping process group {slot.pgid}")
            self.stop(slot, Stop.LOST)
            return False
        if genuine is None:
            ctx.log(f"{slot.job_id}: the claim is not ours after all (it did not land, came from a stale read of the "
                    "queue, or was cancelled first); nothing started")
            slot.stop = Stop.LOST
            slot.ended((None, None))
            return False
        slot.doc, slot.version = genuine
        return True

    def fail_before_start(self, slot: Slot, error_class: str, message: str) -> None:
        slot.io.tell(f"not started: {message}")
        slot.ended((None, None))
        slot.result = d.result("failed", error_class=error_class, message=message)
        self.ctx.notify()  # settled by the next tick, once what it told its output is up

    # -- each tick ------------------------------------------------------------------------------------------

    def tick(self, slot: Slot, *, draining: bool = False) -> None:
        """One look at the slot. `draining`: its agent drains (a slot not started yet is handed back)."""
        ctx = self.ctx
        mono = ctx.clock.monotonic()
        if draining and not slot.started and slot.stop is None and slot.verify is None:
            self.hand_back(slot)
        if slot.phase == Phase.CLAIMED:
            if slot.stop:
                slot.ended((None, None))  # cancelled or taken over before its process started
                slot.io.cancel()
            elif mono >= slot.launch_due or slot.io.inputs_in():
                self.launch(slot, draining=draining)
        if slot.started and slot.verify is not None and not self._verified(slot, running=True):
            return
        if slot.adopted and not slot.gone and not ctx.host.alive(slot.process):
            slot.ended(self._adopted_exit(slot))
        timeout = slot.doc.spec.timeout
        if (not slot.gone and slot.process and timeout and mono - slot.started_mono >= timeout
                and slot.stop is None):
            self.stop(slot, Stop.TIMEOUT)
        if not slot.gone and slot.process and slot.stop is None:
            slot.cost_note = past_cap(slot.doc.spec, ctx.offer, mono - slot.started_mono)
            if slot.cost_note:
                self.stop(slot, Stop.COST_CAP)
        if slot.stop:
            self._escalate(slot)
        if slot.gone and not ctx.host.alive(slot.process):
            if self._closed(slot):
                return slotend.finish(ctx, slot)
        elif slot.gone and slot.stop is None:
            self.stop(slot, Stop.LEFTOVER)  # the shell exited; what it left in its group does not outlive the job
        if mono >= slot.renew_due and slot.stop not in (Stop.CANCEL, Stop.LOST) and slot.version is not None:
            self.renew(slot)  # a cancelled or taken-over job is no longer ours to renew (nor an unknown claim)

    def _adopted_exit(self, slot: Slot) -> tuple[int | None, int | None]:
        """The exit of a process this agent did not start: what the agent it replaced recorded as it reaped it,
        else what the kernel kept of it (its pidfd, pinned at adoption), else unknown."""
        from .workroot import read_exit_status

        watched, slot.exit_watch = slot.exit_watch, None
        got = read_exit_status(slot.job_dir) or self.ctx.host.exit_of_watched(watched)
        if got is None:
            slot.result = d.result("failed", error_class="internal",
                                   message="left by the worker this one replaced; it ended without recording its exit "
                                           "status")
            return None, None
        return got

    def _closed(self, slot: Slot) -> bool:
        """Its artifacts (if it ran to an end of its own) and the rest of its output are up, on the slot's
        JobIO thread: it can be settled. Renewals go on meanwhile."""
        if slot.phase == Phase.ENDED and self.ctx.clock.monotonic() >= slot.close_due:
            upload = slot.stop not in (Stop.LOST, Stop.CANCEL, Stop.SHUTDOWN, Stop.HANDBACK) and slot.result is None
            state, why = slot.io.close(upload)
            if state == "retry":
                slot.close_due = self.ctx.clock.monotonic() + self.ctx.cfg.poll_seconds
            slot.upload_error = why
            if state == "done":
                slot.phase = Phase.CLOSED
        return slot.phase == Phase.CLOSED

    def renew(self, slot: Slot) -> None:
        ctx = self.ctx
        began, now = ctx.clock.monotonic(), ctx.clock.now()
        try:
            got = jobs.renew(ctx.store, slot.doc, slot.version, lease_expires_at=ctx.lease.promise(now), now=now,
                             process=slot.process if slot.doc.process is None else None)
        except CorruptDocument as e:
            # Someone wrote over the running record: the renewal's compare-and-swap lost, so the job is no
            # longer ours to run, and what holds its key cannot be read to learn why.
            slot.renew_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
            ctx.log(f"{slot.job_id}: {e}; the job is no longer ours: stopping process group {slot.pgid}")
            return self.stop(slot, Stop.LOST)
        except StoreError:
            slot.renew_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
            self._pulse(slot, renewed=False)  # the renewal is failing, not the worker: say so
            raise
        ended = ctx.clock.monotonic()
        ctx.lease.observed(slot.renew_due, began, ended)  # monotonic: a wall-clock jump is no late renewal
        slot.renew_due = ended + ctx.cfg.poll_seconds
        if isinstance(got, jobs.Overtaken):
            self._pulse(slot, renewed=False)
            return self._overtaken(slot, got.current, got.version)
        slot.doc, slot.version = got
        slot.promised_until = promised_until(slot.doc, began)
        self._pulse(slot, renewed=True)

    def _pulse(self, slot: Slot, *, renewed: bool) -> None:
        try:
            jobs.pulse(self.ctx.store, slot.doc, renewed=renewed, now=self.ctx.clock.now())
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
        if slot.process and not slot.gone and (current is None or current.claim != slot.doc.claim):
            return self._readopt(slot)  # takes the job back, or says who took it first
        try:
            cancelled = current is None and read(self.ctx.store, keys.terminal("cancelled", slot.job_id)) is not None
        except CorruptDocument:
            cancelled = False
        if cancelled:
            return self.stop(slot, Stop.CANCEL)
        self.ctx.log(f"{slot.job_id}: its running record was taken over or removed; stopping process group {slot.pgid}")
        self.stop(slot, Stop.LOST)

    def _readopt(self, slot: Slot) -> None:
        """Seed 003: a job requeued while this worker still runs its process is not started a second time."""
        ctx = self.ctx
        began, now = ctx.clock.monotonic(), ctx.clock.now()
        try:
            got = jobs.readopt(ctx.store, slot.doc, agent_id=ctx.agent_id, instance_ref=ctx.instance_ref,
                               lease_expires_at=ctx.lease.promise(now), now=now)
        except jobs.Unverified as unsure:  # whether its create landed is told on the next tick
            slot.doc, slot.version, slot.verify = unsure.doc, None, (unsure.queued, unsure.queued_version)
            return
        ran = ctx.clock.monotonic() - slot.started_mono
        if got.doc is not None:
            slot.doc, slot.version = got.doc, got.version
            slot.promised_until = promised_until(got.doc, began)
            ctx.log(f"{slot.job_id}: already running here as process group {slot.pgid} for {ran:.0f} s: its lease "
                    "lapsed while it ran and it was put back in the queue; the running process took the job back and "
                    "no second process was started")
            return
        ctx.log(f"{slot.job_id}: already running here as process group {slot.pgid} for {ran:.0f} s: its lease lapsed "
                f"while it ran and it was put back in the queue, but {got.why} first; stopping process group "
                f"{slot.pgid}, and nothing is started")
        self.stop(slot, Stop.CANCEL if got.cancelled else Stop.LOST)

    def hand_back(self, slot: Slot) -> None:
        """Its agent drains: a job claimed but not started goes back to the queue for another agent (its fetch
        is given up; what arrived is not kept)."""
        slot.stop = Stop.HANDBACK
        slot.stop_sent = self.ctx.clock.monotonic()
        slot.io.cancel()
        self.ctx.log(f"{slot.job_id}: not started; handing it back to the queue (this agent is draining)")

    def stop(self, slot: Slot, why: str) -> None:
        slot.stop = why
        slot.stop_sent = self.ctx.clock.monotonic()
        if slot.phase == Phase.RUNNING:
            slot.phase = Phase.STOPPING
        self.ctx.host.signal(slot.process, TERM)
        if why == Stop.CANCEL:
            self.ctx.log(f"{slot.job_id}: cancelled; stopping process group {slot.pgid}")
        elif why == Stop.TIMEOUT:
            self.ctx.log(f"{slot.job_id}: timed out; stopping process group {slot.pgid}")
        elif why == Stop.COST_CAP:
            self.ctx.log(f"{slot.job_id}: {slot.cost_note}")

    def _escalate(self, slot: Slot) -> None:
        if (slot.process and not slot.kill_sent and self.ctx.clock.monotonic() - slot.stop_sent >= self.ctx.cfg.kill_after
                and self.ctx.host.alive(slot.process)):
            self.ctx.host.signal(slot.process, KILL)
            slot.kill_sent = True
