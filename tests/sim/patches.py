"""What makes the library deterministic in a run, patched from the test side for the run's duration only:
ids (uuid7), nonces (new_nonce where jobs and submissions make them, the manifest's os.urandom), the clock (time.time
and time.monotonic, per actor) of the modules that still read it themselves (the back-off after a store error; the
submitter's and cancellers' library calls are given the simulation's clock, an agent its own,
agent_model.SimClock), the
agent's back-off after a lost claim race,
its pid, and its reading of the environment for secrets to redact (output is not simulated). No product code
changes.
"""
import os
from contextlib import contextmanager
from importlib import import_module

from stado.queue import artifacts, schedules, submission, submitkeys
from stado.store import guarantees, landing
from stado.jobs import reaper
from stado.agent import standin
from stado.agent import cadences, claim_pass, owner

# The transitions' modules.
job_cancel, job_claim, job_common, job_moves = (import_module(f"stado.jobs.{name}")
                                                for name in ("cancellation", "claiming", "common", "moves"))


class _SimTime:
    """The `time` module as the library sees it in a run: the simulated clocks, the rest untouched."""

    def __init__(self, sim):
        self._sim = sim

    def time(self) -> float:
        return self._sim.wall()

    def monotonic(self) -> float:
        return self._sim.now

    def sleep(self, seconds: float) -> None:
        """A submit's or a cancel's back-off after a store error: the actor sleeps on the run's clock."""
        self._sim.sleep_until(self._sim.now + seconds)

    def __getattr__(self, name):
        import time

        return getattr(time, name)


class _SimOs:
    """The `os` module as stado.queue.artifacts, guarantees and agent see it: nonces from the run's counter, and one pid
    for every simulated agent (an agents/ record names its pid; a run must not depend on the process it runs in)."""

    def __init__(self, sim):
        self.urandom = sim.urandom

    @staticmethod
    def getpid() -> int:
        return 4242

    def __getattr__(self, name):
        return getattr(os, name)


class _SimRandom:
    def __init__(self, sim):
        self.random = lambda: sim.ch.below(1000) / 1000


def _no_secrets(env) -> list[str]:
    return []


@contextmanager
def deterministic(sim):
    clock = _SimTime(sim)
    replacements = [
        (submission, "uuid7", sim.new_job_id), (submission, "new_nonce", sim.new_nonce),
        (landing, "time", clock),
        (job_claim, "new_nonce", sim.new_nonce), (job_moves, "new_nonce", sim.new_nonce),
        (job_cancel, "new_nonce", sim.new_nonce), (reaper, "new_nonce", sim.new_nonce),
        (owner, "uuid7", sim.new_agent_id), (cadences, "new_nonce", sim.new_nonce), (submitkeys, "new_nonce", sim.new_nonce),
        (claim_pass, "random", _SimRandom(sim)),
        (owner, "secret_values", _no_secrets),  # output is not simulated; reading the environment costs 1 ms an agent
        (artifacts, "os", _SimOs(sim)),
        (guarantees, "time", clock), (guarantees, "os", _SimOs(sim)), (owner, "os", _SimOs(sim)),
        (cadences, "os", _SimOs(sim)),  # the pid in its agents/ record
        (standin, "os", _SimOs(sim)),  # a stand-in's scratch key for its clock
        (schedules, "new_nonce", sim.new_nonce),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in replacements]
    for module, name, value in replacements:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
