"""Issue 23's "short ids" and "a fleet that feels responsive", through the real CLI and agents."""
import pytest

from .support import machine_status, run_until_idle, stado, submit


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_every_command_that_takes_a_job_takes_a_unique_prefix(stado_env, tmp_path):
    first, second = submit(stado_env, "echo one"), submit(stado_env, "echo two")
    common = next(i for i in range(36) if first[i] != second[i])
    assert common >= 6  # UUIDv7s made a moment apart share their first digits
    short = second[:common + 1]
    assert machine_status(stado_env, short)["id"] == second
    assert stado(stado_env, "status", short.replace("-", "")).stdout.startswith(f"id:               {second}")
    ambiguous = stado(stado_env, "status", first[:common], ok=False)
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr.count("\n") == 1 and first in ambiguous.stderr and second in ambiguous.stderr
    assert stado(stado_env, "status", first[:5], ok=False).returncode == 3
    stado(stado_env, "cancel", short)
    assert machine_status(stado_env, second)["outcome"] == "cancelled"
    run_until_idle(stado_env, tmp_path)
    first_short = first[:next(i for i in range(36) if first[i] != second[i]) + 1]
    assert stado(stado_env, "job", "watch", first_short).stdout == "one\n"
    rerun = stado(stado_env, "job", "rerun", first_short).stdout.strip()
    assert machine_status(stado_env, rerun)["rerun_of"] == first
