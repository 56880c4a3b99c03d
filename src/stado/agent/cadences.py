"""The agent's slow cadences, as functions of its context (context.py) that the Agent (owner.py) calls when they
fall due: its agents/ record, the reaper's pass, the claim-order index kept in step with the queue, schedules
fired, and problems said once.
"""
import os

from ..core import documents as d, keys
from ..core.admission import Room, live_for, refresh_seconds
from ..core.problems import Problem
from ..queue import readyindex
from ..queue.pause import adopt_legacy
from ..store.cas import new_nonce
from ..store.storeclock import SKEW_BOUND, skew_words
from ..jobs.reaper import reap
from .context import AgentContext
from .takeover import settle_here, stop_orphans

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..queue.schedules import ScheduleKnowledge


def agent_record(ctx: AgentContext, free: Room, running: list[str], *, stopping: bool, generation: int) -> dict:
    """The agent's agents/ record: who it is, what it offers and has free, what it runs, and how often it writes."""
    cfg, offer = ctx.cfg, ctx.offer
    refresh = refresh_seconds(cfg.poll_seconds)
    return {"agent": ctx.agent_id, "host": cfg.host, "instance_ref": ctx.instance_ref, "pid": os.getpid(),
            "slots": cfg.slots, "running": running, "capabilities": sorted(offer.capabilities),
            "cores": offer.cores, "memory": offer.memory, "accelerators": offer.accelerators,
            "accelerator_devices": list(offer.devices), "provider": offer.provider, "spot": offer.spot,
            "price_per_hour": offer.price_per_hour,
            "free": {"cores": free.cores, "memory": free.memory, "accelerators": free.accelerators},
            "last_seen": d.iso(ctx.clock.wall()), "stopping": stopping, "poll_seconds": cfg.poll_seconds,
            "refresh_seconds": refresh, "live_for": live_for(refresh), "generation": generation,
            "nonce": new_nonce()}


def say_skew(ctx: AgentContext) -> None:
    skew = ctx.clock.skew()
    if skew is not None and abs(skew) > 1.0:
        ctx.log_once("clock", round(skew), f"this host's clock is {skew_words(skew)}: promises, the reaper's "
                                           f"verdicts and schedules go by the store's")


def report(ctx: AgentContext, source: str, problem: Problem) -> None:
    """A problem is said once (each pass would meet it again, until it is repaired), keyed by where and what it
    is, not by its words: said again when its text changes."""
    ctx.log_once(f"{source} {problem.kind} {problem.job_id}", problem.text, problem.text)


def settle_pass(ctx: AgentContext, runner, running: frozenset, watch, record, guard) -> None:
    """The reaper's pass (one LIST of running/, never of a terminal prefix): finish moves crashed agents left half
    done, requeue or fail jobs whose worker stopped speaking (its own slots, `running`, skipped: their renewals
    speak); a dead sibling's job on this host gets the restart check (takeover.settle_here: a slot it takes over
    is given to `record`); then the orphans of gone agents are stopped. `guard` is the agent's: a store that fails
    for a moment stops neither half."""
    summary = guard(reap, ctx.store, writer=ctx.agent_id, margin=ctx.cfg.reap_margin, skip=running, watch=watch,
                    clock=ctx.clock, now=ctx.clock.wall(),
                    here=lambda doc, version: settle_here(ctx, runner, doc, version, record))
    guard(stop_orphans, ctx, set(running))
    if summary is None:
        return
    for line in summary.lines:
        ctx.log(line)
    for problem in summary.problems:
        report(ctx, "reaper", problem)


def reconcile_index(ctx: AgentContext) -> None:
    if adopt_legacy(ctx.store):  # a pause written by a stado from before the record moved into ready/
        ctx.log_once("legacy pause", True, f"the queue pause in {keys.LEGACY_QUEUE_PAUSE} (written by an older "
                     f"stado) is kept in {keys.QUEUE_PAUSE} too, where agents see it")
    else:
        ctx.log_once.forget("legacy pause")
    for item in readyindex.reconcile(ctx.store):
        if isinstance(item, Problem):
            report(ctx, "index", item)
        else:
            ctx.log(item)


def fire_schedules(ctx: AgentContext, schedules: "ScheduleKnowledge") -> float:
    """Fire the schedules that are due, by the store's clock; when to look again, on the monotonic clock."""
    clock = ctx.clock
    skew = clock.skew()
    if skew is None or abs(skew) > SKEW_BOUND:
        # Not measured yet: the next agents/ record measures it (at once if the last one failed).
        why = ("the store's clock is not measured yet" if skew is None else
               f"this host's clock is {skew_words(skew)}, more than {SKEW_BOUND:.0f} s: fix the time of this host "
               "(NTP) or of the store; the other agents fire them")
        ctx.log_once("schedules", why, f"not firing schedules: {why}")
        return clock.monotonic() + (schedules.refresh if skew is not None else
                                    min(ctx.cfg.poll_seconds, schedules.refresh))
    ctx.log_once.forget("schedules")
    # Fire times go by the store's clock, and never before it (less what the measurement cannot tell).
    now = clock.wall() - clock.uncertainty
    for line in schedules.tick(now):
        ctx.log(line)
    return clock.monotonic() + max(0.05, min(schedules.due_at(now) - now, schedules.refresh))
