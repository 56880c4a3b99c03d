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

from .workroot import EXIT_STATUS_FILE, attempt_tag

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
                "work_dir": cwd, "job": env.get("WC_JOB_ID"), "attempt_started": env.get("WC_JOB_STARTED_AT")}

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
        """What is left of the job's tree: its session and process group, what they started, and whatever
        still carries this attempt's WC_JOB_ID and WC_JOB_STARTED_AT in its environment (a descendant that
        double-forked into a session of its own, which no walk of the tree finds)."""
        if not process:
            return []
        found = {st.pid: st for st in proc.orphaned_tree(process.get("pid"), process.get("start_time"),
                                                          process.get("boot_id"))}
        if process.get("job") and process.get("attempt_started") and process.get("boot_id") == proc.boot_id():
            for st in _same_attempt(process["job"], process["attempt_started"]):
                found.setdefault(st.pid, st)
        return list(found.values())

    def alive(self, process: dict | None) -> bool:
        return bool(self.members(process))

    def signal(self, process: dict | None, sig: int) -> int:
        """Send `sig` to every process of the job's tree, each identity-checked. Returns how many."""
        count = 0
        for st in self.members(process):
            if proc.signal_exact(st.pid, st.start_time, sig):
                count += 1
        return count

    def found_process(self, pids: list[int], job_id: str, started_at: str | None) -> dict | None:
        """The process record of a job's tree found by its users (the restart check), for a worker that died
        before it wrote the record: the session leader among them (the job's shell runs in a session of its
        own, its process group id its pid), identity-pinned."""
        for pid in sorted(pids):
            try:
                leader = os.getsid(pid) == pid
            except OSError:
                continue
            ident = proc.identity(pid) if leader else None
            if ident is not None:
                return {"pid": pid, "pgid": pid, "start_time": ident.start_time, "boot_id": proc.boot_id(),
                        "job": job_id, "attempt_started": started_at}
        return None

    def users_of(self, directory: str) -> list[int]:
        """Processes of this user whose working directory, or an open file, lies under `directory` (what
        lsof would list): the restart check's evidence that a job left by a dead agent still runs."""
        from runkit.envfind import using_path

        return using_path(directory)


def _same_attempt(job_id: str, started_at: str) -> list:
    """Processes of this user whose environment names this job and this attempt's start (two attempts of a
    job on one host, a stale copy and its successor, never share both)."""
    from runkit.envfind import processes_with

    tag = attempt_tag(started_at)
    return [st for st in processes_with("WC_JOB_ID", [job_id]).get(job_id, []) if of_attempt(st.pid, tag)]


def of_attempt(pid: int, tag: str) -> bool:
    """Whether process `pid` belongs to the attempt `tag` names (workroot.attempt_tag of its
    WC_JOB_STARTED_AT); a tag of "" (an old shared job directory) names every attempt."""
    from runkit.envfind import environ_value

    return not tag or attempt_tag(environ_value(pid, "WC_JOB_STARTED_AT")) == tag
