"""The files the agents of one host share under their work root (--work-root): each agent's lock file, and each
job's directory; workspace.py is one agent's use of them.

    <work-root>/agents/<agent-id>.lock   an exclusive flock held while that agent lives (the kernel lets go
                                         when it dies, however it dies: a free lock proves it gone); it names
                                         the agent's pid and start time
    <work-root>/agents/<agent-id>.drain  `stado agent --drain` asks that agent to drain (then SIGTERMs it)
    <work-root>/agents/store-<digest>.env the variables that open the agents' store (its credentials among them),
                                         0600: what each job's $STADO_BIN shim reads; named by its content's digest,
                                         so agents of one store share it and agents of another never overwrite it
    <work-root>/jobs/<job-id>.<attempt>/ job-id, inputs.json, output.log, exit-status, artifacts/, work/ (cwd),
                                         agent (its owner); <attempt> is the attempt's started_at, digits only

Several agents may share a host and its work root; each knows its siblings only through their locks. Each
attempt has a directory of its own: a stale copy (its agent stopped past its promise) and the job's next attempt
claimed on the same host never share one. An attempt's started_at survives re-adoption and take-over, so the
record names its directory.
"""
import os

from runkit.core import jsonfast
from runkit.system import filelocks, host, proc

from ..core.errors import BadInput

OWNER_FILE = "agent"  # the id of the agent that claimed the job this directory is for
KEEP_FILE = "keep-work"  # its agent ran with --keep-work: the directory stays once its attempt has ended
EXIT_STATUS_FILE = "exit-status"  # the job shell's exit status, written by its agent as it reaps it (processhost)


def default_work_root() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "stado", "work")


def prepare_work_root(work_root: str) -> None:
    """Create the work root's directories; BadInput in one line if it cannot be used."""
    try:
        for sub in ("agents", "jobs"):
            os.makedirs(os.path.join(work_root, sub), mode=0o700, exist_ok=True)
        probe = os.path.join(work_root, "agents", f".probe.{os.getpid()}")
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"--work-root {work_root}: cannot use it as the agents' work root ({e.strerror or e}): "
                       "choose a directory this user can create and write") from None


def store_env_file(work_root: str, text: str) -> str:
    """The work root's file holding `text` (environment.store_env_text), written whole and readable by this user
    alone if it is not there yet; its path. It lies outside every job's directory (which a job may copy, upload or
    keep with --keep-work), in agents/ (0700), and stays for the next agent and for the jobs a killed one left."""
    import hashlib

    path = os.path.join(work_root, "agents", f"store-{hashlib.sha256(text.encode()).hexdigest()[:16]}.env")
    if os.path.exists(path):
        return path
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def job_dir(work_root: str, job_id: str, started_at: str) -> str:
    """The directory of the attempt of job_id that started at `started_at` (every claim records it)."""
    return os.path.join(work_root, "jobs", f"{job_id}.{attempt_tag(started_at)}")


def attempt_tag(started_at: str | None) -> str:
    """An attempt's started_at (ISO 8601), digits only: a directory name part no tool trips on."""
    return "".join(c for c in started_at or "" if c.isdigit())


