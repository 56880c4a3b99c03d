"""What a job's keeper (stado/agent/keeper.py) asks of the store, when it must speak for a job its agent left: whether a
renewal in flight landed, the verdict on a job whose processes it stopped, and the outcome of a command that ended
while its agent was silent. Loaded by the keeper only when it needs the store; it opens the store its agent used
(the keeper runs with its agent's environment)."""
import os
import time

from ..core import keys
from .hostfiles import HostLock
from ..store.cas import read
from ..objectstore.base import Version

KEPT = "its agent stopped renewing its promise; its keeper stopped the job's processes before the promise passed"


def _store():
    from ..objectstore.connect import store_from_environment

    return store_from_environment()


def running_nonce(job_id: str) -> tuple[str, Version] | None:
    """(nonce, version) of the job's running record now, or None when there is none."""
    found = read(_store(), keys.running(job_id), job_id)
    return None if found is None else (found[0].nonce, found[1])


def bridge(job_id: str, claim: str, owner: str, lease: float, *, store=None, now=time.time, nonces=None):
    """Renew, for an agent that is gone (its keeper's pipe closed), its claim of a job whose process still runs
    here: a compare-and-swap like its own renewals, so that the agent that next starts on this host finds the job
    alive and takes it over. Returns the record's new version, or None when the record is no longer that agent's
    running attempt (taken over, cancelled, reaped: the bridge ends). `nonces`, a list: each renewal's nonce is
    added before it is sent (one whose answer is lost may still hold the record: lapse_kept's `nonces`)."""
    from .. import jobs

    store = store or _store()
    found = read(store, keys.running(job_id), job_id)
    if found is None or found[0].claim != claim or found[0].owner != owner or not found[0].running_phase:
        return None
    t = now()
    got = jobs.renew(store, found[0], found[1], lease_expires_at=t + lease, now=t,
                     on_attempt=None if nonces is None else lambda new, _base: nonces.append(new.nonce))
    return None if isinstance(got, jobs.Overtaken) else list(got[1])


def lapse_kept(job_id: str, claim: str, versions, why: str, *, nonces=(), store=None, now=time.time,
               pause=time.sleep, tries: int = 5) -> str:
    """The verdict on an attempt whose processes its keeper stopped: requeued (failed past the requeue budget), with
    the keeper's reason, unless its record moved since the last write of this attempt the keeper knows of
    (`versions`: every version such a write left, None entries ignored, none known and any record of the attempt
    counts as its own; `nonces`: those of its agent's renewals in flight, which may have landed unanswered): the
    agent came back, a successor took it over, a reaper or a cancel moved first, and theirs stands. A store error is tried again (`tries` times, `pause` seconds apart); past that the reaper settles
    the job by its promise. Returns what happened, in words. `store`: the store to write (default: the one this
    process's environment opens)."""
    from ..objectstore.base import StoreError

    store = store or _store()
    for attempt in range(tries):
        try:
            return _lapse_kept(store, job_id, claim, [Version(*v) for v in versions if v is not None],
                               {n for n in nonces if n}, why, now())
        except StoreError as e:
            if attempt == tries - 1:
                return f"could not record it ({type(e).__name__}); the reaper settles it by its promise"
            pause(1.0 + attempt)
    raise AssertionError("unreachable")


def _lapse_kept(store, job_id: str, claim: str, known: list, nonces: set, why: str, now: float) -> str:
    from ..jobs.reaper import lapse

    found = read(store, keys.running(job_id), job_id)
    if found is None or found[0].claim != claim:
        return "its record has moved on (requeued, cancelled or ended elsewhere): nothing written"
    doc, current = found
    if known and current not in known and doc.nonce not in nonces:
        return "its agent, or the agent that took it over, wrote its record since: the verdict is theirs"
    if not doc.running_phase:
        return f"its record is {doc.phase} (another writer's move): nothing written"
    new = lapse(store, doc, current, writer=f"keeper of {doc.owner} on {doc.instance_ref}", reason=KEPT, now=now)
    if new is None:
        return "another writer moved its record first: theirs stands"
    return f"{'requeued' if new.state == 'queued' else new.state} ({KEPT}; {why})"


def record_ended(spec: dict, ended: tuple, promise: dict | None = None) -> tuple[str, float | None]:
    """A command that ended while its agent was silent past its promise, recorded by this keeper standing in for
    that agent: an Agent of its own on this host (its lock held, so no restart check takes it for gone). Returns
    what stand_in returns."""
    from .config import AgentConfig
    from .owner import Agent

    cfg = AgentConfig(**spec["agent"])
    agent = Agent(_store(), cfg)
    lock = HostLock(cfg.work_root, agent.id, cfg.host)
    lock.take()
    try:
        return stand_in(agent, spec, ended, pause=time.sleep, promise=promise)
    finally:
        lock.release()


