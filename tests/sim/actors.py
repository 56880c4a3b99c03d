"""The actors of a run, each the library's real code in a greenlet: agents (agent_model.SimAgent, whose
loop also runs the reaper's pass and the leftovers pass), a submitter (submission.submit), cancellers
(jobs.cancel), and restarting workers (an agent that crashed is replaced by a new agent on the same host,
which starts with its restart check and leftovers pass).
"""
from stado import jobs, submission
from stado.errors import Conflict, JobNotFound
from stado.objectstore.base import StoreError
from stado.spec import JobSpec

from .agent_model import SimAgent
from .world import EPOCH

CANCEL_WINDOW = 6.0   # cancels are aimed at jobs during the first seconds of the main phase
SUBMIT_GAP = 1000     # at most this many ms between two submissions


def populate(sim) -> None:
    p = sim.p
    for _ in range(p.agents):
        spawn_agent(sim, start=sim.now + sim.ch.uniform_ms(0, 500))
    sim.spawn_actor("submit-1", "submitter", _submitter)
    for i in range(p.cancels):
        sim.spawn_actor(f"cancel-{i + 1}", "canceller", _canceller,
                        start=sim.now + sim.ch.uniform_ms(0, int(CANCEL_WINDOW * 1000)))


def spawn_agent(sim, *, start: float, name: str | None = None):
    actor = sim.spawn_actor(name or "agent-?", "agent", _agent, start=start)
    actor.model = SimAgent(sim, actor, slots=sim.p.slots, poll_seconds=sim.p.poll, settle_seconds=sim.p.settle_every)
    actor.name = name or sim.names[actor.model.id]
    return actor


def after_crash(sim, actor) -> None:
    """A restarting worker: a crashed agent is replaced on the same host after a moment."""
    if actor.kind == "agent" and sim.restarts < sim.p.restarts and not sim.settling:
        sim.restarts += 1
        new = spawn_agent(sim, start=sim.now + sim.ch.uniform_ms(200, 3000))
        sim.trace.event(new, f"will start at t={new.wake - EPOCH:.3f}, replacing {actor.name}")


def begin_settling(sim) -> None:
    """Faults stop, and a fresh agent comes to finish what the crashed ones left (its leftovers pass at
    start, then claims). Agents exit once idle, but only after the last client is done (drain_when_clients_done)."""
    sim.settling, sim.faults = True, False
    sim.trace.event(None, "settling: faults off, agents drain the queue and exit once idle")
    spawn_agent(sim, start=sim.now + 0.5, name="agent-last")
    drain_when_clients_done(sim)


def drain_when_clients_done(sim) -> None:
    """Once settling and no submitter or canceller is still at work (one may be stalled in a request that
    lands late), every live agent exits once it is idle: a fleet keeps serving while its users submit."""
    if sim.draining or any(a.live for a in sim.actors if a.kind in ("submitter", "canceller")):
        return
    sim.draining = True
    for actor in sim.actors:
        if actor.kind == "agent" and actor.live:
            actor.model.cfg.until_idle = True


# -- the actors' bodies --------------------------------------------------------------------------------

def _agent(actor) -> None:
    actor.model.run()


def _submitter(actor) -> None:
    """Submits p.jobs jobs one `stado submit` at a time; a submit the store failed is tried once more, as a
    user would (it may make a second job if the first one's write landed: both must be accounted for)."""
    sim = actor.sim
    for n in range(sim.p.jobs):
        sim.sleep_until(sim.now + sim.ch.uniform_ms(0, SUBMIT_GAP))
        spec = JobSpec(command=f"sim job {n + 1}", retries=sim.p.retries)
        for _ in range(2):
            try:
                docs = submission.submit(sim.store, [submission.Submission(spec)], submitter="submit-1@sim",
                                         now=sim.wall())
            except (StoreError, Conflict) as e:
                sim.trace.event(actor, f"submit failed: {type(e).__name__}; submitting again")
                continue
            sim.acked.append(docs[0]["id"])
            sim.trace.event(actor, f"submit acknowledged: {sim.names[docs[0]['id']]}")
            break


def _canceller(actor) -> None:
    """`stado cancel` of one job the user knows (an acknowledged submission); a failed command is run
    again, up to three times. An acknowledged cancel is remembered for the invariants."""
    sim = actor.sim
    while not sim.acked:
        if sim.settling or sim.now - EPOCH > sim.p.main_seconds:
            return  # nothing was ever submitted: nothing to cancel
        sim.sleep_until(sim.now + 0.5)
    job = sim.acked[sim.ch.below(len(sim.acked))]
    for _ in range(3):
        try:
            report = jobs.cancel(sim.store, job, by=f"{actor.name}@sim", now=sim.wall())
        except (StoreError, Conflict) as e:
            sim.trace.event(actor, f"cancel {sim.names[job]} failed: {type(e).__name__}; trying again")
            continue
        except JobNotFound:
            sim.trace.event(actor, f"cancel {sim.names[job]}: no such job")
            return
        sim.trace.event(actor, f"cancel {sim.names[job]}: {report.kind}")
        cancelled = report.kind in ("cancelled_queued", "cancelled_running", "already_cancelling") or (
            report.kind == "already_terminal" and report.view.state == "cancelled")
        if cancelled:
            sim.cancel_acked.setdefault(job, sim.steps)
        return
