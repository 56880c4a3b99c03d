"""Whether an agent may run a job (pure), and what its running jobs hold of what it offers.

`why_not` is the fence: capabilities, the provider fence, the spot policy, the cost cap against the agent's
price, and the resource envelope against everything the agent offers (can it EVER run the job). `Holdings`
is the rest of admission: what the agent's slots reserve (cores, memory, which accelerator devices), so that
a job is claimed only when its envelope fits what is free NOW; `Room` is what one claim pass may still give out.
Also: which agents' records still speak for a live agent (time is an argument), and what a job costs.
"""
from dataclasses import dataclass

from .documents import Spec

# An agent refreshes its record every 6 polls, between 1 s and 30 s, and counts as live for 3 refreshes,
# never less than LIVE_FLOOR (clocks of different hosts disagree a little; one loop may stall on an upload).
REFRESH_POLLS = 6
REFRESH_MIN, REFRESH_MAX = 1.0, 30.0
LIVE_REFRESHES = 3
LIVE_FLOOR = 10.0


@dataclass(frozen=True)
class Offer:
    """What an agent brings. memory None: not counted (an agent that does not declare it admits any size).
    devices: the accelerators' ids, named to a job in CUDA_VISIBLE_DEVICES and its siblings; an agent that
    declares none does not manage accelerator variables. price_per_hour: US dollars for the whole agent, or
    None when it declares none."""

    capabilities: frozenset[str]
    cores: int
    memory: int | None
    accelerators: int
    provider: str = "local"
    spot: bool = False
    devices: tuple[str, ...] = ()
    price_per_hour: float | None = None  # None: the agent declares no price (0 is a price: it costs nothing)
    slots: int = 1


def _spec(spec: "Spec | dict") -> Spec:
    """A job's Spec (a plain dict of a spec's fields, as a test or a caller building one by hand has, read as one)."""
    return spec if isinstance(spec, Spec) else Spec(spec)


def why_not(spec: "Spec | dict", offer: Offer) -> str | None:
    """None if the agent could run the job (when free); else the reason, in words for the agent's log and
    `stado status`."""
    spec = _spec(spec)
    missing = sorted(set(spec.capabilities or ()) - offer.capabilities)
    if missing:
        return f"needs capabilities {', '.join(missing)}"
    providers = spec.providers or ()
    if providers and offer.provider not in providers:
        return f"allows providers {', '.join(providers)}, this agent is {offer.provider}"
    spot = spec.spot
    if spot == "require" and not offer.spot:
        return "requires a spot machine, this agent is not spot"
    if spot == "never" and offer.spot:
        return "refuses spot machines, this agent is spot"
    cap = spec.cost_cap
    if cap is not None and offer.price_per_hour is None and not spec.cost_cap_advisory:
        return (f"has a cost cap of ${cap:g}, this agent declares no price (--price-per-hour), so its cost cannot be "
                "judged")
    if cap == 0 and (offer.price_per_hour or 0) > 0:
        return f"has a cost cap of $0, this agent costs ${offer.price_per_hour:g}/hour"
    if _cores(spec) > offer.cores:
        return f"needs {_cores(spec)} cores, this agent has {offer.cores}"
    if offer.memory is not None and _memory(spec) > offer.memory:
        return f"needs {size_text(_memory(spec))} of memory, this agent has {size_text(offer.memory)}"
    if _accelerators(spec) > offer.accelerators:
        return f"needs {_accelerators(spec)} accelerators, this agent has {offer.accelerators}"
    return None


