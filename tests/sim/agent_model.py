"""The agent in the simulator: stado.agent.Agent itself, its loop (Agent.loop), its claim pass
(agent.claims.ClaimPass), its slots (agent.runner.SlotRunner: renew, overtaken, re-adoption; agent.slotend: finish,
settle), its reaper's pass and its index check, unchanged. Only what touches the host is the simulator's, each
passed to the Agent as the real one is (the in-process tests, tests/stado/inprocess.py, pass the same kinds):

- the host's clocks (runkit.clock.Clock): the simulated time, with the agent's host's own skew on its wall clock;
- the process host (agent.processhost.ProcessHost): spawn, reap, alive, signal are simulated processes that exit
  on their own after a drawn time with a drawn status, or when signalled (world.Sim);
- a slot's transfers (agent.jobio.JobIO runs them on threads): nothing to move, no output simulated;
- the job directories (agent.workspace.Workspace): none on disk (tests/stado/inprocess.py's FakeWorkspace);
- the loop's wait (a simulated sleep, woken early when one of its processes exits, as SIGCHLD wakes the real
  one), and run()'s lock file and signals (left out);
- ids, nonces and the claim back-off's randomness are the simulator's while a run lasts (patches.py).
"""

from runkit.clock import Clock

from stado.agent import Agent, AgentConfig
from stado.storecheck import ensure_safe
from tests.stado.inprocess import FakeWorkspace

from . import invariants


class SimClock(Clock):
    """An agent's host clocks in a run: the simulated time; its wall clock off by its host's skew (which jumps)."""

    __slots__ = ("actor", "sim")

    def __init__(self, sim, actor):
        self.sim, self.actor = sim, actor

    def wall(self) -> float:
        return self.sim.now + self.actor.skew

    def monotonic(self) -> float:
        return self.sim.now


class SimIO:
    """A slot's transfers: nothing to move in the simulator."""

    output_path = "/nonexistent/stado-sim/output.log"

    def inputs(self, refs, work_dir):
        return "done", []

    def inputs_in(self) -> bool:
        return False

    def tell(self, message: str) -> None:
        pass

    def cancel(self) -> None:
        pass

    def close(self, upload_artifacts: bool):
        return "done", None


class SimHost:
    """ProcessHost's interface over the simulator's processes."""

    reap_all = False

    def __init__(self, sim, actor):
        self.sim, self.actor = sim, actor

    def spawn(self, command, env, job_dir, cwd, output_path) -> dict:
        pid = self.sim.start_process(self.actor, self._doc(env["WC_JOB_ID"]))
        return {"pid": pid, "pgid": pid, "start_time": None, "boot_id": "sim", "work_dir": cwd}

    def _doc(self, job_id: str) -> dict:
        return self.actor.model.slots[job_id].doc

    def reap(self, pids) -> dict:
        ended = {}
        for pid in pids:
            got = self.sim.reap(pid)
            if got is not None:
                ended[pid] = got
        return ended

    def alive(self, process) -> bool:
        return bool(process) and self.sim.group_alive(process["pgid"])

    def signal(self, process, sig) -> int:
        if process:
            self.sim.signal_group(process["pgid"], sig)
        return 1

    def users_of(self, directory: str) -> list[int]:
        return []


class SimAgent(Agent):
    def __init__(self, sim, actor, *, slots: int, poll_seconds: float, settle_seconds: float, schedules: bool):
        config = AgentConfig(work_root="/nonexistent/stado-sim", stado_bin="stado", slots=slots,
                             poll_seconds=poll_seconds, host="sim", cores=4, memory=None, kill_after=2.0,
                             settle_seconds=settle_seconds, keep_work=True, schedules=schedules)
        super().__init__(sim.store, config, log=lambda line: sim.trace.event(actor, line.split(": ", 1)[-1]),
                         host=SimHost(sim, actor), clock=SimClock(sim, actor),
                         workspace=FakeWorkspace("/nonexistent/stado-sim"),
                         new_io=lambda job_id, directory, attempt=1: SimIO())
        self.sim, self.actor = sim, actor
        self.job_env.clear()  # the jobs' environment is not simulated

    def log(self, message: str) -> None:
        if self.sim.verbose:  # only a replayed run prints its trace
            super().log(message)

    def run(self) -> int:
        """Agent.run minus the lock file and signals: the store probe (its verdict on this agent's own path to
        the store), then the loop (whose first cadence writes the agents/ record and measures the store's clock)."""
        ensure_safe(self.store, log=self.log)
        self.cadences()
        self.loop()
        return 0

    def wait(self, deadline: float) -> None:
        invariants.agent_idles(self.sim, self.actor)
        self.sim.sleep_until(min(deadline, self.sim.next_exit(self.actor)))

