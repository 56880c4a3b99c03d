"""SQLite: connection settings, creating and migrating the schema (jobman.store.migrations), and short
write transactions.

WAL mode, synchronous=FULL (a printed job id must survive power loss), foreign keys on, and a
busy timeout. Every write transaction starts with BEGIN IMMEDIATE: in WAL mode a read
transaction that later tries to write fails at once with SQLITE_BUSY instead of waiting.

A database is only ever created whole: built under a temporary name, then linked into place, so
an empty or missing file at the path is never mistaken for a fresh one. Opening never creates
(SQLite's own open would make an empty file over a deleted one).
"""
import os
import time

from ..core.errors import BadInput, JobmanError
from .sqlite import sqlite3

BUSY_TIMEOUT_MS = 60_000
DEFAULT_GROUP = "default"  # created with the database; its limit starts at the number of CPUs


def default_group_limit() -> int:
    return os.cpu_count() or 1


SCHEMA_VERSION = 9  # len(migrations.MIGRATIONS), loaded only to create or migrate (tests/jobman/test_schema.py)


class DatabaseMissing(BadInput):
    """The database is missing or empty where the home shows it existed: never silently start afresh."""

    exit_code = 1


class StorageTrouble(JobmanError):
    """The database is sound but cannot be used now: its disk is full, read-only, or failing to read."""


class DatabaseDamaged(JobmanError):
    """The database fails SQLite's own checks (its integrity check, or it is not a database at all): the one
    case in which moving it aside is the advice."""


def _uri(path: str, **params: str) -> str:
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?" + "&".join(f"{k}={v}" for k, v in params.items())


def connect(path: str, *, create: bool = True, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
            read_only_fallback: bool = False) -> "Connection":
    """Open the database and bring its schema up to date. With create, a missing database is made
    (0600), unless its home shows that one existed: then DatabaseMissing, as for an empty file.
    read_only_fallback: on a read-only filesystem where SQLite cannot share its WAL index, open the
    file as immutable (reading commands only)."""
    if not os.path.exists(path):
        if not create:
            raise DatabaseMissing(f"no jobman database at {path}")
        refuse_if_it_existed(path)
        _create(path)
    try:
        try:
            return _open(path, busy_timeout_ms)
        except sqlite3.OperationalError as e:
            if not (read_only_fallback and _code(e) in (8, 10, 13, 14) and _unwritable(path)):
                raise
            # A reading command on a home it cannot write (read-only, or full to the last byte, where SQLite cannot
            # make its WAL index). Immutable reads the database file alone: right when no WAL holds commits beside
            # it (every commit checkpointed; the failed open may have left an empty one); with one, a read-only
            # open shares its index.
            if _size(path + "-wal"):
                return _open(path, busy_timeout_ms, read_only=True)
            return _open(path, busy_timeout_ms, immutable=True)
    except sqlite3.DatabaseError as e:
        raise explain(path, e) from None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _code(error: BaseException) -> int:
    return getattr(error, "sqlite_errorcode", 0) & 0xFF


def _unwritable(path: str) -> bool:
    return _read_only_fs(path) or _disk_full(path)


def _disk_full(path: str) -> bool:
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return False
    return st.f_bavail == 0 or st.f_favail == 0


def explain(path: str, error: sqlite3.DatabaseError) -> JobmanError:
    """The one line for a database that cannot be used: full, read-only and damaged told apart (only a
    database that fails SQLite's own checks is called damaged, and only then is moving it aside the advice)."""
    home, code = os.path.dirname(path), _code(error)
    if code == 13 or (code in (10, 14) and _disk_full(path)):
        return StorageTrouble(f"the disk holding {home} is full: free some space there and run the command again; "
                              f"nothing was changed (the database {path} is not damaged)")
    if code == 8 or (code in (10, 14) and _read_only_fs(path)):
        return StorageTrouble(f"{home} is on a read-only filesystem: reading commands work, writing ones need it "
                              f"writable (or set JOBMAN_HOME elsewhere); the database is not damaged")
    if code in (11, 26):
        verdict = integrity_verdict(path) or str(error)
        return DatabaseDamaged(f"the jobman database {path} is damaged (SQLite: {verdict}): move it aside "
                               f"(mv {path} {path}.damaged) and jobman starts afresh; earlier jobs' logs stay in "
                               f"{home}/logs")
    if code == 10:
        return StorageTrouble(f"cannot read the jobman database {path}: {error} (the disk or filesystem under {home} "
                              f"is failing; the database itself was not found damaged)")
    if "no such table" in str(error) or "no such column" in str(error):
        complaint = integrity_verdict(path)
        return DatabaseDamaged(f"the jobman database {path} lacks part of its schema ({error}"
                               f"{'; SQLite: ' + complaint if complaint else ''}): restore it from a copy, or move it "
                               f"aside (mv {path} {path}.damaged) and jobman starts afresh")
    return JobmanError(f"cannot use the jobman database {path}: {error}; check JOBMAN_HOME")


def integrity_verdict(path: str) -> str | None:
    """SQLite's quick_check of the file, read-only: its first complaint, or None if it passes."""
    try:
        conn = sqlite3.connect(_uri(path, immutable="1"), uri=True)
        try:
            found = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return str(e)
    return None if found == "ok" else str(found).splitlines()[0][:200]


