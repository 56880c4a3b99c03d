"""Shrinking a failing run to a short one that fails the same way, by simplifying its tape of choices
(the integers it drew, see choices.py): cut the tape where the failure happened, delete blocks of
choices, zero them, halve them. A candidate is kept when its run fails with the same signature (the same
invariant, at the same kind of request). Deterministic: the same failing tape always shrinks to the same
short one, so `make sim SEED=...` prints the same trace every time."""
import time


def shrink(tape: list[int], fails, *, budget_s: float = 20.0, max_runs: int = 3000) -> list[int]:
    """The simplest tape found for which fails(tape) still returns the length of tape it used (a truthy
    int); fails returns None when the candidate does not fail the same way."""
    deadline = time.monotonic() + budget_s
    runs = 0

    def attempt(candidate: list[int]) -> list[int] | None:
        nonlocal runs
        if runs >= max_runs or time.monotonic() > deadline:
            return None
        runs += 1
        used = fails(candidate)
        return None if used is None else candidate[:used]

    best = attempt(tape) or tape
    improved = True
    while improved and runs < max_runs and time.monotonic() < deadline:
        improved = False
        for size in (32, 16, 8, 4, 2, 1):  # delete blocks
            i = len(best) - size
            while i >= 0:
                got = attempt(best[:i] + best[i + size:])
                if got is not None and _simpler(got, best):
                    best, improved = got, True
                i -= size
        for size in (16, 4, 1):  # zero blocks
            for i in range(0, len(best), size):
                if not any(best[i:i + size]):
                    continue
                got = attempt(best[:i] + [0] * min(size, len(best) - i) + best[i + size:])
                if got is not None and _simpler(got, best):
                    best, improved = got, True
        i = 0
        while i < len(best):  # smaller values (a smaller value may end the run sooner: best shrinks as it goes)
            while i < len(best) and best[i] > 0:
                got = attempt(best[:i] + [best[i] // 2] + best[i + 1:])
                if got is None or not _simpler(got, best):
                    break
                best, improved = got, True
            i += 1
    return best


def _simpler(a: list[int], b: list[int]) -> bool:
    return (len(a), a) < (len(b), b)
