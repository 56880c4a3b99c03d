"""What must hold in every run, checked where it can first break (the soak's list, and the protocol's own
rules: a job is claimed by exactly one worker, and every writer is fenced by the generation it expects):

- fencing: no writer deletes or overwrites a generation of a job newer than any it has read or written
  (checked at the request, before it lands);
- lost-job: every job whose queue entry landed resolves to a record (checked after every step);
- overlap: never two processes of one job at once, not even a stale copy under a worker that stopped speaking
  (checked when a process starts);
- run-after-terminal: no process of a job starts while its completed or failed record exists;
- cancelled-started: no process of a job starts once a cancel reached it (its cancelled record exists, or its
  running record is being cancelled): a claim that landed before the cancel never starts after it;
- ended-rerun: a command that ended on its own is recorded before the job starts again (never again after an exit
  0; each failed end counts a failed attempt), also when its worker is stopped, slow or dead;
- abandoned: an agent between two passes runs every job whose running record holds one of its claims
  (a claim it won and then dropped leaves a job that never runs, until a reaper requeues it);
- self-fenced: an agent never stops its own attempt as taken over while the running record is still
  its own claim (its own retried write that landed must be recognised as its own, by the nonce);
- attempt-twice: each attempt (the job's failures and requeues counters at its claim) starts once;
- one-state / settles: once faults stop and the agents are idle, every job is in exactly one state and
  terminal, unless it waits for the reaper (a running record whose agent crashed);
- actor-raised: no actor dies of an exception the library did not expect (a traceback);
- cancel-untrue: what `stado cancel` told its user holds: a job it said is cancelled ends cancelled, one it
  said had already finished ends as it said, and neither starts again afterwards;
- live-settled: no writer removes a running record while a process of that very claim still runs under a
  live agent whose promise holds (a worker settles only what its own claim holds; the reaper only what a
  passed promise gave up): otherwise the job reads terminal, or runs twice, while its process runs on;
- unreaped: a job whose agent crashed is settled by the reaper soon after its promise passed, by the store's
  clock (a worker whose clock runs ahead must not keep a dead job `running` for as long as it is ahead);
- cron-early, cron-skipped: a schedule's fire time is never submitted before it is due (by the store's
  clock), and never skipped while an honest agent (clock within SKEW_BOUND of the store's) runs;
- unsafe-start: an agent whose path to the store ignores conditions never writes a job record (it probes its
  own path before it claims anything, and refuses).
- kept-untold: a keeper that stopped a job's processes leaves the verdict to another writer only when one wrote the
  record after the stop or took the attempt over: a renewal its own agent wrote before the stop says nothing of it,
  and a job left so is settled by the reaper as a lease that expired, a lease later (or never, with no other agent).
- dependency-early: no process of a job starts before every job it depends on has a terminal record in which its
  condition holds (after-success: completed; after-failure: anything else; after: any);
- retry-early: an attempt after a failed one never starts before the retry_at of the queue entry it was claimed
  from (--retry-delay), by the store's clock, less the claiming agent's own uncertainty about that clock;
- dependency-outcome: once the run settles, a job whose dependencies all ended ran if their conditions held (it
  never ends dependency_failed then), and ended dependency_failed, naming a dependency and the state it truly ended
  in, if one can never hold (or was cancelled, or lost its worker twice before that was written); the dependencies
  recorded are the ones submitted.
- record-time: what an agent, its renewals or a job's keeper writes into a job's record carries the store's time
  (its `written_at`, from the same reading as the promise it writes), whatever that host's wall clock says: the
  reaper, the checker and every reader judge by that clock.
"""
import traceback
from collections import namedtuple

from stado.core import keys
from stado.core.dependencies import edges, holds

from .store import job_of

Violation = namedtuple("Violation", "kind signature step message")

RECORD_STATES = ("queued", "running") + keys.TERMINAL_STATES
# The longest a pulse after a passed promise may keep a dead worker's job alive (docs/stado.md, "Liveness"; the
# reaper's EVIDENCE_FLOOR, or the job's lease if longer).
EVIDENCE_FLOOR = 30.0
CLOCK_GRAIN = 0.001  # the store's clock is read to a millisecond (a float's rounding is not an early fire)
SKEW_BOUND = 300.0  # an agent whose clock is further off the store's than this is not honest
DECLINED = "its agent, or the agent that took it over, wrote its record since"  # stado.agent.standin's words
CANCELLED_KINDS = ("cancelled_queued", "cancelled_running", "cancelled_finishing", "already_cancelling")


