"""Time as an argument: the host's two clocks behind one object that owners take and pass on.

`wall()` is the host's wall clock (what a record names as a time; it jumps when the host's time is set);
`monotonic()` counts seconds and never jumps (what every duration, deadline and promise is measured on). An
owner that reads both only through its Clock can be driven through its decisions by a ManualClock, in process
and without sleeping, and by a simulator's clock with each host's own skew.
"""
import time


class Clock:
    """The host's clocks."""

    __slots__ = ()

    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def boottime(self) -> float:
        """Seconds since boot, a suspend included (CLOCK_BOOTTIME): what two processes of one host share as time
        when one may sleep through the other's deadline (a laptop's lid). The monotonic clock where there is none."""
        boot = getattr(time, "CLOCK_BOOTTIME", None)
        return time.monotonic() if boot is None else time.clock_gettime(boot)


SYSTEM = Clock()


class ManualClock(Clock):
    """Clocks that move only when told: a test advances them to the owner's next deadline instead of sleeping.
    `offset` is how far the wall clock is from the monotonic one (a host whose clock is wrong: set it)."""

    __slots__ = ("now", "offset")

    def __init__(self, start: float = 1_000.0, offset: float = 1_800_000_000.0):
        self.now, self.offset = start, offset

    def wall(self) -> float:
        return self.now + self.offset

    def monotonic(self) -> float:
        return self.now

    def boottime(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def advance_to(self, monotonic: float) -> None:
        self.now = max(self.now, monotonic)
