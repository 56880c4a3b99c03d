"""Platform process control: identity, liveness, spawning and signalling, children and their wait statuses.

It and its sibling platform modules (trees, exits, proctable, host, filelocks, deathwatch) hold every OS-specific
call, so a port is those modules (docs/porting.md lists what they must provide; tests/test_layering.py keeps such
calls out of every other module). Linux is the platform (/proc, prctl): elsewhere the first look at a process
raises UnsupportedPlatform rather than judging every process gone. A remembered pid never authorises a signal: a
process is identified by pid + start time + boot id, and a zombie is not alive.
"""
import os

from ..core.frozen import Frozen

TYPE_CHECKING = False
PROC_FS = os.path.isdir("/proc/self")
_boot_id: str | None = None


class UnsupportedPlatform(RuntimeError):
    pass


def require_proc() -> None:
    if not PROC_FS:
        raise UnsupportedPlatform("no /proc here: jobman and stado run on Linux only")


class Identity(Frozen):
    """Who a process is: pid, start time (clock ticks since boot on Linux) and boot id."""

    __slots__ = ("pid", "start_time", "boot_id")
    if TYPE_CHECKING:
        pid: int
        start_time: int
        boot_id: str

    def __init__(self, pid: int, start_time: int, boot_id: str):
        super().__init__(pid=pid, start_time=start_time, boot_id=boot_id)

    def as_tuple(self) -> tuple:
        return (self.pid, self.start_time, self.boot_id)


def boot_id() -> str:
    """An id that changes on every boot (so a pid and start time from an earlier boot never match)."""
    global _boot_id
    if _boot_id is None:
        require_proc()
        with open("/proc/sys/kernel/random/boot_id") as f:
            _boot_id = f.read().strip()
    return _boot_id


def pid_namespace() -> str | None:
    """The pid namespace this process sees pids in ('pid:[4026531836]'), or None where it cannot be read: two
    processes whose boot id and pid namespace agree name each other's pids alike (containers on one kernel do not)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def machine_id() -> str | None:
    """This machine's id (systemd's /etc/machine-id), kept across reboots; None where there is none."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                found = f.read().strip()
        except OSError:
            continue
        if found:
            return found
    return None


def process_here(record: dict | None) -> str:
    """What this host can tell of a process another process recorded of itself (pid, start_time, boot_id,
    pid_ns, machine_id: agent.hostfiles.agent_identity): 'alive' (that very process runs, in this pid space),
    'gone' (it does not; or this machine has rebooted since), or 'unknown' (it ran on another machine or in another
    pid namespace, or the record says too little to tell)."""
    if not isinstance(record, dict):
        return "unknown"
    pid, start, boot = record.get("pid"), record.get("start_time"), record.get("boot_id")
    if not isinstance(pid, int) or not isinstance(start, int) or not isinstance(boot, str):
        return "unknown"
    if boot != boot_id():
        mine = machine_id()
        return "gone" if mine is not None and record.get("machine_id") == mine else "unknown"
    if record.get("pid_ns") != pid_namespace():
        return "unknown"
    return "alive" if verify(pid, start, boot) else "gone"


class Stat:
    """The fields of /proc/PID/stat that matter here."""

    __slots__ = ("pid", "state", "ppid", "pgid", "sid", "start_time")

    def __init__(self, pid, state, ppid, pgid, sid, start_time):
        self.pid, self.state, self.ppid, self.pgid, self.sid, self.start_time = pid, state, ppid, pgid, sid, start_time

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X", "x")


def stat(pid: int) -> Stat | None:
    """The process's stat, or None if there is no such process."""
    require_proc()
    # os.open/os.read, not open(): a lease round reads this for thousands of waiting processes every few
    # seconds, and the buffered file object costs a third more. The file is far shorter than one read.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not raw:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = raw[raw.rindex(b")") + 2:].split()
    return Stat(pid, rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))


def identity(pid: int) -> Identity | None:
    """The identity of a live process, or None if it is gone or a zombie."""
    st = stat(pid)
    if st is None or not st.alive:
        return None
    return Identity(pid, st.start_time, boot_id())


def self_identity() -> Identity:
    ident = identity(os.getpid())
    assert ident is not None
    return ident


def verify(pid: int | None, start_time: int | None, boot: str | None, awake: bool = False) -> bool:
    """True only if that exact process (same boot, same start time) still lives and is not a zombie;
    with awake, only if it is not stopped either (SIGSTOP, a debugger)."""
    if pid is None or start_time is None or boot is None or pid <= 0:
        return False
    if boot != boot_id():
        return False
    st = stat(pid)
    return (st is not None and st.alive and st.start_time == start_time
            and not (awake and st.state in ("T", "t")))


def _default_signals():
    import _signal  # type: ignore[import-not-found]  # the C module: the signal package's IntEnums pull in enum (~2 ms a start)

    return _signal.valid_signals() - {_signal.SIGKILL, _signal.SIGSTOP}


