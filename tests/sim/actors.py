"""The actors of a run, each the library's real code in a greenlet: agents (agent_model.SimAgent, whose
loop also runs the reaper's pass and the leftovers pass), a submitter (submission.submit), cancellers
(jobs.cancel), and restarting workers (an agent that crashed is replaced by a new agent on the same host,
which starts with its restart check and leftovers pass).
"""
from stado import jobs
from stado.core import keys
from stado.core.dependencies import CONDITIONS
from stado.queue import schedules, submission
from stado.core.errors import Conflict, JobNotFound, NotWritten, OutcomeUnknown
from stado.objectstore.base import StoreError
from stado.core.spec import JobSpec
from stado.store.guarantees import UnsafeStore

from . import invariants
from .agent_model import SimAgent
from .world import EPOCH

CANCEL_WINDOW = 6.0   # cancels are aimed at jobs during the first seconds of the main phase
SUBMIT_GAP = 1000     # at most this many ms between two submissions
AIM_WINDOW = 20.0     # an aimed canceller watches for its moment this long, then cancels anyway
# The schedule of a world with one (params.schedule): three fire times in the first seconds of the run
# (EPOCH is 08:00:00 UTC; the seconds field comes first).
SCHEDULE_CRON = "2,4,7 0 8 * * *"
SCHEDULE_WATCH = 10.0  # an honest agent live this long after a fire time must have fired it


def populate(sim) -> None:
    p = sim.p
    if p.schedule:
        _add_schedule(sim)
    proxied = sim.ch.below(p.agents) if p.proxy else None
    for n in range(p.agents):
        agent = spawn_agent(sim, start=sim.now + sim.ch.uniform_ms(0, 500))
        agent.ignores_conditions = n == proxied
    sim.spawn_actor("submit-1", "submitter", _submitter)
    for i in range(p.cancels):
        sim.spawn_actor(f"cancel-{i + 1}", "canceller", _canceller,
                        start=sim.now + sim.ch.uniform_ms(0, int(CANCEL_WINDOW * 1000)))


def spawn_agent(sim, *, start: float, name: str | None = None, replacing=None):
    """An agent on its host (round robin over p.hosts; a replacement on the host, and with the work root, of the
    agent it replaces), on the host's shared work root or one of its own (p.own_roots)."""
    actor = sim.spawn_actor(name or "agent-?", "agent", _agent, start=start)
    agents = [a for a in sim.actors if a.kind == "agent"]
    actor.pid = sim.new_pid()
    if replacing is not None:
        actor.host, actor.work_root = replacing.host, replacing.work_root
    else:
        actor.host = f"h{(len(agents) - 1) % sim.p.hosts + 1}"
        actor.work_root = (f"/sim/{actor.host}/work-{len(agents)}" if sim.p.own_roots else f"/sim/{actor.host}/work")
    actor.model = SimAgent(sim, actor, slots=sim.p.slots, poll_seconds=sim.p.poll, settle_seconds=sim.p.settle_every,
                           schedules=sim.p.schedule)
    actor.name = name or sim.names[actor.model.id]
    if sim.p.skew:  # a host whose clock is off the store's from the start (0, ahead or behind)
        actor.skew = (0.0, sim.p.skew, -sim.p.skew)[sim.ch.below(3)]
        actor.max_skew = abs(actor.skew)
        if actor.skew:
            sim.trace.event(actor, f"wall clock {actor.skew:+.0f} s off the store's")
    return actor


def _add_schedule(sim) -> None:
    """The world's schedule, written straight into the store before anything runs (not a request)."""
    spec = JobSpec(command="sim tick").to_json()
    doc = schedules.add(sim.backend, "tick", SCHEDULE_CRON, spec, by="sim", now=EPOCH)
    t = EPOCH
    while True:
        t = schedules.next_fire(doc, t)
        if t > EPOCH + 60:
            break
        sim.fire_times.append(t)


def after_crash(sim, actor) -> None:
    """A restarting worker: a crashed agent is replaced on the same host after a moment."""
    if actor.kind == "agent" and sim.restarts < sim.p.restarts and not sim.settling:
        sim.restarts += 1
        new = spawn_agent(sim, start=sim.now + sim.ch.uniform_ms(200, 3000), replacing=actor)
        sim.trace.event(new, f"will start at t={new.wake - EPOCH:.3f}, replacing {actor.name}")


def begin_settling(sim) -> None:
    """Faults stop, and a fresh agent comes to finish what the crashed ones left (its leftovers pass at
    start, then claims). Agents exit once idle, but only after the last client is done (drain_when_clients_done)."""
    sim.settling, sim.faults, sim.settling_at = True, False, sim.now
    sim.trace.event(None, "settling: faults off, agents drain the queue and exit once idle")
    spawn_agent(sim, start=sim.now + 0.5, name="agent-last")
    drain_when_clients_done(sim)


