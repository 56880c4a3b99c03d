"""`stado agent`: claims jobs from the queue and runs them, one process group and work directory each.

One loop thread. Each pass: reap children; for each running job, renew its lease when due (a
compare-and-swap that also tells the agent about a cancel), stop it if cancelled or past its timeout,
and settle it once its process group is gone and its artifacts and output are up; then, with free
slots, one claim pass. An idle pass costs one LIST of queue/ (terminal prefixes are never listed while
polling). Transfers (inputs, output, artifacts) run on threads of each slot's JobIO and wake the loop
when they end, so no transfer delays a renewal or a signal.

SIGTERM or SIGINT: the agent stops claiming and lets running jobs finish (they keep renewing their
leases), then exits. A second signal changes nothing: use SIGKILL to abandon the jobs (the reaper, a
later issue, then settles them).

Work root layout (one per host, shared by every agent on it):
    <work-root>/agents/<agent-id>.lock   held with an exclusive flock while the agent lives
    <work-root>/jobs/<job-id>/           job-id, inputs.json, output.log, artifacts/ (staged), work/ (cwd)
"""
import fcntl
import json
import os
import random
import select
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field

from runkit import proc
from runkit.ids import uuid7
from runkit.redact import secret_values

from . import artifacts, jobs, keys, readyindex
from .cas import new_nonce, read
from .claiming import READY, WAIT, QueueKnowledge
from . import documents as d
from .admission import Offer, live_for, refresh_seconds, why_not
from .environment import job_environment
from .errors import BadInput, CorruptDocument
from .jobio import JobIO
from .lease import LeaseClock
from .objectstore.base import DEFAULT_STALL_TIMEOUT, ObjectStore, StoreError
from .pause import pause_record
from .storecheck import ensure_safe
from .process import KILL, TERM, group_alive, reap, reap_any, signal_group, spawn_shell


def default_work_root() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "stado", "work")


def prepare_work_root(work_root: str) -> None:
    """Create the work root's directories; BadInput in one line if it cannot be used."""
    try:
        for sub in ("agents", "jobs"):
            os.makedirs(os.path.join(work_root, sub), mode=0o700, exist_ok=True)
        probe = os.path.join(work_root, "agents", f".probe.{os.getpid()}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"--work-root {work_root}: cannot use it as the agents' work root ({e.strerror or e}): "
                       "choose a directory this user can create and write") from None


@dataclass
class AgentConfig:
    work_root: str
    stado_bin: str
    slots: int = 1
    poll_seconds: float = 5.0
    host: str = field(default_factory=socket.gethostname)
    capabilities: frozenset[str] = frozenset()
    cores: int = os.cpu_count() or 1
    memory: int | None = None
    accelerators: int = 0
    kill_after: float = 10.0
    late_cap: float = 60.0
    settle_seconds: float = 300.0  # how often a running agent finishes moves other agents left half done
    window: int = 1000  # index entries a poll lists (one page); the queue beyond costs nothing per poll
    until_idle: bool = False
    keep_work: bool = False
    subreaper: bool = False  # become the reaper of jobs' orphans (the CLI agent does; an in-process one need not)
    stall_seconds: float = DEFAULT_STALL_TIMEOUT  # a transfer that moves no bytes this long is ended (and resumed)


@dataclass
class Slot:
    doc: dict
    version: object
    job_dir: str
    pgid: int | None = None
    process: dict | None = None
    started_at: float | None = None
    started_mono: float = 0.0
    io: JobIO | None = None
    verify: tuple | None = None         # (queue doc, version): a claim whose genuineness is still to be read
    launched: bool = False              # its process was spawned (or it failed before it could be)
    launch_due: float = 0.0             # when to try again to fetch its inputs and spawn it
    result: dict | None = None          # an outcome decided without a process (input unavailable, spawn error)
    ended: tuple | None = None          # (exit code, signal) once the shell has exited
    stopping: str | None = None         # why its group is being stopped: cancel | timeout | lost
    stop_sent: float | None = None
    kill_sent: bool = False
    renew_due: float = 0.0
    renew_due_wall: float = 0.0
    closed: bool = False                # its artifacts and output are up (JobIO.close): ready to settle
    close_due: float = 0.0              # when to try closing again after a store error
    upload_error: str | None = None     # why its artifacts could not be uploaded

    @property
    def job_id(self) -> str:
        return self.doc["id"]


