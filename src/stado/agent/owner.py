"""`stado agent`: the owner of one worker on one host. It claims jobs and runs each in a slot, on cadences of its
own: the claim pass every poll (claim_pass.py), the reaper's pass (reaper.py: finish half-done moves, requeue or fail
jobs whose worker stopped speaking), the claim-order index kept in step with the queue, schedules fired when due
(schedules.py), and its agents/ record refreshed.

The Agent holds all of the worker's state, declared in __init__; its collaborators (the claim pass, the slot runner
and the slot's end, the take-over at start) are given an AgentContext (context.py), never the agent, and return
what they decided (claim decisions, slots, problems) for the agent to record. Time is an argument: the host's
clocks come in as a runkit.core.clock.Clock (the store's time is counted on it, storeclock.py), so a test drives the
agent through its decisions with a ManualClock and no sleep (tests/stado/inprocess.py).

Before its first tick it refuses a store that ignores conditions (guarantees.py) and settles the jobs the
worker it replaced on this host left behind (takeover.py). Transfers (inputs, output, artifacts) run on
threads of each slot's JobIO and wake the loop when they end, so no transfer delays a renewal or a signal. A store
that can ring (the local directory: ObjectStore.wake_fd) wakes it when a job is indexed, so an idle agent claims at
once; otherwise its claim passes come every --busy-poll-seconds while they claim, backing off to --poll-seconds.
A job's timeout and the SIGKILL --kill-after past SIGTERM are deadlines of its slot (Slot.due), not of the poll.

SIGTERM or SIGINT: the agent stops claiming and lets running jobs finish (they keep renewing their
leases), then exits. Drained (`stado agent --drain`: a request file beside its lock, then SIGTERM), it also
hands back to the queue the jobs it claimed but has not started. A second SIGTERM or SIGINT stops them (SIGTERM to
their groups, SIGKILL after --kill-after), records them cancelled by the shutdown, and exits. SIGKILL abandons them:
the agent that next starts on the host, or the reaper, settles them.
"""
from runkit.core.clock import SYSTEM
import os
import signal
import sys

from runkit.system import proc
from runkit.core.clock import Clock
from runkit.core.ids import uuid7
from runkit.core.redact import secret_values

from ..core.brief import brief
from ..core import documents as d, keys
from ..core.admission import Holdings, Room
from ..core.errors import CorruptDocument
from ..objectstore.base import ObjectStore, StoreError
from ..jobs.reaper import Watch
from ..store.guarantees import ensure_safe
from ..store.storeclock import StoreClock
from . import cadences
from .claim_pass import Backoff, Claim, ClaimPass, Hold
from .config import AgentConfig
from .context import AgentContext
from .fleet import Fleet
from .jobio import JobIO
from .lease import LeasePromise
from .processhost import ProcessHost
from .queue_knowledge import QueueKnowledge
from .renewals import Renewals
from .runner import SlotRunner
from .slot import Phase, Slot, Stop
from .takeover import settle_left_by_replaced, stop_orphans
from .hostfiles import HostLock, HostName, drain_path
from .wakeups import Wakeups
from .workspace import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..queue.schedules import ScheduleKnowledge


