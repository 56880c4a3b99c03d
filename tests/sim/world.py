"""The simulated world: a clock, actors as greenlets, simulated processes, and the seeded scheduler.

Every actor runs the library's real code in a greenlet. Whenever that code makes a store request, the
store wrapper (store.py) switches to the scheduler, which picks the actor whose pending request runs
next, and may fail it, lose its answer, crash the actor instead, stall it or jump its clock. An actor
that waits (an agent between ticks) sleeps until a simulated time; when no actor is ready the clock
jumps to the next wake-up. Nothing here reads the real clock or the OS's randomness, so a run is a
function of its choices (choices.py): a seed reproduces it exactly.

A run has two phases: the main phase (faults on, submitters and cancellers at work), then the settling
phase (faults off, agents drain the queue and exit once idle, a fresh agent runs a leftovers pass), after
which the end-state invariants are checked.
"""
from greenlet import greenlet

from stado.objectstore.base import StoreUnavailable

from . import invariants
from .choices import Choices
from .store import SimBackend, SimStore, StoreServerClock
from .trace import Trace

EPOCH = 1_800_000_000.0  # simulated wall clock at the start (2027): documents carry plausible times

SLEEP, READY, DONE, CRASHED = "sleep", "ready", "done", "crashed"
OK, FAIL, LOST = "ok", "fail", "lost"


class Crash(BaseException):
    """Thrown into an actor to kill it between two requests. BaseException: the library's handlers of
    StoreError and CorruptDocument must not catch a crash."""


class Actor:
    """One actor: `run` is called in its greenlet with the actor as argument."""

    def __init__(self, sim: "Sim", name: str, kind: str, run, *, crashable: bool = True):
        self.sim, self.name, self.kind, self.run = sim, name, kind, run
        self.crashable = crashable
        self.state, self.wake, self.hold, self.skew = SLEEP, sim.now, 0.0, 0.0
        self.max_skew = 0.0             # the largest |skew| its clock has had (honest: within SKEW_BOUND all along)
        self.started = sim.now
        self.ended_at: float | None = None
        self.stalls: list[tuple[float, float]] = []  # (from, until) of each stall (cron-skipped spares those times)
        self.ignores_conditions = False  # its path to the store drops every condition (params.proxy)
        self.pending: tuple[str, str] | None = None
        self.fate = OK
        self.seen: dict[str, int] = {}  # job id -> highest generation of it this actor read or wrote
        self.versions: dict[str, object] = {}  # job record key -> the version this actor last read or wrote there
        self.model = None               # the SimAgent an agent actor drives
        self.companions: list[Actor] = []  # actors of the same process (an agent's renewals): crash and stop with it
        self.host, self.work_root, self.pid = "sim", "/nonexistent/stado-sim", 0  # an agent's host, and where on it
        self.glet = greenlet(self._body, parent=sim.main)
        self.priority = sim.ch.below(1000) if sim.p.priorities else 0

    def _body(self) -> None:
        try:
            self.run(self)
        except Crash:
            self.state = CRASHED
            return
        except Exception as e:  # a traceback in an actor is a finding, never swallowed
            invariants.actor_raised(self.sim, self, e)
            self.state = CRASHED
            return
        finally:
            self.ended_at = self.sim.now
        self.state = DONE

    @property
    def live(self) -> bool:
        return self.state in (SLEEP, READY)


class Proc:
    """A simulated process group: it exits on its own at `end`, or when its agent signals it."""

    __slots__ = ("pid", "job", "agent", "start", "end", "exit_code", "signal", "reaped", "requeues", "claim",
                 "directory", "host")

    def __init__(self, pid: int, job: str, agent: Actor, start: float, end: float, exit_code: int, requeues: int = 0,
                 claim: str | None = None, directory: str = ""):
        self.pid, self.job, self.agent, self.start, self.end = pid, job, agent, start, end
        self.exit_code, self.signal, self.reaped, self.requeues = exit_code, None, False, requeues
        self.claim = claim  # the claim (running record) this process is the attempt of
        self.directory, self.host = directory, agent.host  # where it runs: its job directory, on its agent's host

    def alive(self, now: float) -> bool:
        return now < self.end