def write_owner(directory: str, agent_id: str) -> None:
    """Record which agent holds the job directory (made again if it went: a process may still run in it)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.path.join(directory, OWNER_FILE), "w") as f:
        f.write(agent_id + "\n")


def write_marker(directory: str, name: str) -> None:
    with open(os.path.join(directory, name), "w"):
        pass


def owner_of(directory: str) -> str | None:
    """The agent the job directory's owner file names, or None (no such file)."""
    try:
        with open(os.path.join(directory, OWNER_FILE)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def left_by_gone_agents(work_root: str, live: set[str]) -> list[tuple[str, str, str, str]]:
    """(job id, attempt tag, its directory, the agent that claimed it) for each job directory whose agent no
    longer runs on this host, skipping the jobs in `live` (those an agent here holds)."""
    found = []
    try:
        names = os.listdir(os.path.join(work_root, "jobs"))
    except OSError:
        return []
    for name in names:
        job_id, _, tag = name.partition(".")
        if job_id in live or not tag:
            continue  # an agent here holds it, or it is no attempt's directory
        directory = os.path.join(work_root, "jobs", name)
        owner = owner_of(directory)
        if owner and agent_gone(work_root, owner):
            found.append((job_id, tag, directory, owner))
    return found


class HostLock:
    """This agent's lock file, held for its whole life."""

    def __init__(self, work_root: str, agent_id: str, host: str):
        self.work_root, self.agent_id, self.host = work_root, agent_id, host
        self.path = os.path.join(work_root, "agents", f"{agent_id}.lock")
        self._fd: int | None = None

    def take(self) -> None:
        prepare_work_root(self.work_root)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        if not filelocks.lock_file(fd, wait=False):  # a fresh id: nobody else can hold it
            os.close(fd)
            raise BlockingIOError(f"{self.path} is locked by another agent")
        me = proc.self_identity()
        os.write(fd, jsonfast.dumps({"agent": self.agent_id, "pid": me.pid, "start_time": me.start_time,
                                 "host": self.host}).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            for path in (drain_path(self.work_root, self.agent_id), self.path):
                try:
                    os.unlink(path)
                except OSError:
                    pass
            os.close(self._fd)
            self._fd = None


class HostName:
    """This agent's claim, on this machine, of its host name in its store, with its work root: a name in the abstract socket
    namespace (runkit.system.host.claim_name), which the kernel lets go when the agent dies. Agents of one host share a
    work root (their locks there make them siblings); a second agent that names the same host with another work root
    would not see the first one's locks, so it is refused at start, in one line."""

    PREFIX = "stado-agent/"

    def __init__(self, host: str, work_root: str, agent_id: str, store_url: str):
        import hashlib

        def digest(text: str) -> str:  # names are at most 107 bytes: host names and paths go in as digests
            return hashlib.sha256(text.encode()).hexdigest()[:16]

        # Per store: agents of two fleets on one machine never meet each other's records, whatever their roots.
        self.base = f"{self.PREFIX}{os.getuid()}/{digest(store_url + chr(0) + host)}/"
        self.root = digest(os.path.realpath(work_root))
        self.host, self.agent_id = host, agent_id
        self._sock = None

    def take(self) -> None:
        """BadInput when a live agent on this machine runs as this host with another work root."""
        try:
            self._sock = host.claim_name(f"{self.base}{self.root}/{self.agent_id}")
        except OSError:
            return  # no abstract namespace here (not Linux): running records' owner identities still guard
        others = [name[len(self.base):].split("/") for name in host.names_claimed(self.base)]
        clash = [agent for root, agent in (o for o in others if len(o) == 2) if root != self.root]
        if clash:
            self.release()
            raise BadInput(f"another stado agent ({clash[0]}) already runs on this machine as local@{self.host} with "
                           "another --work-root: agents of one host share its work root (give this one the same "
                           "--work-root), or each names a host of its own (--host)")

    def release(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def drain_path(work_root: str, agent_id: str) -> str:
    return os.path.join(work_root, "agents", f"{agent_id}.drain")


def live_agents(work_root: str) -> list[dict]:
    """What the lock file of each agent alive on this host's work root says of it (agent, pid, start_time, host):
    those whose lock is held. Reading never takes a live agent's lock."""
    found = []
    try:
        names = sorted(os.listdir(os.path.join(work_root, "agents")))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".lock"):
            continue
        path = os.path.join(work_root, "agents", name)
        try:
            with open(path, "rb") as f:
                # Content first: an agent writes it once it holds the lock, so an empty file is one still being
                # taken, whose lock a probe here must not contend for.
                record = jsonfast.loads(f.read() or b"null")
                if not isinstance(record, dict) or _lock_free(f.fileno()):
                    continue
        except (OSError, ValueError):
            continue
        if isinstance(record.get("pid"), int):
            found.append(record)
    return found


def _lock_free(fd: int) -> bool:
    if not filelocks.lock_file(fd, exclusive=False, wait=False):
        return False
    filelocks.unlock_file(fd)
    return True


def agent_gone(work_root: str, agent_id: str) -> bool:
    """Whether the agent with that id, which ran on this work root, no longer does: its lock file is missing, or
    free. (An agent of another work root has no lock file here: agent_lock tells that apart.)"""
    return agent_lock(work_root, agent_id) != "held"


def agent_lock(work_root: str, agent_id: str) -> str:
    """The agent's lock file on this work root: 'held' (it lives), 'free' (it ran here and is gone: the file is
    tidied away) or 'absent' (none here: it never ran on this work root, or its file was tidied away before)."""
    path = os.path.join(work_root, "agents", f"{agent_id}.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "held"  # cannot tell: treat it as alive (never touch a live sibling's jobs)
    try:
        if not filelocks.lock_file(fd, wait=False):
            return "held"
        filelocks.unlock_file(fd)
        try:
            os.unlink(path)  # a dead agent's lock: tidy it away
        except OSError:
            pass
        return "free"
    finally:
        os.close(fd)


def write_exit_status(path: str, code: int | None, sig: int | None) -> None:
    """`exit N` or `signal N`, as the kernel's wait status said (written whole: a reader never sees half)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"signal {sig}\n" if sig is not None else f"exit {code}\n")
    os.replace(tmp, path)


def read_exit_status(directory: str) -> tuple[int | None, int | None] | None:
    """(exit code, signal) recorded for the job's shell when it ended, or None if none was (or what is there is
    not `exit N` nor `signal N`)."""
    try:
        with open(os.path.join(directory, EXIT_STATUS_FILE)) as f:
            text = f.read().strip()
    except OSError:
        return None
    word, _, number = text.partition(" ")
    if word in ("exit", "signal") and number.isdigit():
        return (int(number), None) if word == "exit" else (None, int(number))
    return None


# -- between an agent and the keeper of each of its jobs (stado.agent.keeper) ----------------------------------------

PROMISE_FILE = "promise.json"  # the agent's promise for this attempt, as the keeper reads it
KEPT_FILE = "kept.json"        # written by the keeper before it stops the job's processes: why, and when


def write_promise(directory: str, promise: dict) -> None:
    """The attempt's promise as its keeper reads it (written whole: a reader never sees half). Times are on this
    machine's CLOCK_BOOTTIME, which counts a suspend as time gone by, as the store's clock does."""
    tmp = os.path.join(directory, PROMISE_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(jsonfast.dumps(promise, sort_keys=True))
    os.replace(tmp, os.path.join(directory, PROMISE_FILE))


def read_json_file(directory: str, name: str) -> dict | None:
    """A small JSON object this machine's agents and keepers share in a job directory, or None (absent, half
    written by a crashed writer, or not an object)."""
    try:
        with open(os.path.join(directory, name)) as f:
            found = jsonfast.loads(f.read())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_kept(directory: str, record: dict) -> None:
    tmp = os.path.join(directory, KEPT_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(jsonfast.dumps(record, sort_keys=True))
    os.replace(tmp, os.path.join(directory, KEPT_FILE))
