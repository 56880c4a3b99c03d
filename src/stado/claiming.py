"""What an agent knows of the queue between its polls, so that a poll costs what changed, not what waits.

Each poll lists one bounded page of the claim-order index (ready/: priority, then creation time; see
readyindex.py), whatever the queue holds. An entry is read (GET) only when its listed version is new to
this agent; an entry known to be unreadable, not for this agent, or held up is skipped until its version
changes. A job waiting for another job's artifacts costs nothing per waiting job: producers are looked
up once per poll whatever number of jobs wait on them, a producer still listed in queue/ or running/
needs no read at all (running/ is listed at most once per poll, and only while something waits), and a
producer's terminal record, final once written, is remembered for good.

One agent starts what it claims in claim order, strictly. Agents polling together race for the same head
of the queue; the create-if-absent write gives each job one winner, and a loser backs off for a random
part of a poll before its next pass (`backoff`), so agents drift apart instead of racing for every job.
"""
import random
import time

from runkit.ids import is_uuid

from . import jobs, keys
from .admission import why_not
from .cas import read, remove
from .errors import CorruptDocument
from .objectstore.base import Entry, ObjectStore, Version
from .pause import pause_record

READY, WAIT = "ready", "wait"


class QueueKnowledge:
    def __init__(self, store: ObjectStore):
        self.store = store
        self._docs: dict[str, tuple[Version, dict]] = {}   # queue key -> (version, decoded document)
        self._final: dict[str, str] = {}                    # producer id -> its terminal state (never changes)
        self._queued_ids: set[str] = set()
        self._running_ids: set[str] | None = None           # listed lazily, once per poll
        self._looked_up: dict[str, str | None] = {}         # producer id -> terminal state found this poll
        self._head_blocked = False
        self._cursor: str | None = None

    def list_window(self, window: int) -> tuple[list[tuple[str, Entry]], list[Entry]]:
        """One poll's view of the queue: the first `window` entries of the claim-order index (highest
        priority, then oldest), and, when all of those are taken up by jobs this agent cannot start now, one
        more page further on (a cursor that wraps round), so jobs behind a head of unclaimable ones are
        reached too. Returns (job entries in claim order, entries that are not job entries)."""
        head = self.store.list_page(keys.READY, limit=window)
        pages = [head]
        if len(head) == window and self._head_blocked:
            further = self.store.list_page(keys.READY, start_after=self._cursor or head[-1].key, limit=window)
            self._cursor = further[-1].key if len(further) == window else None
            pages.append(further)
        jobs, strays, seen = [], [], set()
        for entry in (e for page in pages for e in page):
            job_id = keys.job_id_of_ready(entry.key)
            if job_id is None or not is_uuid(job_id):
                strays.append(entry)
            elif job_id not in seen:
                seen.add(job_id)
                jobs.append((job_id, entry))
        listed = {entry.key for _, entry in jobs}
        for key in [k for k in self._docs if k not in listed]:
            del self._docs[key]
        self._queued_ids = seen
        self._running_ids = None
        self._looked_up = {}
        return jobs, strays

    def head_blocked(self, blocked: bool) -> None:
        """Whether the last pass found nothing it could start in the window's head (then the next pass also
        looks one page further)."""
        self._head_blocked = blocked
        if not blocked:
            self._cursor = None

    def document(self, job_id: str, entry: Entry) -> tuple[dict, Version] | None:
        """The entry's document (a copy of the queue entry): from memory while the index entry's version is
        unchanged, else one GET. CorruptDocument if it cannot be read; None if it is gone."""
        known = self._docs.get(entry.key)
        if known is not None and known[0] == entry.version:
            return known[1], known[0]
        found = read(self.store, entry.key, job_id)
        if found is None:
            self._docs.pop(entry.key, None)
            return None
        doc, version = found
        self._docs[entry.key] = (version, doc)
        return doc, version

    def forget(self, key: str) -> None:
        self._docs.pop(key, None)

    def inputs_state(self, queued: dict) -> str:
        """READY, WAIT (a producer has not finished) or the reason an input can never be delivered.
        CorruptDocument if a producer's terminal record cannot be read."""
        for ref in queued["spec"].get("inputs") or ():
            if ref.get("upload"):
                continue  # stored before the job was queued: nothing to wait for
            state = self._producer_state(ref["job"])
            if state is None:
                return WAIT
            if state != "completed":
                return f"input {ref['job']}:{ref['name']}: its job ended {state}"
        return READY

    def _producer_state(self, producer: str) -> str | None:
        """The producer's terminal state, or None while it has none."""
        if producer in self._final:
            return self._final[producer]
        if producer in self._queued_ids:
            return None
        if self._running_ids is None:
            self._running_ids = {job_id for e in self.store.list(keys.RUNNING)
                                 if (job_id := keys.job_id_of(e.key, keys.RUNNING))}
        if producer in self._running_ids:
            return None
        if producer not in self._looked_up:
            self._looked_up[producer] = None
            for state in keys.TERMINAL_STATES:
                if read(self.store, keys.terminal(state, producer), producer) is not None:
                    self._final[producer] = self._looked_up[producer] = state
                    break
        return self._looked_up[producer]


# -- the claim pass ------------------------------------------------------------------------------------

