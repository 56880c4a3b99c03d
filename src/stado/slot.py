"""One running job on an agent: its state (Slot) and what the agent does with it each tick (SlotRunner).

A slot's life: claimed (and, if the claim could not be checked, held until it can) -> inputs fetched (on
a JobIO thread) -> its shell spawned -> renewed every poll (a compare-and-swap that also tells it of a
cancel or a reaper) -> stopped on cancel or timeout -> once its process group is gone and its artifacts
and output are up, settled (slotend.finish) and dropped. A slot whose lease lapsed while its process ran
and whose job was put back in the queue takes the job back (re-adoption, seed 003) instead of letting
a second process start.
"""
import json
import os
import time
from dataclasses import dataclass

from . import documents as d
from . import faults, jobs, keys, slotend
from .admission import past_cap
from .cas import read
from .environment import job_environment
from .errors import CorruptDocument
from .objectstore.base import StoreError
from .processhost import KILL, TERM


@dataclass
class Slot:
    doc: dict
    version: object
    job_dir: str
    process: dict | None = None         # pid, pgid, start time, boot id, work dir of the job's shell
    started_at: float | None = None     # the attempt's start (the claim's; kept across a re-adoption)
    started_mono: float = 0.0           # when its process started, on this agent's monotonic clock
    io: object = None                   # its JobIO: inputs, output, artifacts on threads of their own
    verify: tuple | None = None         # (queue doc, version): a claim whose genuineness is still to be read
    launched: bool = False              # its process was spawned (or it failed before it could be)
    launch_due: float = 0.0             # when to try again to fetch its inputs and spawn it
    result: dict | None = None          # an outcome decided without a process (input unavailable, spawn error)
    delivered: list | None = None       # its inputs, once fetched and verified
    ended: tuple | None = None          # (exit code, signal) once the shell has exited
    stopping: str | None = None         # why its group is stopped: cancel | timeout | lost | leftover | shutdown,
    #                                     or handback (not started: its agent drains)
    stop_sent: float | None = None
    kill_sent: bool = False
    renew_due: float = 0.0              # when its next renewal is due, on the agent's monotonic clock
    promised_until: float = 0.0         # when its current promise runs out, on the agent's monotonic clock
    closed: bool = False                # its artifacts and output are up (JobIO.close): ready to settle
    close_due: float = 0.0              # when to try closing again after a store error
    upload_error: str | None = None     # why its artifacts could not be uploaded
    adopted: bool = False               # watched, not spawned, by this agent (left by the worker it replaced)
    exit_watch: object = None           # an adopted shell pinned, to read its exit status (ProcessHost.watch_exit)
    cost_note: str | None = None        # why it was stopped for its cost (admission.past_cap)

    @property
    def job_id(self) -> str:
        return self.doc["id"]

    @property
    def pgid(self) -> int | None:
        return self.process["pgid"] if self.process else None

    def due(self, now_mono: float, poll: float) -> float:
        """When this slot next needs the loop."""
        due = self.renew_due
        if not self.launched:
            due = min(due, self.launch_due)
        if self.close_due > now_mono:
            due = min(due, self.close_due)
        if self.stopping or (self.adopted and self.ended is None):
            due = min(due, now_mono + min(0.05 if self.stopping else 0.5, poll))
        return due