class Connection(sqlite3.Connection):
    """A connection that knows whether its lone statements are synced to disk (synchronous=FULL) or
    not (relaxed: NORMAL in WAL mode, where they reach the disk with the next synced commit or
    checkpoint). Transactions are always FULL: see Transaction."""

    relaxed = False

    def relax(self) -> None:
        """Lone statements stop syncing: for a supervisor, whose only lone write is its lease renewal.
        A renewal lost to a power cut promised nothing, and thousands of waiting supervisors renewing
        every few seconds would otherwise cost an fsync each."""
        self.execute("PRAGMA synchronous = NORMAL")
        self.relaxed = True
        # With hundreds of writers, every wake-up finds the database changed, so SQLite drops the
        # connection's page cache and reads again what it needs: a small cache costs nothing in
        # reads and is cheap to drop (and to keep: it is memory of every waiting supervisor).
        self.execute("PRAGMA cache_size = 16")


def _open(path: str, busy_timeout_ms: int, immutable: bool = False, read_only: bool = False) -> "Connection":
    params = {"immutable": "1"} if immutable else {"mode": "ro" if read_only else "rw"}
    conn = sqlite3.connect(_uri(path, **params), uri=True, isolation_level=None, timeout=busy_timeout_ms / 1000,
                           check_same_thread=False, factory=Connection)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = FULL")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        conn.close()
        raise DatabaseMissing(f"the jobman database {path} is empty (truncated?): jobman will not start afresh "
                              f"over it; restore it from a copy, or move it aside to start afresh")
    if version < SCHEMA_VERSION:
        _migrate(conn)
    elif version > SCHEMA_VERSION:
        conn.close()
        raise JobmanError(f"the jobman database {path} has schema version {version}, newer than this jobman "
                          f"understands ({SCHEMA_VERSION}); upgrade jobman (nothing was changed)")
    return conn


def _read_only_fs(path: str) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(path) or ".").f_flag & os.ST_RDONLY)
    except OSError:
        return False


def refuse_if_it_existed(path: str) -> None:
    """Raise DatabaseMissing if the home of a missing database shows that one existed."""
    home = os.path.dirname(path)
    traces = [name for name in (os.path.basename(path) + "-wal",) if os.path.exists(os.path.join(home, name))]
    try:
        traces += os.listdir(os.path.join(home, "logs"))[:1]
    except OSError:
        pass
    if traces:
        raise DatabaseMissing(f"the jobman database {path} is missing, but {home} holds traces of earlier jobs "
                              f"(logs, a WAL file): it was deleted or moved. Put it back, or move {home} aside "
                              f"to start afresh")


def _create(path: str) -> None:
    """Build a new database under a temporary name and link it into place: the path never holds a
    half-made database, and whoever links first wins (the others use theirs)."""
    tmp = f"{path}.new-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            for number in range(1, SCHEMA_VERSION + 1):
                for statement in _statements(_migration(number)):
                    conn.execute(statement)
            conn.execute("INSERT INTO groups (name, slot_limit) VALUES (?, ?)", (DEFAULT_GROUP, default_group_limit()))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another jobman made it meanwhile
        dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        raise BadInput(f"cannot create the jobman database {path}: {e.strerror}; "
                       f"set JOBMAN_HOME to a writable directory") from None
    except sqlite3.Error as e:
        raise BadInput(f"cannot create the jobman database {path}: {e}; "
                       f"set JOBMAN_HOME to a writable directory with free space") from None
    finally:
        for leftover in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _statements(_migration(number)):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _migration(number: int) -> str:
    from .migrations import MIGRATIONS

    return MIGRATIONS[number - 1]


def _statements(script: str):
    # executescript() would COMMIT our transaction; split instead (no ';' inside our statements but
    # for a trigger's body, which is kept whole up to its END).
    pending = ""
    for part in script.split(";"):
        lines = [line.split("--", 1)[0] for line in part.splitlines()]
        text = "\n".join(lines).strip()
        if not text:
            continue
        pending = f"{pending};\n{text}" if pending else text
        if pending.upper().startswith("CREATE TRIGGER") and not pending.upper().endswith("END"):
            continue
        yield pending
        pending = ""


class Transaction:
    """`with Transaction(conn):` runs the block in BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error),
    synced to disk at COMMIT even on a relaxed connection. durable=False leaves a relaxed connection
    unsynced: for facts that matter only during this boot (a slot taken, a target's pid, why a job
    waits), which a power cut makes moot, since no process of this boot outlives it."""

    __slots__ = ("conn", "relaxed")

    def __init__(self, conn: sqlite3.Connection, durable: bool = True):
        self.conn = conn
        self.relaxed = durable and getattr(conn, "relaxed", False)

    def __enter__(self):
        if self.relaxed:
            self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.conn.execute("COMMIT")
            else:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
        finally:
            if self.relaxed:
                self.conn.execute("PRAGMA synchronous = NORMAL")
        return False


def rollback(conn) -> None:
    """End the transaction a failed statement left open (storage trouble leaves one behind)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def next_handle(conn) -> int:
    """Take the next handle of this home (inside the submitting transaction)."""
    conn.execute("UPDATE handle_sequence SET last = last + 1 WHERE one = 1")
    return conn.execute("SELECT last FROM handle_sequence WHERE one = 1").fetchone()[0]


def now() -> float:
    return time.time()
