"""Starting a job's shell and stopping what it started, on this host: the platform primitives are runkit.system.proc's,
with the same identity checks jobman uses (a remembered pid never authorises a signal by itself).

The job's shell is `/bin/sh -c CMD` itself, started by the agent with no wrapper between them: its $PPID is
the agent, it leads its own session and process group (the pid recorded), and its exit status is the kernel's
wait status, so an exit is recorded as an exit (`exit 130` is exit code 130) and a signal as a signal. The
agent writes that status into the job's directory as it reaps the shell, so an agent that replaces it after a
crash records what the job did. A shell still running when its agent died is re-parented elsewhere: the new
agent pins it with a pidfd (exit_watch) and reads its exit status from there once it ends.
"""
import os
import signal
import sys

from runkit.core import jsonfast
from runkit.system import exits, proc, trees

from .hostfiles import EXIT_STATUS_FILE, attempt_tag, write_exit_status

TERM, KILL = signal.SIGTERM, signal.SIGKILL


class ProcessHost:
    """The real processes of one agent's jobs."""

    def __init__(self, reap_all: bool = False):
        self.reap_all = reap_all  # this agent is a subreaper: every orphan comes back to it to be reaped
        self._status_paths: dict[int, str] = {}  # a job shell's pid -> where its exit status is written
        self._keepers: list[int] = []  # keepers told to go, not yet collected (when this agent is no subreaper)
        self._pidfds: dict[int, int] = {}  # a job shell's pid -> a pidfd on it, until its keeper has its own copy

    def spawn(self, command: str, env: dict[str, str], job_dir: str, cwd: str, output_path: str) -> dict:
        """Start the job in its own session (its process group id is its pid), stdin from /dev/null, stdout
        and stderr appended straight to `output_path`, every signal at its default. Returns the process
        record kept in the running document. Raises OSError."""
        out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            pid = proc.spawn("/bin/sh", ["/bin/sh", "-c", command], env, stdin=null, stdout=out, stderr=out,
                             new_session=True, cwd=cwd)
        finally:
            os.close(null)
            os.close(out)
        self._status_paths[pid] = os.path.join(job_dir, EXIT_STATUS_FILE)
        pidfd = exits.pin_child(pid)  # pinned at once: its keeper, given it, learns how the shell ended whoever reaps it
        if pidfd is not None:
            self._pidfds[pid] = pidfd
        ident = proc.identity(pid)
        return {"pid": pid, "pgid": pid, "start_time": ident.start_time if ident else None, "boot_id": proc.boot_id(),
                "work_dir": cwd, "job": env.get("WC_JOB_ID"), "attempt_started": env.get("WC_JOB_STARTED_AT")}

    def reap(self, pids) -> dict[int, tuple[int | None, int | None]]:
        """(exit code, signal) of each of `pids` that has ended, without blocking, each written into its job's
        directory first; with reap_all, every other ended child is collected too (orphans of jobs, re-parented
        to this agent)."""
        ended = {}
        if self.reap_all:
            for pid, status in proc.reap_children():
                if pid in pids:
                    ended[pid] = self._ended(pid, status)
            return ended
        for pid in pids:
            try:
                polled = proc.poll_child(pid)
            except ChildProcessError:
                ended[pid] = (None, None)
                continue
            if polled is not None:
                ended[pid] = self._ended(pid, polled)
        return ended

    def _ended(self, pid: int, status: int) -> tuple[int | None, int | None]:
        got = proc.describe_status(status)
        path = self._status_paths.pop(pid, None)
        if path is not None:
            try:
                write_exit_status(path, *got)
            except OSError:
                pass  # its directory is gone (removed by hand): this agent records the status all the same
        return got

    def watch_exit(self, process: dict | None):
        """A handle on a job shell this agent did not start (left by the agent it replaced), from which
        exit_of_watched() reads its exit status once it ends; None if it cannot be pinned."""
        if not process or process.get("boot_id") != proc.boot_id() or process.get("start_time") is None:
            return None
        pidfd = exits.exit_watch(process["pid"], process["start_time"])
        return None if pidfd is None else (pidfd, process["pid"], process["start_time"])

    def exit_of_watched(self, handle) -> tuple[int | None, int | None] | None:
        """(exit code, signal) of the shell watch_exit() pinned once it has ended (the handle is closed then),
        or None if the kernel does not say."""
        if handle is None:
            return None
        status = exits.exit_status_of(*handle)
        os.close(handle[0])
        return None if status is None else proc.describe_status(status)

    def members(self, process: dict | None) -> list:
        """What is left of the job's tree: its session and process group, what they started, and whatever
        still carries this attempt's WC_JOB_ID and WC_JOB_STARTED_AT in its environment (a descendant that
        double-forked into a session of its own, which no walk of the tree finds)."""
        if not process:
            return []
        found = {st.pid: st for st in trees.orphaned_tree(process.get("pid"), process.get("start_time"),
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
            ident = proc.identity(pid) if proc.leads_session(pid) else None
            if ident is not None:
                return {"pid": pid, "pgid": pid, "start_time": ident.start_time, "boot_id": proc.boot_id(),
                        "job": job_id, "attempt_started": started_at}
        return None

    def keep(self, spec: dict) -> dict | None:
        """Start the job's keeper (stado/agent/keeper.py), in a session of its own and with this agent's environment (it
        opens the same store, should it have to speak for the job): `spec` on its stdin, then the pipe kept open
        (a line 'done' ends it; its end of file tells it this agent is gone); its log in the job's directory. None
        if it cannot be started (the job runs on, with no keeper: said by the caller)."""
        job_dir = spec["job_dir"]
        pidfd = self._pidfds.pop(spec["process"]["pid"], None)
        if pidfd is not None:
            spec = dict(spec, pidfd=3)  # the shell's pidfd, as the keeper's fd 3
        read_end, write_end = os.pipe()
        log = os.open(os.path.join(job_dir, "keeper.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            # `-c`, not `-m`: runpy would import importlib.util and contextlib, a fifth of the keeper's start.
            pid = proc.spawn(sys.executable, [sys.executable, "-c", "import sys, stado.agent.keeper as k; sys.exit(k.main())"],
                             dict(os.environ), stdin=read_end, stdout=log, stderr=log, new_session=True,
                             extra_fds=[(pidfd, 3)] if pidfd is not None else ())
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
            os.close(log)
            if pidfd is not None:
                os.close(pidfd)
        os.write(write_end, jsonfast.dumps(spec, sort_keys=True).encode() + b"\n")
        ident = proc.identity(pid)
        handle = {"pid": pid, "start_time": ident.start_time if ident else None, "fd": write_end}
        with open(os.path.join(job_dir, "keeper.json"), "w") as f:
            f.write(jsonfast.dumps({"pid": pid, "start_time": handle["start_time"], "boot_id": proc.boot_id()}))
        return handle

    def keeper_alive(self, job_dir: str) -> bool:
        """Whether the keeper that job directory names (keeper.json) still runs: an agent taking the job over
        starts another only if not."""
        from .hostfiles import read_json_file

        kept = read_json_file(job_dir, "keeper.json") or {}
        return proc.verify(kept.get("pid"), kept.get("start_time"), kept.get("boot_id"))

    def let_go(self, handle: dict | None) -> None:
        """The slot is settled: its keeper is told so and exits (reaped here when this agent is not every orphan's
        reaper)."""
        if not handle:
            return
        fd = handle.pop("fd", None)
        if fd is not None:
            try:
                os.write(fd, b"done\n")
            except OSError:
                pass
            os.close(fd)
        if not self.reap_all:  # it exits at once: collected here, or by the next let_go
            self._keepers = [pid for pid in self._keepers + [handle["pid"]] if not _collected(pid)]

    def identity(self, work_root: str) -> dict:
        """This agent's own process as running records name their owner (documents.claim_doc): pid, start time,
        boot id, pid namespace and machine id, and its work root (where its jobs' directories are, before a
        job's process is recorded)."""
        me = proc.self_identity()
        return {"pid": me.pid, "start_time": me.start_time, "boot_id": me.boot_id, "pid_ns": proc.pid_namespace(),
                "machine_id": proc.machine_id(), "work_root": work_root}

    def owner_state(self, record: dict | None) -> str:
        """'alive', 'gone' or 'unknown': what this host can tell of the agent a running record names
        (runkit.system.proc.process_here)."""
        return proc.process_here(record)

    def users_of(self, directory: str) -> list[int]:
        """Processes of this user whose working directory, or an open file, lies under `directory` (what
        lsof would list): the restart check's evidence that a job left by a dead agent still runs."""
        from runkit.system.envfind import using_path

        from .hostfiles import read_json_file

        # The job's keeper holds its log there: it speaks for the job, it is not the job.
        kept = read_json_file(directory, "keeper.json") or {}
        return [pid for pid in using_path(directory) if pid != kept.get("pid")]


def _collected(pid: int) -> bool:
    try:
        return proc.poll_child(pid) is not None
    except ChildProcessError:
        return True


def _same_attempt(job_id: str, started_at: str) -> list:
    """Processes of this user whose environment names this job and this attempt's start (two attempts of a
    job on one host, a stale copy and its successor, never share both)."""
    from runkit.system.envfind import processes_with

    tag = attempt_tag(started_at)
    return [st for st in processes_with("WC_JOB_ID", [job_id]).get(job_id, []) if of_attempt(st.pid, tag)]


def of_attempt(pid: int, tag: str) -> bool:
    """Whether process `pid` belongs to the attempt `tag` names (hostfiles.attempt_tag of its
    WC_JOB_STARTED_AT)."""
    from runkit.system.envfind import environ_value

    return attempt_tag(environ_value(pid, "WC_JOB_STARTED_AT")) == tag
