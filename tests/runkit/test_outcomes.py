"""One exit-code table for both tools (runkit.core.outcomes): jobman's outcomes and stado's records map alike."""
from runkit.core.outcomes import exit_status, stado_exit_status


def test_jobman_and_stado_give_the_same_codes():
    pairs = [  # (jobman outcome, exit, signal) and (stado outcome, exit, signal, error class): same code
        (("succeeded", 0, None), ("succeeded", 0, None, None), 0),
        (("failed", 3, None), ("failed", 3, None, "exit_code"), 3),
        (("failed", None, 9), ("failed", None, 9, "signal"), 137),
        (("timed_out", None, 15), ("timed_out", None, 15, "timeout"), 124),
        (("cancelled", None, None), ("cancelled", None, None, None), 125),
        (("lost", None, None), ("failed", None, None, "worker_lease_expired"), 123),
        (("failed", None, None), ("failed", None, None, "spawn_error"), 127),
    ]
    for jobman_args, stado_args, code in pairs:
        assert exit_status(*jobman_args) == code, jobman_args
        assert stado_exit_status(*stado_args) == code, stado_args
    assert exit_status("dependency_failed", None, None) == 122
    assert exit_status("submission_failed", None, None) == 121
    assert stado_exit_status("failed", None, None, "input_unavailable") == 127
    # The SIGTERM that stopped a job at its cost cap was stado's doing: the cap has a code of its own.
    assert stado_exit_status("failed", None, 15, "cost_cap") == 119


def test_a_wait_that_gives_up_has_a_code_of_its_own():
    """`jobman wait --timeout` giving up is not a job's outcome: its code is none of the table's."""
    from runkit.core.outcomes import EXIT_COST_CAP, EXIT_NOT_STARTED, EXIT_WAIT_TIMED_OUT, OUTCOMES

    fixed = {exit_status(outcome, None, None) for outcome in OUTCOMES} | {EXIT_NOT_STARTED, EXIT_COST_CAP}
    assert EXIT_WAIT_TIMED_OUT not in fixed and EXIT_WAIT_TIMED_OUT == 120
