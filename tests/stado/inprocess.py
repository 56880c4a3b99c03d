"""The in-process tier's world: real agents (stado.agent.Agent, every decision its own) on a real in-memory store,
with a ManualClock for time and a process host whose processes exist only here. Nothing sleeps: a test steps the
agents and moves the clock to the next deadline, the way procrastinate's InMemoryConnector drives its worker. The
same shape as the simulator's (tests/sim/agent_model.py: SimHost, SimIO, SimWorkspace), without its scheduler.

A command is a tiny script the fake host reads: "run 5" runs 5 s and exits 0, "run 5 exit 3" exits 3, "run 5
ignore-term" needs SIGKILL; anything else runs 1 s and exits 0.
"""
import signal

from runkit.core.clock import Clock, ManualClock

from stado.agent import Agent, AgentConfig
from stado.objectstore.memory import MemoryStore
from tests.scripted import ScriptedProcess


class HostClock(Clock):
    """One host's view of a shared ManualClock: the same monotonic time, its wall clock off by `skew`."""

    __slots__ = ("base", "skew")

    def __init__(self, base: ManualClock, skew: float = 0.0):
        self.base, self.skew = base, skew

    def wall(self) -> float:
        return self.base.wall() + self.skew

    def monotonic(self) -> float:
        return self.base.monotonic()


class FakeProcess(ScriptedProcess):
    def __init__(self, pid: int, command: str, env: dict, started: float):
        super().__init__(pid, command.split(), env, started)
        self.command = command


class FakeHost:
    """ProcessHost's interface over FakeProcesses: they end on the clock, or when signalled."""

    reap_all = False

    def __init__(self, clock: Clock):
        self.clock = clock
        self.procs: dict[int, FakeProcess] = {}
        self._next_pid = 1000

    def spawn(self, command: str, env: dict, job_dir: str, cwd: str, output_path: str) -> dict:
        self._next_pid += 1
        self.procs[self._next_pid] = FakeProcess(self._next_pid, command, env, self.clock.monotonic())
        return {"pid": self._next_pid, "pgid": self._next_pid, "start_time": None, "boot_id": "fake", "work_dir": cwd,
                "job": env.get("WC_JOB_ID"), "attempt_started": env.get("WC_JOB_STARTED_AT")}

    def reap(self, pids) -> dict:
        ended = {}
        for pid in pids:
            p = self.procs.get(pid)
            if p is not None and not p.reaped and not p.alive(self.clock.monotonic()):
                p.reaped = True
                ended[pid] = (None, p.signal) if p.signal is not None else (p.exit_code, None)
        return ended

    def alive(self, process) -> bool:
        p = self.procs.get(process["pgid"]) if process else None
        return p is not None and p.alive(self.clock.monotonic())

    def signal(self, process, sig) -> int:
        p = self.procs.get(process["pgid"]) if process else None
        if p is None or not p.alive(self.clock.monotonic()):
            return 0
        p.signals.append(int(sig))
        if int(sig) == signal.SIGKILL or not p.ignores_term:
            p.ends, p.signal = self.clock.monotonic(), int(sig)
        return 1

    def users_of(self, directory: str) -> list[int]:
        return []

    def identity(self, work_root: str) -> dict:
        return {"pid": 1, "start_time": 1, "boot_id": "fake", "pid_ns": "fake", "machine_id": "fake",
                "work_root": work_root}

    def owner_state(self, record) -> str:
        return "unknown"  # no agent of this world runs on a host another can see

    def keep(self, spec):
        return None  # its processes live here alone: no keeper outlives the agent

    def keeper_alive(self, job_dir: str) -> bool:
        return False

    def let_go(self, handle) -> None:
        pass

    def watch_exit(self, process):
        return None

    def exit_of_watched(self, handle):
        return None

    def found_process(self, pids, job_id, started_at):
        return None

    def of_job(self, job_id: str) -> list[FakeProcess]:
        return [p for p in self.procs.values() if p.env.get("WC_JOB_ID") == job_id]


