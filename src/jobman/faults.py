"""Fault points for the crash tests: JOBMAN_TEST_FAULT names where a process dies (or misbehaves).

Each point is `<process>:<place>`; several may be given, comma-separated. `hit` kills the process
with SIGKILL, exactly as a crash would; `active` lets the caller misbehave in its own way.
"""
import os

SIGKILL = 9

_ACTIVE = frozenset(p.strip() for p in os.environ.get("JOBMAN_TEST_FAULT", "").split(",") if p.strip())


def active(point: str) -> bool:
    return point in _ACTIVE


def hit(point: str) -> None:
    if point in _ACTIVE:
        os.kill(os.getpid(), SIGKILL)


def pause(point: str) -> None:
    """Stop here until a signal arrives, after touching $JOBMAN_TEST_MARKER so a test knows we are here."""
    if point in _ACTIVE:
        marker = os.environ.get("JOBMAN_TEST_MARKER")
        if marker:
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
        import time

        while True:  # not signal.pause(): a signal landing before pause() is entered would be missed for ever
            time.sleep(0.05)


def linger(point: str, seconds: float = 1.0) -> None:
    """Touch $JOBMAN_TEST_MARKER, then keep going slowly (a window in which a test sends signals)."""
    if point in _ACTIVE:
        import time

        marker = os.environ.get("JOBMAN_TEST_MARKER")
        if marker:
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
        time.sleep(seconds)
