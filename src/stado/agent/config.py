"""What an agent is told to do and what it offers, checked before it touches anything (the CLI only parses
and builds it)."""
import math
import os
import socket
from dataclasses import dataclass, field

from runkit.system.host import physical_memory

from ..core.admission import Offer
from ..core.errors import BadInput
from ..objectstore.base import DEFAULT_STALL_TIMEOUT

MAX_PRICE_PER_HOUR = 1_000_000.0


_HOST_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HOST_CHARS = _HOST_START | frozenset(".-_")


def _is_host(host) -> bool:
    return (isinstance(host, str) and 0 < len(host) <= 253 and host[0] in _HOST_START
            and all(c in _HOST_CHARS for c in host))


@dataclass
class AgentConfig:
    work_root: str
    stado_bin: str
    slots: int = 1
    poll_seconds: float = 5.0       # the longest between two claim passes (an idle agent's), and between renewals
    busy_poll_seconds: float = 0.5  # between claim passes while they claim: doubled after each that claims nothing
    host: str = field(default_factory=socket.gethostname)
    # The offer: what jobs may reserve. A job is claimed only when its envelope fits what is free.
    capabilities: frozenset[str] = frozenset()
    cores: int | None = None        # None: this host's CPU count, or `slots` if that is more (N one-core jobs at once)
    memory: int | None = field(default_factory=physical_memory)  # None: not counted
    accelerators: int = 0
    accelerator_devices: tuple[str, ...] = ()  # their ids (default 0..accelerators-1), named in CUDA_VISIBLE_DEVICES
    provider: str = "local"
    spot: bool = False
    price_per_hour: float | None = None  # US dollars for the whole agent (None: declares none); caps are judged by it
    kill_after: float = 10.0
    late_cap: float = 60.0          # the longest measured late renewal a promise carries (a laptop asleep)
    settle_seconds: float = 30.0    # the reaper's pass: finish half-done moves, reap jobs whose worker is gone
    index_seconds: float = 300.0    # keep the claim-order index in step with the queue ledger
    reap_margin: float = 2.0        # seconds past a promise before it counts as passed (clocks disagree a little)
    store_wait: float = 60.0        # at start, how long a store that answers as unwell (503, resets) is waited out
    keeper_bridge: float = 30.0     # how long a job's keeper renews for its agent once it is gone (killed), for the
    #                                 agent that next starts on the host to take the job over
    window: int = 1000              # index entries a poll lists (one page): the queue beyond costs nothing a poll
    until_idle: bool = False
    keep_work: bool = False
    subreaper: bool = False         # become the reaper of jobs' orphans (the CLI agent does; an in-process one need not)
    stall_seconds: float | None = DEFAULT_STALL_TIMEOUT  # a fetch that moves no bytes this long is ended and
    #                                                     resumed later (None, the default: it goes on, shown stalled)
    schedules: bool = True          # fire `stado schedule` entries (every agent does; each fire time is one job)
    # The variables that open this agent's store (connect.same_store_environment): given, each job's $STADO_BIN is
    # a shim in its directory that sets them for the agent's program. None: $STADO_BIN is stado_bin itself.
    store_env: dict | None = None

    def check(self) -> "AgentConfig":
        """The config unchanged if every setting can work; BadInput naming the first that cannot."""
        from ..core.spec import check_token

        if not _is_host(self.host):
            raise BadInput(f"bad --host {self.host!r} (or STADO_HOST): a host name is letters, digits, '.', '-' and "
                           "'_' (at most 253), starting with a letter or digit; it names the agent in local@HOST")
        if self.slots < 1:
            raise BadInput("--slots must be at least 1")
        for name in ("poll_seconds", "busy_poll_seconds", "settle_seconds", "index_seconds", "kill_after", "reap_margin"):
            if not getattr(self, name) > 0:
                raise BadInput(f"--{name.replace('_', '-')} must be greater than 0")
        if self.cores is not None and self.cores < 1:
            raise BadInput("--cores must be at least 1")
        if not 0 <= self.accelerators <= 1024:
            raise BadInput(f"--accelerators must be a whole number from 0 to 1024, not {self.accelerators}")
        if not 1 <= self.window <= 10_000:
            raise BadInput(f"--window must be a whole number from 1 to 10000, not {self.window}")
        if self.memory is not None and self.memory < 1:
            raise BadInput("--memory must be a size greater than 0, e.g. 16G")
        for cap in self.capabilities:
            check_token(cap, "capability")  # the same rule as a job's --capabilities, so the two can match
        check_token(self.provider, "provider")
        self._check_devices()
        price = self.price_per_hour
        if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))
                                  or not math.isfinite(price) or not 0 <= price <= MAX_PRICE_PER_HOUR):
            raise BadInput(f"--price-per-hour must be a number of US dollars from 0 to {MAX_PRICE_PER_HOUR:.0f}, "
                           f"not {self.price_per_hour!r}")
        return self

    def _check_devices(self) -> None:
        from ..core.spec import check_token

        devices = self.accelerator_devices
        for device in devices:
            check_token(device, "accelerator device")
        if len(set(devices)) != len(devices):
            raise BadInput(f"--accelerator-devices names a device twice: {','.join(devices)}")
        if len(devices) > 1024:
            raise BadInput("--accelerator-devices names more than 1024 devices")
        if devices and self.accelerators and len(devices) != self.accelerators:
            raise BadInput(f"--accelerators {self.accelerators} but --accelerator-devices names {len(devices)} "
                           f"({','.join(devices)}): give one of them, or make them agree")

    def offer(self) -> Offer:
        """What this agent offers jobs (the defaults filled in)."""
        devices = self.accelerator_devices or tuple(str(i) for i in range(self.accelerators))
        cores = self.cores if self.cores is not None else max(os.cpu_count() or 1, self.slots)
        return Offer(frozenset(self.capabilities), cores, self.memory, len(devices), self.provider, self.spot,
                     devices, None if self.price_per_hour is None else float(self.price_per_hour), self.slots)
