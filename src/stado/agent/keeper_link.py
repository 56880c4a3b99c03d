"""What an agent tells the keeper of each running job (stado/agent/keeper.py): it starts it beside the job's shell, and after
every write of the job's record rewrites the promise file the keeper watches.

The promise says until when the agent's last landed renewal holds, the version that write left, a renewal in
flight and the renewals since whose answer was an error. From those the keeper knows when to stop the job's
processes, and, once it has, whether a record it then finds is still this agent's own write (its verdict to
record) or another writer's move (theirs stands).
"""
from ..core import documents as d
from ..jobs.reaper import evidence_window
from .context import AgentContext
from .slot import Slot


def start(ctx: AgentContext, slot: Slot) -> None:
    """The keeper of the slot's process: it stops the job's processes should this agent stop renewing, and records
    an outcome this agent did not. Its promise first, which the keeper reads at once."""
    tell(ctx, slot)
    cfg = ctx.cfg
    spec = {"job_id": slot.job_id, "job_dir": slot.job_dir, "attempt": slot.doc.claim, "process": slot.process,
            "margin": cfg.reap_margin, "kill_after": cfg.kill_after, "agent_id": ctx.agent_id,
            "bridge": cfg.keeper_bridge,
            "agent": {"work_root": cfg.work_root, "stado_bin": cfg.stado_bin, "host": cfg.host,
                      "poll_seconds": cfg.poll_seconds, "kill_after": cfg.kill_after, "keep_work": cfg.keep_work,
                      "store_env": cfg.store_env, "reap_margin": cfg.reap_margin, "cores": ctx.offer.cores,
                      "memory": ctx.offer.memory, "price_per_hour": ctx.offer.price_per_hour,
                      "schedules": False}}
    slot.keeper = ctx.host.keep(spec)
    if slot.keeper is None and slot.process is not None:
        ctx.log(f"{slot.job_id}: its keeper could not be started; should this agent stop, the job's processes run "
                "on until an agent on this host stops them")


def tell(ctx: AgentContext, slot: Slot, trying: d.Job | None = None, base=None) -> None:
    """The slot's promise as its keeper reads it: until when it holds (from the write that made it), the version
    that write left, a renewal in flight (`trying`: its nonce, when it began, its lease, and the version it is
    written on, `base`: this agent's own write, maybe one whose answer was lost), and the renewals since that write
    whose answer was an error (`unanswered`: any of them may hold the record)."""
    if slot.process is None or slot.version is None:
        return  # no process to keep, or a claim not known yet
    slot.trying = None if trying is None else {"nonce": trying.nonce, "began": ctx.clock.monotonic(),
                                               "lease": float(trying.lease_seconds or 0.0),
                                               "base": None if base is None else list(base)}
    # A pulse after a failed renewal proves the worker alive for the evidence window (reaper.evidence_window), as
    # the reaper judges it: only once it is newer than the store's reading of the promise, which the last renewal's
    # write time can put past `until`.
    ctx.workspace.promise(slot.job_dir, {"job": slot.job_id, "attempt": slot.doc.claim, "owner": ctx.agent_id,
                                         "until": slot.promised_until, "late": slot.renew_took,
                                         "pulse": slot.pulsed, "window": evidence_window(slot.doc),
                                         "version": list(slot.version), "trying": slot.trying,
                                         "unanswered": list(slot.unanswered), "store": ctx.clock.offset_bounds()})
