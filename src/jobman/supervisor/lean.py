"""The lean waiting form of a supervisor: while its job only waits, the supervisor `exec`s into a shell
that blocks on the job's doorbell, and `exec`s back into Python when it is rung or its timer fires.

Why: a waiting Python supervisor costs 4.4 MiB of unique memory, and a sweep keeps thousands waiting for
days. bash blocked in `read -t` costs 0.26 MiB and no CPU (measured: docs/performance.md, "A
queue held and drained"). dash costs less (0.1 MiB) but has no timed read: its only timer would be an alarm armed
before the exec, which kills it if it fires before dash has trapped it. bash's `read -t` arms its own.

What stays true across both changes of form, because `exec` keeps them: the pid, the process start
time, the session and process group, the parent, the environment (bash sets PWD to the directory it runs
in and drops `_`; LC_ALL: see SCRIPT), fds 0-2 (the supervisor log) and the doorbell's descriptor, which is why no ring is lost while the form changes: the FIFO stays open
the whole time, so a ring written meanwhile waits in it, and bash's `read` returns at once. What does
not survive is everything in Python's memory: the resumed supervisor (jobman.supervisor.lean_return.resume) reads
it all back from the database, checks that the job is still its own (its supervisor id, its recorded
pid and start time are this process's), and looks at its job afresh before deciding anything.

The lease round's holder never turns lean (someone must renew the lean waiters' leases); a lean
waiter's timer is its fallback poll, spread so that all lean waiters together wake about once per
renewal interval however many they are (one of them then takes the round up if its holder died).
"""
import os

SHELL = "/bin/bash"
# argv[0] of the lean form: what `ps` and `jobman show` see (bash does not care what it is called, but
# for a leading '-', a login shell, or 'sh', POSIX mode).
NAME = "jobman-wait"
# -p: no BASH_ENV, no functions or SHELLOPTS from the environment, so nothing of the job's submitter
# runs in it. $1 timeout, $2 doorbell fd, the rest the command that brings Python back. Whatever `read`
# returns (a ring, the timeout, an error), the next step is Python, which looks at the database. The C
# locale saves each waiter 16 KiB (bash loads the UTF-8 one from LANG); it is lifted again before the
# exec when the supervisor's own environment had no LC_ALL (C_LOCALE_MARK says so).
C_LOCALE_MARK = "JOBMAN_WAIT_C_LOCALE"
SCRIPT = ('read -r -t "$1" -N 1 _ <&"$2"; shift 2; '
          f'if [ -n "${C_LOCALE_MARK}" ]; then unset LC_ALL {C_LOCALE_MARK}; fi; exec "$@"')


def enabled(environ=os.environ) -> bool:
    """Whether a waiting supervisor may turn lean: bash is there, and JOBMAN_LEAN_WAIT is not 0 (the
    supervisor's environment is its submitter's: `JOBMAN_LEAN_WAIT=0 jobman run ...` keeps it Python)."""
    return environ.get("JOBMAN_LEAN_WAIT", "1") != "0" and os.access(SHELL, os.X_OK)


def argv(timeout: float, bell_fd: int, python_argv: list[str]) -> list[str]:
    return [NAME, "-p", "-c", SCRIPT, NAME, f"{max(timeout, 0.001):.3f}", str(bell_fd), *python_argv]


def environment(environ) -> dict[str, str]:
    """The lean form's environment: the supervisor's, in the C locale (see SCRIPT)."""
    if "LC_ALL" in environ:
        return dict(environ)
    return {**environ, "LC_ALL": "C", C_LOCALE_MARK: "1"}


def is_lean(pid: int) -> bool | None:
    """Whether that process is a supervisor in its lean form (None: it cannot be read)."""
    from runkit.system import proctable

    command = proctable.command_line(pid)
    return None if command is None else command.split(" ", 1)[0] == NAME
