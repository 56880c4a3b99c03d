"""jobman's fault points (runkit.faults): JOBMAN_TEST_FAULT names where a process dies or misbehaves.

Each point is `<process>:<place>`; several may be given, comma-separated. `hit` kills the process with
SIGKILL, exactly as a crash would; `active` lets the caller misbehave in its own way; `pause` and `linger`
touch $JOBMAN_TEST_MARKER and wait there (for a signal; for the test to remove the marker).
"""
from runkit.faults import FaultPoints

_POINTS = FaultPoints("jobman", "JOBMAN_TEST_FAULT", marker_variable="JOBMAN_TEST_MARKER")
active, hit, pause, linger = _POINTS.active, _POINTS.hit, _POINTS.pause, _POINTS.linger
