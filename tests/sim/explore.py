"""Running the simulator: one seed, a named scenario, or many seeds; shrinking and printing failures.

    python -m tests.sim                     # 10,000 seeds from 1 (make sim)
    python -m tests.sim --runs 1000000      # the long run (make sim RUNS=1000000), on every core
    python -m tests.sim --seed 4242         # one seed, its failure shrunk and printed (make sim SEED=4242)
    python -m tests.sim --scenario race1    # a named scenario (make sim SCENARIO=race1)
"""
import os
import re
import time
from collections import namedtuple

from .choices import Choices
from .params import draw
from .patches import deterministic
from .shrink import shrink
from .world import Sim

Outcome = namedtuple("Outcome", "violations tape params sim")
AFTER = 60  # steps a shrunk or wanted run goes on after its first violation, to show where it leads


def run_one(*, seed: int | None = None, tape: list[int] | None = None, pinned: dict | None = None,
            verbose: bool = False, after: int = 0) -> Outcome:
    ch = Choices(seed=seed, tape=tape)
    params = draw(ch, pinned)
    sim = Sim(params, ch, verbose=verbose, after=after)
    with deterministic(sim):
        sim.run()
    return Outcome(sim.violations, ch.record, params, sim)


def matches(outcome: Outcome, want: list[str] | None) -> bool:
    """Whether the run failed, and (given `want`, signature prefixes) failed first with want[0] and also
    with every other one of them afterwards."""
    found = outcome.violations
    if not found:
        return False
    if not want:
        return True
    return found[0].signature.startswith(want[0]) and all(
        any(v.signature.startswith(w) for v in found) for w in want[1:])


def shrunk(seed: int, pinned: dict | None = None, want: list[str] | None = None, *,
           budget_s: float = 30.0) -> Outcome:
    """The run of `seed` shrunk to a short run that fails the same way (the first violation's signature, or
    all of `want`), replayed with the library call sites in its trace."""
    after = AFTER if want and len(want) > 1 else 0
    first = run_one(seed=seed, pinned=pinned, after=after)
    if not matches(first, want):
        return run_one(seed=seed, pinned=pinned, verbose=True, after=AFTER)
    want = want or [first.violations[0].signature]

    def fails(candidate):
        got = run_one(tape=candidate, pinned=pinned, after=after)
        return len(got.tape) if matches(got, want) else None

    best = shrink(first.tape, fails, budget_s=budget_s)
    return run_one(tape=best, pinned=pinned, verbose=True, after=AFTER)


def report(seed: int, outcome: Outcome, *, only_job: bool = True, how: str | None = None) -> str:
    """A failing run as text: what broke, the world it ran in, and its steps in order."""
    v = outcome.violations[0]
    lines = [f"seed {seed}: {v.kind}: {v.message}",
             f"  world: {outcome.params.describe()}",
             f"  reproduce: {how or f'make sim SEED={seed}'}"]
    for later in outcome.violations[1:]:
        lines.append(f"  then (step {later.step}) {later.kind}: {later.message}")
    job = _job_of(outcome) if only_job else None
    lines.append(f"  shrunk trace ({len(outcome.tape)} choices, {outcome.sim.steps} steps"
                 + ("; requests on other jobs' keys left out" if job else "") + "):")
    lines += ["    " + line for line in outcome.sim.trace.lines(only_job=job)]
    return "\n".join(lines)


def _job_of(outcome: Outcome) -> str | None:
    """The id of the job the first violation names (J<n>), to keep its trace to that job's requests."""
    m = re.search(r"\bJ(\d+)\b", outcome.violations[0].message)
    if not m:
        return None
    names = {short: full for full, short in outcome.sim.names.items()}
    return names.get(f"J{m.group(1)}")


# -- many seeds ----------------------------------------------------------------------------------------

def explore(start: int, runs: int, pinned: dict | None = None, want: list[str] | None = None) -> dict[str, list[int]]:
    """signature of the first violation -> failing seeds, over seeds start .. start+runs-1 (with `want`,
    only runs that fail that way)."""
    found: dict[str, list[int]] = {}
    after = AFTER if want and len(want) > 1 else 0
    for seed in range(start, start + runs):
        got = run_one(seed=seed, pinned=pinned, after=after)
        if matches(got, want):
            found.setdefault(got.violations[0].signature, []).append(seed)
    return found


def _explore_chunk(args):
    return explore(*args)


def explore_parallel(start: int, runs: int, pinned: dict | None = None, workers: int | None = None,
                     want: list[str] | None = None) -> dict[str, list[int]]:
    workers = workers or os.cpu_count() or 1
    if workers == 1 or runs < 2000:
        return explore(start, runs, pinned, want)
    import multiprocessing

    chunk = max(500, min(20_000, runs // (workers * 4)))
    jobs = [(s, min(chunk, start + runs - s), pinned, want) for s in range(start, start + runs, chunk)]
    found: dict[str, list[int]] = {}
    # spawn, not fork: the caller may be a pytest-xdist worker with threads of its own.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for part in pool.imap(_explore_chunk, jobs):
            for signature, seeds in part.items():
                found.setdefault(signature, []).extend(seeds)
    return found


def summary(found: dict[str, list[int]], runs: int, elapsed: float) -> str:
    failing = sum(len(s) for s in found.values())
    lines = [f"{runs} seeds in {elapsed:.1f} s ({runs / elapsed:.0f} seeds/s): {failing} failed"]
    for signature, seeds in sorted(found.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(seeds):>6} x {signature}  (first: seed {seeds[0]})")
    return "\n".join(lines)


def timed_explore(start: int, runs: int, pinned=None, workers=None, want=None):
    began = time.monotonic()
    found = explore_parallel(start, runs, pinned, workers, want)
    return found, time.monotonic() - began
