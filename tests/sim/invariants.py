"""What must hold in every run, checked where it can first break (issue 14's list, and seed 003's "claimed
by exactly one worker ... writers are fenced by the expected generation"):

- fencing: no writer deletes or overwrites a generation of a job newer than any it has read or written
  (checked at the request, before it lands);
- lost-job: every job whose queue entry landed resolves to a record (checked after every step);
- two-processes: never two processes of one job at once (checked when a process starts);
- run-after-terminal: no claim made after the job got a terminal record starts a process;
- cancelled-started: no claim made after a cancel of the job was acknowledged starts a process (a claim
  that landed before the cancel may still start: the cancel found the job running, and its agent stops
  it at its next tick, as `stado cancel` says);
- abandoned: an agent between two passes runs every job whose running record holds one of its claims
  (a claim it won and then dropped leaves a job that never runs, until a reaper requeues it);
- self-fenced: an agent never stops its own attempt as taken over while the running record is still
  its own claim (its own retried write that landed must be recognised as its own, by the nonce);
- attempt-twice: each attempt (the job's failures and requeues counters at its claim) starts once;
- one-state / settles: once faults stop and the agents are idle, every job is in exactly one state and
  terminal, unless it waits for the reaper (a running record whose agent crashed: issue 11);
- actor-raised: no actor dies of an exception the library did not expect (a traceback).
"""
import traceback
from collections import namedtuple

from stado import keys

from .store import job_of

Violation = namedtuple("Violation", "kind signature step message")

RECORD_STATES = ("queued", "running") + keys.TERMINAL_STATES


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
    if not created:
        return
    if key.startswith(keys.QUEUE):
        if job not in sim.landed:
            sim.landed.append(job)
    elif key.startswith(keys.RUNNING):
        sim.claimed_at[sim.store.document(data, version).get("claim")] = sim.steps
    else:
        sim.terminal_at.setdefault(job, (sim.steps, key.split("/", 1)[0]))


def after_step(sim) -> None:
    """lost-job: a job whose queue entry ever landed has at least one record, at every step (only a
    delete can take the last one away, so only steps that deleted something are looked at)."""
    if not sim.deleted:
        return
    sim.deleted = False
    for job in sim.landed:
        if not _records(sim, job):
            violation(sim, "lost-job", f"{sim.names[job]} has no record left in queue/, running/ or a terminal prefix")


def actor_raised(sim, actor, error: Exception) -> None:
    where = traceback.extract_tb(error.__traceback__)[-1]
    violation(sim, "actor-raised", f"{actor.name} raised {type(error).__name__}: {error} "
                                   f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})", type(error).__name__)


# -- when a process starts -----------------------------------------------------------------------------

def process_starts(sim, proc, doc: dict) -> None:
    job, name = proc.job, sim.names[proc.job]
    # A worker that stops speaking past its promise (stalled, its clock jumped) has its job reaped and run again
    # while its own copy may still run: the seed's design, the copy stopped when that worker speaks again.
    # Two processes of the same attempt, or of an attempt nobody reaped, are never allowed.
    others = [p for p in sim.procs.values() if p.job == job and p.alive(sim.now)
              and p.requeues >= doc.get("requeues", 0)]
    if others:
        violation(sim, "two-processes", f"{name} starts as process {proc.pid} on {proc.agent.name} while process "
                                        f"{others[0].pid} on {others[0].agent.name} still runs it")
    claimed = sim.claimed_at.get(doc.get("claim"), sim.steps)
    if job in sim.terminal_at and sim.terminal_at[job][0] < claimed:
        step, state = sim.terminal_at[job]
        violation(sim, "run-after-terminal", f"{name} starts on {proc.agent.name} from a claim made at step {claimed}, "
                                             f"after its {state} record was written at step {step}", state)
    if job in sim.cancel_acked and sim.cancel_acked[job] < claimed:
        violation(sim, "cancelled-started", f"{name} starts on {proc.agent.name} from a claim made at step {claimed}, "
                                            f"after its cancel was acknowledged at step {sim.cancel_acked[job]}")
    attempt = (job, doc.get("failures", 0), doc.get("requeues", 0))
    if attempt in sim.attempts:
        violation(sim, "attempt-twice", f"{name} attempt (failures {attempt[1]}, requeues {attempt[2]}) starts a "
                                        f"second time, on {proc.agent.name} (first: process {sim.attempts[attempt]})")
    sim.attempts.setdefault(attempt, proc.pid)


def process_stopped(sim, agent, proc) -> None:
    """self-fenced: an agent that stops its attempt as no longer its own must be right about it."""
    slot = agent.model.slots.get(proc.job) if agent.model is not None else None
    if slot is None or slot.stopping != "lost":
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
        if current.get("owner") != model.id or current.get("phase") == "finishing" or current.get("settled_by"):
            continue  # a decided move (or one a settler has taken) is finished by whoever comes first: not abandoned
        slot = model.slots.get(job)
        if slot is None or slot.doc.get("claim") != current.get("claim"):
            violation(sim, "abandoned", f"{agent.name} holds {sim.names[job]}'s claim in running/ (phase "
                                        f"{current.get('phase')}) but no longer runs it: nothing will run or "
                                        "settle it (until a reaper requeues it)")


# -- once the run has settled --------------------------------------------------------------------------

def at_end(sim) -> None:
    """one-state and settles, after the settling phase (faults off, agents drained the queue and left)."""
    live = [a for a in sim.actors if a.live]
    if live:
        violation(sim, "settles", f"the run did not settle: {', '.join(a.name for a in live)} still busy at the "
                                  "end of the settling phase")
        return
    for job in sim.landed:
        states = _records(sim, job)
        name = sim.names[job]
        if "running" in states:
            owner = _owner(sim, sim.store.document(*sim.backend.peek(keys.running(job))))
            if owner is not None and owner.state == "crashed":
                continue  # the reaper's (issue 11): its agent died while the job ran
            violation(sim, "settles", f"{name} is left in running/ ({'+'.join(states)}) by "
                                      f"{owner.name if owner else 'no agent'}, which is gone or no longer runs it")
            continue
        if len(states) != 1:
            violation(sim, "one-state", f"{name} has {len(states)} records once moves settled: {', '.join(states)}")
        elif states[0] == "queued":
            violation(sim, "settles", f"{name} is still queued after the agents drained the queue")


def _owner(sim, doc: dict):
    owner_id = doc.get("owner")
    for actor in sim.actors:
        if actor.model is not None and actor.model.id == owner_id:
            return actor
    return None
