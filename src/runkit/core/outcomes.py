"""Outcomes and the exit status a waiting command gives for each: one table for both tools.

`jobman wait` / `jobman logs --follow` and `stado job watch` exit with the job's own exit code when it ran
to an exit, 128+N if signal N ended it, and these fixed codes otherwise. The waiting command's own
failures (a wait that times out, a store it cannot reach) use codes outside this table (the exit tables
of docs/jobman-reference.md and docs/stado-reference.md)."""

OUTCOMES = ("succeeded", "failed", "timed_out", "cancelled", "dependency_failed", "submission_failed", "lost")

EXIT_TIMED_OUT = 124            # as timeout(1)
EXIT_CANCELLED = 125
EXIT_LOST = 123                 # its supervisor or worker died: what happened to the command is unknown
EXIT_DEPENDENCY_FAILED = 122
EXIT_SUBMISSION_FAILED = 121
EXIT_NOT_STARTED = 127          # failed before the command could start (not found, not executable, no inputs)
EXIT_COST_CAP = 119             # stado: stopped once its cost passed its cap (SIGTERM to its group is the means)
# Not an outcome: the waiting command itself gave up (`jobman wait --timeout`) while the jobs go on. Distinct
# from a job's own timed_out (124), so a script can tell "the job ran out of time" from "I stopped waiting".
EXIT_WAIT_TIMED_OUT = 120
_FIXED = {"timed_out": EXIT_TIMED_OUT, "cancelled": EXIT_CANCELLED, "lost": EXIT_LOST,
          "dependency_failed": EXIT_DEPENDENCY_FAILED, "submission_failed": EXIT_SUBMISSION_FAILED}


def exit_status(outcome: str, exit_code: int | None, signal: int | None) -> int:
    """The job's own exit code when it ran to an exit, 128+N for signal N, else a fixed code."""
    if outcome == "succeeded":
        return 0
    if outcome in _FIXED:
        return _FIXED[outcome]
    if exit_code is not None:
        return exit_code or 1
    if signal is not None:
        return 128 + signal
    return EXIT_NOT_STARTED


# stado's failed records carry a bounded error class; those that say the command never ran, or that its
# worker was lost, map onto the same outcomes as jobman's.
STADO_ERROR_OUTCOMES = {"spawn_error": None, "input_unavailable": None, "worker_lease_expired": "lost"}
# ... and those with an exit status of their own: the signal that stopped the job was stado's doing, not its end.
STADO_ERROR_EXITS = {"cost_cap": EXIT_COST_CAP}


def stado_exit_status(outcome: str | None, exit_code: int | None, signal: int | None, error_class: str | None) -> int:
    """stado's outcomes through the same table: a worker lost twice exits as `lost` (123); a job that could not
    start (spawn error, input unavailable) as not started (127); one its cost cap stopped as 119."""
    if outcome == "failed" and error_class in STADO_ERROR_EXITS:
        return STADO_ERROR_EXITS[error_class]
    if outcome == "failed" and error_class in STADO_ERROR_OUTCOMES:
        mapped = STADO_ERROR_OUTCOMES[error_class]
        return exit_status(mapped, None, None) if mapped else EXIT_NOT_STARTED
    if outcome == "failed" and error_class == "internal" and exit_code is None and signal is None:
        return 1
    return exit_status(outcome or "failed", exit_code, signal)
