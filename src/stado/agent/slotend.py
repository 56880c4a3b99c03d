"""The end of a slot (runner.SlotRunner): once its process group is gone and its artifacts and output are up,
the attempt's outcome is decided and settled (jobs.finish), or the cancel, the shutdown or the other writer
that took the running record is honoured. Every way out leaves the slot DONE: the agent drops it."""
from ..core import documents as d
from .. import jobs
from ..core import keys
from ..core.admission import cost_of
from ..store.cas import new_nonce, read, replace
from ..core.errors import CorruptDocument
from .context import AgentContext
from .slot import Phase, Slot, Stop


def finish(ctx: AgentContext, slot: Slot) -> None:
    if slot.stop == Stop.LOST:
        ctx.log(f"{slot.job_id}: {slot.stopped_words}; nothing recorded (the job is no longer ours)")
        return _done(slot)
    if slot.stop == Stop.CANCEL:
        return _settle_cancel(ctx, slot)
    if slot.stop == Stop.SHUTDOWN:
        return _settle_shutdown(ctx, slot)
    if slot.stop == Stop.HANDBACK:
        return _hand_back(ctx, slot)
    if slot.stop == Stop.KEPT:
        return _settle_kept(ctx, slot)
    _settle(ctx, slot, _outcome_of(ctx, slot))


def _settle_kept(ctx: AgentContext, slot: Slot) -> None:
    """Its keeper stopped its processes while this agent did not renew (stopped, or cut off from the store): the
    attempt's worker was lost, as the reaper would have judged it, so it is requeued within the requeue budget
    (failed past it), with the keeper's reason; a keeper or a reaper that recorded it first stands."""
    from ..jobs.reaper import lapse
    from .standin import KEPT

    try:
        new = lapse(ctx.store, slot.doc, slot.version, writer=ctx.agent_id, reason=KEPT, now=ctx.clock.wall())
        found = None
        if new is None:  # a renewal of ours may have landed though its answer was lost: decide on top of it
            found = read(ctx.store, keys.running(slot.job_id), slot.job_id)
            if found is not None and jobs.own_write(slot.doc, found[0]):
                new = lapse(ctx.store, found[0], found[1], writer=ctx.agent_id, reason=KEPT, now=ctx.clock.wall())
                found = None
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: {slot.stopped_words} by its keeper; its verdict could not be recorded: {e}")
        return _done(slot)
    if new is None and found is not None and found[0].cancelling and found[0].claim == slot.doc.claim:
        slot.doc, slot.cancel_seen = found[0], found  # a cancel of this attempt came first: its processes are gone
        return _settle_cancel(ctx, slot)
    if new is None and found is not None and found[0].claim == slot.doc.claim and found[0].finishing:
        # The keeper's verdict (or a reaper's), decided and not yet finished: any writer may finish it, and this
        # agent does before it may call itself idle, so that the job is back in the queue when it next looks.
        try:
            done = jobs.settle(ctx.store, found[0], found[1], writer=ctx.agent_id, now=ctx.clock.wall())
        except CorruptDocument as e:
            ctx.log(f"{slot.job_id}: {slot.stopped_words} by its keeper; the verdict decided first cannot be "
                    f"finished: {e}")
            return _done(slot)
        how = "finished by its writer" if done is None else "requeued" if done.state == d.QUEUED else done.state
        ctx.log(f"{slot.job_id}: {slot.stopped_words} by its keeper; the verdict another writer decided first "
                f"stands ({how})")
    elif new is None:
        ctx.log(f"{slot.job_id}: {slot.stopped_words} by its keeper; its record was moved first (the keeper's "
                "verdict, a reaper's or a cancel): theirs stands")
    else:
        ctx.log(f"{slot.job_id}: {slot.stopped_words} by its keeper -> "
                f"{'requeued' if new.state == d.QUEUED else new.state} ({KEPT})")
    _done(slot)