def violation(sim, kind: str, message: str, detail: str = "") -> None:
    """Record a violation. The signature (the kind, plus where it happened for fencing) is what the
    shrinker keeps while it simplifies the run."""
    signature = f"{kind}: {detail}" if detail else kind
    message = sim.trace.short(message)
    if any(v.kind == kind and v.message == message for v in sim.violations):
        return  # a lasting state (a lost job) is reported once
    sim.violations.append(Violation(kind, signature, sim.steps, message))
    sim.trace.event(None, f"VIOLATION {kind}: {message}")
    if sim.stop_at is None:
        sim.stop_at = sim.steps + sim.after


def _records(sim, job: str) -> list[str]:
    peek = sim.backend.peek
    return [state for state in RECORD_STATES if peek(keys.state_key(state, job)) is not None]


# -- at a request --------------------------------------------------------------------------------------

def before_overwrite(sim, actor, key: str, verb: str) -> None:
    """fencing: a delete (or unconditional put) of a job record must remove what its writer last saw there.
    Stale if the key now holds another version than the one this actor last read or wrote at it, or (for a
    key it never looked at) a generation of the job newer than any it has seen."""
    job = job_of(key)
    if job is None:
        return
    found = sim.backend.peek(key)
    if found is None:
        return
    gen = sim.store.generation(key, found[0], found[1])
    last = actor.versions.get(key)
    seen = actor.seen.get(job, 0)
    if last is not None and last != found[1]:
        why = f"version v{found[1].etag} (generation {gen}), but the last version of it this actor saw was v{last.etag}"
    elif last is None and gen is not None and gen > seen:
        why = f"generation {gen}, newer than any generation of {sim.names.get(job, job)} it has read or written ({seen})"
    else:
        return
    from .trace import _via

    via = _via(2)
    left = "+".join(state for state in _records(sim, job) if keys.state_key(state, job) != key) or "nothing"
    violation(sim, "fencing", f"{actor.name} {verb}s {key} at {why}; that leaves {left} [{via}]",
              f"{verb} {key.split('/', 1)[0]}/ by {via}; leaves {left}")


def record_written(sim, actor, key: str, job: str, data: bytes, version, created: bool) -> None:
    if key.startswith(keys.QUEUE):
        _retry_written(sim, job, sim.store.document(data, version))
    if not created:
        return
    if key.startswith(keys.QUEUE):
        if job not in sim.landed:
            sim.landed.append(job)
        if job not in sim.names:  # a schedule's job: its id is derived from the fire time, not drawn
            sim.names[job] = f"S{sum(1 for n in sim.names.values() if n.startswith('S')) + 1}"
        fired = (sim.store.document(data, version).get("schedule") or {}).get("fire_time")
        if fired:
            _cron_fired(sim, actor, job, fired)
    elif key.startswith(keys.RUNNING):
        sim.claimed_at[sim.store.document(data, version).get("claim")] = sim.steps
    else:
        sim.terminal_at.setdefault(job, (sim.steps, key.split("/", 1)[0]))


# How far a writer's reading of the store's clock may be from the store's: its measurement's bounds (a round trip
# or two here) with room to spare; far below any skew the worlds draw (30 s and up).
RECORD_TIME_SLACK = 5.0
_HOST_WRITERS = ("agent", "renewals", "keeper")


def record_time(sim, actor, key: str, doc: dict) -> None:
    """record-time: a record an agent or a keeper writes carries the store's time, not its host's wall clock."""
    from stado.core.documents import parse_iso

    if actor is None or actor.kind not in _HOST_WRITERS or not isinstance(doc, dict):
        return
    written = parse_iso(doc.get("written_at")) if isinstance(doc.get("written_at"), str) else None
    off = None if written is None else written - sim.now
    if off is not None and off < -RECORD_TIME_SLACK and any(
            _stalled_within(a, written, sim.now) for a in (actor, getattr(actor, "of", None)) if a is not None):
        return  # read its clock, then stalled before the write landed: late, not wrong
    if off is not None and abs(off) > RECORD_TIME_SLACK + _uncertainty(actor):
        violation(sim, "record-time", f"{actor.name} writes {key} stamped {off:+.1f} s off the store's clock "
                                      f"(its host's wall clock is {actor.skew:+.0f} s off)", f"by {actor.kind}")


