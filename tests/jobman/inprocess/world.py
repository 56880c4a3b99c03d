"""The in-process tier's world: a real supervisor (jobman.supervisor.owner.Supervisor, every decision its own) on a
real SQLite file, with a ManualClock for time and a process layer whose targets exist only here. Nothing sleeps:
when the supervisor sleeps (its poller's poll), the clock moves to the soonest of its timeout, the end of a target
and the next scripted event, the way procrastinate's InMemoryConnector drives its worker and as tests/stado/
inprocess.py drives stado's agent. The doorbell is the real FIFO, polled without waiting.

A target's argv is a tiny script the fake reads: ["run", "5"] runs 5 s and exits 0, ["run", "5", "exit", "3"] exits
3, ["run", "5", "ignore-term"] needs SIGKILL; an executable named "missing" cannot be started.

What happens to the job meanwhile (a cancel, a hold let go, a dependency finished, another supervisor taking the
job over) is scripted: `world.when(condition, action)` runs `action` once, the first time `condition()` holds as
the clock moves; `world.at(seconds, action)`, that many seconds of the world's time after its start.
"""
import errno
import os
import select

from jobman.handoff import doorbell
from jobman.core.home import Home
from jobman.store.trouble import PatientDatabase, connect
from jobman.core.model import JobState
from tests.scripted import ScriptedProcess
from jobman.store import database, queries, transitions
from jobman.supervisor import claim as claiming
from jobman.supervisor.owner import Supervisor
from runkit.system import proc
from runkit.core.clock import ManualClock
from runkit.core.hashing import sha256
from runkit.core.ids import uuid7

CREDENTIAL = b"c" * 32
WINDOWS = {"claim": 10.0, "lease": 15.0, "renew": 5.0, "poll": 30.0}
FAKE_FD = 1_000_000  # a fake target's exit descriptor: FAKE_FD + its pid (never a real descriptor)


class OutOfTime(BaseException):
    """The world's clock passed its limit: what the test waited for did not happen (a BaseException, so that the
    supervisor's own `except Exception` does not swallow it)."""


class TurnedLean(BaseException):
    """The supervisor exec'd into its lean form (the fake exec records the command and ends the run here)."""


class FakeTarget(ScriptedProcess):
    def __init__(self, pid: int, argv: list[str], env: dict, started: float):
        super().__init__(pid, list(argv), env, started)
        self.argv = list(argv)

    def status(self) -> int:
        return self.signal if self.signal is not None else self.exit_code << 8


class FakeProcesses:
    """jobman.supervisor.processes.Processes' interface over FakeTargets, which end on the world's clock or when
    signalled. The supervisor's own identity is this test process's, so that the lease round and reconciliation
    see it alive; `dead` holds identities (pid, start time) a test declares gone, `stopped` those it declares
    alive but stopped (SIGSTOP: they verify, but not as awake)."""

    def __init__(self, world: "World"):
        self.world = world
        self.targets: dict[int, FakeTarget] = {}
        self._next_pid = 50_000
        self.dead: set[tuple[int, int]] = set()
        self.stopped: set[tuple[int, int]] = set()
        self.lean = False
        self.execs: list[list[str]] = []

    def identity(self):
        return proc.self_identity()

    def spawn(self, executable, argv, env, *, stdin, stdout, stderr, cwd) -> int:
        if os.path.basename(executable or "") == "missing":
            raise OSError(errno.ENOENT, "No such file or directory")
        self._next_pid += 1
        self.targets[self._next_pid] = FakeTarget(self._next_pid, argv, env, self.world.clock.monotonic())
        return self._next_pid

    def target_identity(self, pid: int) -> tuple[int, str]:
        return pid * 10, "fake-boot"

    def exit_fd(self, pid: int) -> int:
        return FAKE_FD + pid

    def close_fd(self, fd: int) -> None:
        pass

    def reap(self) -> list[tuple[int, int]]:
        now, ended = self.world.clock.monotonic(), []
        for t in self.targets.values():
            if not t.reaped and not t.alive(now):
                t.reaped = True
                ended.append((t.pid, t.status()))
        return ended

    def signal_tree(self, sig: int) -> int:
        now, count = self.world.clock.monotonic(), 0
        for t in self.targets.values():
            if t.alive(now):
                t.signals.append(sig)
                count += 1
                if sig == 9 or not t.ignores_term:
                    t.ends, t.signal = now, sig
        return count

    def any_descendants(self) -> bool:
        now = self.world.clock.monotonic()
        return any(t.alive(now) for t in self.targets.values())

    def verify(self, pid, start_time, boot, awake: bool = False) -> bool:
        if (pid, start_time) in self.dead:
            return False
        if (pid, start_time) in self.stopped:
            return not awake
        return proc.verify(pid, start_time, boot, awake=awake)

    def watcher(self) -> "FakeWatch":
        return FakeWatch(self)

    def wait_child(self, pid: int) -> int | None:
        t = self.targets.get(pid)
        if t is None:
            return None
        self.world.clock.advance_to(t.ends)
        t.reaped = True
        return t.status()

    def poller(self) -> "FakePoller":
        return FakePoller(self.world)

    def sleep(self, seconds: float) -> None:
        self.world.advance(seconds)

    def lean_enabled(self) -> bool:
        return self.lean

    def exec(self, path: str, argv: list[str], env: dict) -> None:
        self.execs.append(list(argv))
        raise TurnedLean(argv)


