"""jobman's fault points (runkit.system.faults): JOBMAN_TEST_FAULT names where a process dies or misbehaves.

Each point is `<process>:<place>`; several may be given, comma-separated. `hit` kills the process with
SIGKILL, exactly as a crash would; `active` lets the caller misbehave in its own way; `pause` and `linger`
touch $JOBMAN_TEST_MARKER and wait there (for a signal; for the test to remove the marker). `hit_once` kills
only the one process that takes $JOBMAN_TEST_MARKER away (the test makes the marker when the time has come),
so that one job of a batch, whose processes share one environment, fails where the others go on.
"""
import os

from runkit.system.faults import FaultPoints

_POINTS = FaultPoints("jobman", "JOBMAN_TEST_FAULT", marker_variable="JOBMAN_TEST_MARKER")
active, hit, pause, linger = _POINTS.active, _POINTS.hit, _POINTS.pause, _POINTS.linger


def hit_once(point: str) -> None:
    if _POINTS.active(point) and _POINTS.marker:
        try:
            os.unlink(_POINTS.marker)
        except OSError:
            return  # not armed yet, or another process took it
        os.kill(os.getpid(), 9)