def size_text(n: int) -> str:
    """Bytes as the shortest of G, M, K (one decimal at most): 99999G, 23.4G, 512M."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + unit
    return f"{n} bytes"


def _cores(spec: "Spec | dict") -> int:
    return _spec(spec).cores


def _memory(spec: "Spec | dict") -> int:
    return _spec(spec).memory


def _accelerators(spec: "Spec | dict") -> int:
    return _spec(spec).accelerators


# -- what is free now ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reservation:
    """What one slot holds: CARGO_BUILD_JOBS is its cores, CUDA_VISIBLE_DEVICES (and siblings) its devices."""

    cores: int
    memory: int
    accelerators: int
    devices: tuple[str, ...]


@dataclass
class Room:
    """What a claim pass may still give out. Values may go below zero once room is kept back for a job that
    waits for it (a job ahead in claim order that waits for room keeps it back): then nothing that needs that resource fits."""

    slots: int
    cores: int
    memory: int | None
    accelerators: int

    def fits(self, spec: "Spec | dict") -> bool:
        return (self.slots >= 1 and _cores(spec) <= max(self.cores, 0)
                and (self.memory is None or _memory(spec) <= max(self.memory, 0))
                and _accelerators(spec) <= max(self.accelerators, 0))

    def take(self, spec: "Spec | dict") -> None:
        self.slots -= 1
        self.cores -= _cores(spec)
        self.accelerators -= _accelerators(spec)
        if self.memory is not None:
            self.memory -= _memory(spec)

    def short_of(self, spec: "Spec | dict") -> str:
        """What the job waits for, in words for the agent's log."""
        wants = []
        if self.slots < 1:
            wants.append("a slot")
        if _cores(spec) > max(self.cores, 0):
            wants.append(f"{_cores(spec)} cores ({max(self.cores, 0)} free)")
        if self.memory is not None and _memory(spec) > max(self.memory, 0):
            wants.append(f"{size_text(_memory(spec))} of memory ({size_text(max(self.memory, 0))} free)")
        if _accelerators(spec) > max(self.accelerators, 0):
            wants.append(f"{_accelerators(spec)} accelerators ({max(self.accelerators, 0)} free)")
        return ", ".join(wants) or "room"


class Holdings:
    """What this agent's slots hold of its offer, from a job's claim until its slot is dropped (the agent's
    own bookkeeping, in memory). `sync` keeps it in step with the slots: a job taken back or left by the
    worker this one replaced is held too, and a dropped one is let go."""

    def __init__(self, offer: Offer):
        self.offer = offer
        self.held: dict[str, Reservation] = {}

    def sync(self, running: "dict[str, Spec]") -> None:
        """running: the job id -> spec of every slot the agent has."""
        for job_id in [j for j in self.held if j not in running]:
            del self.held[job_id]
        for job_id, spec in running.items():
            self.hold(job_id, spec)

    def hold(self, job_id: str, spec: "Spec | dict") -> Reservation:
        """The job's reservation (made now, from what is free, if it has none yet)."""
        got = self.held.get(job_id)
        if got is None:
            taken = {device for r in self.held.values() for device in r.devices}
            free = [device for device in self.offer.devices if device not in taken]
            got = self.held[job_id] = Reservation(_cores(spec), _memory(spec), _accelerators(spec),
                                                  tuple(free[:_accelerators(spec)]))
        return got

    def free(self) -> Room:
        held = self.held.values()
        return Room(slots=self.offer.slots - len(self.held), cores=self.offer.cores - sum(r.cores for r in held),
                    memory=None if self.offer.memory is None else self.offer.memory - sum(r.memory for r in held),
                    accelerators=self.offer.accelerators - sum(r.accelerators for r in held))


# -- cost ----------------------------------------------------------------------------------------------

def share_of(spec: "Spec | dict", offer: Offer) -> float:
    """The share of the agent a job reserves: the largest of its cores, memory and accelerators as fractions of
    what the agent offers, and its one slot of the agent's slots (a job alone in the only slot pays for all)."""
    parts = [_cores(spec) / offer.cores, 1 / max(offer.slots, 1)]
    if offer.memory:
        parts.append(_memory(spec) / offer.memory)
    if offer.accelerators:
        parts.append(_accelerators(spec) / offer.accelerators)
    return min(1.0, max(parts))


def cost_of(spec: "Spec | dict", offer: Offer, seconds: float) -> float:
    """US dollars a job has cost after running `seconds`: the agent's price per hour (declared), pro-rated by its
    share."""
    return (offer.price_per_hour or 0.0) * share_of(spec, offer) * max(seconds, 0.0) / 3600.0