class FakeWatch:
    """runkit.system.deathwatch.DeathWatch's interface over FakeProcesses.verify: a watched process has ended once
    it no longer verifies (a test declared it dead, or it really ended)."""

    def __init__(self, processes: FakeProcesses):
        self.processes = processes
        self.watched: dict = {}

    def watch(self, key, pid, start_time, boot) -> bool:
        if key in self.watched:
            return self.watched[key] == (pid, start_time, boot)
        if not self.processes.verify(pid, start_time, boot):
            return False
        self.watched[key] = (pid, start_time, boot)
        return True

    def ended(self) -> set:
        return {key for key, who in self.watched.items() if not self.processes.verify(*who)}

    def forget(self, key) -> None:
        self.watched.pop(key, None)

    def keys(self):
        return self.watched.keys()

    def __contains__(self, key) -> bool:
        return key in self.watched

    def close(self) -> None:
        self.watched.clear()


class FakePoller:
    """select.poll over the real doorbell FIFO (never waiting) and the fake targets' exit descriptors; a poll that
    finds nothing ready moves the world's clock instead of sleeping."""

    def __init__(self, world: "World"):
        self.world = world
        self.real = select.poll()
        self.fake: set[int] = set()

    def register(self, fd: int, mask: int) -> None:
        if fd >= FAKE_FD:
            self.fake.add(fd)
        else:
            self.real.register(fd, mask)

    def unregister(self, fd: int) -> None:
        if fd >= FAKE_FD:
            self.fake.discard(fd)
        else:
            self.real.unregister(fd)

    def _ready(self) -> list[tuple[int, int]]:
        now, targets = self.world.clock.monotonic(), self.world.processes.targets
        return self.real.poll(0) + [(fd, select.POLLIN) for fd in sorted(self.fake)
                                    if not targets[fd - FAKE_FD].alive(now)]

    def poll(self, timeout_ms: int | None = None) -> list[tuple[int, int]]:
        self.world.polls += 1
        ready = self._ready()
        if ready or timeout_ms == 0:
            return ready
        self.world.advance(None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000)
        return self._ready()


class CreepingClock(ManualClock):
    """A ManualClock that also moves `step` seconds at every reading of the wall clock, as a real one does
    between two statements: a decision that reads the time twice where it should read it once shows here."""

    __slots__ = ("step",)

    def __init__(self, start: float, step: float):
        super().__init__(start=start)
        self.step = step

    def wall(self) -> float:
        self.now += self.step
        return super().wall()