def drain_when_clients_done(sim) -> None:
    """Once settling and no submitter or canceller is still at work (one may be stalled in a request that
    lands late), every live agent exits once it is idle: a fleet keeps serving while its users submit."""
    if sim.draining or any(a.live for a in sim.actors if a.kind in ("submitter", "canceller")):
        return
    if sim.fire_times and sim.now < sim.fire_times[-1] + SCHEDULE_WATCH:
        return  # the schedule's fire times are watched while agents run
    if invariants.awaiting_reaper(sim):
        return  # a job a crashed agent left is the reaper's: agents keep running until it is settled
    if any(a.live for a in sim.actors if a.kind == "keeper"):
        return  # a keeper still speaks for a job (it may requeue it, or record a retry): the fleet serves on
    sim.draining = True
    for actor in sim.actors:
        if actor.kind == "agent" and actor.live:
            actor.model.cfg.until_idle = True


# -- the actors' bodies --------------------------------------------------------------------------------

def spawn_renewals(sim, agent) -> None:
    """The agent's renewals' thread, as an actor of its own: it crashes and is stopped with its agent, and its
    requests interleave with the loop's as the thread's do."""
    renewals = sim.spawn_actor(f"{agent.name}~r", "renewals", _renewals, crashable=False)
    renewals.model, renewals.skew, renewals.host = None, agent.skew, agent.host
    renewals.seen, renewals.versions = agent.seen, agent.versions  # one process: what either thread saw, it knows
    renewals.of = agent
    agent.companions.append(renewals)


def _renewals(actor) -> None:
    agent = actor.of
    model = agent.model
    while agent.live:
        soonest = model.renewals.run_due()
        actor.sim.sleep_until(min(soonest, actor.sim.now + model.cfg.poll_seconds))


def spawn_keeper(sim, agent, spec: dict):
    """A job's keeper (stado/agent/keeper.py), as an actor of its own on its agent's host: not stopped nor crashed with
    the agent (a process of its own), and deciding as the real one does (keeper.decide)."""
    keeper = sim.spawn_actor(f"keep-{sim.names.get(spec['job_id'], '?')}", "keeper", _keeper, crashable=False)
    keeper.model, keeper.skew, keeper.host, keeper.work_root = None, agent.skew, agent.host, agent.work_root
    keeper.pid, keeper.spec, keeper.released, keeper.of = sim.new_pid(), spec, False, agent
    sim.trace.event(keeper, f"keeps process {spec['process']['pgid']} of {sim.names.get(spec['job_id'])}")
    return keeper


def _keeper(actor) -> None:
    from stado.agent import standin
    from stado.agent.keeper import decide, own_writes, store_time

    sim, spec = actor.sim, actor.spec
    directory, pgid, claim = spec["job_dir"], spec["process"]["pgid"], spec["attempt"]
    poll = spec["agent"]["poll_seconds"]
    proven, checked, version, landed, bridge_until, bridged = 0.0, None, None, None, None, []
    while not actor.released:
        promise = sim.promises.get(directory)
        ended = sim.exit_of(pgid)
        if ended is not None and directory not in sim.exit_files:
            sim.exit_files[directory] = ended  # what its pidfd told it: written as soon as the shell ends
        if bridge_until is None and actor.of.state == "crashed":  # its pipe closed: the agent is gone
            bridge_until = sim.now + spec["bridge"]
        bridging = (bridge_until is not None and sim.now < bridge_until and promise is not None
                    and promise.get("owner") == spec["agent_id"])
        step = decide(promise, claim=claim, now=sim.now, ended=ended is not None, proven=proven, checked=checked,
                      margin=spec["margin"], bridging=bridging, poll=poll)
        if step[0] == "leave":
            return
        if step[0] == "bridge":
            began = sim.now
            try:
                got = standin.bridge(spec["job_id"], claim, spec["agent_id"], poll + 1.0, store=sim.store,
                                     now=lambda: store_time(sim.promises.get(directory), sim.now,
                                                            sim.now + actor.skew), nonces=bridged)
            except StoreError:
                got = None
            if got is None:  # (the version its last renewal left is still its own write, as the real one keeps it)
                bridge_until = -1.0  # the bridge is over: the promise as it stands decides
            else:
                version, proven = got, began + poll + 1.0
        elif step[0] == "wait":
            sim.sleep_until(min(sim.now + step[1], sim.end_of(pgid)))
        elif step[0] == "check":  # the store's answer, as a GET within its deadline gives it
            _, checked, until, _deadline = step
            found = sim.backend.peek(keys.running(spec["job_id"]))
            if found is not None and sim.store.document(*found).get("nonce") == checked:
                proven, landed = until, list(found[1])
        elif step[0] == "record":
            sim.trace.event(actor, f"{sim.names.get(spec['job_id'])}: its command ended and its agent has not "
                                   "recorded it within its promise: standing in")
            held = _stand_in(actor, ended)
            if held is None:
                return
            # Another agent of this host took the job over first: its promise is followed as its own agent's.
            proven = max(proven, held - (store_time(sim.promises.get(directory), sim.now, sim.now + actor.skew)
                                         - sim.now))
        else:
            sim.kept[directory] = {"attempt": claim, "why": "its agent did not renew its promise in time"}
            sim.trace.event(actor, f"stops process {pgid}: its agent did not renew its promise in time")
            stopped_at = sim.now
            sim.signal_group(pgid, 15)
            versions, nonces = own_writes(promise, landed, version)
            said = standin.lapse_kept(spec["job_id"], claim, versions, "stopped by its keeper",
                                      nonces=nonces + bridged[-8:], store=sim.store,
                                      now=lambda: store_time(sim.promises.get(directory), sim.now, sim.now + actor.skew),
                                      pause=lambda seconds: sim.sleep_until(sim.now + seconds))
            sim.trace.event(actor, said)
            invariants.keeper_declined(sim, actor, spec["job_id"], claim, spec["agent_id"], stopped_at, said)
            return


