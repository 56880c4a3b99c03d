"""Whether this agent may run a job (pure). The later scheduler (order, admission) extends this;
for now it is the fence every agent applies before it claims."""
from dataclasses import dataclass


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


def unschedulable(spec: dict, agents: list[dict]) -> str | None:
    """Why no live agent can run the job (None if one can, or if no agent is live to ask)."""
    reasons = []
    for record in agents:
        if record.get("stopping"):
            continue
        reason = why_not(spec, offer_of(record))
        if reason is None:
            return None
        reasons.append(f"{record.get('instance_ref')}: {reason}")
    return "; ".join(sorted(set(reasons))) or None