class World:
    """One jobman home (a real SQLite file), one ManualClock, the fake process layer, and the scripted events."""

    def __init__(self, tmp_path, start: float = 1_000.0, limit: float = 7 * 24 * 3600.0, creep: float = 0.0):
        self.home = Home(str(tmp_path))
        self.path = self.home.db
        self.clock = CreepingClock(start, creep) if creep else ManualClock(start=start)
        self.start, self.limit = start, limit
        self.home.ensure()  # its logs and bells directories, as the first command makes them
        self.conn = database.connect(self.path)  # the test's own connection: what commands would do
        self.processes = FakeProcesses(self)
        self.events: list[tuple] = []  # [(monotonic time or None, condition or None, action)]
        self.logs: list[str] = []
        self.polls = 0
        self.supervisors: dict[str, Supervisor] = {}

    # --- the world's time ---------------------------------------------------------------------------

    def now(self) -> float:
        """The wall clock, as the supervisor reads it (what the database's times are on)."""
        return self.clock.wall()

    def advance(self, seconds: float | None) -> None:
        """Move the clock by `seconds` (None: until something happens), stopping early at the next scripted time
        or target's end; then run what is due."""
        now = self.clock.monotonic()
        stops = [t.ends for t in self.processes.targets.values() if t.alive(now)]
        stops += [when for when, _, _ in self.events if when is not None and when > now]
        if seconds is not None:
            stops.append(now + seconds)
        if not stops:
            raise OutOfTime("the supervisor sleeps with nothing to wake it")
        self.clock.advance_to(min(stops))
        if self.clock.monotonic() - self.start > self.limit:
            raise OutOfTime(f"not within {self.limit} s of the world's time; log:\n" + "\n".join(self.logs))
        self.run_due()

    def run_due(self) -> None:
        now = self.clock.monotonic()
        for event in list(self.events):
            when, condition, action = event
            if (when is not None and when <= now) or (condition is not None and condition()):
                self.events.remove(event)
                action()

    def at(self, seconds: float, action) -> None:
        self.events.append((self.start + seconds, None, action))

    def when(self, condition, action) -> None:
        self.events.append((None, condition, action))

    # --- jobs -------------------------------------------------------------------------------------------

    def submit(self, argv=("run", "1"), *, dependencies=(), executable=None, **spec) -> str:
        job_id = uuid7()
        full = {"v": 1, "argv": list(argv), "executable": executable or f"/fake/{argv[0]}", "cwd": "/",
                "env_policy": "inherit", "env_overrides": {}, "env": {}, "umask": 0o022, "name": None,
                "dependencies": [], "not_before": None, "timeout": None, "kill_after": 3.0,
                "retry": {"retries": 0, "exit_codes": None, "delay": 0.0, "backoff": "constant", "max_delay": None,
                          "on_timeout": False}, "log": {"limit": 0, "separate_stderr": False},
                "group": database.DEFAULT_GROUP, "priority": 0, "windows": dict(WINDOWS), **spec}
        transitions.submit(self.conn, job_id=job_id, spec=full, dependencies=list(dependencies),
                           credential_hash=sha256(CREDENTIAL), clock=ManualClock(self.now(), 0.0))
        return job_id

    def store(self) -> PatientDatabase:
        return PatientDatabase(connect(self.path), self.path, self.logs.append, self.clock)

    def claim(self, job_id: str, supervisor_id: str | None = None, identity=None):
        """The supervisor's claim (jobman.supervisor.claim.claim) on the world's clock: (store, supervisor id,
        state as claimed). identity: another process's (pid, start_time, boot_id) to claim as (a peer)."""
        store, supervisor_id = self.store(), supervisor_id or uuid7()
        me = identity or self.processes.identity()
        state = claiming.claim(store, job_id, sha256(CREDENTIAL), supervisor_id, me, self.clock,
                               sleep=self.processes.sleep)
        return store, supervisor_id, state

    def supervisor(self, job_id: str) -> Supervisor:
        """A supervisor that has claimed the job, ready to run."""
        store, supervisor_id, state = self.claim(job_id)
        sup = Supervisor(store, self.home, job_id, supervisor_id, JobState.from_row(state), clock=self.clock,
                         processes=self.processes, log=self.logs.append)
        self.supervisors[job_id] = sup
        return sup

    def supervise(self, job_id: str) -> int:
        """Claim the job and supervise it to its end, in this process; the supervisor's exit code."""
        return self.supervisor(job_id).run()

    # --- what the test looks at and does ----------------------------------------------------------------

    def state(self, job_id: str) -> JobState:
        return JobState.from_row(queries.load_state(self.conn, job_id))

    def attempts(self, job_id: str) -> list:
        return queries.attempts(self.conn, job_id)

    def events_of(self, job_id: str) -> list[str]:
        return [e["kind"] for e in queries.events(self.conn, job_id)]

    def waiting_for(self, job_id: str, reason: str):
        return lambda: (s := self.state(job_id)).phase == "waiting" and s.waiting_for == reason

    def running(self, job_id: str):
        return lambda: self.state(job_id).phase == "running"

    def ring(self, job_id: str) -> None:
        doorbell.ring(self.home, job_id)

    def log(self) -> str:
        return "\n".join(self.logs)