class Sim:
    def __init__(self, params, choices: Choices, *, verbose: bool = False, after: int = 0):
        self.p, self.ch, self.verbose = params, choices, verbose
        self.after = after  # steps the run goes on after its first violation (to show what it leads to)
        self.now = EPOCH
        self.main = greenlet.getcurrent()
        self.backend = SimBackend(clock=StoreServerClock(self))
        self.store = SimStore(self, self.backend)
        self.trace = Trace(self)
        self.actors: list[Actor] = []
        self.current: Actor | None = None
        self.steps = 0
        self.settling = False
        self.draining = False  # settling, and every client done: idle agents exit
        self.faults = True
        self.procs: dict[int, Proc] = {}
        self.names: dict[str, str] = {}  # ids -> short names (J1, A1) for the trace
        self._counters = {"job": 0, "agent": 0, "nonce": 0, "pid": 100}
        # What the invariants need: jobs whose queue entry landed, acknowledged submissions and cancels,
        # attempts started, and the version -> generation of every job document written.
        self.landed: list[str] = []
        self.acked: list[str] = []
        self.depends: dict[str, list[tuple[str, str]]] = {}  # job -> its (condition, job id) dependencies, as submitted
        self.retry_at: dict[tuple, float] = {}  # (job, failures, requeues) -> a retry entry's retry_at (store time)
        self.cancel_acked: dict[str, int] = {}
        self.claimed_at: dict[str, int] = {}            # claim nonce -> step its running/ record landed
        self.terminal_at: dict[str, tuple] = {}         # job -> (step, state) of its first terminal record
        self.attempts: dict[tuple, int] = {}
        self.documents: dict[object, dict] = {}  # version -> decoded job document (see SimStore.document)
        self.deleted = False  # a delete removed something during this step
        self.violations: list = []
        self.stop_at: int | None = None  # set by the first violation: the run ends a few steps later
        self.restarts = 0
        # Cancels: what each report told its user (job -> (step, report kind, the state it said the job ends in)).
        self.cancel_said: dict[str, tuple] = {}
        # Schedules: the world's fire times, and for each the step and store time its job's queue entry landed.
        self.fire_times: list[float] = []
        self.fired: dict[float, tuple[int, float]] = {}
        self.promised: dict[str, float] = {}  # claim -> when its owner's last renewal promised to speak again
        self.pulsed: dict[str, float] = {}    # job -> when its heartbeat was last written
        self.cancel_taken: dict[str, float] = {}  # claim -> when a settler other than its owner first took its cancel
        self.settling_at: float | None = None     # when faults stopped
        # The hosts: each work root's agent locks (agent id -> its actor, while the lock file is there) and each job
        # directory's recorded exit status (what an agent writes as it reaps a job's shell).
        self.locks: dict[str, dict[str, Actor]] = {}
        self.exit_files: dict[str, tuple] = {}
        # Between each agent and its jobs' keepers: the promise of each job directory, and what a keeper that
        # stopped a job wrote first (stado/agent/keeper.py's promise.json and kept.json).
        self.promises: dict[str, dict] = {}
        self.kept: dict[str, dict] = {}

    # -- ids and nonces (new_nonce where the transitions make them, uuid7 are patched to these) ---------

    def _next(self, what: str) -> int:
        self._counters[what] += 1
        return self._counters[what]

    def new_job_id(self, now_ns=None) -> str:
        n = self._next("job")
        job_id = f"00000000-0000-7000-8000-{n:012x}"
        self.names[job_id] = f"J{n}"
        return job_id

    def new_agent_id(self, now_ns=None) -> str:
        n = self._next("agent")
        agent_id = f"00000000-0000-7000-a000-{n:012x}"
        self.names[agent_id] = f"agent-{n}"
        return agent_id

    def new_nonce(self) -> str:
        return f"{self._next('nonce'):024x}"

    def urandom(self, n: int) -> bytes:
        return self._next("nonce").to_bytes(n, "big")

    # -- time -------------------------------------------------------------------------------------------

    def wall(self) -> float:
        """The wall clock of the actor running now (its own skew: clocks jump per host)."""
        return self.now + (self.current.skew if self.current is not None else 0.0)

    # -- what actors call (inside their greenlet) -------------------------------------------------------

    def request(self, verb: str, key: str) -> tuple[Actor, str]:
        """Wait for the scheduler to let this store request run; its fate: OK, FAIL or LOST."""
        actor = self.current
        if actor is None or actor.state == CRASHED:
            raise Crash()
        actor.state, actor.pending = READY, (verb, key)
        self.main.switch()
        actor.pending = None
        return actor, actor.fate

    def sleep_until(self, t: float) -> None:
        actor = self.current
        actor.state, actor.wake = SLEEP, max(t, self.now + 0.001)
        self.main.switch()

    def spawn_actor(self, name: str, kind: str, run, *, start: float | None = None, crashable: bool = True) -> Actor:
        actor = Actor(self, name, kind, run, crashable=crashable)
        actor.wake = actor.started = self.now if start is None else start
        self.actors.append(actor)
        return actor

    # -- simulated processes (stado.agent's spawn, reap, group_alive, signal_group) ----------------------

    def new_pid(self) -> int:
        return self._next("pid")

    def start_process(self, agent: Actor, doc: dict, directory: str = "") -> int:
        pid = self._next("pid")
        duration = self.ch.uniform_ms(50, int(self.p.max_run * 1000))
        exit_code = 1 if self.ch.chance(self.p.exit_fail) else 0
        proc = Proc(pid, doc["id"], agent, self.now, self.now + duration, exit_code, doc.get("requeues", 0),
                    doc.get("claim"), directory)
        invariants.process_starts(self, proc, doc)
        self.procs[pid] = proc
        self.trace.event(agent, f"starts {self.names[doc['id']]} as process {pid} (failures {doc.get('failures', 0)}, "
                                f"runs {duration:.3f} s, exits {exit_code})")
        return pid

    def group_alive(self, pgid: int) -> bool:
        proc = self.procs.get(pgid)
        return proc is not None and proc.alive(self.now)

    def reap(self, pgid: int):
        proc = self.procs.get(pgid)
        if proc is None or proc.reaped or proc.alive(self.now):
            return None
        proc.reaped = True
        self.exit_files[proc.directory] = (proc.exit_code, proc.signal)  # written as it is reaped, as the agent does
        return (proc.exit_code, proc.signal)

    def exit_of(self, pgid: int):
        """How a process ended, once it has (what a pidfd held on it tells, whoever reaped it), else None."""
        proc = self.procs.get(pgid)
        if proc is None or proc.alive(self.now):
            return None
        return (proc.exit_code, proc.signal)

    def signal_group(self, pgid: int, sig) -> None:
        proc = self.procs.get(pgid)
        if proc is not None and proc.alive(self.now):
            invariants.process_stopped(self, self.current, proc)
            proc.end, proc.exit_code, proc.signal = self.now, None, int(sig)
            self.trace.event(self.current, f"stops process {pgid} of {self.names[proc.job]} (signal {int(sig)})")

    def next_exit(self, agent: Actor) -> float:
        ends = [p.end for p in self.procs.values() if p.agent is agent and p.alive(self.now)]
        return min(ends) if ends else float("inf")

    def end_of(self, pgid: int) -> float:
        """When that process ends on its own (inf once it has ended, or if there is none)."""
        proc = self.procs.get(pgid)
        return proc.end if proc is not None and proc.alive(self.now) else float("inf")

    # -- the scheduler ----------------------------------------------------------------------------------

    def run(self) -> None:
        from .actors import populate

        populate(self)
        try:
            self._schedule()
        finally:
            self._unwind()
        if not self.violations:
            invariants.at_end(self)

    def _schedule(self) -> None:
        from .actors import begin_settling, drain_when_clients_done

        while self.stop_at is None or self.steps < self.stop_at:
            self._wake_due()
            if self.settling and not self.draining:
                drain_when_clients_done(self)
            if not self.settling and self._main_phase_over():
                begin_settling(self)
                continue
            ready = [a for a in self.actors if a.state == READY and a.hold <= self.now]
            if not ready:
                upcoming = [max(a.wake, a.hold) for a in self.actors if a.state == SLEEP]
                upcoming += [a.hold for a in self.actors if a.state == READY]
                if not upcoming and not self.settling:
                    begin_settling(self)
                    continue
                if not upcoming or self._out_of_time():
                    break
                self.now = max(self.now, min(upcoming))
                continue
            if self._out_of_time():
                break
            self._step(self._pick(ready))

    def _unwind(self) -> None:
        """End every actor still suspended, so that no greenlet outlives its run (a suspended greenlet
        left to the garbage collector keeps its frames, and each run would leave more)."""
        for actor in self.actors:
            if actor.glet and not actor.glet.dead:
                was = actor.state
                actor.state = CRASHED
                self.current = actor
                try:
                    actor.glet.throw(Crash())
                except Crash:
                    pass
                actor.state = was
            actor.glet = None
        self.current = None

    def _main_phase_over(self) -> bool:
        if self.steps >= self.p.main_steps:
            return True
        if self.now - EPOCH < self.p.main_seconds:
            return False
        return not any(a.live for a in self.actors if a.kind in ("submitter", "canceller"))

    def _out_of_time(self) -> bool:
        return self.steps >= self.p.main_steps + self.p.settle_steps or self.now - EPOCH > self.p.horizon

    def _wake_due(self) -> None:
        """Let every actor whose sleep is over run up to its next request (or its end)."""
        woke = True
        while woke:
            woke = False
            for actor in self.actors:
                if actor.state == SLEEP and actor.wake <= self.now and actor.hold <= self.now:
                    self._resume(actor)
                    woke = True

    def _pick(self, ready: list[Actor]) -> Actor:
        """Which ready actor's request runs: uniformly at random, or (a priority run, as in PCT: Burckhardt et
        al., ASPLOS 2010) the ready actor of highest priority, priorities being drawn afresh now and then, so
        that one actor is held back for long stretches while the others move: the shape of most races."""
        if not self.p.priorities:
            return ready[self.ch.below(len(ready))]
        actor = max(ready, key=lambda a: a.priority)
        if self.ch.chance(self.p.p_reprioritise):
            actor.priority = self.ch.below(1000)
            actor = max(ready, key=lambda a: a.priority)
        return actor

    def _stall_chance(self, actor: Actor) -> float:
        """p_stall, or much more before a request of the run's slow kind (as FoundationDB's BUGGIFY makes
        chosen places slow): the windows between that request and its neighbours get explored."""
        slow = self.p.slow
        if slow is not None and actor.pending[0] == slow[0] and actor.pending[1].startswith(slow[1]):
            return 0.5
        return self.p.p_stall

    def _step(self, actor: Actor) -> None:
        """One scheduling decision: the actor's pending request runs (perhaps with a fault), and the actor
        goes on to its next request."""
        if self.faults:
            if actor.crashable and self.ch.chance(self.p.p_crash):
                return self._crash(actor)
            if actor.kind == "agent" and self.ch.chance(self.p.p_stop):
                return self._stop(actor)
            if self.ch.chance(self._stall_chance(actor)):
                # From 20 ms (a slow request) to stall_max (a process stopped, a host swapping), log-uniform.
                actor.hold = self.now + 0.02 * (self.p.stall_max / 0.02) ** (self.ch.below(1001) / 1000)
                actor.stalls.append((self.now, actor.hold))
                self.trace.event(actor, f"stalls until t={actor.hold - EPOCH:.3f}")
                return
            if self.ch.chance(self.p.p_jump):
                jump = self.ch.uniform_ms(1000, 600_000) * (1 if self.ch.below(2) else -1)
                actor.skew += jump
                actor.max_skew = max(actor.max_skew, abs(actor.skew))
                self.trace.event(actor, f"wall clock jumps {jump:+.3f} s")
        actor.fate = OK
        if self.faults and (self.p.fault_verbs is None or actor.pending[0] in self.p.fault_verbs):
            if self.ch.chance(self.p.p_fail):
                actor.fate = FAIL
            elif self.ch.chance(self.p.p_lost):
                actor.fate = LOST
        self.steps += 1
        self._resume(actor)
        invariants.after_step(self)
        self.now += self.ch.uniform_ms(0, 20)

    def _resume(self, actor: Actor) -> None:
        self.current = actor
        actor.glet.switch()
        self.current = None

    def _stop(self, actor: Actor) -> None:
        """SIGSTOP of an agent's whole process, its renewals included (the keepers of its jobs are processes of their
        own, and go on), from 20 ms to stall_max, log-uniform; then SIGCONT."""
        until = self.now + 0.02 * (self.p.stall_max / 0.02) ** (self.ch.below(1001) / 1000)
        self.trace.event(actor, f"is stopped (SIGSTOP) until t={until - EPOCH:.3f}")
        for held in [actor] + actor.companions:
            held.hold = max(held.hold, until)
            held.stalls.append((self.now, until))

    def _crash(self, actor: Actor) -> None:
        from .actors import after_crash

        self.trace.event(actor, "crashes" + (f" before its {actor.pending[0]} of {actor.pending[1]}"
                                             if actor.pending else ""))
        for dying in [actor] + [c for c in actor.companions if c.live]:
            dying.state = CRASHED
            dying.ended_at = self.now
            self.current = dying
            try:
                dying.glet.throw(Crash())
            except Crash:
                pass
            self.current = None
        after_crash(self, actor)


def unavailable(verb: str, key: str, landed: bool) -> StoreUnavailable:
    what = "landed, then the connection dropped" if landed else "connection reset before it landed"
    return StoreUnavailable(f"simulated fault: {verb} {key}: {what}")
