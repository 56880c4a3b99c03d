"""runkit.system.faults: the one fault-point mechanism of both tools, in real processes."""
import signal
import subprocess
import sys

from tests.helpers import wait_for

PROGRAM = """
import sys
from runkit.system.faults import FaultPoints
points = FaultPoints("tool", "TOOL_FAULT", exit_code={exit_code}, marker_variable="TOOL_MARKER")
getattr(points, sys.argv[1])(sys.argv[2])
print("went on past", sys.argv[2], flush=True)
"""


def start(kind: str, point: str, env: dict, exit_code=None):
    return subprocess.Popen([sys.executable, "-c", PROGRAM.format(exit_code=exit_code), kind, point],
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_an_active_point_crashes_by_sigkill_or_by_the_tools_exit_code():
    killed = start("hit", "a:b", {"TOOL_FAULT": "x:y, a:b"})
    out, _ = killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL and out == ""
    exited = start("hit", "a:b", {"TOOL_FAULT": "a:b"}, exit_code=86)
    out, err = exited.communicate(timeout=30)
    assert exited.returncode == 86 and out == ""
    assert err == "tool: fault point a:b: exiting as a crash would\n"


def test_an_inactive_point_is_passed_through():
    for env in ({}, {"TOOL_FAULT": "a:bc,x"}):
        passed = start("hit", "a:b", env)
        out, err = passed.communicate(timeout=30)
        assert passed.returncode == 0 and out == "went on past a:b\n", err


def _held_at_p(kind: str, marker):
    """A process that stops at fault point p the `kind` way, once it has reached it (its marker written)."""
    proc = start(kind, "p", {"TOOL_FAULT": "p", "TOOL_MARKER": str(marker)})
    wait_for(marker.exists, message="the process to reach its fault point")
    return proc


def test_linger_holds_the_process_until_the_test_removes_its_marker(tmp_path):
    marker = tmp_path / "marker"
    proc = _held_at_p("linger", marker)
    assert marker.read_text() == str(proc.pid)
    # Held for as long as the marker stays (a sleep would have let it go after its fixed time).
    try:
        proc.wait(timeout=1.5)
        raise AssertionError("the process went on while its marker was still there")
    except subprocess.TimeoutExpired:
        pass
    marker.unlink()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out == "went on past p\n", err


def test_pause_holds_the_process_until_a_signal(tmp_path):
    proc = _held_at_p("pause", tmp_path / "marker")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM and out == ""
