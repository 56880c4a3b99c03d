"""`stado agent`: the loop of one worker on one host. It claims jobs and runs each in a slot (slot.py),
on cadences of its own: the claim pass every poll (claiming.py), the reaper's pass (reaper.py: finish
half-done moves, requeue or fail jobs whose worker stopped speaking), the claim-order index kept in step
with the queue, schedules fired when due (schedules.py), and its agents/ record refreshed.

Before its first tick it refuses a store that ignores conditions (storecheck.py) and settles the jobs the
worker it replaced on this host left behind (restart.py). Transfers (inputs, output, artifacts) run on
threads of each slot's JobIO and wake the loop when they end, so no transfer delays a renewal or a signal.

SIGTERM or SIGINT: the agent stops claiming and lets running jobs finish (they keep renewing their
leases), then exits. Drained (`stado agent --drain`: a request file beside its lock, then SIGTERM), it also
hands back to the queue the jobs it claimed but has not started. A second SIGTERM or SIGINT stops them (SIGTERM to their groups, SIGKILL after
--kill-after), records them cancelled by the shutdown, and exits. SIGKILL abandons them: the agent that
next starts on the host, or the reaper, settles them.
"""
import os
import select
import shutil
import signal
import sys
import time

from runkit import proc
from runkit.ids import uuid7
from runkit.redact import secret_values

from . import artifacts, keys, readyindex
from . import documents as d
from .admission import Holdings, live_for, refresh_seconds
from .agentconfig import AgentConfig
from .cas import new_nonce
from .environment import SHIM_NAME, shim_text
from .claiming import QueueKnowledge, claim_pass
from .errors import CorruptDocument
from .jobio import JobIO
from .lease import LeaseClock
from .objectstore.base import ObjectStore, StoreError
from .processhost import ProcessHost
from .reaper import Watch, reap
from .restart import settle_left_by_replaced, stop_orphans
from .slot import Slot, SlotRunner
from .storecheck import ensure_safe
from .storeclock import SKEW_BOUND, StoreClock, skew_words
from .workroot import HostLock, drain_path, job_dir, owner_of, write_owner

__all__ = ["Agent", "AgentConfig", "run_agent"]


