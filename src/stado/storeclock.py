"""The store's clock, as one process reads it: the one clock every agent and reaper of a fleet shares.

Each host's wall clock may be off by any amount (no NTP, a VM resumed, a laptop's clock set by hand), and may
jump. The store stamps every write it takes with its own time (`Last-Modified`, listed as `modified`), so
promises, reaper verdicts and cron fire times are judged by that clock: a process writes an object, reads back
its `modified`, and from then on counts on its own monotonic clock, which no wall-clock jump moves:

    store now = modified + (monotonic now - monotonic at the write)

A measurement is good to `uncertainty`: half the write's round trip (the write landed somewhere within it),
and half a second more where the store stamps whole seconds (taken as the middle of that second).
Judgements that must never come early (reaping a job, firing a schedule) add it to their margin. The store's
own resolution (whole seconds on S3) makes `modified` up to a second early, for the documents judged as for the
measurement, so it cancels out of a promise's judgement but for that second, which the reaper's margin covers.
A measurement is repeated every `every` seconds (monotonic clocks drift a little).
"""
import time

from .objectstore.base import ObjectStore

# An agent whose wall clock is further than this from the store's refuses to fire schedules (its clock, or the
# store's, is wrong: people must look), and `stado doctor` fails.
SKEW_BOUND = 300.0
# A measurement whose write took longer than twice this is made again (up to TRIES times): it says too little.
GOOD_ENOUGH = 0.5
TRIES = 3


class StoreClock:
    def __init__(self, every: float = 600.0):
        self.every = every
        self.uncertainty = 0.0
        self._at: tuple[float, float] | None = None  # (store seconds, monotonic seconds) of the last measurement
        self._wall: float | None = None  # this host's wall clock at that moment
        self._due = float("-inf")

    @property
    def measured(self) -> bool:
        return self._at is not None

    def due(self) -> bool:
        return time.monotonic() >= self._due

    def measure(self, store: ObjectStore, key: str, write) -> None:
        """`write()` puts `key` (an object this process owns); its `modified` is read back with one HEAD.
        StoreError if either request fails (the last measurement, if any, stays)."""
        for attempt in range(TRIES):
            wall, began = time.time(), time.monotonic()
            write()
            ended = time.monotonic()
            half = (ended - began) / 2
            if half <= GOOD_ENOUGH or attempt == TRIES - 1:
                break
        modified = store.head(key).modified
        if modified == int(modified):  # whole seconds (S3's Last-Modified): the write landed within the next one
            modified, half = modified + 0.5, half + 0.5
        self._at, self._wall = (modified, began + half), wall + half
        self.uncertainty = half
        self._due = ended + self.every

    def now(self) -> float:
        """The store's time now, by the last measurement; this host's wall clock until there is one."""
        if self._at is None:
            return time.time()
        return self._at[0] + (time.monotonic() - self._at[1])

    def skew(self) -> float | None:
        """How far this host's wall clock is from the store's (positive: the store is ahead), None before the
        first measurement. Read now, so a wall-clock jump since the measurement shows at once."""
        if self._at is None:
            return None
        return self.now() - time.time()


def skew_words(skew: float) -> str:
    return f"{abs(skew):.1f} s {'behind' if skew > 0 else 'ahead of'} the store's"


def measured(store: ObjectStore, key: str) -> StoreClock:
    """A clock measured once, for a command that judges by the store's time (`stado reap`, `stado machine
    may-delete`): it writes `key`, reads it back and deletes it (three requests)."""
    clock = StoreClock()
    try:
        clock.measure(store, key, lambda: store.put(key, b"{}"))
    finally:
        store.delete(key)
    return clock
