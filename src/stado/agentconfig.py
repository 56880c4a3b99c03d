"""What an agent is told to do, checked before it touches anything (the CLI only parses and builds it)."""
import os
import socket
from dataclasses import dataclass, field

from .errors import BadInput
from .objectstore.base import DEFAULT_STALL_TIMEOUT


@dataclass
class AgentConfig:
    work_root: str
    stado_bin: str
    slots: int = 1
    poll_seconds: float = 5.0
    host: str = field(default_factory=socket.gethostname)
    capabilities: frozenset[str] = frozenset()
    cores: int = os.cpu_count() or 1
    memory: int | None = None
    accelerators: int = 0
    kill_after: float = 10.0
    late_cap: float = 60.0          # the longest measured late renewal a promise carries (a laptop asleep)
    settle_seconds: float = 30.0    # the reaper's pass: finish half-done moves, reap jobs whose worker is gone
    index_seconds: float = 300.0    # keep the claim-order index in step with the queue ledger
    reap_margin: float = 2.0        # seconds past a promise before it counts as passed (clocks disagree a little)
    window: int = 1000              # index entries a poll lists (one page): the queue beyond costs nothing a poll
    until_idle: bool = False
    keep_work: bool = False
    subreaper: bool = False         # become the reaper of jobs' orphans (the CLI agent does; an in-process one need not)
    stall_seconds: float = DEFAULT_STALL_TIMEOUT  # a transfer that moves no bytes this long is ended (and resumed)
    schedules: bool = True          # fire `stado schedule` entries (every agent does; each fire time is one job)

    def check(self) -> "AgentConfig":
        """The config unchanged if every setting can work; BadInput naming the first that cannot."""
        from .spec import check_token

        if self.slots < 1:
            raise BadInput("--slots must be at least 1")
        for name in ("poll_seconds", "settle_seconds", "index_seconds", "kill_after"):
            if not getattr(self, name) > 0:
                raise BadInput(f"--{name.replace('_', '-')} must be greater than 0")
        if self.cores < 1:
            raise BadInput("--cores must be at least 1")
        if not 0 <= self.accelerators <= 1024:
            raise BadInput(f"--accelerators must be a whole number from 0 to 1024, not {self.accelerators}")
        if not 1 <= self.window <= 10_000:
            raise BadInput(f"--window must be a whole number from 1 to 10000, not {self.window}")
        if self.memory is not None and self.memory < 1:
            raise BadInput("--memory must be a size greater than 0, e.g. 16G")
        for cap in self.capabilities:
            check_token(cap, "capability")  # the same rule as a job's --capabilities, so the two can match
        return self