class Agent:
    def __init__(self, store: ObjectStore, config: AgentConfig, log=None):
        self.store, self.cfg = store, config
        self.id = uuid7()
        self.instance_ref = f"local@{config.host}"
        self.offer = Offer(frozenset(config.capabilities), config.cores, config.memory, config.accelerators)
        self.lease = LeaseClock(config.poll_seconds, config.late_cap)
        self.slots: dict[str, Slot] = {}
        self.queue = QueueKnowledge(store)
        self.stopping = False
        self.secrets = secret_values(dict(os.environ))
        self._log = log or (lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
        self._said: dict[str, object] = {}   # things logged once (corrupt keys, ineligible jobs, pause)
        self._blocked: dict[str, object] = {}  # queue key -> version: held up by a corrupt record elsewhere
        self._lock_fd: int | None = None
        self._wake_r = self._wake_w = None
        self._freed = False
        self._record_due = 0.0
        self._record_generation = 0
        self._settle_due = 0.0
        self._reap_all = False

    def log(self, message: str) -> None:
        self._log(f"{d.iso(time.time())} agent {self.id[-12:]}: {message}")

    def log_once(self, key: str, value, message: str) -> None:
        if self._said.get(key) != value:
            self._said[key] = value
            self.log(message)

    # -- life cycle --------------------------------------------------------------------------------------

    def run(self) -> int:
        self._take_lock()
        try:
            ensure_safe(self.store, log=self.log)  # never claim on a store that would let two agents win
        except BaseException:
            self._release_lock()
            raise
        self._reap_all = self.cfg.subreaper and proc.become_subreaper()
        old = self._install_signals()
        recorded = False
        try:
            self._write_record()
            recorded = True
            self.log(f"started on {self.instance_ref} with {self.cfg.slots} slot(s), polling every "
                     f"{self.cfg.poll_seconds:g} s; store {getattr(self.store, 'url', '?')}")
            self._settle_leftovers_now()
            last_claim = -1e18
            while True:
                self._reap()
                for slot in list(self.slots.values()):
                    self._guard(self._tick, slot)
                if self.stopping and not self.slots:
                    break
                eligible = None
                now = time.monotonic()
                if (not self.stopping and len(self.slots) < self.cfg.slots
                        and (now - last_claim >= self.cfg.poll_seconds or self._freed)):
                    self._freed = False
                    last_claim = now
                    eligible = self._guard(self._claim_pass)
                if self.cfg.until_idle and not self.slots and eligible == 0:
                    self.log("idle: nothing to claim and nothing running; exiting (--until-idle)")
                    break
                if time.monotonic() >= self._record_due:
                    self._guard(self._write_record)
                if time.monotonic() >= self._settle_due:
                    self._settle_leftovers_now()
                self._wait(self._next_deadline(last_claim))
        finally:
            if recorded:
                self._guard(lambda: self.store.delete(keys.agent(self.id)))
            self._restore_signals(old)
            self._release_lock()
        return 0

    def _guard(self, fn, *args):
        """A store that fails for a moment must not stop the agent: log, and the next pass tries again.
        A corrupt record is reported (once) and never stops it either; the places that meet one handle it
        so that no other job waits on it, this is the last line."""
        try:
            return fn(*args)
        except StoreError as e:
            self.log(f"object store error: {type(e).__name__}: {str(e)[:200]}; retrying on the next pass")
            return None
        except CorruptDocument as e:
            self.log_once(str(e), True, f"{e}: skipped; `stado status` lists it under problems")
            return None

    def _take_lock(self) -> None:
        prepare_work_root(self.cfg.work_root)
        lock_dir = os.path.join(self.cfg.work_root, "agents")
        self._lock_path = os.path.join(lock_dir, f"{self.id}.lock")
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh id: nobody else can hold it
        os.write(fd, json.dumps({"agent": self.id, "pid": os.getpid(), "host": self.cfg.host}).encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            try:
                os.unlink(self._lock_path)
            except OSError:
                pass
            os.close(self._lock_fd)
            self._lock_fd = None

    def _install_signals(self):
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old = {sig: signal.signal(sig, self._on_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        old[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda *_: None)
        old["wakeup"] = signal.set_wakeup_fd(self._wake_w)
        return old

    def _restore_signals(self, old) -> None:
        signal.set_wakeup_fd(old.pop("wakeup"))
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _on_stop(self, signum, _frame) -> None:
        if not self.stopping:
            self.stopping = True
            self.log(f"{signal.Signals(signum).name}: not claiming any more; waiting for {len(self.slots)} running "
                     "job(s) to finish")

    def _notify(self) -> None:
        """Wake the loop: a slot's transfer thread has finished."""
        try:
            os.write(self._wake_w, b"!")
        except (OSError, TypeError):  # full (a wake-up is pending anyway), or not running
            pass

    def _wait(self, deadline: float) -> None:
        timeout = max(0.0, deadline - time.monotonic())
        try:
            ready, _, _ = select.select([self._wake_r], [], [], timeout)
        except InterruptedError:
            return
        if ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    def _next_deadline(self, last_claim: float) -> float:
        deadline = min(last_claim + self.cfg.poll_seconds, self._settle_due, self._record_due)
        for slot in self.slots.values():
            deadline = min(deadline, slot.renew_due)
            if not slot.launched:
                deadline = min(deadline, slot.launch_due)
            if slot.close_due > time.monotonic():
                deadline = min(deadline, slot.close_due)
            if slot.stopping:
                deadline = min(deadline, time.monotonic() + min(0.05, self.cfg.poll_seconds))
        if self._freed:
            deadline = time.monotonic()
        return deadline

    def _write_record(self) -> None:
        refresh = refresh_seconds(self.cfg.poll_seconds)
        record = {"agent": self.id, "host": self.cfg.host, "instance_ref": self.instance_ref, "pid": os.getpid(),
                  "slots": self.cfg.slots, "running": sorted(self.slots), "capabilities": sorted(self.offer.capabilities),
                  "cores": self.offer.cores, "memory": self.offer.memory, "accelerators": self.offer.accelerators,
                  "provider": self.offer.provider, "spot": self.offer.spot, "last_seen": d.iso(time.time()),
                  "stopping": self.stopping, "poll_seconds": self.cfg.poll_seconds, "refresh_seconds": refresh,
                  "live_for": live_for(refresh), "generation": self._record_generation + 1, "nonce": new_nonce()}
        self.store.put(keys.agent(self.id), d.encode(record))  # only this agent writes its record
        self._record_generation += 1
        self._record_due = time.monotonic() + refresh

    def _settle_leftovers_now(self) -> None:
        """At start, then every settle_seconds: finish the moves that crashed agents left half done (one LIST
        of running/, never of a terminal prefix), and look again at queued jobs a corrupt record held up."""
        self._settle_due = time.monotonic() + self.cfg.settle_seconds
        self._blocked.clear()
        self._guard(self._settle_leftovers)

    def _settle_leftovers(self) -> None:
        for line in jobs.settle_leftovers(self.store, writer=self.id) + readyindex.reconcile(self.store):
            if "cannot finish its move" in line or "corrupt document" in line:
                self.log_once(f"leftover {line}", True, line)  # reported once, not on every pass
            else:
                self.log(line)

    # -- claiming ----------------------------------------------------------------------------------------

    def _claim_pass(self) -> int:
        """Claim up to the free slots. Returns how many claimable jobs were seen (0: nothing to do)."""
        listed, strays = self.queue.list_window(self.cfg.window)
        for entry in strays:
            self.log_once(entry.key, entry.version, f"{entry.key}: not a job document; skipped")
        entries = [(job_id, entry) for job_id, entry in listed if job_id not in self.slots]
        if not entries:
            return 0
        paused = None  # read once per pass, and only when a job could be claimed: waiting jobs cost nothing
        free = initially_free = self.cfg.slots - len(self.slots)
        seen = 0
        for job_id, entry in _spread(entries, max(4 * free, 8)):
            if free == 0:
                self.queue.head_blocked(False)
                return seen + 1
            if self._said.get(entry.key) == entry.version or self._blocked.get(entry.key) == entry.version:
                continue  # known corrupt, ineligible or blocked, unchanged since
            try:
                found = self.queue.document(job_id, entry)
            except CorruptDocument as e:
                self.log_once(entry.key, entry.version, f"{e}: skipped")
                continue
            if found is None:
                continue
            queued = found[0]
            reason = why_not(queued["spec"], self.offer)
            if reason:
                self.log_once(entry.key, entry.version, f"{job_id}: not for this agent: {reason}")
                continue
            seen += 1
            try:
                inputs = self.queue.inputs_state(queued)
                if inputs == WAIT:
                    continue
                if paused is None:
                    paused = self._paused()
                if paused:
                    return 0
                now = time.time()
                got = jobs.claim(self.store, queued, agent_id=self.id, instance_ref=self.instance_ref,
                                 lease_expires_at=self.lease.promise(now), now=now)
            except jobs.Unverified as unsure:
                self.log(f"{unsure}; held, not started: checked again on the next tick")
                free -= 1
                self._start(unsure.doc, unsure.version, inputs_missing=None,
                            verify=(unsure.queued, unsure.queued_version))
                continue
            except CorruptDocument as e:
                # Another record of this job (or of its input's producer) is corrupt: this job cannot be
                # decided on, the others can. Looked at again on the slow leftovers cadence, or once its
                # queue entry changes.
                self._blocked[entry.key] = entry.version
                self.log_once(f"blocked {entry.key}", str(e), f"{job_id}: not claimed: {e}; skipped (`stado status` "
                              "lists it under problems)")
                continue
            self.queue.forget(entry.key)
            if got is None:
                continue
            free -= 1
            self._start(*got, inputs_missing=inputs if inputs != READY else None)
        self.queue.head_blocked(free == initially_free)  # nothing here could start: look further next time
        return seen

    def _paused(self) -> bool:
        pause = pause_record(self.store)
        if pause is None:
            self._said.pop("pause", None)
            return False
        self.log_once("pause", pause.get("nonce"), f"queue paused by {pause.get('by')} at {pause.get('at')}"
                      f" ({pause.get('reason') or 'no reason given'}): not claiming")
        return True

    # -- running -----------------------------------------------------------------------------------------

    def _start(self, doc: dict, version, *, inputs_missing: str | None, verify=None) -> None:
        job_id = doc["id"]
        job_dir = os.path.join(self.cfg.work_root, "jobs", job_id)
        work = os.path.join(job_dir, "work")
        os.makedirs(work, mode=0o700, exist_ok=True)
        with open(os.path.join(job_dir, artifacts.JOB_ID_FILE), "w") as f:
            f.write(job_id + "\n")
        slot = Slot(doc, version, job_dir, verify=verify)
        self.slots[job_id] = slot
        self.log(f"{job_id}: claimed ({doc['spec']['command'][:80]!r})")
        now = time.time()
        slot.started_at = now
        slot.started_mono = time.monotonic()
        slot.renew_due = slot.started_mono + self.cfg.poll_seconds
        slot.renew_due_wall = now + self.cfg.poll_seconds
        slot.io = JobIO(self.store, job_id, job_dir, self.secrets, poll_seconds=self.cfg.poll_seconds,
                        stall_seconds=self.cfg.stall_seconds, log=self.log, notify=self._notify)
        if inputs_missing:
            return self._fail_before_start(slot, "input_unavailable", inputs_missing)
        self._launch(slot)

    def _launch(self, slot: Slot) -> None:
        """Fetch the job's inputs (on the slot's JobIO thread; this is called again until they are in), then
        spawn it. A fetch that stalls or meets a store error leaves the slot claimed and not started: the
        claim stays ours (renewed as usual) and a later tick resumes the fetch, so the job still starts once,
        here."""
        if slot.verify is not None and not self._verified(slot):
            return
        doc, job_id, job_dir = slot.doc, slot.job_id, slot.job_dir
        work = os.path.join(job_dir, "work")
        output_path = slot.io.output_path
        state, delivered = slot.io.inputs(doc["spec"].get("inputs") or [], work)
        if state == "failed":
            return self._fail_before_start(slot, "input_unavailable", delivered)
        if state != "done":
            slot.launch_due = time.monotonic() + self.cfg.poll_seconds
            return
        slot.launched = True
        inputs_json = json.dumps(delivered, sort_keys=True)
        inputs_file = os.path.join(job_dir, "inputs.json")
        with open(inputs_file, "w") as f:
            f.write(inputs_json)
        now = time.time()  # the start is when the process starts: after its inputs are in place
        slot.started_at = now
        slot.started_mono = time.monotonic()
        env = job_environment(dict(os.environ), stado_bin=self.cfg.stado_bin, job_id=job_id,
                              started_at=d.iso(now), inputs_json=inputs_json, inputs_file=inputs_file,
                              cores=int(doc["spec"].get("cores") or 1))
        try:
            pid = spawn_shell(doc["spec"]["command"], env, work, output_path)
        except OSError as e:
            return self._fail_before_start(slot, "spawn_error", f"could not start /bin/sh: {e}")
        ident = proc.identity(pid)
        slot.pgid = pid
        slot.process = {"pid": pid, "pgid": pid, "start_time": ident.start_time if ident else None,
                        "boot_id": proc.boot_id(), "work_dir": work}
        self.log(f"{job_id}: started as process group {pid}")

    def _verified(self, slot: Slot) -> bool:
        """A claim held while its check failed: check again. True once it is known genuine."""
        try:
            genuine = jobs.verify_claim(self.store, slot.doc, slot.version, *slot.verify, writer=self.id)
        except StoreError as e:
            slot.launch_due = time.monotonic() + self.cfg.poll_seconds
            self.log(f"{slot.job_id}: still cannot tell whether its claim is genuine ({type(e).__name__}: "
                     f"{str(e)[:200]}); checking again on the next tick")
            return False
        slot.verify = None
        if genuine is None:
            self.log(f"{slot.job_id}: the claim is not ours after all (it did not land, came from a stale read of the "
                     "queue, or was cancelled first); nothing started")
            slot.launched, slot.ended, slot.stopping = True, (None, None), "lost"
            return False
        slot.doc, slot.version = genuine
        return True

    def _fail_before_start(self, slot: Slot, error_class: str, message: str) -> None:
        slot.io.tell(f"not started: {message}")
        slot.launched = True
        slot.ended = (None, None)
        slot.result = d.result("failed", error_class=error_class, message=message)
        self._notify()  # settled by the next tick, once what it told its output is up

    def _reap(self) -> None:
        if self._reap_all:
            leaders = {slot.pgid: slot for slot in self.slots.values()}
            for pid, code, sig in reap_any():
                slot = leaders.get(pid)
                if slot is not None and slot.ended is None:
                    slot.ended = (code, sig)
            return
        for slot in self.slots.values():
            if slot.ended is None and slot.pgid is not None:
                ended = reap(slot.pgid)
                if ended is not None:
                    slot.ended = ended

    def _tick(self, slot: Slot) -> None:
        mono = time.monotonic()
        if not slot.launched and slot.ended is None:
            if slot.stopping:
                slot.ended = (None, None)  # cancelled or taken over before its process started
                slot.io.cancel()
            elif mono >= slot.launch_due or slot.io.inputs_in():
                self._launch(slot)
        timeout = slot.doc["spec"].get("timeout")
        if (slot.ended is None and slot.pgid is not None and timeout and mono - slot.started_mono > timeout
                and slot.stopping is None):
            self._stop(slot, "timeout")
        if slot.stopping:
            self._escalate(slot)
        if slot.ended is not None and (slot.pgid is None or not group_alive(slot.pgid)):
            if self._closed(slot):
                return self._finish(slot)
        elif slot.ended is not None and slot.stopping is None:
            self._stop(slot, "leftover")  # the shell exited; what it left in its group does not outlive the job
        if mono >= slot.renew_due and slot.stopping not in ("cancel", "lost") and slot.version is not None:
            self._renew(slot)  # a cancelled or taken-over job is no longer ours to renew (nor an unknown claim)

    def _closed(self, slot: Slot) -> bool:
        """Its artifacts (if it ran to an end of its own) and the rest of its output are up, on the slot's
        JobIO thread: it can be settled. Renewals go on meanwhile."""
        if not slot.closed and time.monotonic() >= slot.close_due:
            upload = slot.stopping not in ("lost", "cancel") and slot.result is None
            state, why = slot.io.close(upload)
            if state == "retry":
                slot.close_due = time.monotonic() + self.cfg.poll_seconds
            slot.closed, slot.upload_error = state == "done", why
        return slot.closed

    def _renew(self, slot: Slot) -> None:
        began = time.time()
        try:
            got = jobs.renew(self.store, slot.doc, slot.version, lease_expires_at=self.lease.promise(began),
                             now=began, started_at=(slot.started_at if slot.pgid is not None
                                                    and slot.doc.get("started_at") is None else None),
                             process=slot.process if slot.doc.get("process") is None else None)
        except CorruptDocument as e:
            # Someone wrote over the running record: the renewal's compare-and-swap lost, so the job is no
            # longer ours to run, and what holds its key cannot be read to learn why.
            slot.renew_due = time.monotonic() + self.cfg.poll_seconds
            self.log(f"{slot.job_id}: {e}; the job is no longer ours: stopping process group {slot.pgid}")
            return self._stop(slot, "lost")
        ended = time.time()
        self.lease.observed(slot.renew_due_wall, began, ended)
        slot.renew_due = time.monotonic() + self.cfg.poll_seconds
        slot.renew_due_wall = ended + self.cfg.poll_seconds
        if isinstance(got, jobs.Fenced):
            jobs.pulse(self.store, slot.doc, renewed=False, now=ended)
            return self._fenced(slot, got.current)
        slot.doc, slot.version = got
        jobs.pulse(self.store, slot.doc, renewed=True, now=ended)

    def _fenced(self, slot: Slot, current: dict | None) -> None:
        """Another writer moved the running document: a cancel, or (later) a reaper."""
        if current is not None and current.get("phase") == "cancelling":
            slot.doc = current
            return self._stop(slot, "cancel")
        try:
            cancelled = current is None and read(self.store, keys.terminal("cancelled", slot.job_id)) is not None
        except CorruptDocument:
            cancelled = False
        if cancelled:
            return self._stop(slot, "cancel")
        self.log(f"{slot.job_id}: its running record was taken over or removed; stopping process group "
                 f"{slot.pgid}")
        self._stop(slot, "lost")

    def _stop(self, slot: Slot, why: str) -> None:
        slot.stopping = why
        slot.stop_sent = time.monotonic()
        if slot.pgid is not None:
            signal_group(slot.pgid, TERM)
        if why == "cancel":
            self.log(f"{slot.job_id}: cancelled; stopping process group {slot.pgid}")
        elif why == "timeout":
            self.log(f"{slot.job_id}: timed out; stopping process group {slot.pgid}")

    def _escalate(self, slot: Slot) -> None:
        if (slot.pgid is not None and not slot.kill_sent
                and time.monotonic() - slot.stop_sent >= self.cfg.kill_after and group_alive(slot.pgid)):
            signal_group(slot.pgid, KILL)
            slot.kill_sent = True

    def _finish(self, slot: Slot) -> None:
        if slot.stopping == "lost":
            self.log(f"{slot.job_id}: process group {slot.pgid} stopped; nothing recorded (the job is no longer ours)")
            return self._drop(slot)
        if slot.stopping == "cancel":
            return self._settle_cancel(slot)
        if slot.result is not None:
            return self._settle_slot(slot, slot.result)  # decided without a process; an earlier settle failed
        exit_code, sig = slot.ended
        res = d.classify_exit(exit_code, sig, timed_out=slot.stopping == "timeout",
                              timeout=slot.doc["spec"].get("timeout"))
        if slot.upload_error:
            res = d.result("failed", exit_code=exit_code, error_class="internal", message=slot.upload_error)
        self._settle_slot(slot, res)

    def _settle_slot(self, slot: Slot, res: dict) -> None:
        doc = dict(slot.doc)
        if slot.started_at is not None:
            doc["started_at"] = d.iso(slot.started_at)
        if slot.process is not None:
            doc["process"] = slot.process
        try:
            got = jobs.finish(self.store, doc, slot.version, res)
        except CorruptDocument as e:
            self.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                     "(`stado status` lists it under problems)")
            return self._drop(slot)
        if isinstance(got, jobs.Fenced):
            current = got.current
            if current is not None and current.get("phase") == "cancelling":
                slot.doc = current
                return self._settle_cancel(slot)
            if current is not None and current.get("phase") == "finishing" and current.get("claim") == doc.get("claim"):
                # Our own decision, written by an earlier pass whose move was interrupted: finish it.
                try:
                    found = read(self.store, keys.running(slot.job_id), slot.job_id)
                    ours = found is not None and found[0].get("claim") == doc.get("claim")
                    got = jobs.settle(self.store, *found, writer=self.id) if ours else None
                except CorruptDocument as e:
                    self.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an "
                             "operator (`stado status` lists it under problems)")
                    return self._drop(slot)
                state = got["state"] if got else "settled by another agent"
                self.log(f"{slot.job_id}: {state} (finished the move of an earlier pass)")
                return self._drop(slot)
            self.log(f"{slot.job_id}: ended, but its running record was taken over or removed; nothing recorded")
            return self._drop(slot)
        how = f"exit {res['exit_code']}" if res["exit_code"] is not None else (
            f"signal {res['signal']}" if res["signal"] else res["error"]["class"] if res["error"] else "?")
        self.log(f"{slot.job_id}: {how} -> {got['state']}" + (" (retry queued)" if got["state"] == "queued" else ""))
        self._drop(slot)

    def _settle_cancel(self, slot: Slot) -> None:
        try:
            found = read(self.store, keys.running(slot.job_id), slot.job_id)
            if found is not None and found[0].get("phase") == "cancelling" and found[0].get("claim") == slot.doc["claim"]:
                jobs.settle(self.store, *found, writer=self.id)
        except CorruptDocument as e:
            self.log(f"{slot.job_id}: process group {slot.pgid} stopped; the cancel could not be settled: {e}; "
                     "left for an operator (`stado status` lists it under problems)")
            return self._drop(slot)
        self.log(f"{slot.job_id}: process group {slot.pgid} stopped; job cancelled")
        self._drop(slot)

    def _drop(self, slot: Slot) -> None:
        self.slots.pop(slot.job_id, None)
        self._freed = True
        if not self.cfg.keep_work:
            shutil.rmtree(slot.job_dir, ignore_errors=True)


def _spread(entries: list, head: int) -> list:
    """Claim order (priority, then creation time), with the first `head` entries shuffled among those of
    equal priority, so that agents polling together do not all race for the same first job."""
    first, rest = entries[:head], entries[head:]
    runs: dict[str, list] = {}
    for item in first:
        runs.setdefault(item[1].key[len(keys.READY):][:4], []).append(item)
    for run in runs.values():
        random.shuffle(run)
    return [item for rank in sorted(runs) for item in runs[rank]] + rest


def run_agent(store: ObjectStore, config: AgentConfig) -> int:
    return Agent(store, config).run()