class Agent:
    def __init__(self, store: ObjectStore, config: AgentConfig, log=None, host: ProcessHost | None = None):
        self.store, self.cfg = store, config
        self.id = uuid7()
        self.instance_ref = f"local@{config.host}"
        self.offer = config.offer()
        self.holdings = Holdings(self.offer)  # what its slots reserve of the offer
        self.lease = LeaseClock(config.poll_seconds, config.late_cap)
        self.clock = StoreClock()  # the store's time: what every time this agent writes or judges is read on
        self.slots: dict[str, Slot] = {}
        self.queue = QueueKnowledge(store)
        self.runner = SlotRunner(self)
        self.host = host or ProcessHost()
        self.stopping = False
        self.draining = False       # stopping, and handing back what has not started (`stado agent --drain`)
        self.shutting_down = False  # a second SIGTERM/SIGINT: stop the running jobs too
        self.job_env = dict(os.environ)
        self.secrets = secret_values(self.job_env)
        self._log = log or (lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
        self.said: dict[str, object] = {}     # things logged once (corrupt keys, ineligible jobs, pause)
        self.blocked: dict[str, bool] = {}    # job ids held up by a corrupt record elsewhere (until the slow cadence)
        self._wake_r = self._wake_w = None
        self._freed = False
        self._last_claim = -1e18
        self._record_due = self._settle_due = self._index_due = self._schedules_due = 0.0
        self._watch = Watch()  # how long each running document has looked unchanged to this agent (reaper.Watch)
        self._record_generation = 0
        self._schedules = None

    def log(self, message: str) -> None:
        self._log(f"{d.iso(self.clock.now())} agent {self.id[-12:]}: {message}")

    def log_once(self, key: str, value, message: str) -> None:
        if self.said.get(key) != value:
            self.said[key] = value
            self.log(message)

    # -- life cycle --------------------------------------------------------------------------------------

    def run(self) -> int:
        lock = HostLock(self.cfg.work_root, self.id, self.cfg.host)
        lock.take()
        try:
            ensure_safe(self.store, log=self.log)  # never claim on a store that would let two agents win
        except BaseException:
            lock.release()
            raise
        if self.cfg.subreaper and proc.become_subreaper():
            self.host.reap_all = True
        old = self._install_signals()
        recorded = False
        try:
            self._write_record()
            recorded = True
            self.log(f"started on {self.instance_ref} with {self.cfg.slots} slot(s), polling every "
                     f"{self.cfg.poll_seconds:g} s; store {getattr(self.store, 'url', '?')}")
            self.guard(settle_left_by_replaced, self)
            self.guard(stop_orphans, self)
            self._cadences()  # the reaper's pass and the index check once before the first claim
            self.loop()
        finally:
            if recorded:
                self.guard(lambda: self.store.delete(keys.agent(self.id)))
            self._restore_signals(old)
            lock.release()
        return 0

    def loop(self) -> None:
        while True:
            self._reap_children()
            for slot in list(self.slots.values()):
                if self.shutting_down and slot.stopping is None:
                    self.runner.stop(slot, "shutdown")
                self.guard(self.runner.tick, slot)
            if self.stopping and not self.slots:
                return
            eligible = None
            if self._may_claim() and (time.monotonic() - self._last_claim >= self.cfg.poll_seconds or self._freed):
                self._freed = False
                self._last_claim = time.monotonic()
                eligible = self.guard(claim_pass, self)
            if self.cfg.until_idle and not self.slots and eligible == 0:
                self.log("idle: nothing to claim and nothing running; exiting (--until-idle)")
                return
            self._cadences()
            self.wait(self._next_deadline())

    def claim_backoff(self, seconds: float) -> None:
        """The next claim pass comes `seconds` from now, not a poll from now (claiming.backoff)."""
        self._last_claim = time.monotonic() + seconds - self.cfg.poll_seconds
        self._freed = False

    def _may_claim(self) -> bool:
        return not self.stopping and len(self.slots) < self.cfg.slots

    def _cadences(self) -> None:
        mono = time.monotonic()
        if mono >= self._record_due:
            self.guard(self._write_record)
        if mono >= self._settle_due:
            self.blocked.clear()  # look again at queued jobs a corrupt record held up
            self._settle_pass()
        if mono >= self._index_due:
            self._index_due = mono + self.cfg.index_seconds
            self.guard(self._reconcile_index)
        if self.cfg.schedules and mono >= self._schedules_due:
            self.guard(self._fire_schedules)

    def guard(self, fn, *args, **kwargs):
        """A store that fails for a moment must not stop the agent: log, and the next pass tries again.
        A corrupt record is reported (once) and never stops it either; the places that meet one handle it
        so that no other job waits on it, this is the last line."""
        try:
            return fn(*args, **kwargs)
        except StoreError as e:
            self.log(f"object store error: {type(e).__name__}: {str(e)[:200]}; retrying on the next pass")
            return None
        except CorruptDocument as e:
            self.log_once(str(e), True, f"{e}: skipped; `stado status` lists it under problems")
            return None

    def _install_signals(self):
        self._wake_r, self._wake_w = proc.wake_pipe()
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
        name = signal.Signals(signum).name
        if not self.stopping:
            self.stopping = True
            self.draining = os.path.exists(drain_path(self.cfg.work_root, self.id))
            unstarted = sum(1 for slot in self.slots.values() if not slot.launched)
            if self.draining:
                self.log(f"{name} (drain): not claiming any more; handing back {unstarted} job(s) not started yet and "
                         f"waiting for {len(self.slots) - unstarted} running job(s) to finish (a second SIGTERM or "
                         "SIGINT stops them)")
            else:
                self.log(f"{name}: not claiming any more; waiting for {len(self.slots)} running job(s) to finish (a "
                         "second SIGTERM or SIGINT stops them)")
        elif not self.shutting_down:
            self.shutting_down = True
            self.log(f"second {name}: stopping {len(self.slots)} running job(s) (SIGTERM to their process groups, "
                     f"SIGKILL after {self.cfg.kill_after:g} s), recording them cancelled by this shutdown, then "
                     "exiting")

    def notify(self) -> None:
        """Wake the loop: a slot's transfer thread has finished."""
        try:
            os.write(self._wake_w, b"!")
        except (OSError, TypeError):  # full (a wake-up is pending anyway), or not running
            pass

    def wait(self, deadline: float) -> None:
        timeout = max(0.0, deadline - time.monotonic())
        try:
            ready, _, _ = select.select([self._wake_r], [], [], timeout)
        except InterruptedError:
            return
        if ready:
            proc.drain(self._wake_r)

    def _next_deadline(self) -> float:
        mono = time.monotonic()
        deadline = min(self._settle_due, self._record_due, self._index_due)
        if self._may_claim():  # a full agent does not poll the queue: no deadline for it (no busy loop)
            deadline = min(deadline, self._last_claim + self.cfg.poll_seconds)
        if self.cfg.schedules:
            deadline = min(deadline, self._schedules_due)
        for slot in self.slots.values():
            deadline = min(deadline, slot.due(mono, self.cfg.poll_seconds))
        return mono if self._freed and self._may_claim() else deadline

    # -- what the slots need from their agent ------------------------------------------------------------

    def room(self):
        """What is free now: the offer less what its slots hold (the holdings kept in step with the slots)."""
        self.holdings.sync({job_id: slot.doc["spec"] for job_id, slot in self.slots.items()})
        return self.holdings.free()

    def prepare_job_dir(self, job_id: str, started_at: str | None) -> str:
        directory = job_dir(self.cfg.work_root, job_id, started_at)
        os.makedirs(os.path.join(directory, "work"), mode=0o700, exist_ok=True)
        with open(os.path.join(directory, artifacts.JOB_ID_FILE), "w") as f:
            f.write(job_id + "\n")
        write_owner(directory, self.id)
        if self.cfg.store_env is not None:
            # It may name credentials: readable by this user alone, in a directory only this user can enter.
            fd = os.open(os.path.join(directory, SHIM_NAME), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o700)
            with os.fdopen(fd, "w") as f:
                f.write(shim_text(self.cfg.stado_bin, self.cfg.store_env, job_id))
        return directory

    def stado_bin_for(self, directory: str) -> str:
        """$STADO_BIN of the job in `directory`: its shim (prepare_job_dir), or the agent's program."""
        return self.cfg.stado_bin if self.cfg.store_env is None else os.path.join(directory, SHIM_NAME)

    def write_inputs_file(self, directory: str, inputs_json: str) -> str:
        """WC_ARTIFACT_INPUTS_FILE: the job's inputs, as JSON, in a file of its own directory."""
        path = os.path.join(directory, "inputs.json")
        with open(path, "w") as f:
            f.write(inputs_json)
        return path

    def new_io(self, job_id: str, directory: str, attempt: int = 1) -> JobIO:
        return JobIO(self.store, job_id, directory, self.secrets, poll_seconds=self.cfg.poll_seconds,
                     stall_seconds=self.cfg.stall_seconds, log=self.log, notify=self.notify, attempt=attempt)

    def drop(self, slot: Slot) -> None:
        self.slots.pop(slot.job_id, None)
        self._freed = True
        # Only a directory still ours: after this agent was stopped past its promise, another agent on this host
        # may run the job's next attempt in it (its owner file says so), and that attempt's files are not ours.
        if owner_of(slot.job_dir) not in (self.id, None):
            return
        if not self.cfg.keep_work:
            shutil.rmtree(slot.job_dir, ignore_errors=True)
        elif self.cfg.store_env is not None:
            try:
                os.unlink(os.path.join(slot.job_dir, SHIM_NAME))  # kept work keeps no credentials
            except OSError:
                pass

    def _reap_children(self) -> None:
        leaders = {slot.pgid: slot for slot in self.slots.values()
                   if slot.pgid is not None and slot.ended is None and not slot.adopted}
        if not leaders and not self.host.reap_all:
            return
        for pid, ended in self.host.reap(leaders).items():
            leaders[pid].ended = ended

    # -- the slow cadences ---------------------------------------------------------------------------------

    def _write_record(self) -> None:
        refresh = refresh_seconds(self.cfg.poll_seconds)
        offer, free = self.offer, self.room()
        record = {"agent": self.id, "host": self.cfg.host, "instance_ref": self.instance_ref, "pid": os.getpid(),
                  "slots": self.cfg.slots, "running": sorted(self.slots), "capabilities": sorted(offer.capabilities),
                  "cores": offer.cores, "memory": offer.memory, "accelerators": offer.accelerators,
                  "accelerator_devices": list(offer.devices), "provider": offer.provider, "spot": offer.spot,
                  "price_per_hour": offer.price_per_hour,
                  "free": {"cores": free.cores, "memory": free.memory, "accelerators": free.accelerators},
                  "last_seen": d.iso(self.clock.now()), "stopping": self.stopping, "poll_seconds": self.cfg.poll_seconds,
                  "refresh_seconds": refresh, "live_for": live_for(refresh), "generation": self._record_generation + 1,
                  "nonce": new_nonce()}
        key = keys.agent(self.id)
        if self.clock.due():  # its write time, read back, tells where the store's clock stands
            self.clock.measure(self.store, key, lambda: self.store.put(key, d.encode(record)))
            self._said_skew()
        else:
            self.store.put(key, d.encode(record))  # only this agent writes its record
        self._record_generation += 1
        self._record_due = time.monotonic() + refresh

    def _said_skew(self) -> None:
        skew = self.clock.skew()
        if skew is not None and abs(skew) > 1.0:
            self.log_once("clock", round(skew), f"this host's clock is {skew_words(skew)}: promises, the reaper's "
                                                f"verdicts and schedules go by the store's")

    def _settle_pass(self) -> None:
        """The reaper's pass (one LIST of running/, never of a terminal prefix): finish moves crashed agents
        left half done, requeue or fail jobs whose worker stopped speaking. Its own slots are skipped: their
        renewals speak for them."""
        self._settle_due = time.monotonic() + self.cfg.settle_seconds
        summary = self.guard(reap, self.store, writer=self.id, margin=self.cfg.reap_margin,
                             skip=frozenset(self.slots), watch=self._watch, clock=self.clock)
        self.guard(stop_orphans, self)
        for line in summary.lines if summary else ():
            if "corrupt document" in line or "cannot finish" in line:
                self.log_once(f"leftover {line}", True, line)  # reported once, not on every pass
            else:
                self.log(line)

    def _reconcile_index(self) -> None:
        for line in readyindex.reconcile(self.store):
            self.log_once(f"index {line}", True, line) if "corrupt document" in line else self.log(line)

    def _fire_schedules(self) -> None:
        from .schedules import ScheduleKnowledge

        if self._schedules is None:
            self._schedules = ScheduleKnowledge(self.store, submitter=f"schedule via agent {self.id}")
        skew = self.clock.skew()
        if skew is None or abs(skew) > SKEW_BOUND:
            # Not measured yet: the next agents/ record measures it (at once if the last one failed).
            self._schedules_due = time.monotonic() + (self._schedules.refresh if skew is not None else
                                                      min(self.cfg.poll_seconds, self._schedules.refresh))
            why = ("the store's clock is not measured yet" if skew is None else
                   f"this host's clock is {skew_words(skew)}, more than {SKEW_BOUND:.0f} s: fix the time of this host "
                   "(NTP) or of the store; the other agents fire them")
            return self.log_once("schedules", why, f"not firing schedules: {why}")
        self.said.pop("schedules", None)
        # Fire times go by the store's clock, and never before it (less what the measurement cannot tell).
        now = self.clock.now() - self.clock.uncertainty
        self._schedules_due = time.monotonic() + self.cfg.poll_seconds  # if the store fails: try again next poll
        for line in self._schedules.tick(now):
            self.log(line)
        self._schedules_due = time.monotonic() + max(0.05, min(self._schedules.due_at(now) - now,
                                                                self._schedules.refresh))


def run_agent(store: ObjectStore, config: AgentConfig) -> int:
    return Agent(store, config).run()
