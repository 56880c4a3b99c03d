"""Every decision of a simulated run, drawn from one source: a seeded PRNG, or a recorded tape.

A run draws integers only (`below`, `chance`), and 0 is always the plainest answer: the first actor,
no fault, the shortest delay, exit code 0. So a run is a function of its tape (the integers it drew),
and a shorter tape of smaller numbers is a simpler run: the shrinker (shrink.py) works on the tape, as
Hypothesis does on its choice sequences, and needs to know nothing about what the numbers mean.
"""
import random

# chance(p) compares one draw against this many buckets: large draws are the rare branch, so shrinking
# the draw towards 0 takes the fault away.
BUCKETS = 10_000


class Choices:
    """A seeded PRNG (exploring), or a tape to replay (shrinking): draws past the tape's end are 0."""

    __slots__ = ("rng", "tape", "record", "_pos")

    def __init__(self, seed: int | None = None, tape: list[int] | None = None):
        self.rng = random.Random(seed) if tape is None else None
        self.tape = tape
        self.record: list[int] = []
        self._pos = 0

    def below(self, n: int) -> int:
        """An integer in [0, n)."""
        if n <= 1:
            return 0
        if self.rng is not None:
            v = int(self.rng.random() * n)  # randrange's rejection sampling costs 5x more, for no use here
        else:
            v = self.tape[self._pos] if self._pos < len(self.tape) else 0
            self._pos += 1
            v = min(v, n - 1)
        self.record.append(v)
        return v

    def chance(self, p: float) -> bool:
        """True with probability p (p == 0 draws nothing, so switched-off faults leave the tape alone)."""
        if p <= 0:
            return False
        return self.below(BUCKETS) >= BUCKETS - int(p * BUCKETS)

    def pick(self, items):
        return items[self.below(len(items))]

    def uniform_ms(self, low_ms: int, high_ms: int) -> float:
        """Seconds, in whole milliseconds, from low_ms to high_ms."""
        return (low_ms + self.below(high_ms - low_ms + 1)) / 1000.0
