"""The store's clock, as one process reads it: the one clock every agent and reaper of a fleet shares.

Each host's wall clock may be off by any amount (no NTP, a VM resumed, a laptop's clock set by hand), and may
jump. The store stamps every write it takes with its own time (`Last-Modified`, listed as `modified`), so
promises, reaper verdicts and cron fire times are judged by that clock: a process writes an object, reads back
its `modified`, and from then on counts on its own monotonic clock, which no wall-clock jump moves:

    store now = offset + monotonic now

Each measurement bounds the offset: the write landed between the request's start and its answer, and the store
stamped it `modified` (or, where it stamps whole seconds, as S3 does, some time within the second after that).
The bounds of successive measurements are intersected, so they narrow towards the round trip whatever the
store's resolution; `uncertainty` is half their width. Judgements that must never come early (reaping a job,
firing a schedule) add it to their margin. Bounds that no longer meet (the store's clock was set, or a monotonic
clock drifted) start again from the latest measurement. Until they are narrow, every record write measures
again (one HEAD); then every `every` seconds.

The host's wall and monotonic clocks are read through a runkit.core.clock.Clock (the host's own, unless a test or
the simulator passes another), and `monotonic()` hands that monotonic clock on to whoever judges by this one.
"""
from runkit.core.clock import SYSTEM, Clock

from ..objectstore.base import ObjectStore

# An agent whose wall clock is further than this from the store's refuses to fire schedules (its clock, or the
# store's, is wrong: people must look), and `stado doctor` fails.
SKEW_BOUND = 300.0
NARROW = 0.05  # bounds this close together need no more measuring for a while


class StoreClock:
    __slots__ = ("_bounds", "_due", "every", "host")

    def __init__(self, every: float = 600.0, host: Clock = SYSTEM):
        self.every, self.host = every, host
        self._bounds: tuple[float, float] | None = None  # the offset (store seconds - monotonic seconds): lo, hi
        self._due = float("-inf")

    @property
    def measured(self) -> bool:
        return self._bounds is not None

    @property
    def uncertainty(self) -> float:
        return 0.0 if self._bounds is None else (self._bounds[1] - self._bounds[0]) / 2

    def due(self) -> bool:
        return self.host.monotonic() >= self._due

    def monotonic(self) -> float:
        """This host's monotonic clock, the one the store's time is counted on."""
        return self.host.monotonic()

    def measure(self, store: ObjectStore, key: str, write) -> None:
        """`write()` puts `key` (an object this process owns); its `modified` is read back with one HEAD.
        StoreError if either request fails (what was measured before stays)."""
        began = self.host.monotonic()
        write()
        ended = self.host.monotonic()
        modified = store.head(key).modified
        stamp = 1.0 if modified == int(modified) else 0.0  # whole seconds: it landed within the next one
        lo, hi = modified - ended, modified + stamp - began
        if self._bounds is not None and max(lo, self._bounds[0]) <= min(hi, self._bounds[1]):
            lo, hi = max(lo, self._bounds[0]), min(hi, self._bounds[1])
        self._bounds = (lo, hi)
        self._due = ended + (self.every if hi - lo <= 2 * NARROW else 0.0)

    def offset_bounds(self) -> list[float] | None:
        """The bounds of the store's time less this monotonic clock, [lo, hi], for a process on this host that
        counts on a clock of its own (a job's keeper; adopt() takes them back); None before the first measurement."""
        return None if self._bounds is None else list(self._bounds)

    def adopt(self, lo: float, hi: float) -> None:
        """Bounds of the offset another process of this host measured (on this monotonic clock), to count on until
        this one has measured its own: the next record write measures again, and narrows them."""
        if self._bounds is None and lo <= hi:
            self._bounds, self._due = (lo, hi), float("-inf")

    def wall(self) -> float:
        """The store's time now (the middle of what the measurements allow); this host's wall clock until the
        first measurement."""
        if self._bounds is None:
            return self.host.wall()
        return (self._bounds[0] + self._bounds[1]) / 2 + self.host.monotonic()

    def skew(self) -> float | None:
        """How far this host's wall clock is from the store's (positive: the store is ahead), None before the
        first measurement. Read now, so a wall-clock jump since the measurement shows at once."""
        if self._bounds is None:
            return None
        return self.wall() - self.host.wall()


def skew_words(skew: float) -> str:
    return f"{abs(skew):.1f} s {'behind' if skew > 0 else 'ahead of'} the store's"


def measured(store: ObjectStore, key: str, host: Clock = SYSTEM) -> StoreClock:
    """A clock measured once, for a command that judges by the store's time (`stado reap`, `stado machine
    may-delete`): it writes `key`, reads it back and deletes it (three requests)."""
    clock = StoreClock(host=host)
    try:
        clock.measure(store, key, lambda: store.put(key, b"{}"))
    finally:
        store.delete(key)
    return clock