def claim_pass(agent) -> int:
    """Claim, in claim order, the jobs whose envelope fits what the agent has free (a slot, cores, memory,
    accelerators its slots do not hold). A job this agent could run but that does not fit what is free now
    keeps that room back from the jobs behind it in claim order, so a large job is not starved by a stream of
    small ones (it starts once its room is free; another agent with the room may take it first). Returns how
    many claimable jobs were seen (0: nothing to do). The pause record is read only when a job could be
    claimed; jobs this agent runs are never claimed (a queued job one of its own slots runs is taken back by
    that slot, not started)."""
    entries = _window(agent)
    if not entries:
        return 0
    paused = None
    room = agent.room()
    seen = claimed = 0
    for job_id, entry in entries:
        if room.slots < 1:
            agent.queue.head_blocked(False)
            return seen + 1
        if agent.said.get(entry.key) == entry.version or job_id in agent.blocked:
            continue  # known corrupt or ineligible (unchanged since), or held up until the slow cadence
        hint = _candidate(agent, job_id, entry)
        if hint is None:
            continue
        spec = hint["spec"]
        try:
            inputs = agent.queue.inputs_state(hint)
            if inputs == WAIT:
                seen += 1
                continue
            if not room.fits(spec):
                seen += 1
                _keep_room(agent, room, job_id, entry, spec)
                continue
            paused = _paused(agent) if paused is None else paused
            if paused:
                return 0
            ledger = _ledger(agent, job_id, entry)
            if ledger is None:
                continue
            seen += 1
            now, mono = agent.clock.now(), time.monotonic()
            got = jobs.claim(agent.store, ledger[0], agent_id=agent.id, instance_ref=agent.instance_ref,
                             lease_expires_at=agent.lease.promise(now), now=now, queued_version=ledger[1])
        except jobs.Unverified as unsure:
            _hold_unverified(agent, room, job_id, spec, unsure)
            claimed += 1
            continue
        except CorruptDocument as e:
            _block(agent, job_id, entry, e)
            continue
        agent.queue.forget(entry.key)
        if got is None:
            # Lost to another claimant (or the entry read was stale). Going on down the queue now would race
            # the winner again for the next job: back off instead, so agents polling together drift apart.
            agent.claim_backoff(backoff(agent.cfg.poll_seconds))
            break
        _hold(agent, room, job_id, spec)
        agent.runner.start(*got, inputs_missing=inputs if inputs != READY else None, claimed_mono=mono)
        claimed += 1
    else:
        agent.queue.head_blocked(claimed == 0)  # nothing here could start: look further next time
    return seen


def _window(agent) -> list:
    """(job id, index entry) of the head of the claim order, but the jobs this agent runs; strays reported."""
    listed, strays = agent.queue.list_window(agent.cfg.window)
    for entry in strays:
        agent.log_once(entry.key, entry.version, f"{entry.key}: not a job document; skipped")
    return [(job_id, entry) for job_id, entry in listed if job_id not in agent.slots]


def _keep_room(agent, room, job_id: str, entry, spec: dict) -> None:
    """A job this agent could run but that does not fit what is free now: its room is kept back for it, so
    nothing behind it takes what it waits for."""
    agent.log_once(f"room {entry.key}", entry.version, f"{job_id}: waits for {room.short_of(spec)}")
    room.take(spec)


def _hold_unverified(agent, room, job_id: str, spec: dict, unsure) -> None:
    """A claim whose check could not finish: held in a slot (its room taken), renewed, nothing started, and
    checked again on the next tick."""
    agent.log(f"{unsure}; held, not started: checked again on the next tick")
    _hold(agent, room, job_id, spec)
    agent.runner.start(unsure.doc, unsure.version, verify=(unsure.queued, unsure.queued_version))


def _ledger(agent, job_id: str, entry):
    """The job's queue entry, as the claim must take it (the index is a hint; the ledger decides); None, and
    the index entry removed, when it is gone (claimed or ended since: the index entry points nowhere)."""
    ledger = read(agent.store, keys.queued(job_id), job_id)
    if ledger is None:
        remove(agent.store, entry.key, entry.version)
        agent.queue.forget(entry.key)
    return ledger


def _block(agent, job_id: str, entry, error: CorruptDocument) -> None:
    """Another record of this job (or of its input's producer) is corrupt: this job cannot be decided on, the
    others can. Looked at again on the slow cadence (after `stado repair`, say)."""
    agent.blocked[job_id] = True
    agent.log_once(f"blocked {entry.key}", str(error), f"{job_id}: not claimed: {error}; skipped (`stado status` "
                   "lists it under problems)")


def _hold(agent, room, job_id: str, spec: dict) -> None:
    """The claimed job's reservation: taken from this pass's room and held by the agent until its slot goes."""
    room.take(spec)
    agent.holdings.hold(job_id, spec)


def _candidate(agent, job_id: str, entry: Entry) -> dict | None:
    """The entry's job if this agent may run it (known corrupt and ineligible ones are said once)."""
    try:
        found = agent.queue.document(job_id, entry)
    except CorruptDocument as e:
        agent.log_once(entry.key, entry.version, f"{e}: skipped")
        return None
    if found is None:
        return None
    reason = why_not(found[0]["spec"], agent.offer)
    if reason:
        agent.log_once(entry.key, entry.version, f"{job_id}: not for this agent: {reason}")
        return None
    return found[0]


def _paused(agent) -> bool:
    pause = pause_record(agent.store)
    if pause is None:
        agent.said.pop("pause", None)
        return False
    agent.log_once("pause", pause.get("nonce"), f"queue paused by {pause.get('by')} at {pause.get('at')}"
                   f" ({pause.get('reason') or 'no reason given'}): not claiming")
    return True


def backoff(poll_seconds: float) -> float:
    """Seconds to wait after a lost claim race before the next pass: a random part of a poll (at least a
    tenth), so that agents which lost to each other do not poll in step again."""
    return poll_seconds * (0.1 + 0.9 * random.random())