class Agent:
    def __init__(self, store: ObjectStore, config: AgentConfig, log=None, host=None, *, clock: Clock = SYSTEM,
                 workspace=None, new_io=None):
        """`host` (the jobs' processes), `clock` (this host's clocks), `workspace` (the jobs' directories) and
        `new_io` (a slot's transfers) are this host's own unless given: the simulator and the in-process tests
        give theirs."""
        self.id = uuid7()
        self.cfg = config
        self.store = store
        self.clock = StoreClock(host=clock)  # the store's time: what every time this agent writes or judges is read on
        self.offer = config.offer()
        self.holdings = Holdings(self.offer)  # what its slots reserve of the offer
        self.job_env = dict(os.environ)
        self.secrets = secret_values(self.job_env)
        self._log = log or _stderr_line  # its log names other people's text (a pause's reason, who held a job)
        self.host = host or ProcessHost()
        self.ctx = AgentContext(store=store, agent_id=self.id, cfg=config, clock=self.clock,
                                lease=LeasePromise(config.poll_seconds, config.late_cap), log=self.log, host=self.host,
                                workspace=workspace or Workspace(config, self.id, clock), new_io=new_io or self._new_io,
                                notify=self.notify, holdings=self.holdings, job_env=self.job_env)
        self.runner = SlotRunner(self.ctx)
        self.queue = QueueKnowledge(store)   # what it knows of the queue between polls (keyed by version, pruned)
        self.fleet = Fleet(self.id, config.poll_seconds)  # the live agents, for its rank in the claim pass (fleet.py)
        self.slots: dict[str, Slot] = {}
        # The slots' renewals: on a thread of their own once the agent runs (run(); the simulator runs them as an
        # actor of their own); inline in the loop, as step() renews, for a caller that steps the agent itself.
        self.renewals = Renewals(self.runner, self.slots)
        self.renew_inline = True
        self.stopping = False        # SIGTERM/SIGINT: claim nothing more, let what runs finish
        self.draining = False        # stopping, and handing back what has not started (`stado agent --drain`)
        self.shutting_down = False   # a second SIGTERM/SIGINT: stop the running jobs too
        self.recorded = False        # its agents/ record was written (and is removed when it exits)
        self.wakeups = Wakeups()     # how the loop sleeps and is woken (a signal, a slot's thread, the store's ring)
        self._freed = False          # a slot went: claim at once rather than at the next poll
        self._rung = False           # it rang: claim at once
        self._poll = min(config.busy_poll_seconds, config.poll_seconds)  # between claim passes now (next_poll)
        self._last_claim = -1e18
        self._record_due = self._settle_due = self._index_due = self._schedules_due = 0.0
        self._watch = Watch()  # how long each running document has looked unchanged to this agent (reaper.Watch)
        self._record_generation = 0
        self._saw_work = False  # the last claim pass saw something to claim: its record's cadence lists agents/ too
        self._schedules: ScheduleKnowledge | None = None  # made at the first firing step

    @property
    def instance_ref(self) -> str:
        return self.ctx.instance_ref

    def log(self, message: str) -> None:
        self._log(f"{d.iso(self.clock.wall())} agent {self.id[-12:]}: {message}")

    def log_once(self, key: str, value, message: str) -> None:
        self.ctx.log_once(key, value, message)

    # -- life cycle --------------------------------------------------------------------------------------

    def run(self) -> int:
        # The store by its endpoint too: two servers (a test's, a staging one) may hold buckets of one name.
        store = str(getattr(self.store, "where", None) or getattr(self.store, "url", ""))
        name = HostName(self.cfg.host, self.cfg.work_root, self.id, store)
        name.take()  # two live agents naming one host need one work root (BadInput otherwise)
        lock = HostLock(self.cfg.work_root, self.id, self.cfg.host)
        try:
            lock.take()
        except BaseException:
            name.release()
            raise
        try:
            ensure_safe(self.store, log=self.log, wait=self.cfg.store_wait, clock=self.clock)  # never claim where two agents could win
        except BaseException:
            lock.release()
            name.release()
            raise
        if self.cfg.subreaper and proc.become_subreaper():
            self.host.reap_all = True
        old = self.wakeups.install(self.store, self._on_stop)
        self.renew_inline = False
        self.renewals.start()
        try:
            self.begin()
            self.loop()
        finally:
            self.renewals.stop()
            self.end()
            self.wakeups.restore(old)
            lock.release()
            name.release()
        return 0

    def begin(self) -> None:
        """Before the first claim: its agents/ record (which measures the store's clock), the jobs the worker it
        replaced left on this host, and the reaper's pass and the index check once."""
        self._write_record()
        self.log(f"started on {self.instance_ref} with {self.cfg.slots} slot(s), polling every "
                 f"{self.cfg.poll_seconds:g} s; store {getattr(self.store, 'url', '?')}")
        self.guard(self._take_over_replaced)
        self.guard(stop_orphans, self.ctx, set(self.slots))
        self.cadences()

    def end(self) -> None:
        if self.recorded:
            self.guard(lambda: self.store.delete(keys.agent(self.id)))

    def loop(self) -> None:
        while not self.step():
            self.wait(self.next_deadline())

    def step(self) -> bool:
        """One pass of the loop: reap, tick every slot, claim if it may, the slow cadences. True when the agent is
        done (stopped with nothing left running, or idle under --until-idle)."""
        self._reap_children()
        for slot in list(self.slots.values()):
            if self.shutting_down and slot.stop is None:
                self.runner.stop(slot, Stop.SHUTDOWN)
            self.guard(self.runner.tick, slot, draining=self.draining, renew=self.renew_inline)
            if slot.phase == Phase.DONE:
                self.drop(slot)
        if self.stopping and not self.slots:
            return True
        eligible = None
        mono = self.clock.monotonic()
        if self._may_claim() and (mono - self._last_claim >= self._poll or self._freed or self._rung):
            self._freed = self._rung = False
            self._last_claim = mono
            eligible = self.guard(self.claim)
        if self.cfg.until_idle and not self.slots and eligible == 0:
            self.log("idle: nothing to claim and nothing running; exiting (--until-idle)")
            return True
        self.cadences()
        return False

    def claim(self) -> int:
        """One claim pass (claim_pass.ClaimPass), its decisions recorded as they come. Returns how many claimable jobs
        it saw (0: nothing to do)."""
        claim_pass = ClaimPass(self.ctx, self.queue, running=set(self.slots), room=self.room(), rank=self.fleet.rank())
        claimed, backoff = False, None
        for decision in claim_pass:
            claimed = claimed or isinstance(decision, (Claim, Hold))
            if isinstance(decision, Backoff):
                backoff = decision.seconds
                self._freed = False
            elif isinstance(decision, Hold):
                unsure = decision.unsure
                self.log(f"{unsure}; held, not started: checked again on the next tick")
                self.holdings.hold(unsure.doc.id, unsure.doc.spec)
                slot = self.runner.claimed(unsure.doc, unsure.version, verify=(unsure.queued, unsure.queued_version),
                                           claimed_mono=decision.claimed_mono)
                self._record(slot)
                self.runner.begin(slot, draining=self.draining, dependency_failed=decision.dependency_failed)
            elif isinstance(decision, Claim):
                self.holdings.hold(decision.doc.id, decision.doc.spec)
                slot = self.runner.claimed(decision.doc, decision.version, claimed_mono=decision.claimed_mono)
                self._record(slot)
                self.runner.begin(slot, inputs_missing=decision.inputs_missing, draining=self.draining,
                                  dependency_failed=decision.dependency_failed)
        self._poll = self.next_poll(claimed)
        if backoff is not None:  # lost a race: the next pass comes `backoff` from now
            self._last_claim = self.clock.monotonic() + backoff - self._poll
        self._saw_work = claim_pass.seen > 0
        if claim_pass.lost or claim_pass.gone:
            self._learn_fleet()
        return claim_pass.seen

    def _learn_fleet(self) -> None:
        """After a lost race (or an entry found taken): list the live agents again (a competitor it may not know of yet; its rank would then
        send it to the head the other takes too), at most once a busy poll."""
        mono = self.clock.monotonic()
        listed = self.fleet.listed_at
        if listed is None or mono - listed >= min(self.cfg.busy_poll_seconds, self.cfg.poll_seconds):
            self.guard(self.fleet.refresh, self.store, self.clock.wall(), mono)

    def next_poll(self, claimed: bool) -> float:
        """Seconds to the next claim pass: --busy-poll-seconds after a pass that claimed (work is arriving: on a
        remote store, the next job is found within that), doubled after each pass that claimed nothing, up to
        --poll-seconds (an idle agent costs one LIST a poll). A ring (the local directory) claims at once anyway."""
        fast = min(self.cfg.busy_poll_seconds, self.cfg.poll_seconds)
        return fast if claimed else min(max(self._poll, fast) * 2, self.cfg.poll_seconds)

    def _record(self, slot: Slot) -> None:
        self.slots[slot.job_id] = slot
        self.renewals.wake()

    def _take_over_replaced(self) -> None:
        for slot in settle_left_by_replaced(self.ctx, self.runner, read=self._watch.read):
            self._record(slot)

    def _may_claim(self) -> bool:
        return not self.stopping and len(self.slots) < self.cfg.slots

    def cadences(self) -> None:
        mono = self.clock.monotonic()
        if mono >= self._record_due:
            self.guard(self._write_record)
        if mono >= self._settle_due:
            self.queue.blocked.clear()  # look again at queued jobs a corrupt record held up
            self._settle_pass()
        if mono >= self._index_due:
            self._index_due = mono + self.cfg.index_seconds
            self.guard(cadences.reconcile_index, self.ctx)
        if self.cfg.schedules and mono >= self._schedules_due:
            self.guard(self._fire_schedules)

    def _fire_schedules(self) -> None:
        from ..queue.schedules import ScheduleKnowledge

        if self._schedules is None:
            self._schedules = ScheduleKnowledge(self.store, submitter=f"schedule via agent {self.id}")
        self._schedules_due = self.clock.monotonic() + self.cfg.poll_seconds  # if the store fails: try again next poll
        self._schedules_due = cadences.fire_schedules(self.ctx, self._schedules)

    def guard(self, fn, *args, **kwargs):
        """A store that fails for a moment must not stop the agent: log, and the next pass tries again.
        A corrupt record is reported (once) and never stops it either; the places that meet one handle it
        so that no other job waits on it, this is the last line."""
        try:
            return fn(*args, **kwargs)
        except StoreError as e:
            self.log(f"object store error: {type(e).__name__}: {brief(str(e), 200)}; retrying on the next pass")
            return None
        except CorruptDocument as e:
            self.log_once(str(e), True, f"{e}: skipped; `stado status` lists it under problems")
            return None

    def _on_stop(self, signum, _frame) -> None:
        self.stop(signal.Signals(signum).name, drain=os.path.exists(drain_path(self.cfg.work_root, self.id)))

    def stop(self, why: str, *, drain: bool = False) -> None:
        """A SIGTERM or SIGINT (`why`): the first stops claiming (and, drained, hands back what has not started);
        the second stops the running jobs too."""
        if not self.stopping:
            self.stopping = True
            self.draining = drain
            unstarted = sum(1 for slot in self.slots.values() if not slot.started)
            if self.draining:
                self.log(f"{why} (drain): not claiming any more; handing back {unstarted} job(s) not started yet and "
                         f"waiting for {len(self.slots) - unstarted} running job(s) to finish (a second SIGTERM or "
                         "SIGINT stops them)")
            else:
                self.log(f"{why}: not claiming any more; waiting for {len(self.slots)} running job(s) to finish (a "
                         "second SIGTERM or SIGINT stops them)")
        elif not self.shutting_down:
            self.shutting_down = True
            self.log(f"second {why}: stopping {len(self.slots)} running job(s) (SIGTERM to their process groups, "
                     f"SIGKILL after {self.cfg.kill_after:g} s), recording them cancelled by this shutdown, then "
                     "exiting")

    def notify(self) -> None:
        """Wake the loop: a slot's transfer thread has finished."""
        self.wakeups.notify()

    def wait(self, deadline: float) -> None:
        self._rung = self.wakeups.wait(max(0.0, deadline - self.clock.monotonic())) or self._rung

    def next_deadline(self) -> float:
        """When the loop next has something to do, on this host's monotonic clock."""
        mono = self.clock.monotonic()
        deadline = min(self._settle_due, self._record_due, self._index_due)
        if self._may_claim():  # a full agent does not poll the queue: no deadline for it (no busy loop)
            deadline = min(deadline, self._last_claim + self._poll)
        if self.cfg.schedules:
            deadline = min(deadline, self._schedules_due)
        for slot in self.slots.values():
            deadline = min(deadline, slot.due(mono, self.cfg.poll_seconds, self.cfg.kill_after,
                                              renewals=self.renew_inline))
            if slot.overtaken is not None:
                deadline = mono  # a refused renewal waits for the loop
        return mono if (self._freed or self._rung) and self._may_claim() else deadline

    # -- what its slots hold --------------------------------------------------------------------------------

    def room(self) -> Room:
        """What is free now: the offer less what its slots hold (the holdings kept in step with the slots)."""
        self.holdings.sync({job_id: slot.doc.spec for job_id, slot in self.slots.items()})
        return self.holdings.free()

    def _new_io(self, job_id: str, directory: str, attempt: int = 1) -> JobIO:
        return JobIO(self.store, job_id, directory, self.secrets, poll_seconds=self.cfg.poll_seconds,
                     stall_seconds=self.cfg.stall_seconds, log=self.log, notify=self.notify, clock=self.clock,
                     attempt=attempt)

    def drop(self, slot: Slot) -> None:
        self.slots.pop(slot.job_id, None)
        self._freed = True
        self.ctx.workspace.promise_done(slot.job_dir)  # its keeper (and one an earlier agent started) may go
        self.host.let_go(slot.keeper)
        self.ctx.workspace.release(slot.job_dir)

    def _reap_children(self) -> None:
        leaders = {slot.pgid: slot for slot in self.slots.values()
                   if slot.pgid is not None and slot.live and not slot.adopted}
        if not leaders and not self.host.reap_all:
            return
        for pid, ended in self.host.reap(leaders).items():
            leaders[pid].ended(ended)

    # -- the slow cadences ---------------------------------------------------------------------------------

    def _write_record(self) -> None:
        record = cadences.agent_record(self.ctx, self.room(), sorted(self.slots), stopping=self.stopping,
                                       generation=self._record_generation + 1)
        key = keys.agent(self.id)
        if self.clock.due():  # its write time, read back, tells where the store's clock stands
            self.clock.measure(self.store, key, lambda: self.store.put(key, d.encode(record)))
            cadences.say_skew(self.ctx)
        else:
            self.store.put(key, d.encode(record))  # only this agent writes its record
        self.recorded = True
        self._record_generation += 1
        self._record_due = self.clock.monotonic() + record["refresh_seconds"]
        # The live agents, its own record just written (a failed LIST keeps what it knew: the rank is only a hint),
        # while its passes see work to claim: an idle agent's rank spreads nothing, and it stays at one LIST a poll (a
        # pass that then meets work and loses a race, or finds an entry gone, lists them at once: _learn_fleet).
        if self._saw_work:
            self.guard(self.fleet.refresh, self.store, self.clock.wall(), self.clock.monotonic())

    def _settle_pass(self) -> None:
        self._settle_due = self.clock.monotonic() + self.cfg.settle_seconds
        cadences.settle_pass(self.ctx, self.runner, frozenset(self.slots), self._watch, self._record, self.guard)


def run_agent(store: ObjectStore, config: AgentConfig) -> int:
    return Agent(store, config).run()


def _stderr_line(line: str) -> None:
    """The agent's log line on stderr, other people's text in it escaped (runkit.core.printable): one line each."""
    from runkit.core.printable import printable

    sys.stderr.write(printable(line) + "\n")
    sys.stderr.flush()
