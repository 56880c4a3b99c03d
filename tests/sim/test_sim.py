"""The deterministic simulator of stado's protocol (tests/sim/README.md): the default exploration, the
named scenarios of the races, and the simulator's own guarantees (a seed replays exactly; a broken
store is caught and its failure shrunk)."""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stado.objectstore.memory import MemoryStore

from .cli import main
from .explore import report, run_one, shrunk, summary, timed_explore
from .scenarios import SCENARIOS
from .shrink import shrink
from .store import SimBackend

DEFAULT_SEEDS = 10_000
ROOT = Path(__file__).resolve().parents[2]


def _failure_report(found: dict[str, list[int]], pinned=None, show: int = 3) -> str:
    parts = []
    for _signature, seeds in sorted(found.items(), key=lambda kv: -len(kv[1]))[:show]:
        parts.append(report(seeds[0], shrunk(seeds[0], pinned, budget_s=8.0)))
    return "\n\n".join(parts)


def test_the_default_exploration_finds_no_violation():
    """10,000 seeds of the swarm (each its own world and faults): every invariant holds at every step."""
    found, elapsed = timed_explore(1, DEFAULT_SEEDS, workers=2)
    print(summary(found, DEFAULT_SEEDS, elapsed))
    assert not found, summary(found, DEFAULT_SEEDS, elapsed) + "\n\n" + _failure_report(found)


def test_the_exploration_reaches_spread_claim_passes(monkeypatch):
    """The agents' claim passes spread over the head of the claim order by rank (agent.claim_pass.spread).
    The simulator runs the real pass, so the exploration above covers that choice, provided its worlds reach it:
    passes whose walk is not the claim order (an agent of rank 1 or 2 among 2-3 agents with a job it goes past)."""
    from stado.agent import claim_pass

    real, reordered = claim_pass.spread, []

    def counting(entries, **kwargs):
        walk, passed = real(entries, **kwargs)
        reordered.append(walk != entries)
        return walk, passed

    monkeypatch.setattr(claim_pass, "spread", counting)
    for seed in range(1, 1001):
        assert not run_one(seed=seed).violations, seed
    assert sum(reordered) >= 30, (sum(reordered), len(reordered))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_race_of_issue_8_is_gone(name):
    """The race's recorded seed, then its world over more seeds: no violation of any kind."""
    scenario = SCENARIOS[name]
    first = run_one(seed=scenario.seed, pinned=scenario.pinned)
    assert not first.violations, report(scenario.seed, shrunk(scenario.seed, scenario.pinned, scenario.want),
                                        how=f"make sim SCENARIO={name}")
    found, _ = timed_explore(1, scenario.runs, scenario.pinned, workers=2)
    assert not found, summary(found, scenario.runs, 1.0) + "\n\n" + _failure_report(found, scenario.pinned, show=1)


def _digest(outcome) -> str:
    h = hashlib.sha256()
    for row in outcome.sim.trace.rows:
        h.update(repr(row).encode())
    for key in sorted(outcome.sim.backend._objects):
        data, version, _ = outcome.sim.backend._objects[key]
        h.update(key.encode() + data + repr(version).encode())
    return h.hexdigest()


def test_a_seed_replays_exactly_in_this_process():
    for seed in (3, 58, 4242):
        assert _digest(run_one(seed=seed, verbose=True)) == _digest(run_one(seed=seed, verbose=True))


def test_a_seed_replays_exactly_in_another_process_whatever_its_hash_seed():
    code = ("import sys; from tests.sim.test_sim import _digest; from tests.sim.explore import run_one; "
            "print(_digest(run_one(seed=int(sys.argv[1]), verbose=True)))")
    here = _digest(run_one(seed=58, verbose=True))
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", code, "58"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == here


@pytest.fixture
def store_ignoring_create_if_absent(monkeypatch):
    """A store whose create-if-absent overwrites what is there (as a server ignoring If-None-Match would)."""

    def put_if_absent(self, key, data):
        self._objects.pop(key, None)
        return MemoryStore.put_if_absent(self, key, data)

    monkeypatch.setattr(SimBackend, "put_if_absent", put_if_absent)


def _first_failing(limit: int = 300, **pinned) -> tuple[int, object]:
    for seed in range(1, limit):
        got = run_one(seed=seed, pinned=pinned or None)
        if got.violations:
            return seed, got
    raise AssertionError(f"no violation in {limit} seeds")


def test_a_store_that_ignores_create_if_absent_is_caught_and_shrunk(store_ignoring_create_if_absent):
    """The invariants can fail: with two claims both winning, a run breaks them within a few seeds, and
    the failing run shrinks to a tape of choices no longer than its own that fails the same way."""
    world = dict(agents=2, jobs=2, p_fail=0.0, p_lost=0.0, p_crash=0.0, p_stall=0.05, cancels=0)
    seed, got = _first_failing(**world)
    signature = got.violations[0].signature

    def fails(candidate):
        again = run_one(tape=candidate, pinned=world)
        return len(again.tape) if again.violations and again.violations[0].signature == signature else None

    best = shrink(got.tape, fails, budget_s=10.0)
    assert len(best) <= len(got.tape)
    assert run_one(tape=best, pinned=world).violations[0].signature == signature
    text = report(seed, shrunk(seed, world, budget_s=10.0))
    assert f"reproduce: make sim SEED={seed}" in text and "shrunk trace" in text


def test_the_command_prints_the_shrunk_trace_and_fails(store_ignoring_create_if_absent, capsys):
    seed, _ = _first_failing()
    assert main(["--seed", str(seed)]) == 1
    out = capsys.readouterr().out
    assert f"seed {seed}:" in out and f"make sim SEED={seed}" in out and "put_if_absent" in out
