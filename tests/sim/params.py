"""The shape of one run, drawn from its choices first (swarm testing: each seed switches its own set of
faults on, at its own rates, as TigerBeetle's VOPR does), so shrinking a run also shrinks its world:
fewer agents and jobs, fewer fault kinds. A profile pins some fields (the named scenarios use them)."""
from dataclasses import dataclass, fields, replace

from .choices import Choices


@dataclass
class Params:
    agents: int = 2             # agents at the start (each may crash and be replaced)
    slots: int = 1              # job slots per agent
    jobs: int = 2               # jobs submitted, one `submit` each, by one submitter
    retries: int = 0            # --retries of every job
    exit_fail: float = 0.0      # chance that a process exits 1 (a failed attempt)
    max_run: float = 2.0        # longest a process runs, s
    cancels: int = 0            # cancellers, each cancelling one acknowledged job
    poll: float = 1.0           # the agents' --poll-seconds
    settle_every: float = 2.0   # the agents' --settle-seconds (the leftovers pass)
    p_fail: float = 0.0         # per request: fails before it lands
    p_lost: float = 0.0         # per request: lands, and its answer is lost
    fault_verbs: tuple | None = None  # the requests p_fail and p_lost apply to (None: every one)
    p_crash: float = 0.0        # per step: the chosen actor crashes instead
    p_stall: float = 0.0        # per step: the chosen actor stalls (20 ms up to stall_max) before its request
    slow: tuple | None = None   # (verb, key prefix): requests of this kind stall half the time
    p_jump: float = 0.0         # per step: the chosen actor's wall clock jumps (up to 10 minutes either way)
    stall_max: float = 6.0
    priorities: bool = False    # schedule by actor priorities (PCT) rather than uniformly
    p_reprioritise: float = 0.0  # per step, in a priority run: the chosen actor's priority is drawn again
    restarts: int = 0           # crashed agents replaced by a new agent on the same host, at most
    skew: float = 0.0           # how far an agent's wall clock may be off the store's from its start (each agent
                                # draws 0, +skew or -skew): 30 s, 10 minutes, an hour
    schedule: bool = False      # a `stado schedule` with fire times early in the run; every agent fires schedules
    cancel_aim: str = "any"     # when cancellers strike: "any" (a drawn moment), "finishing" (while the job's
                                # finishing move is under way: a retry, a requeue or a terminal record being
                                # written), "stale" (while a worker that lost the job still runs a process of it)
    proxy: bool = False         # one agent reaches the store through a path that ignores every condition
    hosts: int = 1              # hosts the agents are spread over (round robin); a replacement keeps its host
    own_roots: bool = False     # agents of one host each use a work root of their own (else they share the host's)
    p_stop: float = 0.0         # per step: the chosen agent is stopped whole (SIGSTOP: its loop and its renewals),
                                # 20 ms up to stall_max; its host's keepers are not
    deps: float = 0.0           # chance that a job after the first depends on an earlier acknowledged one
                                # (--after-success, --after-failure or --after, drawn per job)
    retry_delay: float = 0.0    # --retry-delay of every job (backoff 2), s
    main_steps: int = 300       # the main phase (faults on) lasts this many steps at most ...
    main_seconds: float = 6.0   # ... or until submitters and cancellers are done and this much time passed
    settle_steps: int = 3000    # the settling phase: faults off, agents drain the queue and exit once idle
    horizon: float = 120.0      # simulated seconds, both phases

    def describe(self) -> str:
        default = Params()
        changed = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                   if getattr(self, f.name) != getattr(default, f.name)]
        return " ".join(changed) or "defaults"


_RATES = (0.0, 0.01, 0.03, 0.08)
_SLOW = tuple((verb, prefix) for verb in ("get", "put_if_absent", "put_if_match", "delete")
              for prefix in ("queue/", "running/", "c")) + (("list", "queue/"), ("list", "running/"))


def draw(ch: Choices, pinned: dict | None = None) -> Params:
    """A world for this run. Every draw happens whether or not the field is pinned, so a profile changes
    the world but not the rest of the run's choices."""
    drawn = Params(
        agents=1 + ch.below(3),
        slots=1 + ch.below(2),
        jobs=1 + ch.below(4),
        retries=ch.below(3),
        exit_fail=ch.pick((0.0, 0.3, 0.7)),
        max_run=ch.pick((0.3, 1.0, 3.0)),
        cancels=ch.below(3),
        poll=ch.pick((1.0, 0.5)),
        settle_every=ch.pick((2.0, 0.5, 5.0)),
        p_fail=ch.pick(_RATES),
        p_lost=ch.pick(_RATES),
        p_crash=ch.pick(_RATES[:3]),
        p_stall=ch.pick(_RATES),
        p_jump=ch.pick(_RATES[:3]),
        restarts=ch.below(3),
        priorities=ch.below(2) == 1,
        p_reprioritise=ch.pick((0.0, 0.02, 0.1)),
        slow=ch.pick((None,) * len(_SLOW) + _SLOW),
        skew=ch.pick((0.0, 0.0, 30.0, 600.0, 3600.0)),
        schedule=ch.below(3) == 0,
        cancel_aim=ch.pick(("any", "any", "finishing", "stale")),
        proxy=ch.below(8) == 0,
        hosts=1 + ch.below(2),
        own_roots=ch.below(4) == 0,
        p_stop=ch.pick(_RATES[:3]),
        deps=ch.pick((0.0, 0.0, 0.5, 1.0)),
        retry_delay=ch.pick((0.0, 0.0, 0.3, 1.0, 3.0)),
    )
    return replace(drawn, **(pinned or {}))
