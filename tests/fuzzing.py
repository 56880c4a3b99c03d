"""The fuzz tests' settings (hypothesis), imported by each (tests/*/fuzz/, and tests/runkit's *_fuzz and option
tables). Example counts keep them all well under a minute on a loaded 2-core machine; FUZZ=long (or
FUZZ_EXAMPLES=N) runs many more, e.g.

    FUZZ=long .venv/bin/python -m pytest tests/jobman/fuzz tests/stado/fuzz tests/runkit -q

Each property names the contract it holds the code to: bad input gets a clear error (the module's own
exception type), never a crash; corrupt records are reported, never lose a job.
"""
import os

from hypothesis import HealthCheck, settings

_LONG = os.environ.get("FUZZ") == "long"
_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or (2000 if _LONG else 0))

# A loaded machine makes single examples slow now and then: no deadline, no health check on speed. The
# database of found examples stays out of the tree (a failing example is printed, and shrunk).
settings.register_profile("fuzz", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("fuzz")


def examples(default: int) -> settings:
    """The example count of one property: `default` here, FUZZ_EXAMPLES (or 2000 under FUZZ=long) when asked."""
    return settings(max_examples=_EXAMPLES or default)
