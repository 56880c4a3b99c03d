"""What the agent does with each of its slots (slot.py) every tick: launch it, renew it, stop it, and once its
process group is gone and its artifacts and output are up, settle it (slotend.finish).

A slot's life: claimed (and, if the claim could not be checked, held until it can) -> inputs fetched (on a JobIO
thread) -> its shell spawned -> renewed every poll (a compare-and-swap that also tells it of a cancel or a
reaper) -> stopped on cancel or timeout -> once its process group is gone and its artifacts and output are up,
settled and done. A slot whose lease lapsed while its process ran and whose job was put back in the queue takes
the job back (re-adoption: docs/stado.md, "Liveness") instead of letting a second process start.

The runner is given the agent's context (context.py), never the agent: it moves slots through their phases and
the agent records what came of it (a slot DONE is dropped).
"""
import json
import os

from ..core.brief import brief
from ..core import documents as d, faults, keys
from .. import jobs
from ..core.admission import past_cap
from ..core.dependencies import failed_message as dependency_message
from ..store.cas import read
from ..core.errors import CorruptDocument
from ..objectstore.base import StoreError
from . import keeper_link, slotend
from .context import AgentContext
from .environment import job_environment
from .processhost import KILL, TERM
from .slot import Phase, Slot, Stop, attempt_start, promised_until
from .slot_renewal import SlotRenewal