def _uncertainty(actor) -> float:
    """How far the writer's own reading of the store's clock may be off, by its measurements' bounds (a measurement
    whose round trip a stall stretched is that much less certain; the next writes narrow it): its agent's clock,
    or the one its keeper's stand-in agent measured."""
    for owner in (actor, getattr(actor, "of", None)):
        model = getattr(owner, "model", None) if owner is not None else None
        clock = getattr(getattr(model, "ctx", None), "clock", None)
        if clock is not None:
            return clock.uncertainty
    bounds = (actor.sim.promises.get((getattr(actor, "spec", None) or {}).get("job_dir")) or {}).get("store")
    return (bounds[1] - bounds[0]) / 2 if bounds else 0.0  # a keeper's own writes: its agent's bounds


def after_step(sim) -> None:
    """lost-job: a job whose queue entry ever landed has at least one record, at every step (only a
    delete can take the last one away, so only steps that deleted something are looked at)."""
    if not sim.deleted:
        return
    sim.deleted = False
    for job in sim.landed:
        if not _records(sim, job):
            violation(sim, "lost-job", f"{sim.names[job]} has no record left in queue/, running/ or a terminal prefix")


def unsafe_write(sim, actor, verb: str, key: str) -> None:
    """unsafe-start: the store probe's own requests are the only ones a path that drops conditions may carry."""
    if job_of(key) is not None:
        violation(sim, "unsafe-start", f"{actor.name}, whose path to the store ignores every condition, makes a {verb} "
                                       f"of {key}: it started on a verdict not made for its own path")


def running_written(sim, doc: dict) -> None:
    """Keep each claim's promise, by the store's (the simulation's) clock: when its owner last renewed it; and
    when a settler other than the owner first took a cancel of it (a reaper settling the cancel of a dead owner)."""
    lease = doc.get("lease_seconds")
    if (doc.get("owner") and doc.get("written_by") == doc.get("owner") and doc.get("phase") == "running"
            and isinstance(lease, (int, float))):
        sim.promised[doc.get("claim")] = sim.now + lease
    if (doc.get("phase") == "cancelling" and doc.get("owner") and doc.get("settled_by")
            and doc.get("settled_by") != doc.get("owner")):
        sim.cancel_taken.setdefault(doc.get("claim"), sim.now)


def running_removed(sim, actor, key: str, doc: dict) -> None:
    """live-settled: running/<id> goes while a process of that claim runs under a live agent whose promise holds."""
    claim = doc.get("claim")
    if claim is None or sim.now >= sim.promised.get(claim, float("-inf")):
        return
    for proc in sim.procs.values():
        if proc.claim == claim and proc.alive(sim.now) and proc.agent.live:
            held = sim.promised[claim] - sim.now
            violation(sim, "live-settled", f"{actor.name} removes {key} (phase {doc.get('phase')}) while process "
                                           f"{proc.pid} of that claim still runs on {proc.agent.name}, whose promise "
                                           f"holds for {held:.1f} s more: the job reads finished while it runs",
                      f"by {actor.kind}")
            return


def keeper_declined(sim, actor, job: str, claim: str, owner: str, stopped_at: float, said: str) -> None:
    """kept-untold: the keeper, having stopped the attempt's processes at `stopped_at`, says the verdict is
    someone else's; it must not be its own agent's record from before the stop."""
    if not said.startswith(DECLINED):
        return
    found = sim.backend._objects.get(keys.running(job))
    if found is None:
        return
    doc = sim.store.document(*found[:2])
    if (doc.get("claim") == claim and doc.get("owner") == owner and doc.get("written_by") == owner
            and found[2] < stopped_at):
        violation(sim, "kept-untold", f"{actor.name} stopped {sim.names.get(job)}'s processes and left the verdict to "
                                      f"its agent's renewal of {stopped_at - found[2]:.2f} s before the stop: nobody "
                                      "records the stop")


def cancel_reported(sim, job: str, report) -> None:
    """What a `stado cancel` told its user; checked when a process starts and at the end (cancel-untrue)."""
    if report.kind in CANCELLED_KINDS or (report.kind == "already_terminal" and report.view.state == "cancelled"):
        sim.cancel_acked.setdefault(job, sim.steps)
        expect = "cancelled"
    elif report.kind == "already_terminal":
        expect = report.view.state
    elif report.kind == "finishing":
        from stado.core import documents as d

        expect = d.terminal_state_of(report.view.doc.get("result") or {"outcome": "failed"})
    else:
        return
    sim.cancel_said.setdefault(job, (sim.steps, report.kind, expect))


