"""The end of a slot (runner.SlotRunner): once its process group is gone and its artifacts and output are up,
the attempt's outcome is decided and settled (jobs.finish), or the cancel, the shutdown or the other writer
that took the running record is honoured. Every way out leaves the slot DONE: the agent drops it."""
from .. import documents as d
from .. import jobs, keys
from ..admission import cost_of
from ..cas import new_nonce, read, replace
from ..errors import CorruptDocument
from .context import AgentContext
from .slot import Phase, Slot, Stop


def finish(ctx: AgentContext, slot: Slot) -> None:
    if slot.stop == Stop.LOST:
        ctx.log(f"{slot.job_id}: process group {slot.pgid} stopped; nothing recorded (the job is no longer ours)")
        return _done(slot)
    if slot.stop == Stop.CANCEL:
        return _settle_cancel(ctx, slot)
    if slot.stop == Stop.SHUTDOWN:
        return _settle_shutdown(ctx, slot)
    if slot.stop == Stop.HANDBACK:
        return _hand_back(ctx, slot)
    if slot.result is not None:
        return _settle(ctx, slot, slot.result)  # decided without a process; an earlier settle failed
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
    _settle(ctx, slot, res)


def _done(slot: Slot) -> None:
    slot.phase = Phase.DONE


def _settle(ctx: AgentContext, slot: Slot, res: dict) -> None:
    doc = slot.doc if slot.process is None else slot.doc.with_(process=slot.process)
    try:
        got = jobs.finish(ctx.store, doc, slot.version, res, now=ctx.clock.now())
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                f"(`stado repair {slot.job_id}`)")
        return _done(slot)
    if isinstance(got, jobs.Overtaken):
        return _settle_overtaken(ctx, slot, doc, got.current, got.version)
    assert got is not None  # its own take just landed: the move is its to finish
    how = f"exit {res['exit_code']}" if res["exit_code"] is not None else (
        f"signal {res['signal']}" if res["signal"] else res["error"]["class"] if res["error"] else "?")
    ctx.log(f"{slot.job_id}: {how} -> {got.state}" + (" (retry queued)" if got.state == d.QUEUED else ""))
    _done(slot)


def _settle_overtaken(ctx: AgentContext, slot: Slot, doc: d.Job, current: d.Job | None, version=None) -> None:
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
            got = jobs.settle(ctx.store, *found, writer=ctx.agent_id, now=ctx.clock.now()) if found and ours else None
        except CorruptDocument as e:
            ctx.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                    f"(`stado repair {slot.job_id}`)")
            return _done(slot)
        ctx.log(f"{slot.job_id}: {got.state if got else 'settled by another agent'} (finished the move of an "
                "earlier pass)")
        return _done(slot)
    ctx.log(f"{slot.job_id}: ended, but its running record was taken over or removed; nothing recorded")
    _done(slot)


def _settle_shutdown(ctx: AgentContext, slot: Slot) -> None:
    """Its agent was told to stop twice: the job is recorded cancelled, by this shutdown."""
    moved = d.cancelling_doc(slot.doc, by=f"shutdown of agent {ctx.agent_id} on {ctx.instance_ref}",
                             reason="its agent was told to stop twice (a second SIGTERM or SIGINT)",
                             now=ctx.clock.now(), nonce=new_nonce())
    version, current = replace(ctx.store, keys.running(slot.job_id), moved, slot.version)
    if version is None:
        return _settle_overtaken(ctx, slot, slot.doc, current)
    slot.doc, slot.version = moved, version
    jobs.settle(ctx.store, moved, version, writer=ctx.agent_id, taken=True, now=ctx.clock.now())
    ctx.log(f"{slot.job_id}: process group {slot.pgid} stopped; job cancelled (by this agent's shutdown)")
    _done(slot)


def _hand_back(ctx: AgentContext, slot: Slot) -> None:
    """A claim whose process never started goes back to the queue, neither requeues nor failures moved (a cancel
    that reached it first is settled instead)."""
    try:
        jobs.give_back(ctx.store, slot.doc, slot.version, writer=ctx.agent_id, restore=True, handed_back=True,
                       now=ctx.clock.now())
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: could not be handed back: {e}; its claim lapses to the reaper")
        return _done(slot)
    ctx.log(f"{slot.job_id}: handed back to the queue (not started; this agent drained)")
    _done(slot)


def _settle_cancel(ctx: AgentContext, slot: Slot) -> None:
    try:
        jobs.settle_own_cancel(ctx.store, slot.job_id, slot.doc.claim, writer=ctx.agent_id, now=ctx.clock.now(),
                               seen=slot.cancel_seen)
    except CorruptDocument as e:
        ctx.log(f"{slot.job_id}: process group {slot.pgid} stopped; the cancel could not be settled: {e}; left for "
                f"an operator (`stado repair {slot.job_id}`)")
        return _done(slot)
    ctx.log(f"{slot.job_id}: process group {slot.pgid} stopped; job cancelled")
    _done(slot)
