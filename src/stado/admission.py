"""Whether this agent may run a job (pure). The later scheduler (order, admission) extends this;
for now it is the fence every agent applies before it claims. Also: which agents' records still speak
for a live agent (time is an argument)."""
from dataclasses import dataclass

# An agent refreshes its record every 6 polls, between 1 s and 30 s, and counts as live for 3 refreshes,
# never less than LIVE_FLOOR (clocks of different hosts disagree a little; one loop may stall on an upload).
REFRESH_POLLS = 6
REFRESH_MIN, REFRESH_MAX = 1.0, 30.0
LIVE_REFRESHES = 3
LIVE_FLOOR = 10.0


@dataclass(frozen=True)
class Offer:
    """What an agent brings: a local agent is provider 'local', never spot, and costs nothing."""

    capabilities: frozenset[str]
    cores: int
    memory: int | None
    accelerators: int
    provider: str = "local"
    spot: bool = False


def why_not(spec: dict, offer: Offer) -> str | None:
    """None if the job fits the offer; else the reason, in words for the agent's log and `stado status`."""
    missing = sorted(set(spec.get("capabilities") or ()) - offer.capabilities)
    if missing:
        return f"needs capabilities {', '.join(missing)}"
    providers = spec.get("providers") or ()
    if providers and offer.provider not in providers:
        return f"allows providers {', '.join(providers)}, this agent is {offer.provider}"
    spot = spec.get("spot", "allow")
    if spot == "require" and not offer.spot:
        return "requires a spot machine"
    if spot == "never" and offer.spot:
        return "refuses spot machines"
    if (spec.get("cores") or 1) > offer.cores:
        return f"needs {spec.get('cores')} cores, this agent has {offer.cores}"
    if spec.get("memory") and offer.memory is not None and spec["memory"] > offer.memory:
        return f"needs {spec['memory']} bytes of memory, this agent has {offer.memory}"
    if (spec.get("accelerators") or 0) > offer.accelerators:
        return f"needs {spec.get('accelerators')} accelerators, this agent has {offer.accelerators}"
    return None


def offer_of(record: dict) -> Offer:
    """The offer an agent published in its agents/ record."""
    return Offer(frozenset(record.get("capabilities") or ()), int(record.get("cores") or 1), record.get("memory"),
                 int(record.get("accelerators") or 0), record.get("provider") or "local", bool(record.get("spot")))


def refresh_seconds(poll_seconds: float) -> float:
    """How often an agent polling this often rewrites its record (its last_seen)."""
    return min(REFRESH_MAX, max(REFRESH_MIN, REFRESH_POLLS * poll_seconds))


def live_for(refresh: float) -> float:
    """How long after its last_seen an agent's record still counts as a live agent."""
    return max(LIVE_FLOOR, LIVE_REFRESHES * refresh)


def silent_for(record: dict, now: float) -> float | None:
    """Seconds since the agent last refreshed its record (None if it carries no readable last_seen)."""
    from .documents import parse_iso

    try:
        seen = parse_iso(record.get("last_seen"))
    except (TypeError, ValueError):
        return None
    return None if seen is None else now - seen


def is_live(record: dict, now: float) -> bool:
    """Whether an agents/ record speaks for a live agent: its last_seen is younger than the window it
    recorded (records from before windows were recorded: the 30 s refresh of that time)."""
    silent = silent_for(record, now)
    if silent is None:
        return False
    window = record.get("live_for")
    if isinstance(window, bool) or not isinstance(window, (int, float)):
        window = live_for(REFRESH_MAX)
    return silent <= max(LIVE_FLOOR, window)


def unschedulable(spec: dict, agents: list[dict], now: float) -> str | None:
    """Why no live agent can run the job (None if one can, or if no agent is live to ask). Records of
    agents that stopped speaking (is_live) and agents that are stopping do not count."""
    reasons = []
    for record in agents:
        if record.get("stopping") or not is_live(record, now):
            continue
        reason = why_not(spec, offer_of(record))
        if reason is None:
            return None
        reasons.append(f"{record.get('instance_ref')}: {reason}")
    return "; ".join(sorted(set(reasons))) or None
