"""The claim pass: the decisions an agent makes over one page of the claim order (Claim, Hold, Backoff), what it
knows of the queue given (queue_knowledge.py).

One agent alone starts what it claims in claim order, strictly. Agents polling together would race for the
same head of the queue (the create-if-absent write gives each job one winner, the others pay requests for
nothing): a pass of an agent that knows of others (fleet.py) begins, within the head of the highest priority
listed, at an offset given by its rank among them (`spread`), so that each takes a different part of the head;
rank 0 keeps the exact order. A loser (rare once agents are spread) backs off for a random part of a poll before
its next pass (`backoff`), so agents that keep meeting drift apart, and lists the live agents again (a competitor
it did not know of yet is the likely cause).
"""
import random

from runkit.core.records import record

from ..core import documents as d
from .. import jobs
from ..core import keys
from ..core.admission import Room, why_not
from ..core.errors import CorruptDocument
from ..objectstore.base import Entry
from .context import AgentContext
from .queue_knowledge import READY, WAIT, QueueKnowledge


class Claim(record("Claim", "doc version inputs_missing claimed_mono dependency_failed", defaults=(None,))):
    """A job claimed: the agent gives it a slot and starts it (or ends it at once: `inputs_missing`, why an input
    can never be delivered; `dependency_failed`, the dependency whose condition can never hold, as
    dependencies.judge says it). `claimed_mono`: when the claim's write began, on the agent's monotonic clock."""

    __slots__ = ()


def _claim(got, inputs, mono: float) -> Claim:
    """The Claim of a job just claimed, from what its inputs and dependencies were found to be."""
    return Claim(got[0], got[1], inputs if isinstance(inputs, str) and inputs != READY else None, mono,
                 inputs if isinstance(inputs, dict) else None)


class Hold(record("Hold", "unsure claimed_mono dependency_failed", defaults=(None,))):
    """A claim that landed but could not be checked (jobs.Unverified): held in a slot, nothing started, checked again
    on the next tick. `claimed_mono`: as Claim's (its promise runs from the claim's write, not from the slot's);
    `dependency_failed`: as Claim's (once the claim is found genuine, the job ends so)."""

    __slots__ = ()


class Backoff(record("Backoff", "seconds")):
    """Lost a claim race: the next pass comes `seconds` from now, not a poll from now."""

    __slots__ = ()


