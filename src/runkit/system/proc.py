"""Platform process control: identity, liveness, spawning and signalling, and the rest of what jobman and
stado ask of the OS (file locks, the process table, the host's memory, log hole punching).

All OS-specific code lives here, so a port is this module (docs/porting.md lists what it must provide;
tests/test_layering.py keeps such calls out of every other module). Linux is the platform (/proc, prctl): elsewhere the first look at a
process raises UnsupportedPlatform rather than judging every process gone. A remembered pid never
authorises a signal: a process is identified by pid + start time + boot id, and a zombie is not alive.
"""
import os

_PROC = os.path.isdir("/proc/self")
_boot_id: str | None = None


class UnsupportedPlatform(RuntimeError):
    pass


def _require_proc() -> None:
    if not _PROC:
        raise UnsupportedPlatform("no /proc here: jobman and stado run on Linux only")


class Identity:
    """Who a process is: pid, start time (clock ticks since boot on Linux) and boot id."""

    __slots__ = ("pid", "start_time", "boot_id")

    def __init__(self, pid: int, start_time: int, boot_id: str):
        self.pid, self.start_time, self.boot_id = pid, start_time, boot_id

    def __eq__(self, other):
        return isinstance(other, Identity) and self.as_tuple() == other.as_tuple()

    def __repr__(self):
        return f"Identity(pid={self.pid}, start_time={self.start_time}, boot_id={self.boot_id!r})"

    def as_tuple(self):
        return (self.pid, self.start_time, self.boot_id)


def boot_id() -> str:
    """An id that changes on every boot (so a pid and start time from an earlier boot never match)."""
    global _boot_id
    if _boot_id is None:
        _require_proc()
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
    pid_ns, machine_id: agent.workroot.agent_identity): 'alive' (that very process runs, in this pid space),
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
    _require_proc()
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
    _require_proc()
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


def _libc_handle():
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
    return _libc_handle().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def all_stats() -> list[Stat]:
    _require_proc()
    stats = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = stat(int(entry))
            if st is not None:
                stats.append(st)
    return stats


def children(pid: int) -> list[int] | None:
    """Direct children from /proc/PID/task/*/children (cheap: no scan of the whole process table);
    None where the kernel does not offer it."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None if not _PROC else []
    kids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(k) for k in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return kids


def descendants(root: int, stats: list[Stat] | None = None) -> list[Stat]:
    """Every live process below `root` (children, grandchildren, ...): by walking children lists where the
    kernel has them, else from one scan of the process table."""
    if stats is None and _PROC:
        found, frontier = [], [root]
        while frontier:
            kids = children(frontier.pop())
            if kids is None:
                break
            for kid in kids:
                st = stat(kid)
                if st is not None:
                    found.append(st)
                    frontier.append(kid)
        else:
            return found
    children_of: dict[int, list[Stat]] = {}
    for st in stats if stats is not None else all_stats():
        children_of.setdefault(st.ppid, []).append(st)
    found, frontier = [], [root]
    while frontier:
        for child in children_of.get(frontier.pop(), ()):
            found.append(child)
            frontier.append(child.pid)
    return found


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


def signal_tree(root: int, sig: int) -> int:
    """Signal every live descendant of `root`, each one identity-checked. Returns how many were signalled.
    A stopped process sent SIGTERM is continued after it (as systemd does), so that a job stopped with
    SIGSTOP stops at its cancel or timeout, not at the SIGKILL that follows."""
    count = 0
    for st in descendants(root):
        if st.alive and signal_exact(st.pid, st.start_time, sig):
            count += 1
            _continue_if_stopped(st, sig)
    return count


def _continue_if_stopped(st: Stat, sig: int) -> None:
    import signal

    if sig == signal.SIGTERM and st.state in ("T", "t"):
        signal_exact(st.pid, st.start_time, signal.SIGCONT)


def live_descendants(root: int) -> list[Stat]:
    return [st for st in descendants(root) if st.alive]


def orphaned_tree(pid: int | None, start_time: int | None, boot: str | None) -> list[Stat]:
    """The live processes of a target tree whose watcher is gone: the root itself if it still verifies,
    every member of the session and process group it led (a double fork keeps both, but its parent
    becomes init, so no walk of children finds it), and everything below those.

    POSIX forbids reusing a pid while a process group or session with that id exists, so members with
    that sid or pgid are ours, unless the pid now belongs to a different process (then our session
    ended before it was reused). Members must also have started no earlier than the root."""
    if pid is None or start_time is None or boot is None or pid <= 0 or boot != boot_id():
        return []
    root = stat(pid)
    if root is not None and root.start_time != start_time:
        return []  # the pid is someone else's now, so our session and group ended before that
    stats = all_stats()
    members = [st for st in stats if st.alive and (st.sid == pid or st.pgid == pid) and st.start_time >= start_time]
    found = {st.pid: st for st in members}
    for member in members:
        for below in descendants(member.pid, stats):
            if below.alive:
                found.setdefault(below.pid, below)
    return list(found.values())


def stop_orphaned_tree(pid: int, start_time: int, boot: str, grace: float, poll: float = 0.05) -> bool:
    """SIGTERM every process of orphaned_tree(), then SIGKILL what is left after `grace` seconds; every
    signal identity-checked. Returns whether anything was found to stop."""
    return stop_all(lambda: orphaned_tree(pid, start_time, boot), grace, poll)


def stop_all(find, grace: float, poll: float = 0.05) -> bool:
    """SIGTERM every process that find() returns (a list of Stat), then SIGKILL what it still returns
    after `grace` seconds, going round until it returns nothing (a process may fork while we kill);
    every signal pinned to the process's start time. Returns whether anything was found to stop."""
    import signal
    import time

    tree = find()
    if not tree:
        return False
    for st in tree:
        if signal_exact(st.pid, st.start_time, signal.SIGTERM):
            _continue_if_stopped(st, signal.SIGTERM)
    give_up = time.monotonic() + grace
    while (tree := find()) and time.monotonic() < give_up:
        time.sleep(poll)
    for _ in range(50):
        if not tree:
            break
        for st in tree:
            signal_exact(st.pid, st.start_time, signal.SIGKILL)
        time.sleep(poll)
        tree = find()
    return True


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