class SlotRunner:
    """The per-slot state machine of one agent (`agent` gives the store, settings, clocks, log, processes)."""

    def __init__(self, agent):
        self.a = agent

    # -- start ----------------------------------------------------------------------------------------------

    def start(self, doc: dict, version, *, inputs_missing: str | None = None, verify=None,
              claimed_mono: float | None = None) -> Slot:
        """`claimed_mono`: when the claim's write began, on the agent's monotonic clock (its promise runs from
        then)."""
        a = self.a
        job_id = doc["id"]
        slot = Slot(doc, version, a.prepare_job_dir(job_id, doc.get("started_at")), verify=verify)
        a.slots[job_id] = slot
        a.log(f"{job_id}: claimed ({doc['spec']['command'][:80]!r})")
        slot.started_at = d.parse_iso(doc.get("started_at")) or a.clock.now()
        slot.started_mono = time.monotonic()
        slot.renew_due = slot.started_mono + a.cfg.poll_seconds
        slot.promised_until = _promised_until(doc, slot.started_mono if claimed_mono is None else claimed_mono)
        slot.io = a.new_io(job_id, slot.job_dir, d.attempt_of(doc))
        if inputs_missing:
            self.fail_before_start(slot, "input_unavailable", inputs_missing)
        else:
            self.launch(slot)
        return slot

    def adopt(self, doc: dict, version, job_dir: str, *, ended=None) -> Slot:
        """A slot for a job the worker this agent replaced left on this host: its process (if any) is watched
        to its end, not spawned (restart.py)."""
        a = self.a
        slot = Slot(doc, version, job_dir, process=doc.get("process"), launched=True, adopted=True, ended=ended)
        if ended is None:
            slot.exit_watch = a.host.watch_exit(slot.process)
        a.slots[doc["id"]] = slot
        now, mono = a.clock.now(), time.monotonic()
        slot.started_at = d.parse_iso(doc.get("started_at")) or now
        slot.started_mono = mono - max(0.0, now - slot.started_at)
        slot.renew_due = mono + a.cfg.poll_seconds
        slot.promised_until = _promised_until(doc, mono)
        slot.io = a.new_io(doc["id"], job_dir, d.attempt_of(doc))
        return slot

    def launch(self, slot: Slot) -> None:
        """Fetch the job's inputs (on the slot's JobIO thread; called again until they are in), then spawn
        it. A fetch that stalls or meets a store error leaves the slot claimed and not started: the claim
        stays ours (renewed as usual) and a later tick resumes the fetch, so the job still starts once, here."""
        a = self.a
        if slot.verify is not None and not self._verified(slot):
            return
        if a.draining:
            return self.hand_back(slot)
        doc, job_id, job_dir = slot.doc, slot.job_id, slot.job_dir
        work = os.path.join(job_dir, "work")
        if slot.delivered is None:
            state, delivered = slot.io.inputs(doc["spec"].get("inputs") or [], work)
            if state == "failed":
                return self.fail_before_start(slot, "input_unavailable", delivered)
            if state != "done":
                slot.launch_due = time.monotonic() + a.cfg.poll_seconds
                return
            slot.delivered = delivered
        if not self._still_ours(slot):
            return
        delivered = slot.delivered
        doc = slot.doc
        slot.launched = True
        inputs_json = json.dumps(delivered, sort_keys=True)
        inputs_file = a.write_inputs_file(job_dir, inputs_json)
        held = a.holdings.hold(job_id, doc["spec"])  # CARGO_BUILD_JOBS and the accelerator variables name it
        # The record's own string (a float's round trip can move it a millisecond): it names the attempt in its
        # directory and in every process's environment, and the restart check and orphan pass match the two.
        started_at = doc.get("started_at") or d.iso(slot.started_at)
        env = job_environment(a.job_env, stado_bin=a.stado_bin_for(job_dir), job_id=job_id, started_at=started_at,
                              inputs_json=inputs_json, inputs_file=inputs_file, cores=held.cores,
                              devices=held.devices if a.offer.devices else None)
        try:
            slot.process = a.host.spawn(doc["spec"]["command"], env, job_dir, work, slot.io.output_path)
        except OSError as e:
            return self.fail_before_start(slot, "spawn_error", f"could not start /bin/sh: {e}")
        slot.started_mono = time.monotonic()
        slot.process["started_at"] = d.iso(a.clock.now())  # the claim's started_at stays the attempt's start
        faults.point("spawned")
        a.log(f"{job_id}: started as process group {slot.pgid}")

    def _still_ours(self, slot: Slot) -> bool:
        """Just before its process starts: only on a promise with at least half a poll to run (an agent stopped
        past its promise, or a slot that waited for its inputs, renews first, so a job reaped, requeued or
        cancelled meanwhile is never started). Nothing reaches the store between this check and the spawn."""
        if self._promise_left(slot) >= self.a.cfg.poll_seconds / 2:
            return True
        before = slot.version
        try:
            self.renew(slot)
        except StoreError as e:
            self.a.log(f"{slot.job_id}: could not renew its claim before starting it ({type(e).__name__}: "
                       f"{str(e)[:200]}); trying again on the next tick")
        if (slot.stopping is None and slot.version is not None and slot.version != before
                and self._promise_left(slot) >= self.a.cfg.poll_seconds / 2):
            return True
        if slot.stopping is None:
            slot.launch_due = time.monotonic() + self.a.cfg.poll_seconds
        return False

    @staticmethod
    def _promise_left(slot: Slot) -> float:
        return slot.promised_until - time.monotonic()

    def _verified(self, slot: Slot, running: bool = False) -> bool:
        """A claim held while its check failed: check again. True once it is known genuine. `running`: its
        process already runs (a re-adoption whose answer was lost): if the claim is not ours, it is stopped."""
        a = self.a
        try:
            genuine = jobs.verify_claim(a.store, slot.doc, slot.version, *slot.verify, writer=a.id, now=a.clock.now())
        except StoreError as e:
            slot.launch_due = time.monotonic() + a.cfg.poll_seconds
            a.log(f"{slot.job_id}: still cannot tell whether its claim is genuine ({type(e).__name__}: "
                  f"{str(e)[:200]}); checking again on the next tick")
            return False
        slot.verify = None
        if genuine is None and running:
            a.log(f"{slot.job_id}: taking the job back did not hold; stopping process group {slot.pgid}")
            self.stop(slot, "lost")
            return False
        if genuine is None:
            a.log(f"{slot.job_id}: the claim is not ours after all (it did not land, came from a stale read of the "
                  "queue, or was cancelled first); nothing started")
            slot.launched, slot.ended, slot.stopping = True, (None, None), "lost"
            return False
        slot.doc, slot.version = genuine
        return True

    def fail_before_start(self, slot: Slot, error_class: str, message: str) -> None:
        slot.io.tell(f"not started: {message}")
        slot.launched = True
        slot.ended = (None, None)
        slot.result = d.result("failed", error_class=error_class, message=message)
        self.a.notify()  # settled by the next tick, once what it told its output is up

    # -- each tick ------------------------------------------------------------------------------------------

    def tick(self, slot: Slot) -> None:
        a = self.a
        mono = time.monotonic()
        if a.draining and not slot.launched and slot.stopping is None and slot.verify is None:
            self.hand_back(slot)
        if not slot.launched and slot.ended is None:
            if slot.stopping:
                slot.ended = (None, None)  # cancelled or taken over before its process started
                slot.io.cancel()
            elif mono >= slot.launch_due or slot.io.inputs_in():
                self.launch(slot)
        if slot.launched and slot.verify is not None and not self._verified(slot, running=True):
            return
        if slot.adopted and slot.ended is None and not a.host.alive(slot.process):
            slot.ended = self._adopted_exit(slot)
        timeout = slot.doc["spec"].get("timeout")
        if (slot.ended is None and slot.process and timeout and mono - slot.started_mono > timeout
                and slot.stopping is None):
            self.stop(slot, "timeout")
        if slot.ended is None and slot.process and slot.stopping is None:
            slot.cost_note = past_cap(slot.doc["spec"], a.offer, mono - slot.started_mono)
            if slot.cost_note:
                self.stop(slot, "cost_cap")
        if slot.stopping:
            self._escalate(slot)
        if slot.ended is not None and not a.host.alive(slot.process):
            if self._closed(slot):
                return slotend.finish(a, slot)
        elif slot.ended is not None and slot.stopping is None:
            self.stop(slot, "leftover")  # the shell exited; what it left in its group does not outlive the job
        if mono >= slot.renew_due and slot.stopping not in ("cancel", "lost") and slot.version is not None:
            self.renew(slot)  # a cancelled or taken-over job is no longer ours to renew (nor an unknown claim)

    def _adopted_exit(self, slot: Slot) -> tuple[int | None, int | None]:
        """The exit of a process this agent did not start: what the agent it replaced recorded as it reaped it,
        else what the kernel kept of it (its pidfd, pinned at adoption), else unknown."""
        from .workroot import read_exit_status

        watched, slot.exit_watch = slot.exit_watch, None
        got = read_exit_status(slot.job_dir) or self.a.host.exit_of_watched(watched)
        if got is None:
            slot.result = d.result("failed", error_class="internal",
                                   message="left by the worker this one replaced; it ended without recording its exit "
                                           "status")
            return None, None
        return got

    def _closed(self, slot: Slot) -> bool:
        """Its artifacts (if it ran to an end of its own) and the rest of its output are up, on the slot's
        JobIO thread: it can be settled. Renewals go on meanwhile."""
        if not slot.closed and time.monotonic() >= slot.close_due:
            upload = slot.stopping not in ("lost", "cancel", "shutdown", "handback") and slot.result is None
            state, why = slot.io.close(upload)
            if state == "retry":
                slot.close_due = time.monotonic() + self.a.cfg.poll_seconds
            slot.closed, slot.upload_error = state == "done", why
        return slot.closed

    def renew(self, slot: Slot) -> None:
        a = self.a
        began, now = time.monotonic(), a.clock.now()
        try:
            got = jobs.renew(a.store, slot.doc, slot.version, lease_expires_at=a.lease.promise(now), now=now,
                             process=slot.process if slot.doc.get("process") is None else None)
        except CorruptDocument as e:
            # Someone wrote over the running record: the renewal's compare-and-swap lost, so the job is no
            # longer ours to run, and what holds its key cannot be read to learn why.
            slot.renew_due = time.monotonic() + a.cfg.poll_seconds
            a.log(f"{slot.job_id}: {e}; the job is no longer ours: stopping process group {slot.pgid}")
            return self.stop(slot, "lost")
        except StoreError:
            slot.renew_due = time.monotonic() + a.cfg.poll_seconds
            self._pulse(slot, renewed=False)  # the renewal is failing, not the worker: say so
            raise
        ended = time.monotonic()
        a.lease.observed(slot.renew_due, began, ended)  # monotonic: a wall-clock jump is no late renewal
        slot.renew_due = ended + a.cfg.poll_seconds
        if isinstance(got, jobs.Fenced):
            self._pulse(slot, renewed=False)
            return self._fenced(slot, got.current)
        slot.doc, slot.version = got
        slot.promised_until = _promised_until(slot.doc, began)
        self._pulse(slot, renewed=True)

    def _pulse(self, slot: Slot, *, renewed: bool) -> None:
        try:
            jobs.pulse(self.a.store, slot.doc, renewed=renewed, now=self.a.clock.now())
        except StoreError:
            pass  # the next renewal attempt writes the next pulse

    def _fenced(self, slot: Slot, current: dict | None) -> None:
        """Another writer moved the running document: a cancel, or the reaper (then the job may be ours to
        take back: re-adoption)."""
        if current is not None and current.get("phase") == "cancelling" and current.get("claim") == slot.doc.get("claim"):
            slot.doc = current  # a cancel of this very attempt (another claim's cancel is that claim's owner's)
            return self.stop(slot, "cancel")
        if current is not None and current.get("reaped") and current.get("claim") == slot.doc.get("claim"):
            return  # the reaper's move is under way: look again on the next tick
        if slot.process and slot.ended is None and (current is None or current.get("claim") != slot.doc.get("claim")):
            return self._readopt(slot)  # takes the job back, or says who took it first
        try:
            cancelled = current is None and read(self.a.store, keys.terminal("cancelled", slot.job_id)) is not None
        except CorruptDocument:
            cancelled = False
        if cancelled:
            return self.stop(slot, "cancel")
        self.a.log(f"{slot.job_id}: its running record was taken over or removed; stopping process group {slot.pgid}")
        self.stop(slot, "lost")

    def _readopt(self, slot: Slot) -> None:
        """Seed 003: a job requeued while this worker still runs its process is not started a second time."""
        a = self.a
        began, now = time.monotonic(), a.clock.now()
        try:
            got = jobs.readopt(a.store, slot.doc, agent_id=a.id, instance_ref=a.instance_ref,
                               lease_expires_at=a.lease.promise(now), now=now)
        except jobs.Unverified as unsure:  # whether its create landed is told on the next tick
            slot.doc, slot.version, slot.verify = unsure.doc, None, (unsure.queued, unsure.queued_version)
            return
        ran = time.monotonic() - slot.started_mono
        if got.doc is not None:
            slot.doc, slot.version = got.doc, got.version
            slot.promised_until = _promised_until(got.doc, began)
            a.log(f"{slot.job_id}: already running here as process group {slot.pgid} for {ran:.0f} s: its lease lapsed "
                  "while it ran and it was put back in the queue; the running process took the job back and no "
                  "second process was started")
            return
        a.log(f"{slot.job_id}: already running here as process group {slot.pgid} for {ran:.0f} s: its lease lapsed "
              f"while it ran and it was put back in the queue, but {got.why} first; stopping process group "
              f"{slot.pgid}, and nothing is started")
        self.stop(slot, "cancel" if got.cancelled else "lost")

    def hand_back(self, slot: Slot) -> None:
        """Its agent drains: a job claimed but not started goes back to the queue for another agent (its fetch
        is given up; what arrived is not kept)."""
        slot.stopping = "handback"
        slot.stop_sent = time.monotonic()
        slot.io.cancel()
        self.a.log(f"{slot.job_id}: not started; handing it back to the queue (this agent is draining)")

    def stop(self, slot: Slot, why: str) -> None:
        slot.stopping = why
        slot.stop_sent = time.monotonic()
        self.a.host.signal(slot.process, TERM)
        if why == "cancel":
            self.a.log(f"{slot.job_id}: cancelled; stopping process group {slot.pgid}")
        elif why == "timeout":
            self.a.log(f"{slot.job_id}: timed out; stopping process group {slot.pgid}")
        elif why == "cost_cap":
            self.a.log(f"{slot.job_id}: {slot.cost_note}")

    def _escalate(self, slot: Slot) -> None:
        if (slot.process and not slot.kill_sent and time.monotonic() - slot.stop_sent >= self.a.cfg.kill_after
                and self.a.host.alive(slot.process)):
            self.a.host.signal(slot.process, KILL)
            slot.kill_sent = True


def _promised_until(doc: dict, written_mono: float) -> float:
    """When the promise in `doc` runs out on this agent's monotonic clock: from when its write began (the
    store's stamp, by which the reaper judges it, is no earlier)."""
    lease = doc.get("lease_seconds")
    return written_mono + (lease if isinstance(lease, (int, float)) else 0.0)