def spawn(path: str, argv: list[str], env: dict[str, str], *, stdin: int, stdout: int, stderr: int,
          new_session: bool = True, cwd: str | None = None, only_std_fds: bool = False, extra_fds=()) -> int:
    """Start a program with the given fds as 0/1/2, every signal at its default disposition and an
    empty signal mask (the caller may ignore SIGINT/SIGHUP/SIGPIPE; the child must not inherit that),
    in a new session when asked, in `cwd` if given. Raises OSError if it cannot be started (a missing
    cwd included). only_std_fds: the child gets fds 0-2 and nothing else, even descriptors this
    process inherited from its own parent (a shell's `exec 7>&1` would otherwise hold a pipeline open
    for as long as the child lives). extra_fds: (fd here, fd in the child) pairs given to the child besides.

    posix_spawn has no working-directory action in Python 3.11, so the caller's directory is changed
    around the spawn and restored: callers are single-threaded and use absolute paths.
    """
    actions: list[tuple[int, ...]] = [(os.POSIX_SPAWN_DUP2, stdin, 0), (os.POSIX_SPAWN_DUP2, stdout, 1), (os.POSIX_SPAWN_DUP2, stderr, 2)]
    actions += [(os.POSIX_SPAWN_DUP2, here, there) for here, there in extra_fds]
    if only_std_fds:
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in inherited_fds()]
    if cwd is None:
        return os.posix_spawn(path, argv, env, file_actions=actions, setsid=new_session,
                              setsigdef=_default_signals(), setsigmask=())
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chdir(cwd)
        try:
            return os.posix_spawn(path, argv, env, file_actions=actions, setsid=new_session,
                                  setsigdef=_default_signals(), setsigmask=())
        finally:
            os.fchdir(here)
    finally:
        os.close(here)


def inherited_fds() -> list[int]:
    """This process's descriptors above 2 that a program it starts would inherit (no close-on-exec)."""
    require_proc()
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:
                pass  # the descriptor listdir itself used, closed by now
    return found


def drain(fd: int) -> bytes:
    """Read a non-blocking pipe or FIFO until it is empty (the wake-ups it carries have been seen);
    returns what was read."""
    seen = b""
    try:
        while chunk := os.read(fd, 4096):
            seen += chunk
    except BlockingIOError:
        pass
    return seen


def ensure_std_fds() -> None:
    """Open /dev/null on any of fds 0-2 that is closed, so later pipes never land on them."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def which(name: str, path: str | None) -> str | None:
    """Resolve a bare command name on a PATH string (like shutil.which, without its import cost)."""
    for d in (path or os.defpath).split(os.pathsep):
        candidate = os.path.join(d or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


# --- process trees ---------------------------------------------------------------------------

_libc = None


def libc_handle():
    global _libc
    if _libc is None:
        import ctypes  # only a supervisor that runs a target pays for it

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def become_subreaper() -> bool:
    """Linux: orphaned descendants are re-parented to us instead of init, so a double-forked grandchild
    stays findable (and reapable) by its supervisor or agent. False where unsupported."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    PR_SET_CHILD_SUBREAPER = 36
    return libc_handle().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def signal_exact(pid: int, start_time: int, sig: int) -> bool:
    """Send sig to that exact process: pin it with a pidfd, then check the start time, so a recycled pid
    is never signalled. False if it is gone or is someone else now."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
        if not hasattr(os, "pidfd_open"):
            st = stat(pid)
            if st is None or st.start_time != start_time:
                return False
            try:
                os.kill(pid, sig)
                return True
            except OSError:
                return False
        return False
    if pidfd is None:  # unreachable: the branches above returned; told to the type checker
        return False
    import signal

    try:
        st = stat(pid)
        if st is None or st.start_time != start_time:
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def reap_children() -> list[tuple[int, int]]:
    """Collect every exited child without blocking: [(pid, wait status)]."""
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        reaped.append((pid, status))
    return reaped


def wait_child(pid: int) -> int | None:
    """Block until our child `pid` exits (reaping any other child that exits first); its wait status,
    or None if it is not (or no longer) our child."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return None
        except InterruptedError:
            continue
        if done == pid:
            return status


# --- the exit status of a process that is not our child -------------------------------------------


def describe_status(status: int) -> tuple[int | None, int | None]:
    """(exit code, signal number) from a wait status."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None


def signal_name(sig: int | None) -> str | None:
    if sig is None:
        return None
    import signal

    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# --- the rest of what jobman and stado ask of the OS (see docs/porting.md) ---------------------------


def leads_session(pid: int) -> bool:
    """Whether the process leads a session of its own (False if it is gone)."""
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def signal_group(pgid: int, sig: int) -> bool:
    """Send sig to a process group that our own unreaped child leads (its id cannot have been reused):
    whether it was delivered."""
    try:
        os.killpg(pgid, sig)
        return True
    except OSError:
        return False


def signal_led_group(leader: int, start_time: int, sig: int) -> bool:
    """Send sig at once to every process of the group that process (leader, start_time) leads, while it still
    exists (alive, or a zombie not yet reaped: either way its group id cannot have been reused). One delivery to
    the whole group, so that no member ends (and has the rest swept) before the others are sent it. Whether it
    was delivered."""
    st = stat(leader)
    if st is None or st.start_time != start_time or st.pgid != leader:
        return False
    return signal_group(leader, sig)


def poll_child(pid: int) -> int | None:
    """Our child's wait status if it has ended (it is reaped), else None; ChildProcessError if it is not (or
    no longer) our child."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return status if done == pid else None


def exit_fd(pid: int) -> int | None:
    """A descriptor that polls readable once the process has exited (a pidfd), for a waiter that sleeps on
    several things at once; None where the system has none (then poll the process)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def wake_pipe() -> tuple[int, int]:
    """A non-blocking, close-on-exec pipe (read end, write end): how signals and threads wake a waiting loop."""
    return os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)


