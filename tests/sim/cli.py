"""`python -m tests.sim` (what `make sim` runs): see explore.py's docstring for the forms."""
import argparse
import sys

from .explore import report, shrunk, summary, timed_explore
from .scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.sim", description="stado's deterministic simulator")
    ap.add_argument("--seed", type=int, help="run this seed; a failure is shrunk and its trace printed")
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), help="run a named scenario (see tests/sim/README.md)")
    ap.add_argument("--runs", type=int, default=10_000, help="how many seeds to explore (default 10000)")
    ap.add_argument("--start", type=int, default=1, help="the first seed to explore (default 1)")
    ap.add_argument("--workers", type=int, default=0, help="processes to explore with (default: every core)")
    ap.add_argument("--show", type=int, default=3, help="failures to shrink and print, one per signature")
    ap.add_argument("--full-trace", action="store_true", help="print requests on every job's keys, not only the "
                                                              "failing job's")
    args = ap.parse_args(argv)
    if args.scenario:
        return _scenario(args.scenario, args.seed, args.runs if args.runs != 10_000 else SCENARIOS[args.scenario].runs,
                         args.full_trace)
    if args.seed is not None:
        return _one(args.seed, None, None, args.full_trace)
    found, elapsed = timed_explore(args.start, args.runs, None, args.workers or None)
    print(summary(found, args.runs, elapsed))
    for _signature, seeds in list(sorted(found.items(), key=lambda kv: -len(kv[1])))[:args.show]:
        print()
        print(report(seeds[0], shrunk(seeds[0]), only_job=not args.full_trace))
    return 1 if found else 0


def _one(seed: int, pinned: dict | None, want: list[str] | None, full_trace: bool, how: str | None = None) -> int:
    outcome = shrunk(seed, pinned, want)
    if not outcome.violations:
        print(f"seed {seed}: no violation ({outcome.params.describe()}; {outcome.sim.steps} steps)")
        return 0
    print(report(seed, outcome, only_job=not full_trace, how=how))
    return 1


def _scenario(name: str, seed: int | None, runs: int, full_trace: bool) -> int:
    """The scenario's seed (its failure shrunk and printed), then its world explored over `runs` seeds."""
    scenario = SCENARIOS[name]
    print(f"scenario {name}: {scenario.about}")
    print(f"  before the fix it failed with: {' ... then '.join(scenario.want)}")
    seed = scenario.seed if seed is None else seed
    failed = _one(seed, scenario.pinned, scenario.want, full_trace, how=f"make sim SCENARIO={name}")
    found, elapsed = timed_explore(1, runs, scenario.pinned)
    print(f"scenario {name}, its world explored: " + summary(found, runs, elapsed))
    return 1 if failed or found else 0


if __name__ == "__main__":
    sys.exit(main())