def _measure(agent) -> None:
    """Where the store's clock stands, as an agent measures it at its start (a scratch object written, read back
    and deleted): what the stand-in writes carries the store's time, not this host's. A store that does not answer
    leaves this host's clock, as for any agent not yet measured."""
    from ..objectstore.base import StoreError

    key = f"control/clock/{os.urandom(8).hex()}"
    try:
        agent.ctx.clock.measure(agent.store, key, lambda: agent.store.put(key, b"{}"))
    except StoreError:
        pass
    try:
        agent.store.delete(key)
    except StoreError:
        pass


def stand_in(agent, spec: dict, ended: tuple, *, pause, promise: dict | None = None) -> tuple[str, float | None]:
    """What `agent` (a stand-in for the agent the job's keeper outlived) does for that job, as the agent next
    starting on the host would (agent.takeover): take it over (a compare-and-swap of its owner, so a reaper or a
    cancel that moved first wins), upload the output and artifacts the job left, and record the outcome. `pause`:
    waits that many seconds between its ticks. `promise`: the job's last promise, whose reading of the store's
    clock it counts on until it has measured its own. Returns what happened, in words."""
    from ..core import documents as d
    from .slot import Phase
    from .takeover import REPLACED, Voice, take_over

    from .keeper import store_bounds
    from ..objectstore.base import StoreError

    job_id = spec["job_id"]
    clock = agent.ctx.clock
    bounds = store_bounds(promise)
    if bounds is not None:  # the promise's bounds are on CLOCK_BOOTTIME; the clock counts on its monotonic one
        shift = clock.host.boottime() - clock.monotonic()
        clock.adopt(bounds[0] + shift, bounds[1] + shift)
    _measure(agent)
    deadline = clock.monotonic() + 30 * 60  # past it, the reaper settles the job (by its promise)
    while True:
        try:
            found = read(agent.store, keys.running(job_id), job_id)
            if found is None or found[0].claim != spec["attempt"] or not found[0].running_phase:
                return "its record has moved on (requeued, cancelled, decided or ended elsewhere): nothing recorded", None
            # The status its agent wrote as it reaped the shell, if it did: the keeper may have pinned the shell too
            # late to learn it (a command that ended at once).
            recorded = agent.ctx.workspace.exit_status(spec["job_dir"])
            voice = Voice("keeper", f"its agent {found[0].owner}", REPLACED)
            slot = take_over(agent.ctx, agent.runner, found[0], found[1], spec["job_dir"], voice,
                             ended=recorded or ended)
            ended = recorded or ended
            break
        except StoreError as e:
            if clock.monotonic() >= deadline:
                return f"the store did not answer ({type(e).__name__}); left to the reaper", None
            pause(min(5.0, agent.cfg.poll_seconds))
    if slot is None:
        return _taken_by(agent, spec)
    if ended == (None, None) and slot.result is None:
        slot.result = d.result("failed", error_class="internal", message="its agent stopped before recording its exit "
                                                                         "status, and this host kept none")
    agent.slots[job_id] = slot
    while slot.phase != Phase.DONE and clock.monotonic() < deadline:
        agent.guard(agent.runner.tick, slot, renew=True)
        if slot.phase != Phase.DONE:
            pause(min(0.2, max(0.01, slot.due(clock.monotonic(), agent.cfg.poll_seconds) - clock.monotonic())))
    agent.slots.pop(job_id, None)
    return ("recorded" if slot.phase == Phase.DONE else "not recorded within 30 minutes; left to the reaper"), None


def _taken_by(agent, spec: dict) -> tuple[str, float | None]:
    """Who moved the record first, read back: the same attempt still running under another agent is a take-over
    (whose promise the keeper follows); anything else is a move that stands."""
    from ..core import documents as d
    from ..core.errors import CorruptDocument
    from ..objectstore.base import StoreError

    try:
        found = read(agent.store, keys.running(spec["job_id"]), spec["job_id"])
    except (StoreError, CorruptDocument):
        found = None
    if found is None or found[0].claim != spec["attempt"] or not found[0].running_phase:
        return "another writer moved its record first: theirs stands", None
    doc = found[0]
    until = d.parse_iso(doc.lease_expires_at)
    if until is None:
        return "another writer moved its record first: theirs stands", None
    return (f"agent {doc.owner} took the job over first: following its promise (until {doc.lease_expires_at}), "
            "to record the outcome if that runs out first"), until