def _cron_fired(sim, actor, job: str, fire_time: str) -> None:
    from stado.core import documents as d

    fire = d.parse_iso(fire_time)
    if fire in sim.fired:
        return
    sim.fired[fire] = (sim.steps, sim.now)
    if sim.now < fire - CLOCK_GRAIN:
        violation(sim, "cron-early", f"{actor.name} (its clock {actor.skew:+.0f} s off the store's) submits the fire "
                                     f"time {fire_time} as {sim.names.get(job, job)} {fire - sim.now:.1f} s before it "
                                     "is due by the store's clock")


def _reaper_due(sim, doc: dict, agent) -> float | None:
    """For a running record whose owner crashed: by when `agent` (a reaper, alive from its start) must have
    settled it. From the owner's last word by the store's clock (its promise, or a pulse after it, which proves
    it alive for reaper.evidence_window more) or the agent's start if later, the agent watches a lease plus its
    margin before it judges, and needs one pass of its own, perhaps after a stall. None for any other record."""
    owner = _owner(sim, doc)
    if owner is None or owner.state != "crashed" or doc.get("claim") not in sim.promised or agent.ignores_conditions:
        return None
    lease = float(doc.get("lease_seconds") or 0.0)
    spoke = max(sim.promised[doc["claim"]], sim.pulsed.get(doc["id"], float("-inf")) + max(lease, EVIDENCE_FLOOR))
    return max(spoke, agent.started) + 2 * (lease + 2.0) + sim.p.settle_every + sim.p.poll + sim.p.stall_max + 1.0


def awaiting_reaper(sim) -> bool:
    """Whether running/ holds a record a crashed agent left that a live agent is due to settle within the run: the
    agents keep running (a fleet does) until it is settled or late."""
    from .world import EPOCH

    live = [a for a in sim.actors if a.kind == "agent" and a.live]
    for job in sim.landed:
        found = sim.backend.peek(keys.running(job))
        if found is None:
            continue
        doc = sim.store.document(*found)
        for agent in live:
            due = _reaper_due(sim, doc, agent)
            if due is not None and sim.now <= due <= EPOCH + sim.p.horizon - 1.0:
                return True
    return False


def actor_raised(sim, actor, error: Exception) -> None:
    where = traceback.extract_tb(error.__traceback__)[-1]
    violation(sim, "actor-raised", f"{actor.name} raised {type(error).__name__}: {error} "
                                   f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})", type(error).__name__)


# -- when a process starts -----------------------------------------------------------------------------

def process_starts(sim, proc, doc: dict) -> None:
    job, name = proc.job, sim.names[proc.job]
    # No two processes of a job ever run at once: not even a stale copy under a worker that stopped speaking past
    # its promise (its host's keeper stops it before the promise passes, so a requeue never runs beside it).
    others = [p for p in sim.procs.values() if p.job == job and p.alive(sim.now)]
    if others:
        violation(sim, "overlap", f"{name} starts as process {proc.pid} on {proc.agent.name} while process "
                                  f"{others[0].pid} on {others[0].agent.name} still runs it")
    claimed = sim.claimed_at.get(doc.get("claim"), sim.steps)
    peek = sim.backend.peek
    ended = [state for state in ("completed", "failed") if peek(keys.terminal(state, job)) is not None]
    if ended:
        violation(sim, "run-after-terminal", f"{name} starts on {proc.agent.name} (claim made at step {claimed}) while "
                                             f"its {ended[0]} record exists", ended[0])
    running = peek(keys.running(job))
    cancelling = running is not None and sim.store.document(*running).get("phase") == "cancelling"
    if peek(keys.terminal("cancelled", job)) is not None or cancelling:
        where = "its cancelled record exists" if not cancelling else "its running record is being cancelled"
        violation(sim, "cancelled-started", f"{name} starts on {proc.agent.name} (claim made at step {claimed}) "
                                            f"while {where}")
    elif job in sim.cancel_said and sim.cancel_said[job][0] < claimed:
        step, kind, expect = sim.cancel_said[job]
        violation(sim, "cancel-untrue", f"{name} starts on {proc.agent.name} from a claim made at step {claimed}, "
                                        f"after `stado cancel` said at step {step} ({kind}) that it ends {expect}",
                  kind)
    _ended_rerun(sim, proc, doc)
    _dependency_early(sim, proc, doc)
    _retry_early(sim, proc, doc)
    attempt = (job, doc.get("failures", 0), doc.get("requeues", 0))
    if attempt in sim.attempts:
        violation(sim, "attempt-twice", f"{name} attempt (failures {attempt[1]}, requeues {attempt[2]}) starts a "
                                        f"second time, on {proc.agent.name} (first: process {sim.attempts[attempt]})")
    sim.attempts.setdefault(attempt, proc.pid)