# struct pidfd_info (linux/pidfd.h, Linux 6.15+): mask u64 @0 ... exit_code s32 @60; 64 bytes in all.
_PIDFD_GET_INFO = 0xC040FF0B  # _IOWR(0xFF, 11, struct pidfd_info)
_PIDFD_INFO_EXIT = 1 << 3
_STAT_EXIT_CODE = 49  # /proc/PID/stat field 52 (Linux 3.5+), counted from the field after the command name's ')'


def pin_child(pid: int) -> int | None:
    """A pidfd on a child this process has just started and not yet waited for (so the pid is still that child),
    or None where there are no pidfds. Close it with os.close."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def exit_watch(pid: int, start_time: int) -> int | None:
    """A pidfd pinned to that exact process (an identity check right after opening it), from which
    exit_status_of() can later read how it ended though another process reaps it; None if it is gone or is
    someone else now. Close it with os.close."""
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None
    st = stat(pid)
    if st is None or st.start_time != start_time:
        os.close(pidfd)
        return None
    return pidfd


def exit_status_of(pidfd: int, pid: int, start_time: int) -> int | None:
    """The wait status of the process exit_watch() pinned, once it has ended: from its pidfd once its parent
    has reaped it (Linux 6.15+), or from /proc while it is still a zombie. None while it runs, or where the
    kernel keeps neither."""
    # Zombie, then pidfd again: reaped between the first two looks, it has left /proc for the pidfd.
    for look in (_pidfd_exit, _zombie_exit, _pidfd_exit):
        status = look(pidfd, pid, start_time)
        if status is not None:
            return status
    return None


def _pidfd_exit(pidfd: int, pid: int, start_time: int) -> int | None:
    import fcntl
    import struct

    info = bytearray(64)
    struct.pack_into("<Q", info, 0, _PIDFD_INFO_EXIT)
    try:
        fcntl.ioctl(pidfd, _PIDFD_GET_INFO, info, True)
    except OSError:
        return None  # an older kernel: no exit information on pidfds
    if struct.unpack_from("<Q", info, 0)[0] & _PIDFD_INFO_EXIT:
        return struct.unpack_from("<i", info, 60)[0]
    return None


def _zombie_exit(pidfd: int, pid: int, start_time: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if rest[0] != b"Z" or int(rest[19]) != start_time or len(rest) <= _STAT_EXIT_CODE:
        return None
    return int(rest[_STAT_EXIT_CODE])


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

def pids() -> list[int]:
    """Every process id on this host (empty where the process table cannot be read)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def owner_uid(pid: int) -> int | None:
    """The user id a process runs as, or None if it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def environ_of(pid: int) -> bytes | None:
    """The environment the process was started with (NUL-separated NAME=value), or None if it is gone or not
    this user's."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:
        return None


def paths_held(pid: int) -> list[str] | None:
    """The process's working directory and the paths of its open files (what lsof lists), or None if it is
    gone or not this user's."""
    base = f"/proc/{pid}"
    try:
        paths = [os.readlink(f"{base}/cwd")]
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            paths.append(os.readlink(f"{base}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return paths


def command_line(pid: int) -> str | None:
    """The process's command line, its arguments joined by spaces, or None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


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


def watch_directory(path: str) -> int | None:
    """A non-blocking, close-on-exec fd that turns readable when a file in the directory `path` is created, written
    and closed, renamed into it or touched (Linux inotify); None where that cannot be had (no inotify, no such
    directory, the watch limit reached): the caller then polls. Read it empty with `drain`."""
    IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x4, 0x8, 0x80, 0x100
    IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
    try:
        libc = _libc_handle()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(path), IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0:
        os.close(fd)
        return None
    return fd


def claim_name(name: str):
    """A socket bound to `name` in this machine's abstract socket namespace (per network namespace): held while the
    socket is open, and let go by the kernel when its process dies however it dies, as an flock is. Raises OSError
    (EADDRINUSE) if another process holds that very name. The caller keeps the socket."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind("\0" + name)
    except OSError:
        sock.close()
        raise
    return sock


def names_claimed(prefix: str) -> list[str]:
    """The abstract socket names held on this machine (its network namespace) that start with `prefix`."""
    _require_proc()
    try:
        with open("/proc/net/unix") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith("@" + prefix):
            found.append(fields[7][1:])
    return found


def physical_memory() -> int | None:
    """This host's physical memory in bytes (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


# Linux fallocate(2) modes (linux/falloc.h).
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE, _FALLOC_FL_COLLAPSE_RANGE = 0x01, 0x02, 0x08


def collapse_range(fd: int, offset: int, length: int) -> bool:
    """Remove `length` bytes at `offset` from the file, moving what follows down (whole blocks; ext4, xfs):
    whether it was done (False where the filesystem or the system cannot)."""
    return _fallocate(fd, _FALLOC_FL_COLLAPSE_RANGE, offset, length)


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the file's bytes from `offset` for `length` in place, its size and offsets unchanged (tmpfs, btrfs,
    ext4, ...): whether it was done."""
    return _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length)


def _fallocate(fd: int, flags: int, offset: int, length: int) -> bool:
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    libc = _libc_handle()
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    return libc.fallocate(fd, flags, offset, length) == 0