def past_cap(spec: "Spec | dict", offer: Offer, seconds: float) -> str | None:
    """Why the job must be stopped for its cost (its error message), or None while it is within its cap."""
    cap = _spec(spec).cost_cap
    if cap is None or not offer.price_per_hour:  # no price (an advisory cap), or free: it never passes
        return None
    cost = cost_of(spec, offer, seconds)
    if cost <= cap:
        return None
    return (f"its cost passed its cap of ${cap:g}: ${cost:.4f} after {seconds:.1f} s at ${offer.price_per_hour:g}/hour "
            f"for {share_of(spec, offer):.0%} of the agent; its process group was stopped")


# -- what agents' records say ----------------------------------------------------------------------------

def offer_of(record: dict) -> Offer | None:
    """The offer an agent published in its agents/ record (a field it lacks takes the agent's default); None if the
    record's offer cannot be read (an agent record is advisory: it is then not counted)."""
    try:
        memory = record.get("memory")
        return Offer(frozenset(str(c) for c in record.get("capabilities") or ()), max(1, int(record.get("cores") or 1)),
                     None if memory is None else int(memory), int(record.get("accelerators") or 0),
                     str(record.get("provider") or "local"), bool(record.get("spot")),
                     tuple(str(x) for x in record.get("accelerator_devices") or ()),
                     _price(record.get("price_per_hour")), max(1, int(record.get("slots") or 1)))
    except (TypeError, ValueError):
        return None


def _price(value) -> float | None:
    return None if value is None else float(value)


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
    recorded (a record that states no window cannot be judged: not live)."""
    silent = silent_for(record, now)
    window = record.get("live_for")
    if silent is None or isinstance(window, bool) or not isinstance(window, (int, float)):
        return False
    return silent <= max(LIVE_FLOOR, window)


def unschedulable(spec: "Spec | dict", agents: list[dict], now: float) -> str | None:
    """Why no live agent can run the job (None if one can, or if no agent is live to ask). Records of
    agents that stopped speaking (is_live) and agents that are stopping do not count."""
    reasons = []
    for record in agents:
        offer = offer_of(record)
        if record.get("stopping") or not is_live(record, now) or offer is None:
            continue
        reason = why_not(spec, offer)
        if reason is None:
            return None
        reasons.append(f"{record.get('instance_ref')}: {reason}")
    return "; ".join(sorted(set(reasons))) or None


NO_AGENT = "no live agent serves this queue: start one with `stado agent` (it claims at once)"


def waiting_reason(spec: "Spec | dict", agents: list[dict], held: dict[str, list], now: float) -> str | None:
    """Why a queued job is not running yet, as far as the agents' records and the running jobs tell (None: an agent
    has room for it, so its next look at the queue claims it). `agents`: live agents' records; `held`: agent id ->
    the specs of the jobs it runs now (from their running records, fresher than an agent's own record)."""
    live = [r for r in agents if is_live(r, now) and not r.get("stopping") and offer_of(r) is not None]
    if not live:
        return NO_AGENT
    able = [r for r in live if why_not(spec, offer_of(r)) is None]  # type: ignore[arg-type]
    if not able:
        return f"no live agent can run it ({unschedulable(spec, live, now)})"
    full = []
    for record in able:
        offer = offer_of(record)
        assert offer is not None
        specs = held.get(str(record.get("agent")), [])
        used_cores = sum(_cores(s) for s in specs)
        used_memory = sum(_memory(s) for s in specs)
        used_acc = sum(_accelerators(s) for s in specs)
        if len(specs) >= offer.slots:
            full.append(f"{record.get('instance_ref')} runs {len(specs)}/{offer.slots}")
        elif used_cores + _cores(spec) > offer.cores:
            full.append(f"{record.get('instance_ref')} has {offer.cores - used_cores} of {offer.cores} cores free, "
                        f"it needs {_cores(spec)}")
        elif offer.memory is not None and used_memory + _memory(spec) > offer.memory:
            full.append(f"{record.get('instance_ref')} has {size_text(max(0, offer.memory - used_memory))} of memory "
                        f"free, it needs {size_text(_memory(spec))}")
        elif used_acc + _accelerators(spec) > offer.accelerators:
            full.append(f"{record.get('instance_ref')} has {offer.accelerators - used_acc} accelerators free, it "
                        f"needs {_accelerators(spec)}")
        else:
            return None
    return "every agent that can run it is full (" + "; ".join(sorted(full)) + ")"
