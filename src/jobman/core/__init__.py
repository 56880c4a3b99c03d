"""jobman's core: what every other layer builds on, with no I/O of its own beyond a home's paths.

errors: the exceptions and the exit codes they mean. model: frozen records of a job's spec, state and attempts.
scheduling: the slot verdict (pure). home: where a home's
files are. faults: the test fault points (JOBMAN_TEST_FAULT).
"""
