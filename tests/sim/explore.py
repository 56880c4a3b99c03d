"""Running the simulator: one seed, a named scenario, or many seeds; shrinking and printing failures.

    python -m tests.sim                     # 10,000 seeds from 1 (make sim)
    python -m tests.sim --runs 1000000      # the long run (make sim RUNS=1000000), on every core
    python -m tests.sim --seed 4242         # one seed, its failure shrunk and printed (make sim SEED=4242)
    python -m tests.sim --scenario race1    # a named scenario (make sim SCENARIO=race1)
"""
import os
import time
from collections import namedtuple

from .choices import Choices
from .params import draw
from .patches import deterministic
from .shrink import shrink
from .world import Sim

Outcome = namedtuple("Outcome", "violations tape params sim")


def run_one(*, seed: int | None = None, tape: list[int] | None = None, pinned: dict | None = None,
            verbose: bool = False) -> Outcome:
    ch = Choices(seed=seed, tape=tape)
    params = draw(ch, pinned)
    sim = Sim(params, ch, verbose=verbose)
    with deterministic(sim):
        sim.run()
    return Outcome(sim.violations, ch.record, params, sim)


def shrunk(seed: int, pinned: dict | None = None, *, budget_s: float = 20.0) -> Outcome:
    """The seed's run, shrunk to a short run that fails with the same signature, replayed verbosely."""
    first = run_one(seed=seed, pinned=pinned)
    if not first.violations:
        return first
    signature = first.violations[0].signature

    def fails(candidate):
        got = run_one(tape=candidate, pinned=pinned)
        return len(got.tape) if got.violations and got.violations[0].signature == signature else None

    best = shrink(first.tape, fails, budget_s=budget_s)
    return run_one(tape=best, pinned=pinned, verbose=True)


def report(seed: int, outcome: Outcome, *, only_job: bool = True) -> str:
    """A failing run as text: what broke, the world it ran in, and its steps in order."""
    v = outcome.violations[0]
    lines = [f"seed {seed}: {v.kind}: {v.message}",
             f"  world: {outcome.params.describe()}",
             f"  reproduce: make sim SEED={seed}"]
    for later in outcome.violations[1:]:
        lines.append(f"  then (step {later.step}) {later.kind}: {later.message}")
    job = _job_of(outcome) if only_job else None
    lines.append(f"  shrunk trace ({len(outcome.tape)} choices, {outcome.sim.steps} steps"
                 + (f"; requests on other jobs' keys left out" if job else "") + "):")
    lines += ["    " + line for line in outcome.sim.trace.lines(only_job=job)]
    return "\n".join(lines)


def _job_of(outcome: Outcome) -> str | None:
    """The id of the job the first violation names (J<n>), to keep its trace to that job's requests."""
    import re

    m = re.search(r"\bJ(\d+)\b", outcome.violations[0].message)
    if not m:
        return None
    names = {short: full for full, short in outcome.sim.names.items()}
    return names.get(f"J{m.group(1)}")


# -- many seeds ----------------------------------------------------------------------------------------

def explore(start: int, runs: int, pinned: dict | None = None) -> dict[str, list[int]]:
    """signature -> failing seeds, over seeds start .. start+runs-1."""
    found: dict[str, list[int]] = {}
    for seed in range(start, start + runs):
        got = run_one(seed=seed, pinned=pinned)
        if got.violations:
            found.setdefault(got.violations[0].signature, []).append(seed)
    return found


def _explore_chunk(args):
    return explore(*args)


def explore_parallel(start: int, runs: int, pinned: dict | None = None, workers: int | None = None):
    workers = workers or os.cpu_count() or 1
    if workers == 1 or runs < 1000:
        return explore(start, runs, pinned)
    import multiprocessing

    chunk = max(1000, runs // (workers * 8))
    jobs = [(s, min(chunk, start + runs - s), pinned) for s in range(start, start + runs, chunk)]
    found: dict[str, list[int]] = {}
    with multiprocessing.get_context("fork").Pool(workers) as pool:
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


def timed_explore(start: int, runs: int, pinned=None, workers=None):
    began = time.monotonic()
    found = explore_parallel(start, runs, pinned, workers)
    return found, time.monotonic() - began
