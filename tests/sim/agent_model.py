"""The agent in the simulator: stado.agent.Agent itself, its loop (Agent.loop), its claim pass
(agent.claim_pass.ClaimPass), its slots (agent.runner.SlotRunner: renew, overtaken, re-adoption; agent.slotend: finish,
settle), its reaper's pass and its index check, unchanged. Only what touches the host is the simulator's, each
passed to the Agent as the real one is (the in-process tests, tests/stado/inprocess.py, pass the same kinds):

- the host's clocks (runkit.core.clock.Clock): the simulated time, with the agent's host's own skew on its wall clock;
- the process host (agent.processhost.ProcessHost): spawn, reap, alive, signal are simulated processes that exit
  on their own after a drawn time with a drawn status, or when signalled (world.Sim);
- a slot's transfers (agent.jobio.JobIO runs them on threads): nothing to move, no output simulated;
- the job directories (agent.workspace.Workspace): none on disk, but kept per host and work root (SimWorkspace):
  each agent's lock (held while it lives, free once it is gone, tidied away when seen free), and each directory's
  recorded exit status, so the restart check (agent.takeover) runs as it does on a real host;
- its renewals: Agent.renewals, run by an actor of their own (the agent's thread), crashed and stopped with it;
- the loop's wait (a simulated sleep, woken early when one of its processes exits, as SIGCHLD wakes the real
  one), and run()'s lock file and signals (left out);
- ids, nonces and the claim back-off's randomness are the simulator's while a run lasts (patches.py).
"""

from runkit.core.clock import Clock

from stado.agent import Agent, AgentConfig
from stado.agent.hostfiles import attempt_tag
from stado.store.guarantees import ensure_safe
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

    def boottime(self) -> float:
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
    """ProcessHost's interface over the simulator's processes, on the agent's host."""

    reap_all = False

    def __init__(self, sim, actor):
        self.sim, self.actor = sim, actor

    def spawn(self, command, env, job_dir, cwd, output_path) -> dict:
        pid = self.sim.start_process(self.actor, self._doc(env["WC_JOB_ID"]), job_dir)
        return {"pid": pid, "pgid": pid, "start_time": None, "boot_id": "sim", "work_dir": cwd,
                "job": env["WC_JOB_ID"], "attempt_started": env.get("WC_JOB_STARTED_AT")}

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

    def identity(self, work_root: str) -> dict:
        """The agent as its running records name it: its pid, in its host's one pid space (a boot that never ends)."""
        return {"pid": self.actor.pid, "start_time": 1, "boot_id": f"boot-{self.actor.host}",
                "pid_ns": f"ns-{self.actor.host}", "machine_id": self.actor.host, "work_root": work_root}

    def owner_state(self, record) -> str:
        """runkit.system.proc.process_here on the simulated hosts: an agent of this host is alive until it crashed or ended
        (a stopped one is alive); one of another host cannot be told."""
        if not isinstance(record, dict) or record.get("pid_ns") != f"ns-{self.actor.host}":
            return "unknown"
        owner = next((a for a in self.sim.actors if a.kind == "agent" and a.pid == record.get("pid")), None)
        return "alive" if owner is not None and owner.live else "gone"

    def users_of(self, directory: str) -> list[int]:
        return [p.pid for p in self.sim.procs.values()
                if p.directory == directory and p.host == self.actor.host and p.alive(self.sim.now)]

    def found_process(self, pids, job_id, started_at):
        pid = min(pids)
        return {"pid": pid, "pgid": pid, "start_time": None, "boot_id": "sim", "job": job_id,
                "attempt_started": started_at}

    def keep(self, spec: dict):
        """The job's keeper: an actor of its own on this host (actors._keeper), which outlives its agent."""
        from .actors import spawn_keeper

        return spawn_keeper(self.sim, self.actor, spec)

    def keeper_alive(self, job_dir: str) -> bool:
        return any(a.kind == "keeper" and a.live and a.spec["job_dir"] == job_dir and a.host == self.actor.host
                   for a in self.sim.actors)

    def let_go(self, handle) -> None:
        if handle is not None and handle.live:
            handle.released = True
            if handle.state == "sleep":
                handle.wake = self.sim.now

    def watch_exit(self, process):
        return None if not process else process["pgid"]

    def exit_of_watched(self, handle):
        return None if handle is None else self.sim.exit_of(handle)


