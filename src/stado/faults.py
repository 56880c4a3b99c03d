"""Fault points: named places where a test makes a stado process die, to open a crash window.

STADO_FAULT_POINT=<name> makes the process exit at once (no cleanup, like a crash) the first time
it reaches that point. The points sit between the two writes of a two-write transition:

    claim-written     running/<id>.json created, queue/<id>.json not yet deleted
    terminal-written  the terminal record created, running/<id>.json not yet deleted
    cancel-written    cancelled/<id>.json created, the queue entry or tombstone not yet deleted
    requeue-written   a retry's queue entry written, running/<id>.json not yet deleted
    spawned           the job's process started, its record not yet in running/<id>.json (the first renewal)
"""
import os
import sys

FAULT_EXIT = 86
POINTS = ("claim-written", "terminal-written", "cancel-written", "requeue-written", "spawned")


def point(name: str) -> None:
    assert name in POINTS, name
    if os.environ.get("STADO_FAULT_POINT") == name:
        sys.stderr.write(f"stado: fault point {name}: exiting as a crash would\n")
        sys.stderr.flush()
        os._exit(FAULT_EXIT)
