"""The supervisor's process layer: everything it asks of the OS about processes, in one object the owner passes
to its lease and its attempts. The real one is runkit.system.proc's; the in-process tier passes a fake whose processes
exist only in the test and end on its clock (tests/jobman/inprocess/world.py).

Its methods: the supervisor's own identity; the target spawned (and the supervisor made a subreaper first);
the target's identity, its exit descriptor, the children reaped; the supervisor's process tree signalled and
looked at; another process verified or waited for; the poller the supervisor sleeps on; and the exec into
the lean waiting form.
"""
import os
import select
import time

from runkit.system import proc, trees


class Processes:
    """The real processes of one supervisor (this process, its target and their descendants)."""

    __slots__ = ("subreaper",)

    def __init__(self):
        self.subreaper = False  # whether orphans of the target's tree come back to this process

    def identity(self):
        return proc.self_identity()

    def spawn(self, executable: str, argv: list[str], env: dict[str, str], *, stdin: int, stdout: int, stderr: int,
              cwd: str | None) -> int:
        """Start the target in its own session (runkit.system.proc.spawn); raises OSError."""
        if not self.subreaper:
            self.subreaper = proc.become_subreaper()
        return proc.spawn(executable, argv, env, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd,
                          only_std_fds=True)

    def target_identity(self, pid: int) -> tuple[int, str]:
        """(start time, boot id) of a child just started (0 for a start time that cannot be read)."""
        st = proc.stat(pid)
        return (st.start_time if st else 0), proc.boot_id()

    def exit_fd(self, pid: int) -> int | None:
        return proc.exit_fd(pid)

    def close_fd(self, fd: int) -> None:
        os.close(fd)

    def reap(self) -> list[tuple[int, int]]:
        """Every exited child collected without blocking: [(pid, wait status)]."""
        return proc.reap_children()

    def signal_tree(self, sig: int) -> int:
        """Signal every live descendant of this process; how many were signalled."""
        return trees.signal_tree(os.getpid(), sig)

    def any_descendants(self) -> bool:
        return bool(trees.live_descendants(os.getpid()))

    def verify(self, pid, start_time, boot, awake: bool = False) -> bool:
        return proc.verify(pid, start_time, boot, awake=awake)

    def wait_child(self, pid: int) -> int | None:
        return proc.wait_child(pid)

    def watcher(self):
        """A watch of many processes' ends at once (runkit.system.deathwatch): the lease round's holder's."""
        from runkit.system.deathwatch import DeathWatch

        return DeathWatch()

    def poller(self):
        """What the supervisor sleeps on (register, unregister, poll(ms) as select.poll's)."""
        return select.poll()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def lean_enabled(self) -> bool:
        from . import lean

        return lean.enabled()

    def exec(self, path: str, argv: list[str], env: dict[str, str]) -> None:
        """Replace this process (the lean form); returns only by raising OSError."""
        os.execve(path, argv, env)