def _outcome_of(ctx: AgentContext, slot: Slot) -> dict:
    """The attempt's outcome: decided without a process (input unavailable, spawn error), or from how its command
    ended and why its group was stopped."""
    if slot.result is not None:
        return slot.result
    assert slot.exit is not None
    exit_code, sig = slot.exit
    res = d.classify_exit(exit_code, sig, timed_out=slot.stop == Stop.TIMEOUT,
                          timeout=slot.doc.spec.timeout)
    if slot.stop == Stop.COST_CAP:
        res = d.result("failed", exit_code=exit_code, signal=sig, error_class="cost_cap", message=slot.cost_note)
    if slot.upload_error:
        res = d.result("failed", exit_code=exit_code, error_class="internal", message=slot.upload_error)
    if ctx.offer.price_per_hour is not None:  # what the attempt cost, from its start until it was settled
        res["cost_usd"] = round(cost_of(slot.doc.spec, ctx.offer, ctx.clock.monotonic() - slot.started_mono), 6)
    return res


def _done(slot: Slot) -> None:
    slot.phase = Phase.DONE


def _settle(ctx: AgentContext, slot: Slot, res: dict) -> None:
    doc = slot.doc if slot.process is None else slot.doc.with_(process=slot.process)
    try:
        got = jobs.finish(ctx.store, doc, slot.version, res, now=ctx.clock.wall())
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                f"(`stado repair {slot.job_id}`)")
        return _done(slot)
    if isinstance(got, jobs.Overtaken):
        return _settle_overtaken(ctx, slot, doc, got.current, got.version, res=res if slot.process else None)
    assert got is not None  # its own take just landed: the move is its to finish
    how = f"exit {res['exit_code']}" if res["exit_code"] is not None else (
        f"signal {res['signal']}" if res["signal"] else res["error"]["class"] if res["error"] else "?")
    ctx.log(f"{slot.job_id}: {how} -> {got.state}" + (" (retry queued)" if got.state == d.QUEUED else ""))
    _done(slot)


def _settle_overtaken(ctx: AgentContext, slot: Slot, doc: d.Job, current: d.Job | None, version=None, *,
                      res: dict | None = None) -> None:
    """The slot's move was refused: another writer moved its running record first. `res`: the outcome this slot
    holds (its command ended here), recorded still if the job can be taken back from the queue."""
    if current is not None and current.cancelling and current.claim == doc.claim:
        slot.doc = current  # a cancel of this very attempt; another claim's cancel is its own owner's to settle
        slot.cancel_seen = None if version is None else (current, version)
        return _settle_cancel(ctx, slot)
    if (current is not None and current.finishing and current.claim == doc.claim
            and not current.reaped):
        # Our own decision, written by an earlier pass whose move was interrupted: finish it.
        try:
            found = read(ctx.store, keys.running(slot.job_id), slot.job_id)
            ours = found is not None and found[0].claim == doc.claim
            got = jobs.settle(ctx.store, *found, writer=ctx.agent_id, now=ctx.clock.wall()) if found and ours else None
        except CorruptDocument as e:
            ctx.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                    f"(`stado repair {slot.job_id}`)")
            return _done(slot)
        ctx.log(f"{slot.job_id}: {got.state if got else 'settled by another agent'} (finished the move of an "
                "earlier pass)")
        return _done(slot)
    if current is None:
        recorded = _recorded_here(ctx, doc)
        if recorded is not None:  # an earlier try of this settle wrote it, its answer lost: nothing is missing
            ctx.log(f"{slot.job_id}: -> {recorded} (recorded by an earlier try of this settle)")
            return _done(slot)
    if res is not None and (current is None or current.claim != doc.claim):
        # Requeued while this outcome waited to be recorded (its lease lapsed): take the job back from the queue, as
        # re-adoption does, and record the outcome, rather than let the command run again.
        took = _took_back(ctx, slot)
        if took == "taken":
            return _settle(ctx, slot, res)
        if took == "unsure":
            return None  # its claim is checked on the next tick (runner._verified), then settled
        return _done(slot)
    ctx.log(f"{slot.job_id}: ended, but its running record was taken over or removed; nothing recorded")
    _done(slot)