def _ended_rerun(sim, proc, doc: dict) -> None:
    """ended-rerun: a command that ended on its own (no signal: its status is the job's outcome) is recorded
    before the job starts again: once it succeeded, never again; each failed end counts one failed attempt. Unless
    nothing on its host could speak: its agent and its keeper each crashed, stopped or stuck in a request for longer
    than a promise after the command ended (the fleet then judges the worker lost, as it must)."""
    own = [p for p in sim.procs.values() if p.job == proc.job and p.signal is None and not p.alive(sim.now)
           and not _silenced(sim, p)]
    succeeded = [p for p in own if p.exit_code == 0]
    failed = [p for p in own if p.exit_code != 0]
    if succeeded:
        violation(sim, "ended-rerun", f"{sim.names[proc.job]} starts again on {proc.agent.name} though its process "
                                      f"{succeeded[0].pid} on {succeeded[0].agent.name} had ended with exit 0",
                  "succeeded")
    elif len(failed) > doc.get("failures", 0):
        violation(sim, "ended-rerun", f"{sim.names[proc.job]} starts again on {proc.agent.name} as if "
                                      f"{doc.get('failures', 0)} attempt(s) had failed, though {len(failed)} of its "
                                      f"processes had ended with a failure (the last, {failed[-1].pid} on "
                                      f"{failed[-1].agent.name}): an ended command's outcome was lost", "failed")


def _retry_written(sim, job: str, doc: dict) -> None:
    """A retry's queue entry: the time its attempt may be claimed from (retry-early)."""
    from stado.core.documents import parse_iso

    if isinstance(doc, dict) and isinstance(doc.get("retry_at"), str):
        sim.retry_at[(job, doc.get("failures", 0), doc.get("requeues", 0))] = parse_iso(doc["retry_at"])


def _retry_early(sim, proc, doc: dict) -> None:
    """retry-early: an attempt after a failed one starts no sooner than its entry's retry_at, by the store's clock,
    less what the claiming agent's own reading of that clock may be off by."""
    at = sim.retry_at.get((proc.job, doc.get("failures", 0), doc.get("requeues", 0)))
    if at is not None and sim.now < at - _uncertainty(proc.agent) - CLOCK_GRAIN:
        violation(sim, "retry-early", f"{sim.names[proc.job]} attempt after {doc.get('failures', 0)} failure(s) "
                                      f"starts on {proc.agent.name} {at - sim.now:.3f} s before its retry_at")


def _terminal_state(sim, job: str) -> str | None:
    return next((state for state in keys.TERMINAL_STATES if sim.backend.peek(keys.terminal(state, job)) is not None),
                None)


def _dependency_early(sim, proc, doc: dict) -> None:
    from stado.core import documents as d

    for condition, depended in edges(d.Job(doc).spec):
        state = _terminal_state(sim, depended)
        if state is None or not holds(condition, state):
            ended = "has not ended" if state is None else f"ended {state}"
            violation(sim, "dependency-early", f"{sim.names[proc.job]} starts on {proc.agent.name} while its "
                                               f"dependency {sim.names.get(depended, depended)} ({condition}) {ended}",
                      condition)