class SimWorkspace(FakeWorkspace):
    """The job directories of an agent's work root, with its agents' locks and its recorded exit statuses."""

    def __init__(self, sim, actor):
        super().__init__(actor.work_root)
        self.sim, self.actor = sim, actor

    def prepare(self, job_id: str, started_at: str | None) -> str:
        return f"{self.root}/jobs/{job_id}.{attempt_tag(started_at)}"

    def lock_state(self, agent_id: str) -> str:
        locks = self.sim.locks.get(self.root, {})
        holder = locks.get(agent_id)
        if holder is None:
            return "absent"
        if holder.live:
            return "held"
        del locks[agent_id]  # a dead agent's lock: tidied away once seen free, as hostfiles.agent_lock does
        return "free"

    def directory_of(self, doc) -> str:
        work_dir = (doc.process or {}).get("work_dir")
        if isinstance(work_dir, str) and work_dir.endswith("/work"):
            return work_dir[:-len("/work")]
        root = (doc.owner_process or {}).get("work_root") or self.root
        return f"{root}/jobs/{doc.id}.{attempt_tag(doc.started_at)}"

    def exit_status(self, directory: str):
        return self.sim.exit_files.get(directory)

    def promise(self, directory: str, record: dict) -> None:
        self.sim.promises[directory] = dict(record)  # the simulated time is every host's CLOCK_BOOTTIME

    def promise_done(self, directory: str) -> None:
        found = self.sim.promises.get(directory)
        if found is not None:
            found["done"] = True

    def kept(self, directory: str):
        return self.sim.kept.get(directory)


class SimAgent(Agent):
    def __init__(self, sim, actor, *, slots: int, poll_seconds: float, settle_seconds: float, schedules: bool):
        config = AgentConfig(work_root=actor.work_root, stado_bin="stado", slots=slots,
                             poll_seconds=poll_seconds, host=actor.host, cores=4, memory=None, kill_after=2.0,
                             settle_seconds=settle_seconds, keep_work=True, schedules=schedules)
        super().__init__(sim.store, config, log=lambda line: sim.trace.event(actor, line.split(": ", 1)[-1]),
                         host=SimHost(sim, actor), clock=SimClock(sim, actor),
                         workspace=SimWorkspace(sim, actor),
                         new_io=lambda job_id, directory, attempt=1: SimIO())
        self.sim, self.actor = sim, actor
        self.job_env.clear()  # the jobs' environment is not simulated

    def log(self, message: str) -> None:
        if self.sim.verbose:  # only a replayed run prints its trace
            super().log(message)

    def run(self) -> int:
        """Agent.run minus the lock file and signals: its lock taken (in the simulated work root), the store probe
        (its verdict on this agent's own path to the store), its renewals started (an actor of their own), then
        begin (the agents/ record, which measures the store's clock, and the restart check) and the loop."""
        self.sim.locks.setdefault(self.cfg.work_root, {})[self.id] = self.actor
        ensure_safe(self.store, log=self.log, clock=self.clock)
        self.renew_inline = False
        from .actors import spawn_renewals

        spawn_renewals(self.sim, self.actor)
        self.begin()
        self.loop()
        return 0

    def wait(self, deadline: float) -> None:
        invariants.agent_idles(self.sim, self.actor)
        self.sim.sleep_until(min(deadline, self.sim.next_exit(self.actor)))

    def notify(self) -> None:
        """A refused renewal (or a transfer) wants the loop: it wakes at once, as the real agent's wake pipe does."""
        if self.actor.state == "sleep":
            self.actor.wake = self.sim.now
