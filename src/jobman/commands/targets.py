"""A job's target processes when its supervisor cannot speak for them (it died): the recorded root
and what is left of the session and process group it led (runkit.system.trees.orphaned_tree), plus every
process of this user carrying the job's id in its environment (runkit.system.envfind). The second way finds
the target of a supervisor killed before it recorded it, and a daemon that double-forked and started
a session of its own. Each process is identified by pid and start time, so a signal sent to it later
is pinned to that very process (runkit.system.proc.signal_exact).
"""
from runkit.system import envfind, proc, proctable, trees

JOB_ID_VARIABLE = "JOBMAN_JOB_ID"  # set in every target's environment by its supervisor


class Finder:
    """Looks at the process table once for all the jobs one pass asks about."""

    def __init__(self):
        self._tagged = None

    def tagged(self, job_id: str) -> list:
        if self._tagged is None:
            self._tagged = envfind.processes_with(JOB_ID_VARIABLE)
        return self._tagged.get(job_id, [])

    def processes(self, job_id: str, attempt) -> list:
        """The live processes of the job's target (attempt: its last attempts row, or None)."""
        found = {}
        if attempt is not None and attempt["pid"] is not None:
            for st in trees.orphaned_tree(attempt["pid"], attempt["start_time"], attempt["boot_id"]):
                found[st.pid] = st
        for st in self.tagged(job_id):
            found.setdefault(st.pid, st)
        return sorted(found.values(), key=lambda st: st.pid)

    def alive(self, job_id: str, attempt) -> bool:
        if attempt is not None and proc.verify(attempt["pid"], attempt["start_time"], attempt["boot_id"]):
            return True
        return bool(self.processes(job_id, attempt))


def processes(job_id: str, attempt) -> list:
    """A fresh look (for a loop that stops them and looks again)."""
    return Finder().processes(job_id, attempt)


def describe(stats) -> list[dict]:
    """pid and command of each process, for show."""
    out = []
    for st in stats:
        command = proctable.command_line(st.pid)
        out.append({"pid": st.pid, "command": "?" if command is None else command})
    return out
