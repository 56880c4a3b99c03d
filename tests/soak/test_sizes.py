"""The soak says before it starts when the time it is given cannot drain the jobs it is asked for (a phase that
runs out reports its unfinished jobs as violations, which look like bugs)."""
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _soak():
    sys.path.insert(0, str(BENCH))
    try:
        import soak
    finally:
        sys.path.remove(str(BENCH))
    return soak


def test_the_default_sizes_fit_the_default_time_and_the_short_soak_fits_its_own():
    soak = _soak()
    for phase in soak.PHASES:
        assert soak.too_short(phase, 2000, 600.0 * soak.SHARE[phase]) is None, phase
        short = soak.SHORT["jobs"] if phase == "jobman" else soak.SHORT["stado_jobs"]
        assert soak.too_short(phase, short, soak.SHORT["seconds"] * soak.SHARE[phase]) is None, phase


def test_a_time_too_short_for_the_default_sizes_is_said_with_what_would_fit():
    soak = _soak()
    warning = soak.too_short("stado-s3", 2000, 450.0 * soak.SHARE["stado-s3"])
    assert warning is not None and "stado-s3 is given 135 s for 2000 jobs" in warning and "at most 1552 jobs" in warning