def _stand_in(actor, ended) -> float | None:
    from stado.agent import standin

    sim = actor.sim
    agent = SimAgent(sim, actor, slots=1, poll_seconds=sim.p.poll, settle_seconds=sim.p.settle_every, schedules=False)
    actor.model = agent
    sim.locks.setdefault(actor.work_root, {})[agent.id] = actor
    said, held = standin.stand_in(agent, actor.spec, ended, pause=lambda seconds: sim.sleep_until(sim.now + seconds),
                                  promise=sim.promises.get(actor.spec["job_dir"]))
    sim.trace.event(actor, said)
    if held is not None:  # as the real stand-in releases its lock: it stands in again, if at all, as a new agent
        sim.locks[actor.work_root].pop(agent.id, None)
    return held


def _agent(actor) -> None:
    try:
        actor.model.run()
    except UnsafeStore as e:  # it probed its own path to the store and refused to claim anything: as it must
        actor.sim.trace.event(actor, f"refuses to start: {e}")
    except StoreError as e:  # `stado agent` exits 4 when its first requests (the store probe) fail
        actor.sim.trace.event(actor, f"cannot start: {type(e).__name__}: {e}")


def _submitter(actor) -> None:
    """Submits p.jobs jobs one `stado submit` at a time; a submit the store failed is tried once more, as a
    user would (it may make a second job if the first one's write landed: both must be accounted for)."""
    sim = actor.sim
    for n in range(sim.p.jobs):
        sim.sleep_until(sim.now + sim.ch.uniform_ms(0, SUBMIT_GAP))
        spec = JobSpec(command=f"sim job {n + 1}", retries=sim.p.retries,
                       retry_delay=sim.p.retry_delay or None, retry_backoff=2.0 if sim.p.retry_delay else None)
        after = ()
        if sim.acked and sim.ch.chance(sim.p.deps):
            after = ((sim.ch.pick(CONDITIONS), sim.ch.pick(sim.acked)),)
        for _ in range(2):
            try:
                docs = submission.submit(sim.store, [submission.Submission(spec, after=after)],
                                         submitter="submit-1@sim", clock=sim)
            except (StoreError, Conflict, NotWritten, OutcomeUnknown) as e:
                sim.trace.event(actor, f"submit failed: {type(e).__name__}; submitting again")
                continue
            sim.acked.append(docs[0]["id"])
            sim.depends[docs[0]["id"]] = list(after)
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
    if sim.p.cancel_aim != "any":
        _await_moment(sim, job, sim.p.cancel_aim)
    for _ in range(3):
        try:
            report = jobs.cancel(sim.store, job, by=f"{actor.name}@sim", clock=sim)
        except (StoreError, Conflict, NotWritten, OutcomeUnknown) as e:
            sim.trace.event(actor, f"cancel {sim.names[job]} failed: {type(e).__name__}; trying again")
            continue
        except JobNotFound:
            sim.trace.event(actor, f"cancel {sim.names[job]}: no such job")
            return
        sim.trace.event(actor, f"cancel {sim.names[job]}: {report.kind}: {sim.trace.short(report.message)}")
        invariants.cancel_reported(sim, job, report)
        return


def _await_moment(sim, job: str, aim: str) -> None:
    """An aimed canceller: it looks (without a request: it is the adversary, not a client) until the job is in
    the window it aims at, then cancels at once."""
    peek = sim.backend.peek
    deadline = sim.now + AIM_WINDOW
    while sim.now < deadline:
        found = peek(keys.running(job))
        doc = sim.store.document(*found) if found is not None else None
        if doc is not None and aim == "finishing" and doc.get("phase") == "finishing":
            return
        if doc is not None and aim == "stale" and doc.get("phase") == "running" and any(
                p.job == job and p.alive(sim.now) and p.claim != doc.get("claim") for p in sim.procs.values()):
            return
        if any(peek(keys.terminal(state, job)) is not None for state in keys.TERMINAL_STATES):
            return
        sim.sleep_until(sim.now + 0.005)
