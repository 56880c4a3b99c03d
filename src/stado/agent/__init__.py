"""One stado agent: the owner and everything it hands work to, in one place.

    owner.py      Agent: the worker's state, declared in one place; its loop, cadences and signals
    cadences.py   the slow cadences the Agent calls when due: its record, the reaper's pass, the index, schedules
    wakeups.py    Wakeups: how the loop sleeps and is woken (signals, a slot's thread, the store's ring)
    context.py    AgentContext: what collaborators get (store, ids, settings, clocks, log, processes, directories)
    claim_pass.py ClaimPass (the decisions of one pass over the claim order: Claim, Hold, Backoff)
    queue_knowledge.py  QueueKnowledge: what it knows of the queue between polls, keyed by version
    fleet.py      Fleet: the live agents (one LIST of agents/), for the claim pass's rank among them
    slot.py       Slot, its Phase and why it is stopped (Stop)
    runner.py     SlotRunner: each tick of a slot (launch, stop, the end)
    slot_renewal.py  SlotRenewal, its renewal half: renewing a claim, and meeting a refusal (re-adoption)
    slotend.py    the end of a slot: its outcome settled, or the cancel, shutdown or hand-back honoured
    takeover.py   the restart check at start: jobs the worker this one replaced left on this host; orphans stopped
    logonce.py    LogOnce: saying a thing once, bounded
    adapters:     processhost.py (the jobs' processes), jobio.py (their transfers), workspace.py and hostfiles.py
                  (their directories, the agents' locks), environment.py (a job's environment and $STADO_BIN shim)
    renewals.py   Renewals: each slot's renewals, on a thread of their own
    config.py     AgentConfig; lease.py the promise (pure)
    keeper.py     the keeper: a process beside each running job that outlives the agent (started by keeper_link)
    standin.py    what a keeper asks of the store when it must speak for a job its agent left
    drain.py      `stado agent --drain`: the agents of this host claim nothing new and hand their jobs back

A job's keeper (a process of its own beside the job's shell) imports its pieces from here: the package loads the
agent itself only when it is asked for.
"""
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import AgentConfig
    from .owner import Agent, run_agent

__all__ = ["Agent", "AgentConfig", "run_agent"]


def __getattr__(name: str):
    if name == "AgentConfig":
        from .config import AgentConfig

        return AgentConfig
    if name in ("Agent", "run_agent"):
        from . import owner

        return getattr(owner, name)
    raise AttributeError(f"module 'stado.agent' has no attribute {name!r}")
