"""Starting a job's shell and stopping what it started, on this host: the platform primitives are runkit.proc's,
with the same identity checks jobman uses (a remembered pid never authorises a signal by itself).

The job's command runs under a shell of its own that writes the command's exit status into the job's
directory when it ends: an agent that replaces one that died can then record what the job did, which
its wait status would have said had it been the parent. Exit statuses above 128 are read as the signal
that ended the command (128 + N), as shells report them.
"""
import os
import signal

from runkit import proc

from .workroot import EXIT_STATUS_FILE

TERM, KILL = signal.SIGTERM, signal.SIGKILL
# $1: the command; $2: where its exit status goes. The status is written before the wrapper exits with it.
_WRAPPER = '/bin/sh -c "$1"; s=$?; printf "%s" "$s" > "$2"; exit "$s"'


def exit_of(code: int | None, sig: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of the job's command from the wrapper's own wait status."""
    if sig is None and code is not None and 128 < code <= 128 + 64:
        return None, code - 128
    return code, sig


class ProcessHost:
    """The real processes of one agent's jobs."""

    def __init__(self, reap_all: bool = False):
        self.reap_all = reap_all  # this agent is a subreaper: every orphan comes back to it to be reaped

    def spawn(self, command: str, env: dict[str, str], job_dir: str, cwd: str, output_path: str) -> dict:
        """Start the job in its own session (its process group id is its pid), stdin from /dev/null, stdout
        and stderr appended straight to `output_path`, every signal at its default. Returns the process
        record kept in the running document. Raises OSError."""
        status_path = os.path.join(job_dir, EXIT_STATUS_FILE)
        out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            pid = proc.spawn("/bin/sh", ["/bin/sh", "-c", _WRAPPER, "stado-job", command, status_path], env,
                             stdin=null, stdout=out, stderr=out, new_session=True, cwd=cwd)
        finally:
            os.close(null)
            os.close(out)
        ident = proc.identity(pid)
        return {"pid": pid, "pgid": pid, "start_time": ident.start_time if ident else None, "boot_id": proc.boot_id(),
                "work_dir": cwd}

    def reap(self, pids) -> dict[int, tuple[int | None, int | None]]:
        """(exit code, signal) of each of `pids` that has ended, without blocking; with reap_all, every
        other ended child is collected too (orphans of jobs, re-parented to this agent)."""
        ended = {}
        if self.reap_all:
            for pid, status in proc.reap_children():
                if pid in pids:
                    ended[pid] = exit_of(*proc.describe_status(status))
            return ended
        for pid in pids:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                ended[pid] = (None, None)
                continue
            if done:
                ended[pid] = exit_of(*proc.describe_status(status))
        return ended

    def members(self, process: dict | None) -> list:
        """What is left of the job's tree: its session and process group, and what they started."""
        if not process:
            return []
        return proc.orphaned_tree(process.get("pid"), process.get("start_time"), process.get("boot_id"))

    def alive(self, process: dict | None) -> bool:
        return bool(self.members(process))

    def signal(self, process: dict | None, sig: int) -> int:
        """Send `sig` to every process of the job's tree, each identity-checked. Returns how many."""
        count = 0
        for st in self.members(process):
            if proc.signal_exact(st.pid, st.start_time, sig):
                count += 1
        return count

    def users_of(self, directory: str) -> list[int]:
        """Processes of this user whose working directory, or an open file, lies under `directory` (what
        lsof would list): the restart check's evidence that a job left by a dead agent still runs."""
        return proc.using_path(directory)