class ClaimPass:
    """One claim pass: iterating it claims, in claim order, the jobs whose envelope fits what the agent has free (a
    slot, cores, memory, accelerators its slots do not hold), and yields each decision (Claim, Hold, Backoff) for the
    agent to record before the next one is made. A job this agent could run but that does not fit what is free now
    keeps that room back from the jobs behind it in claim order, so a large job is not starved by a stream of small
    ones (it starts once its room is free; another agent with the room may take it first). `seen` afterwards: how
    many claimable jobs it saw (0: nothing to do). The pause record is read only when a job could be claimed; jobs
    this agent runs (`running`) are never claimed (a queued job one of its own slots runs is taken back by that
    slot, not started). `rank`: (this agent's rank among the live agents, how many): the walk is spread over the
    head (`spread`). Afterwards, `lost`: how many claim races it lost; `gone`: how many entries named a job that was
    no longer queued when its ledger entry was read (most often, another agent had just taken it)."""

    def __init__(self, ctx: AgentContext, queue: QueueKnowledge, *, running, room: Room,
                 rank: tuple[int, int] = (0, 1)):
        self.ctx, self.queue, self.running, self.room, self.rank = ctx, queue, running, room, rank
        self.seen = self.lost = self.gone = 0

    def __iter__(self):
        entries = self._window()
        if not entries:
            return
        mono = self.ctx.clock.monotonic()
        due_after = DUE_POLLS * self.ctx.cfg.poll_seconds
        walk, passed = spread(entries, rank=self.rank, slots=self.ctx.cfg.slots,
                              overdue=lambda key: self.queue.overdue(key, mono, due_after))
        visited = set[str]()
        claimed = yield from self._walk(walk, visited)
        if claimed:  # the entries it went past are left to agents of lower rank: noted, so that none waits for good
            self.queue.passed_over([e.key for _, e in passed if e.key not in visited], mono)

    def _walk(self, entries, visited: set[str]):
        """The pass over `entries` in the order given; returns how many it claimed (or held)."""
        ctx, queue, room = self.ctx, self.queue, self.room
        paused = None
        seen = claimed = 0
        for job_id, entry in entries:
            if room.slots < 1:
                queue.head_blocked(False)
                self.seen = seen + 1
                return claimed
            visited.add(entry.key)
            if queue.skipped(job_id, entry):
                continue  # known corrupt or ineligible (unchanged since), or held up until the slow cadence
            hint = self._candidate(job_id, entry)
            if hint is None:
                continue
            spec = hint.spec
            try:
                inputs = self._inputs_unless_waiting(job_id, entry, hint)
                if inputs is None:
                    seen += 1
                    continue
                paused = self._paused() if paused is None else paused
                if paused:
                    self.seen = 0
                    return claimed
                ledger = self._ledger(job_id, entry)
                if ledger is None:
                    continue
                seen += 1
                now, mono = ctx.clock.wall(), ctx.clock.monotonic()
                got = jobs.claim(ctx.store, ledger[0], agent_id=ctx.agent_id, instance_ref=ctx.instance_ref,
                                 lease_expires_at=ctx.lease.promise(now), now=now, queued_version=ledger[1],
                                 index_version=entry.version, recheck=False, owner_process=ctx.identity)
            except jobs.Unverified as unsure:
                room.take(spec)
                claimed += 1
                self.seen = seen
                yield Hold(unsure, mono, inputs if isinstance(inputs, dict) else None)
                continue
            except CorruptDocument as e:
                self._blocked(job_id, entry, e)
                continue
            queue.forget(entry.key)
            if got is None:
                # Lost to another claimant (or the entry read was stale): back off rather than race the winner for
                # the next job, so agents polling together drift apart (docs/stado.md, "Claim order with several
                # agents": going on tripled the lost races at 8 agents unspread).
                self.lost += 1
                self.seen = seen
                yield Backoff(backoff(ctx.cfg.poll_seconds))
                break
            room.take(spec)
            claimed += 1
            self.seen = seen
            yield _claim(got, inputs, mono)
        else:
            queue.head_blocked(claimed == 0)  # nothing here could start: look further next time
        self.seen = seen
        return claimed

    def _inputs_unless_waiting(self, job_id: str, entry, hint):
        """The job's inputs state (or, when a dependency can never hold, what its dependency_failed record says:
        a dict), or None when it waits: for its retry delay, a dependency, an input (none of them costs a request
        per waiting job), or for room on this agent (then the room is kept back for it: nothing behind it takes
        what it waits for)."""
        if d.retry_waits(hint, self.ctx.clock.wall()):
            return None  # the retry delay, on the store's time (the owner decided the outcome on that time too)
        inputs = self.queue.dependencies_state(hint)
        if inputs == READY:
            inputs = self.queue.inputs_state(hint)
        if inputs == WAIT:
            return None
        if not self.room.fits(hint.spec):
            self.ctx.log_once(f"room {entry.key}", entry.version, f"{job_id}: waits for {self.room.short_of(hint.spec)}")
            self.room.take(hint.spec)
            return None
        return inputs

    def _blocked(self, job_id: str, entry, error: CorruptDocument) -> None:
        """Another record of this job (or of its input's producer) is corrupt: this job cannot be decided on, the
        others can. Looked at again on the slow cadence (after `stado repair`, say)."""
        self.queue.blocked.add(job_id)
        self.ctx.log_once(f"blocked {entry.key}", str(error), f"{job_id}: not claimed: {error}; skipped (`stado "
                          "status` lists it under problems)")

    def _window(self) -> list:
        """(job id, index entry) of the head of the claim order, but the jobs this agent runs; strays reported."""
        listed, strays = self.queue.list_window(self.ctx.cfg.window)
        for entry in strays:
            self.ctx.log_once(entry.key, entry.version, f"{entry.key}: not a job document; skipped")
        return [(job_id, entry) for job_id, entry in listed if job_id not in self.running]

    def _ledger(self, job_id: str, entry):
        """The job's queue entry, as the claim must take it (QueueKnowledge.ledger); None when it is gone."""
        ledger = self.queue.ledger(job_id, entry)
        if ledger is None:
            self.gone += 1
            self.queue.forget(entry.key)
        elif ledger[0].held:  # held since the index entry was read (its copy follows): not claimed
            self.queue.skip(entry)
            return None
        elif d.retry_waits(ledger[0], self.ctx.clock.wall()):
            return None  # a retry queued since the index entry was read (a stalled pass): its delay holds too
        return ledger

    def _candidate(self, job_id: str, entry: Entry) -> d.Job | None:
        """The entry's job if this agent may run it (known corrupt and ineligible ones are said once)."""
        try:
            found = self.queue.document(job_id, entry)
        except CorruptDocument as e:
            self.queue.skip(entry)
            self.ctx.log_once(entry.key, entry.version, f"{e}: skipped")
            return None
        if found is None:
            self.gone += 1
            return None
        if found[0].held:  # `stado job hold`: skipped, at no cost, until its entry changes (a release rewrites it)
            self.queue.skip(entry)
            self.ctx.log_once(entry.key, entry.version, f"{job_id}: held by {found[0].held.get('by')}: not claimed")
            return None
        reason = why_not(found[0].spec, self.ctx.offer)
        if reason:
            self.queue.skip(entry)
            self.ctx.log_once(entry.key, entry.version, f"{job_id}: not for this agent: {reason}")
            return None
        return found[0]

    def _paused(self) -> bool:
        pause = self.queue.pause()
        if pause is None:
            self.ctx.log_once.forget("pause")
            return False
        self.ctx.log_once("pause", pause.get("nonce"), f"queue paused by {pause.get('by')} at {pause.get('at')}"
                          f" ({pause.get('reason') or 'no reason given'}): not claiming")
        return True