class SlotRunner(SlotRenewal):
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
        slot.started_at = attempt_start(doc, ctx.clock.wall())
        slot.started_mono = ctx.clock.monotonic()
        slot.renew_due = slot.started_mono + ctx.cfg.poll_seconds
        slot.promised_until = promised_until(doc, slot.started_mono if claimed_mono is None else claimed_mono)
        return slot

    def begin(self, slot: Slot, *, inputs_missing: str | None = None, draining: bool = False,
              dependency_failed: dict | None = None) -> None:
        """A slot just recorded: its inputs fetched and its process started, if it can be now (under the slot's lock:
        its renewals may have begun on their thread; if they hold it, the next tick launches it). A job whose
        dependency can never hold (`dependency_failed`) or whose input can never be delivered ends at once: its
        claim (create-if-absent on running/) made this agent the one writer of that outcome."""
        ctx = self.ctx
        ctx.log(f"{slot.job_id}: claimed ({brief(slot.doc.spec.command, 80)!r})")
        slot.io = ctx.new_io(slot.job_id, slot.job_dir, d.attempt_of(slot.doc))
        redact_env(slot)
        slot.dependency_failed = dependency_failed
        if dependency_failed and slot.verify is None:
            return self.end_dependency_failed(slot)
        if inputs_missing:
            return self.fail_before_start(slot, "input_unavailable", inputs_missing)
        if not slot.lock.acquire(blocking=False):
            slot.launch_due = ctx.clock.monotonic()
            return
        try:
            self.launch(slot, draining=draining)
        finally:
            slot.lock.release()

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
        now, mono = ctx.clock.wall(), ctx.clock.monotonic()
        slot.started_at = attempt_start(doc, now)
        slot.started_mono = mono - max(0.0, now - slot.started_at)
        slot.renew_due = mono + ctx.cfg.poll_seconds
        slot.promised_until = promised_until(doc, mono)
        slot.io = ctx.new_io(doc.id, job_dir, d.attempt_of(doc))
        redact_env(slot)
        if ended is None and slot.process is not None and not ctx.host.keeper_alive(job_dir):
            keeper_link.start(self.ctx, slot)  # its keeper went too (or there was none): this agent's renewals get one
        else:
            keeper_link.tell(self.ctx, slot)  # the keeper left by the replaced agent follows this one's promise from now on
        return slot

    def launch(self, slot: Slot, *, draining: bool = False) -> None:
        """Fetch the job's inputs (on the slot's JobIO thread; called again until they are in), then spawn
        it. A fetch that stalls or meets a store error leaves the slot claimed and not started: the claim
        stays ours (renewed as usual) and a later tick resumes the fetch, so the job still starts once, here."""
        ctx = self.ctx
        if slot.verify is not None and not self._verified(slot):
            return
        if slot.dependency_failed:  # a claim held until it was checked: genuine, it ends as the pass decided
            return self.end_dependency_failed(slot)
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
                              cores=held.cores, devices=held.devices if ctx.offer.devices else None,
                              spec_env=doc.spec.env)
        try:
            slot.process = ctx.host.spawn(doc.spec.command, env, job_dir, work, slot.io.output_path)
        except OSError as e:
            return self.fail_before_start(slot, "spawn_error", f"could not start /bin/sh: {e}")
        slot.started_mono = ctx.clock.monotonic()
        slot.process["started_at"] = d.iso(ctx.clock.wall())  # the claim's started_at stays the attempt's start
        keeper_link.start(self.ctx, slot)
        faults.point("spawned")
        ctx.log(f"{job_id}: started as process group {slot.pgid}")

    def _still_ours(self, slot: Slot) -> bool:
        """Just before its process starts: the running record read once more, and found as this agent last wrote
        it (a cancel, a reaper or a take-over that moved it since is met here, never after the spawn), on a
        promise with at least half a poll to run (an agent stopped past its promise, or a slot that waited for its
        inputs, renews first, then reads). That read is the last request before the spawn."""
        poll = self.ctx.cfg.poll_seconds
        if self._promise_left(slot) < poll / 2:
            before = slot.version
            try:
                refused = self.renew(slot)
            except StoreError as e:
                refused = None
                self.ctx.log(f"{slot.job_id}: could not renew its claim before starting it ({type(e).__name__}: "
                             f"{brief(str(e), 200)}); trying again on the next tick")
            if refused is not None:
                self._overtaken(slot, refused.current, refused.version)
            if slot.stop is not None or slot.version is None or slot.version == before:
                if slot.stop is None:
                    slot.launch_due = self.ctx.clock.monotonic() + poll
                return False
        if not self._unmoved(slot):
            return False
        if self._promise_left(slot) >= poll / 2:  # (the read itself may have been slow)
            return True
        slot.launch_due = self.ctx.clock.monotonic()  # renewed first on the next tick
        return False

    def _unmoved(self, slot: Slot) -> bool:
        """One GET of running/: True when it still holds the version this agent last wrote. A record moved on is
        met as a refused renewal would meet it (a cancel is settled, a requeue or a take-over stops the slot), and a
        store error leaves the slot claimed, to be started on a later tick."""
        ctx = self.ctx
        try:
            found = read(ctx.store, keys.running(slot.job_id), slot.job_id)
        except StoreError as e:
            ctx.log(f"{slot.job_id}: could not read its claim before starting it ({type(e).__name__}: "
                    f"{brief(str(e), 200)}); trying again on the next tick")
            slot.launch_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
            return False
        except CorruptDocument as e:
            ctx.log(f"{slot.job_id}: {e}; the job is no longer ours: nothing started")
            self.stop(slot, Stop.LOST)
            return False
        if found is not None and found[1] == slot.version:
            return True
        current, version = found if found is not None else (None, None)
        if current is not None and jobs.own_write(slot.doc, current):
            slot.doc, slot.version = current, version  # a renewal of ours whose answer was lost
            return True
        slot.launch_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds  # a move still under way is looked at again
        self._overtaken(slot, current, version)
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
                                        now=ctx.clock.wall())
        except StoreError as e:
            slot.launch_due = ctx.clock.monotonic() + ctx.cfg.poll_seconds
            ctx.log(f"{slot.job_id}: still cannot tell whether its claim is genuine ({type(e).__name__}: "
                    f"{brief(str(e), 200)}); checking again on the next tick")
            return False
        slot.verify = None
        if genuine is None and running:
            ctx.log(f"{slot.job_id}: taking the job back did not hold; {slot.stopping_words}")
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

    def end_dependency_failed(self, slot: Slot) -> None:
        """End the claimed job, never started, dependency_failed (a record of which dependency ended how)."""
        failed = slot.dependency_failed or {}
        message = dependency_message(failed)
        self.ctx.log(f"{slot.job_id}: not started: {message}")
        slot.io.tell(f"not started: {message}")
        slot.ended((None, None))
        slot.result = dict(d.result("dependency_failed", error_class="dependency", message=message), dependency=failed)
        self.ctx.notify()

    def fail_before_start(self, slot: Slot, error_class: str, message: str) -> None:
        slot.io.tell(f"not started: {message}")
        slot.ended((None, None))
        slot.result = d.result("failed", error_class=error_class, message=message)
        self.ctx.notify()  # settled by the next tick, once what it told its output is up

    # -- each tick ------------------------------------------------------------------------------------------

    def tick(self, slot: Slot, *, draining: bool = False, renew: bool = True) -> None:
        """One look at the slot. `draining`: its agent drains (a slot not started yet is handed back). `renew`: the
        loop renews the slot itself, when due (otherwise its renewals run on a thread of their own: renewals.py).
        What writes the running record runs only while the slot's lock is free (a renewal in flight on the other
        thread): it is left for the next tick; the slot's signals and deadlines never wait for it."""
        ctx = self.ctx
        mono = ctx.clock.monotonic()
        if not slot.lock.acquire(blocking=False):
            self._keep_time(slot, mono)
            slot.retick = True  # the renewal that holds the lock wakes the loop when it lets go
            return
        try:
            self._tick(slot, mono, draining=draining, renew=renew)
        finally:
            slot.lock.release()

    def _tick(self, slot: Slot, mono: float, *, draining: bool, renew: bool) -> None:
        ctx = self.ctx
        if slot.renewed is not None:  # a renewal that answered while this loop held the slot's lock
            (held, outcome), slot.renewed = slot.renewed, None
            refused = self.apply_renewal(slot, held, outcome)
            if refused is not None:
                slot.overtaken = (refused.current, refused.version)
        if slot.overtaken is not None:  # a renewal on the other thread met another writer's move
            (current, version), slot.overtaken = slot.overtaken, None
            self._overtaken(slot, current, version)
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
            ended = self._adopted_exit(slot, mono)
            if ended is not None:
                slot.ended(ended)
        self._keep_time(slot, mono)
        if slot.gone and slot.stop is None and slot.process is not None and self._kept(slot):
            slot.stop = Stop.KEPT  # its keeper stopped it: a lost worker's requeue, not the signal, is recorded
        if slot.gone and not ctx.host.alive(slot.process):
            if self._closed(slot):
                return slotend.finish(ctx, slot)
        elif slot.gone and slot.stop is None:
            self.stop(slot, Stop.LEFTOVER)  # the shell exited; what it left in its group does not outlive the job
        if renew and mono >= slot.renew_due and self.renewable(slot):
            got = self.renew(slot)
            if got is not None:
                self._overtaken(slot, got.current, got.version)

    def _kept(self, slot: Slot) -> bool:
        kept = self.ctx.workspace.kept(slot.job_dir)
        if kept is None or kept.get("attempt") != slot.doc.claim:
            return False
        self.ctx.log(f"{slot.job_id}: its keeper stopped its processes: {kept.get('why')}")
        return True

    def _keep_time(self, slot: Slot, mono: float) -> None:
        """The slot's own deadlines, kept whatever its record's writes are waiting for: its timeout, its cost cap,
        and SIGKILL --kill-after past SIGTERM."""
        timeout = slot.doc.spec.timeout
        if (not slot.gone and slot.process and timeout and mono - slot.started_mono >= timeout
                and slot.stop is None):
            self.stop(slot, Stop.TIMEOUT)
        if not slot.gone and slot.process and slot.stop is None:
            slot.cost_note = past_cap(slot.doc.spec, self.ctx.offer, mono - slot.started_mono)
            if slot.cost_note:
                self.stop(slot, Stop.COST_CAP)
        if slot.stop:
            self._escalate(slot)

    def _adopted_exit(self, slot: Slot, mono: float) -> tuple[int | None, int | None] | None:
        """The exit of a process this agent did not start: what the agent it replaced (or the job's keeper) recorded
        as it saw it end, else what the kernel kept of it (its pidfd, pinned at adoption), else unknown. None while
        nothing says yet but the job's keeper lives: it writes the status once it looks (a keeper is slow to look
        when it is starved or stopped), so it is waited for, a few polls at most, before the job is called failed."""
        ctx = self.ctx
        got = ctx.workspace.exit_status(slot.job_dir)
        if got is None and slot.exit_watch is not None:
            watched, slot.exit_watch = slot.exit_watch, None
            got = ctx.host.exit_of_watched(watched)
        if got is None and ctx.host.keeper_alive(slot.job_dir):
            if slot.keeper_wait is None:
                slot.keeper_wait = mono + 3 * ctx.cfg.poll_seconds + ctx.cfg.kill_after
                ctx.log(f"{slot.job_id}: its command has ended; waiting for its keeper to record how")
            if mono < slot.keeper_wait:
                return None
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
            upload = (slot.stop not in (Stop.LOST, Stop.CANCEL, Stop.SHUTDOWN, Stop.HANDBACK, Stop.KEPT)
                      and slot.result is None)
            state, why = slot.io.close(upload)
            if state == "retry":
                slot.close_due = self.ctx.clock.monotonic() + self.ctx.cfg.poll_seconds
            slot.upload_error = why
            if state == "done":
                slot.phase = Phase.CLOSED
        # A settle that must wait (its take-back did not answer) sets close_due too.
        return slot.phase == Phase.CLOSED and self.ctx.clock.monotonic() >= slot.close_due

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
            self.ctx.log(f"{slot.job_id}: cancelled; {slot.stopping_words}")
        elif why == Stop.TIMEOUT:
            self.ctx.log(f"{slot.job_id}: timed out; {slot.stopping_words}")
        elif why == Stop.COST_CAP:
            self.ctx.log(f"{slot.job_id}: {slot.cost_note}")

    def _escalate(self, slot: Slot) -> None:
        if (slot.process and not slot.kill_sent and self.ctx.clock.monotonic() - slot.stop_sent >= self.ctx.cfg.kill_after
                and self.ctx.host.alive(slot.process)):
            self.ctx.host.signal(slot.process, KILL)
            slot.kill_sent = True


def redact_env(slot: Slot) -> None:
    """The values of the job's own secret-looking --env variables are kept out of its uploaded output too, as its
    agent's are."""
    from runkit.core.redact import secret_values

    values = secret_values(dict(slot.doc.spec.env)) if slot.doc.spec.env else []
    if values:
        slot.io.redact_also(values)
