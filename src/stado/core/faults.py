"""stado's fault points (runkit.system.faults): named places where a test makes a stado process die, to open a
crash window.

STADO_FAULT_POINT=<name> makes the process exit at once with status 86 (no cleanup, like a crash) when it
reaches that point. The points sit between the two writes of a two-write transition:

    claim-written     running/<id>.json created, queue/<id>.json not yet deleted
    terminal-written  the terminal record created, running/<id>.json not yet deleted
    cancel-written    cancelled/<id>.json created, the queue entry or tombstone not yet deleted
    requeue-written   a retry's queue entry written, running/<id>.json not yet deleted
    spawned           the job's process started, its record not yet in running/<id>.json (the first renewal)
"""
from runkit.system.faults import FaultPoints

FAULT_EXIT = 86
POINTS = ("claim-written", "terminal-written", "cancel-written", "requeue-written", "spawned")
_POINTS = FaultPoints("stado", "STADO_FAULT_POINT", exit_code=FAULT_EXIT)


def point(name: str) -> None:
    assert name in POINTS, name
    _POINTS.hit(name)
