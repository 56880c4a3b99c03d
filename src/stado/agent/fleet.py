"""Which agents serve this queue, as far as one LIST of agents/ tells, and where this agent stands among them.

Agents that poll together race for the head of the claim order; a claim pass spreads them over it (claim_pass.spread)
by this agent's rank among the live agents. Knowing them costs one LIST of agents/ (keys and stamps, no record
read) at the record's cadence, right after this agent rewrote its own, while its claim passes see work to claim (an
idle agent lists nothing more than its poll's page of ready/), and once more after a lost claim race or an entry
found gone (a race means a competitor this agent may not know yet: agents started together each list before the
others wrote).
A record counts as live while its `modified` stamp is younger than the liveness window of agents polling as this
one does (admission.live_for): a crashed agent's record drops out after that, a cleanly stopped agent's at once
(it deletes its record). The rank is a hint, never a guarantee: a wrong one costs a lost race, not a wrong claim.
"""
from runkit.core.ids import is_uuid

from ..core import keys
from ..core.admission import live_for, refresh_seconds
from ..objectstore.base import ObjectStore


class Fleet:
    def __init__(self, agent_id: str, poll_seconds: float):
        self.agent_id = agent_id
        self.window = live_for(refresh_seconds(poll_seconds))  # how old a record may be and still count as live
        self.peers: tuple[str, ...] = (agent_id,)                # live agent ids, sorted, this one among them
        self.listed_at: float | None = None                      # when it last listed, on the monotonic clock

    def refresh(self, store: ObjectStore, store_now: float, mono: float) -> None:
        """List agents/ once: the live agents are those whose record was written within the window."""
        self.listed_at = mono
        live = {self.agent_id}
        for entry in store.list(keys.AGENTS):
            agent_id = _agent_id(entry.key)
            if agent_id is not None and (entry.modified is None or store_now - entry.modified <= self.window):
                live.add(agent_id)
        self.peers = tuple(sorted(live))

    def rank(self) -> tuple[int, int]:
        """(this agent's place among the live agents, how many there are): (0, 1) when it knows of no other."""
        return self.peers.index(self.agent_id), len(self.peers)


def _agent_id(key: str) -> str | None:
    name = key[len(keys.AGENTS):]
    agent_id = name.removesuffix(".json")
    return agent_id if name.endswith(".json") and is_uuid(agent_id) else None