def backoff(poll_seconds: float) -> float:
    """Seconds to wait after a lost claim race before the next pass: a random part of a poll (at least a
    tenth), so that agents which lost to each other do not poll in step again."""
    return poll_seconds * (0.1 + 0.9 * random.random())


# A pass that went past entries to spread (`spread`) walks them first, in order, once they have been passed over
# for this many polls: the agent they were left to is not coming for them.
DUE_POLLS = 2


def spread(entries: list, *, rank: tuple[int, int], slots: int, overdue) -> tuple[list, list]:
    """The order a pass walks the window in, and the entries it goes past to spread. Agents that poll together list
    the same head: each begins at its own part of it, `rank` x `slots` entries in (each agent may claim up to
    `slots` jobs a pass), within the first `agents` x `slots` entries of the highest priority listed, then goes on
    in order round that part of the head, then the rest. Nothing of a higher priority is ever gone past (only the
    first priority's entries are reordered), an entry `overdue(key)` is walked first, and rank 0, or an agent that
    knows of no other, walks in exact claim order. `entries`: (job id, index entry) in claim order."""
    place, agents = rank
    if place == 0 or agents < 2 or not entries:
        return entries, []
    top = _priority(entries[0][1].key)
    band = next((i for i, (_, e) in enumerate(entries) if _priority(e.key) != top), len(entries))
    head = entries[:min(band, agents * slots)]
    offset = (place * slots) % len(head)
    if offset == 0:
        return entries, []
    due = [item for item in head[:offset] if overdue(item[1].key)]
    passed = [item for item in head[:offset] if not overdue(item[1].key)]
    return due + head[offset:] + passed + entries[len(head):], passed


def _priority(key: str) -> str:
    """The priority part of a claim-order index key (keys.ready: ready/<rank>-<id>)."""
    return key[len(keys.READY):].partition("-")[0]