class FakeIO:
    """A slot's transfers: nothing to move; what the agent tells the job's output is kept."""

    output_path = "/nonexistent/stado-inprocess/output.log"

    def __init__(self, inputs_ready: bool = True):
        self.told: list[str] = []
        self.inputs_ready = inputs_ready
        self.cancelled = False

    def inputs(self, refs, work_dir):
        return ("done", []) if self.inputs_ready else ("waiting", None)

    def inputs_in(self) -> bool:
        return False

    def tell(self, message: str) -> None:
        self.told.append(message)

    def cancel(self) -> None:
        self.cancelled = True

    def close(self, upload_artifacts: bool):
        return "done", None


class FakeWorkspace:
    """The jobs' directories, none on disk (the simulator's agents use it too)."""

    def __init__(self, root: str = "/nonexistent/stado-inprocess", stado_bin: str = "stado"):
        self.root, self._stado_bin = root, stado_bin

    def prepare(self, job_id: str, started_at: str | None) -> str:
        return f"{self.root}/jobs/{job_id}"

    def stado_bin(self, directory: str) -> str:
        return self._stado_bin

    def inputs_file(self, directory: str, inputs_json: str) -> str:
        return f"{directory}/inputs.json"

    def take(self, directory: str) -> None:
        pass

    def release(self, directory: str) -> None:
        pass

    def lock_state(self, agent_id: str) -> str:
        return "absent"

    def directory_of(self, doc) -> str:
        return f"{self.root}/jobs/{doc.id}"

    def exit_status(self, directory: str):
        return None

    def promise(self, directory: str, record: dict) -> None:
        pass

    def promise_done(self, directory: str) -> None:
        pass

    def kept(self, directory: str):
        return None


class World:
    """One store, one ManualClock, and the agents a test adds (each its own host, work root and log)."""

    def __init__(self, tmp_path, start: float = 1_000.125):  # not whole seconds: the store is not S3
        self.tmp_path = tmp_path
        self.clock = ManualClock(start=start)
        self.store = MemoryStore(clock=self.clock)  # the store stamps `modified` by the same time
        self.agents: list[Agent] = []
        self.logs: dict[str, list[str]] = {}
        self.done: list[Agent] = []  # agents whose step said they are finished

    def agent(self, name: str = "a", *, skew: float = 0.0, inputs_ready: bool = True, **settings) -> Agent:
        config = dict(work_root=str(self.tmp_path / name), stado_bin="stado", host=name, poll_seconds=1.0,
                      settle_seconds=5.0, memory=None, cores=4, kill_after=3.0, schedules=False)
        config.update(settings)
        lines = self.logs.setdefault(name, [])
        host_clock = HostClock(self.clock, skew)
        agent = Agent(self.store, AgentConfig(**config), log=lines.append, host=FakeHost(host_clock), clock=host_clock,
                      workspace=FakeWorkspace(), new_io=lambda job_id, directory, attempt=1: FakeIO(inputs_ready))
        agent.begin()
        self.agents.append(agent)
        return agent

    def step(self, agents=None) -> None:
        """One pass of each agent (a stopped one is left out), then the clock moves to the soonest deadline."""
        agents = [a for a in (agents or self.agents) if a not in self.done]
        for agent in agents:
            if agent.step():
                self.done.append(agent)
        deadlines = [a.next_deadline() for a in agents if a not in self.done]
        self.clock.advance_to(max(min(deadlines, default=self.clock.now), self.clock.now + 0.001))

    def run_until(self, predicate, *, agents=None, limit: float = 600.0):
        """Step until `predicate()` holds; fails once the clock has moved `limit` seconds."""
        until = self.clock.now + limit
        while not (got := predicate()):
            assert self.clock.now < until, f"not within {limit} s of the agents' time: {self.logs}"
            self.step(agents)
        return got

    def log(self, name: str = "a") -> str:
        return "\n".join(self.logs[name])
