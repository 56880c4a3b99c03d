"""What the transitions share."""
import time
from collections import namedtuple

CONFLICT_RETRIES = 8


class Fenced(namedtuple("Fenced", "current")):
    """A conditional write lost: `current` is what holds the key now (None: the key is gone)."""

    __slots__ = ()


def _now(now: float | None) -> float:
    return time.time() if now is None else now
