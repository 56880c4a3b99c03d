"""The end of a slot (slot.SlotRunner): once its process group is gone and its artifacts and output are up,
the attempt's outcome is decided and settled (jobs.finish), or the cancel, the shutdown or the other writer
that took the running record is honoured. `a` is the agent, `slot` a slot.Slot."""
import time

from . import documents as d
from . import jobs, keys
from .admission import cost_of
from .cas import new_nonce, read, replace
from .errors import CorruptDocument


def finish(a, slot) -> None:
    if slot.stopping == "lost":
        a.log(f"{slot.job_id}: process group {slot.pgid} stopped; nothing recorded (the job is no longer ours)")
        return a.drop(slot)
    if slot.stopping == "cancel":
        return _settle_cancel(a, slot)
    if slot.stopping == "shutdown":
        return _settle_shutdown(a, slot)
    if slot.stopping == "handback":
        return _hand_back(a, slot)
    if slot.result is not None:
        return _settle(a, slot, slot.result)  # decided without a process; an earlier settle failed
    exit_code, sig = slot.ended
    res = d.classify_exit(exit_code, sig, timed_out=slot.stopping == "timeout",
                          timeout=slot.doc["spec"].get("timeout"))
    if slot.stopping == "cost_cap":
        res = d.result("failed", exit_code=exit_code, signal=sig, error_class="cost_cap", message=slot.cost_note)
    if slot.upload_error:
        res = d.result("failed", exit_code=exit_code, error_class="internal", message=slot.upload_error)
    if a.offer.price_per_hour is not None:  # what the attempt cost, from its start until it was settled
        res["cost_usd"] = round(cost_of(slot.doc["spec"], a.offer, time.monotonic() - slot.started_mono), 6)
    _settle(a, slot, res)

def _settle(a, slot, res: dict) -> None:
    doc = dict(slot.doc)
    if slot.process is not None:
        doc["process"] = slot.process
    try:
        got = jobs.finish(a.store, doc, slot.version, res, now=a.clock.now())
    except CorruptDocument as e:
        a.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
              f"(`stado repair {slot.job_id}`)")
        return a.drop(slot)
    if isinstance(got, jobs.Fenced):
        return _settle_fenced(a, slot, doc, got.current)
    how = f"exit {res['exit_code']}" if res["exit_code"] is not None else (
        f"signal {res['signal']}" if res["signal"] else res["error"]["class"] if res["error"] else "?")
    a.log(f"{slot.job_id}: {how} -> {got['state']}" + (" (retry queued)" if got["state"] == "queued" else ""))
    a.drop(slot)

def _settle_fenced(a, slot, doc: dict, current: dict | None) -> None:
    if current is not None and current.get("phase") == "cancelling" and current.get("claim") == doc.get("claim"):
        slot.doc = current  # a cancel of this very attempt; another claim's cancel is its own owner's to settle
        return _settle_cancel(a, slot)
    if (current is not None and current.get("phase") == "finishing" and current.get("claim") == doc.get("claim")
            and not current.get("reaped")):
        # Our own decision, written by an earlier pass whose move was interrupted: finish it.
        try:
            found = read(a.store, keys.running(slot.job_id), slot.job_id)
            ours = found is not None and found[0].get("claim") == doc.get("claim")
            got = jobs.settle(a.store, *found, writer=a.id, now=a.clock.now()) if ours else None
        except CorruptDocument as e:
            a.log(f"{slot.job_id}: ended, but its outcome could not be recorded: {e}; left for an operator "
                  f"(`stado repair {slot.job_id}`)")
            return a.drop(slot)
        a.log(f"{slot.job_id}: {got['state'] if got else 'settled by another agent'} (finished the move of an "
              "earlier pass)")
        return a.drop(slot)
    a.log(f"{slot.job_id}: ended, but its running record was taken over or removed; nothing recorded")
    a.drop(slot)

def _settle_shutdown(a, slot) -> None:
    """Its agent was told to stop twice: the job is recorded cancelled, by this shutdown."""
    moved = d.cancelling_doc(slot.doc, by=f"shutdown of agent {a.id} on {a.instance_ref}",
                             reason="its agent was told to stop twice (a second SIGTERM or SIGINT)", now=a.clock.now(),
                             nonce=new_nonce())
    version, current = replace(a.store, keys.running(slot.job_id), moved, slot.version)
    if version is None:
        return _settle_fenced(a, slot, slot.doc, current)
    slot.doc, slot.version = moved, version
    jobs.settle(a.store, moved, version, writer=a.id, taken=True, now=a.clock.now())
    a.log(f"{slot.job_id}: process group {slot.pgid} stopped; job cancelled (by this agent's shutdown)")
    a.drop(slot)

def _hand_back(a, slot) -> None:
    """A claim whose process never started goes back to the queue, neither requeues nor failures moved (a cancel
    that reached it first is settled instead)."""
    try:
        jobs.give_back(a.store, slot.doc, slot.version, writer=a.id, restore=True, handed_back=True,
                       now=a.clock.now())
    except CorruptDocument as e:
        a.log(f"{slot.job_id}: could not be handed back: {e}; its claim lapses to the reaper")
        return a.drop(slot)
    a.log(f"{slot.job_id}: handed back to the queue (not started; this agent drained)")
    a.drop(slot)

def _settle_cancel(a, slot) -> None:
    try:
        found = read(a.store, keys.running(slot.job_id), slot.job_id)
        if found is not None and found[0].get("phase") == "cancelling" and found[0].get("claim") == slot.doc["claim"]:
            jobs.settle(a.store, *found, writer=a.id, now=a.clock.now())
    except CorruptDocument as e:
        a.log(f"{slot.job_id}: process group {slot.pgid} stopped; the cancel could not be settled: {e}; left for an "
              f"operator (`stado repair {slot.job_id}`)")
        return a.drop(slot)
    a.log(f"{slot.job_id}: process group {slot.pgid} stopped; job cancelled")
    a.drop(slot)
