"""Outcomes and the exit status `jobman wait` (and `logs --follow`) gives for each."""

OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled", "dependency_failed", "submission_failed", "lost")

# Fixed, documented codes for outcomes with no exit code of their own (124 as timeout(1) uses).
EXIT_TIMED_OUT = 124
EXIT_CANCELLED = 125
EXIT_LOST = 123
EXIT_DEPENDENCY_FAILED = 122
EXIT_SUBMISSION_FAILED = 121
EXIT_NOT_STARTED = 127  # failed before the command could start (not found, not executable)
_FIXED = {"timed_out": EXIT_TIMED_OUT, "cancelled": EXIT_CANCELLED, "lost": EXIT_LOST,
          "dependency_failed": EXIT_DEPENDENCY_FAILED, "submission_failed": EXIT_SUBMISSION_FAILED}


def exit_status(outcome: str, exit_code: int | None, signal: int | None) -> int:
    """The job's own exit code when it ran to an exit, 128+N for signal N, else a fixed code."""
    if outcome == "succeeded":
        return 0
    if outcome in _FIXED:
        return _FIXED[outcome]
    if exit_code is not None:
        return exit_code
    if signal is not None:
        return 128 + signal
    return EXIT_NOT_STARTED