def _recorded_here(ctx: AgentContext, doc: d.Job) -> str | None:
    """The state of a terminal record this very attempt's settle wrote (or a retry it queued), else None."""
    from ..queue.lookup import terminal_records

    for state, (found, _) in terminal_records(ctx.store, doc.id).items():
        if found.claim == doc.claim:
            return state
    queued = read(ctx.store, keys.queued(doc.id), doc.id)
    if queued is not None and queued[0].requeued_from == doc.claim and not jobs.lost_worker_requeue(doc, queued[0]):
        return "queued (retry queued)"
    return None


def _took_back(ctx: AgentContext, slot: Slot) -> str:
    """jobs.readopt of a slot whose command ended here: 'taken' when the job is this attempt's again, 'unsure' when
    that is still to be checked (the slot holds the claim, checked on its next tick), 'lost' otherwise."""
    now = ctx.clock.wall()
    try:
        got = jobs.readopt(ctx.store, slot.doc, agent_id=ctx.agent_id, instance_ref=ctx.instance_ref,
                           lease_expires_at=ctx.lease.promise(now), now=now, owner_process=ctx.identity, ended=True)
    except jobs.Unverified as unsure:
        ctx.log(f"{slot.job_id}: ended, and was put back in the queue meanwhile; whether taking it back held is "
                "checked on the next tick")
        slot.doc, slot.version, slot.verify = unsure.doc, unsure.version, (unsure.queued, unsure.queued_version)
        return "unsure"
    if got.doc is None:
        ctx.log(f"{slot.job_id}: ended, but it was put back in the queue while its outcome waited to be recorded, "
                f"and {got.why} first; its outcome is not recorded")
        return "lost"
    slot.doc, slot.version = got.doc, got.version
    ctx.log(f"{slot.job_id}: ended, and was put back in the queue while its outcome waited to be recorded; took it "
            "back to record that outcome (nothing is started again)")
    return "taken"


def _settle_shutdown(ctx: AgentContext, slot: Slot) -> None:
    """Its agent was told to stop twice: the job is recorded cancelled, by this shutdown."""
    moved = d.cancelling_doc(slot.doc, by=f"shutdown of agent {ctx.agent_id} on {ctx.instance_ref}",
                             reason="its agent was told to stop twice (a second SIGTERM or SIGINT)",
                             now=ctx.clock.wall(), nonce=new_nonce())
    version, current = replace(ctx.store, keys.running(slot.job_id), moved, slot.version)
    if version is None:
        return _settle_overtaken(ctx, slot, slot.doc, current)
    slot.doc, slot.version = moved, version
    jobs.settle(ctx.store, moved, version, writer=ctx.agent_id, taken=True, now=ctx.clock.wall())
    ctx.log(f"{slot.job_id}: {slot.stopped_words}; job cancelled (by this agent's shutdown)")
    _done(slot)


def _hand_back(ctx: AgentContext, slot: Slot) -> None:
    """A claim whose process never started goes back to the queue, neither requeues nor failures moved (a cancel
    that reached it first is settled instead)."""
    try:
        jobs.give_back(ctx.store, slot.doc, slot.version, writer=ctx.agent_id, restore=True, handed_back=True,
                       now=ctx.clock.wall())
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: could not be handed back: {e}; its claim lapses to the reaper")
        return _done(slot)
    ctx.log(f"{slot.job_id}: handed back to the queue (not started; this agent drained)")
    _done(slot)


def _settle_cancel(ctx: AgentContext, slot: Slot) -> None:
    try:
        jobs.settle_own_cancel(ctx.store, slot.job_id, slot.doc.claim, writer=ctx.agent_id, now=ctx.clock.wall(),
                               seen=slot.cancel_seen)
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: {slot.stopped_words}; the cancel could not be settled: {e}; left for "
                f"an operator (`stado repair {slot.job_id}`)")
        return _done(slot)
    ctx.log(f"{slot.job_id}: {slot.stopped_words}; job cancelled")
    _done(slot)