def _dependency_outcome(sim, job: str, state: str) -> None:
    """dependency-outcome, for a job settled in terminal `state` (its record read from the store)."""
    from stado.core import documents as d

    found = sim.backend.peek(keys.terminal(state, job))
    doc = d.Job(sim.store.document(*found))
    pairs, name = edges(doc.spec), sim.names[job]
    if job in sim.depends and sorted(pairs) != sorted(sim.depends[job]):
        violation(sim, "dependency-outcome", f"{name} records dependencies {pairs}, not those submitted "
                                             f"{sim.depends[job]}", "recorded")
    ended = {depended: _terminal_state(sim, depended) for _, depended in pairs}
    if not pairs or None in ended.values():
        return  # no dependency, or one not ended (`settles` says why)
    never = [(c, j) for c, j in pairs if not holds(c, ended[j])]
    if doc.outcome == "dependency_failed":
        said = doc.get("dependency") or {}
        if not never or (said.get("condition"), said.get("job")) not in never or said.get("state") != ended[said["job"]]:
            violation(sim, "dependency-outcome", f"{name} ended dependency_failed ({said}) though its dependencies "
                                                 f"ended {ended}", "wrongly")
    elif never and doc.outcome != "cancelled" and (doc.error or {}).get("class") != "worker_lease_expired":
        violation(sim, "dependency-outcome", f"{name} ended {doc.outcome}, though its dependency {never[0]} ended "
                                             f"{ended[never[0][1]]}: it should have ended dependency_failed", "ran")


def _silenced(sim, proc) -> bool:
    """Whether every actor that held this ended process's outcome (its agent, and the keeper of its job) crashed, or
    was stopped or stalled for longer than a poll, between its end and now."""
    keepers = [a for a in sim.actors if a.kind == "keeper" and a.spec["process"]["pgid"] == proc.pid]
    for holder in [proc.agent] + keepers:
        crashed = holder.state == "crashed" and (holder.ended_at or 0.0) >= proc.start
        held = any(until - since > sim.p.poll and until > proc.end and since < sim.now for since, until in holder.stalls)
        if not (crashed or held):
            return False
    return True


def process_stopped(sim, agent, proc) -> None:
    """self-fenced: an agent that stops its attempt as no longer its own must be right about it."""
    slot = agent.model.slots.get(proc.job) if agent.model is not None else None
    if slot is None or slot.stop != "lost":
        return
    found = sim.backend.peek(keys.running(proc.job))
    if found is None:
        return
    current = sim.store.document(*found)
    if (current.get("owner") == agent.model.id and current.get("claim") == slot.doc.get("claim")
            and current.get("phase") == "running"):
        violation(sim, "self-fenced", f"{agent.name} stops its own attempt of {sim.names[proc.job]} (process "
                                      f"{proc.pid}) as taken over, while running/ still holds its own claim "
                                      f"(generation {current.get('generation')})")


def agent_idles(sim, agent) -> None:
    """abandoned: checked when an agent has finished a pass and waits for the next one."""
    model = agent.model
    for job in sim.landed:
        found = sim.backend.peek(keys.running(job))
        if found is None:
            continue
        current = sim.store.document(found[0], found[1])
        if (current.get("owner") != model.id or current.get("phase") == "finishing" or current.get("settled_by")
                or _decided(current)):
            # A decided move (or one a settler has taken) is finished by whoever comes first: not abandoned. That
            # includes a cancel that overtook a finishing move (it keeps the attempt's result: no process of it
            # can run), which any agent's leftovers pass settles.
            continue
        slot = model.slots.get(job)
        if slot is None or slot.doc.get("claim") != current.get("claim"):
            violation(sim, "abandoned", f"{agent.name} holds {sim.names[job]}'s claim in running/ (phase "
                                        f"{current.get('phase')}) but no longer runs it: nothing will run or "
                                        "settle it (until a reaper requeues it)")


def _decided(doc: dict) -> bool:
    from stado.core import documents as d

    return d.decided(d.Job(doc))


# -- once the run has settled --------------------------------------------------------------------------

def at_end(sim) -> None:
    """one-state and settles, after the settling phase (faults off, agents drained the queue and left)."""
    _unreaped(sim)
    live = [a for a in sim.actors if a.live]
    if live and not sim.violations:
        violation(sim, "settles", f"the run did not settle: {', '.join(a.name for a in live)} still busy at the "
                                  "end of the settling phase")
        return
    _cron_skipped(sim)
    for job in sim.landed:
        states = _records(sim, job)
        name = sim.names[job]
        if "running" in states:
            owner = _owner(sim, sim.store.document(*sim.backend.peek(keys.running(job))))
            if owner is not None and owner.state == "crashed":
                continue  # the reaper's, and not late yet (_unreaped)
            violation(sim, "settles", f"{name} is left in running/ ({'+'.join(states)}) by "
                                      f"{owner.name if owner else 'no agent'}, which is gone or no longer runs it")
            continue
        if len(states) != 1:
            violation(sim, "one-state", f"{name} has {len(states)} records once moves settled: {', '.join(states)}")
        elif states[0] == "queued":
            violation(sim, "settles", f"{name} is still queued after the agents drained the queue")
        elif job in sim.cancel_said and states[0] != sim.cancel_said[job][2]:
            step, kind, expect = sim.cancel_said[job]
            violation(sim, "cancel-untrue", f"{name} ends {states[0]}, but `stado cancel` said at step {step} ({kind}) "
                                            f"that it ends {expect}", kind)
        else:
            _dependency_outcome(sim, job, states[0])


