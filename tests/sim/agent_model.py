"""The agent in the simulator: stado.agent.Agent itself, with only its process-bound parts played by the
simulator. This is the one place that knows how agent.py is built; once agent.py is split into a slot
state machine and its process shell, this module shrinks to driving that state machine.

Kept from the real Agent, unchanged: the claim pass (_claim_pass: list queue/, pause record, read,
admission, jobs.claim), the tick (_tick: reap, renew with jobs.renew, the pulse, _fenced, _stop), the finish
(_finish, _settle_slot: jobs.finish, jobs.settle), the cancel (_settle_cancel) and the
leftovers pass (jobs.settle_leftovers). Replaced here:
- run(): the same loop, minus the lock file, signals and the agents/ record; its wait is a simulated sleep
  (woken early when one of its processes exits, as SIGCHLD wakes the real one);
- _start(): the same slot bookkeeping, minus the work directory; the process is a simulated one that
  exits on its own after a drawn time with a drawn status (see world.Sim.start_process);
- the module's clock, shuffle, uuid7 and process calls (time, random, uuid7, group_alive, signal_group,
  reap) are the simulator's while a run lasts (patches.py).
"""
import math

from stado import agent as real
from stado.agent import Agent, AgentConfig, Slot

from . import invariants


class SimIO:
    """A slot's transfers (stado.jobio.JobIO runs them on threads): nothing to move in the simulator."""

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


class SimAgent(Agent):
    def __init__(self, sim, actor, *, slots: int, poll_seconds: float, settle_seconds: float):
        config = AgentConfig(work_root="/nonexistent/stado-sim", stado_bin="stado", slots=slots,
                             poll_seconds=poll_seconds, host="sim", cores=4, memory=None, kill_after=2.0,
                             settle_seconds=settle_seconds, keep_work=True)
        super().__init__(sim.store, config, log=lambda line: sim.trace.event(actor, line.split(": ", 1)[-1]))
        self.sim, self.actor = sim, actor
        self._record_due = math.inf  # the agents/ record is not simulated (only this agent writes it)

    def log(self, message: str) -> None:
        if self.sim.verbose:  # only a replayed run prints its trace
            super().log(message)

    def run(self) -> int:
        """Agent.run's loop (see the module's docstring for what is left out)."""
        time = real.time
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
            if time.monotonic() >= self._settle_due:
                self._settle_leftovers_now()
            invariants.agent_idles(self.sim, self.actor)
            # Agent._next_deadline counts the claim poll even when no claim can be made (slots full, or
            # stopping): its deadline is then in the past and the real loop spins (a busy loop, reported).
            # Here that poll is left out while no claim can be made, which changes no request, only CPU.
            can_claim = not self.stopping and len(self.slots) < self.cfg.slots
            deadline = self._next_deadline(last_claim if can_claim else math.inf)
            self.sim.sleep_until(min(deadline, self.sim.next_exit(self.actor)))
        return 0

    def _start(self, doc: dict, version, *, inputs_missing: str | None, verify=None) -> None:
        """Agent._start for a job with no inputs, minus the work directory."""
        time = real.time
        job_id = doc["id"]
        slot = Slot(doc, version, job_dir=f"/nonexistent/stado-sim/jobs/{job_id}", verify=verify)
        self.slots[job_id] = slot
        self.log(f"{job_id}: claimed ({doc['spec']['command'][:80]!r})")
        now = time.time()
        slot.started_at = now
        slot.started_mono = time.monotonic()
        slot.renew_due = slot.started_mono + self.cfg.poll_seconds
        slot.renew_due_wall = now + self.cfg.poll_seconds
        slot.io = SimIO()  # inputs, output and artifacts are not simulated (only a job's own agent writes them)
        if inputs_missing:
            return self._fail_before_start(slot, "input_unavailable", inputs_missing)
        self._launch(slot)

    def _launch(self, slot: Slot) -> None:
        """Agent._launch with a simulated process (after the same check of a claim held unverified)."""
        if slot.verify is not None and not self._verified(slot):
            return
        slot.launched = True
        pid = self.sim.start_process(self.actor, slot.doc)
        slot.pgid = pid
        slot.process = {"pid": pid, "pgid": pid, "start_time": None, "boot_id": "sim", "work_dir": slot.job_dir}
