"""The short chaos soak (bench/soak.py --short, about 60 s): jobman under supervisor kills and stops, CLI kills
mid-handoff, a held write lock and a full home; stado on the local directory and on SeaweedFS under agent
kills (some for good), restarts and stops past their promise, cancels, and (SeaweedFS) a slow, stalled and cut
link, every client through a fault proxy that passes everything here (`--faults` in the long soak). Every
invariant of the long soak is checked; violations that belong to bugs already reported (known.py) are
printed, any other fails the test. The test also checks that the soak was real: every kind of fault was
injected, and most jobs were accepted and ran."""
import io
import os
import sys
from pathlib import Path

import pytest

from .known import split

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
@pytest.mark.soak
def test_a_short_chaos_soak_of_both_tools_keeps_every_invariant(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        import soak
    finally:
        sys.path.remove(str(BENCH))
    out = io.StringIO()
    reports = soak.soak(seconds=soak.SHORT["seconds"], jobs=soak.SHORT["jobs"], stado_jobs=soak.SHORT["stado_jobs"],
                        workdir=tmp_path, keep=True, chaos_gap=soak.SHORT["chaos_gap"], out=out)
    print(out.getvalue())
    by_name = {r.name: r for r in reports}
    assert set(by_name) == {"jobman", "stado, local directory", "stado, SeaweedFS"}, out.getvalue()
    expected_faults = {
        "jobman": {"supervisor_kill", "supervisor_stop", "cli_kill", "db_lock"} | (
            {"disk_full"} if os.geteuid() == 0 else set()),
        "stado, local directory": {"agent_kill", "agent_gone", "agent_stop", "cancel"},
        "stado, SeaweedFS": {"agent_kill", "agent_gone", "agent_stop", "cancel", "store_slow", "store_stall",
                             "conn_drop"}}
    failures = []
    for name, report in by_name.items():
        missing = expected_faults[name] - {k for k, n in report.faults.items() if n}
        if missing:
            failures.append(f"{name}: no {', '.join(sorted(missing))} fault was injected")
        if report.jobs < 0.3 * report.attempted or sum(report.outcomes.values()) < 20:
            failures.append(f"{name}: only {report.jobs} of {report.attempted} jobs were accepted")
        known, other = split(name, report.violations)
        for violation, entry in known:
            print(f"known ({entry.where}): {name}: {violation}")
        failures += [f"{name}: {v}" for v in other]
    assert not failures, "\n".join(failures) + "\n\n" + out.getvalue()