def _cancel_due(sim, doc: dict, agent) -> float | None:
    """For the cancel of a crashed owner's attempt that another settler (a reaper) took and did not finish (it
    stopped short on a store error, or crashed): by when `agent` must have finished it. The take said the owner
    was gone, so the next pass of any agent, once faults stop, finishes the move; no second lease is watched."""
    owner = _owner(sim, doc)
    taken = sim.cancel_taken.get(doc.get("claim"))
    if (owner is None or owner.state != "crashed" or taken is None or doc.get("phase") != "cancelling"
            or sim.settling_at is None or agent.ignores_conditions):
        return None
    return max(taken, sim.settling_at, agent.started) + sim.p.settle_every + sim.p.poll + sim.p.stall_max + 1.0


def _unreaped(sim) -> None:
    """unreaped: a job a crashed agent left in running/ outlives the due time of an agent that ran through it."""
    for job in sim.landed:
        found = sim.backend.peek(keys.running(job))
        if found is None:
            continue
        doc = sim.store.document(*found)
        for agent in (a for a in sim.actors if a.kind == "agent"):
            due = _cancel_due(sim, doc, agent)
            if due is not None and due <= (agent.ended_at if agent.ended_at is not None else sim.now):
                violation(sim, "unreaped", f"{sim.names[job]}'s cancel, taken by {doc.get('settled_by')} after its "
                                           f"owner crashed, stays in running/ {sim.now - sim.cancel_taken[doc['claim']]:.1f} s "
                                           f"after that take, though {agent.name} ran a pass after faults stopped")
                break
        else:
            _unreaped_after_promise(sim, job, doc)


def _unreaped_after_promise(sim, job: str, doc: dict) -> None:
    for agent in (a for a in sim.actors if a.kind == "agent"):
        due = _reaper_due(sim, doc, agent)
        if due is not None and due <= (agent.ended_at if agent.ended_at is not None else sim.now):
            owner = _owner(sim, doc)
            violation(sim, "unreaped", f"{sim.names[job]} stays in running/ {sim.now - sim.promised[doc['claim']]:.1f} "
                                       f"s after the promise of {owner.name} (crashed; its clock {owner.skew:+.0f} s "
                                       f"off the store's) passed, though {agent.name} ran through the time it had "
                                       "to be settled by")
            return


def _cron_skipped(sim) -> None:
    from .actors import SCHEDULE_WATCH

    for fire in sim.fire_times:
        if fire in sim.fired or sim.now < fire + SCHEDULE_WATCH:
            continue
        honest = [a for a in sim.actors if a.kind == "agent" and a.max_skew <= SKEW_BOUND and not a.ignores_conditions
                  and a.started <= fire and (a.live or (a.ended_at or 0) >= fire + SCHEDULE_WATCH)
                  and not _stalled_within(a, fire, fire + SCHEDULE_WATCH)]
        if honest:
            from stado.core import documents as d

            violation(sim, "cron-skipped", f"the fire time {d.iso(fire)} was never submitted, though "
                                           f"{honest[0].name} (its clock {honest[0].skew:+.0f} s off the store's) ran "
                                           f"from before it until {SCHEDULE_WATCH:.0f} s after")


def _stalled_within(actor, start: float, end: float) -> bool:
    """Whether the actor was stalled (stopped, as a process is by SIGSTOP or a host swapping) at some time in
    [start, end]: it did not run through that window, so it owes no fire time due in it."""
    return any(held_from <= end and held_to >= start for held_from, held_to in actor.stalls)


def _owner(sim, doc: dict):
    owner_id = doc.get("owner")
    for actor in sim.actors:
        if actor.model is not None and actor.model.id == owner_id:
            return actor
    return None
