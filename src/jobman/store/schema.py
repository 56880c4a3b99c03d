"""SQLite: connection settings, the schema, its migrations, and short write transactions.

WAL mode, synchronous=FULL (a printed job id must survive power loss), foreign keys on, and a
busy timeout. Every write transaction starts with BEGIN IMMEDIATE: in WAL mode a read
transaction that later tries to write fails at once with SQLITE_BUSY instead of waiting.

A database is only ever created whole: built under a temporary name, then linked into place, so
an empty or missing file at the path is never mistaken for a fresh one. Opening never creates
(SQLite's own open would make an empty file over a deleted one).
"""
import os
import sqlite3
import time

from ..errors import BadInput

BUSY_TIMEOUT_MS = 60_000
DEFAULT_GROUP = "default"  # created with the database; its limit starts at the number of CPUs


def default_group_limit() -> int:
    return os.cpu_count() or 1

# The schema, as migrations. Migration N takes user_version N-1 to N. Never edit a released
# migration: add a new one (tests/jobman/test_schema.py checks a fresh database against them).
MIGRATIONS = [
    """
    CREATE TABLE jobs (
        id             TEXT PRIMARY KEY,           -- UUIDv7: sorts by submission time
        name           TEXT,                       -- optional display name (not unique: newest wins)
        spec           TEXT NOT NULL,              -- the immutable resolved specification (JSON)
        group_name     TEXT NOT NULL REFERENCES groups(name),
        priority       INTEGER NOT NULL DEFAULT 0,
        submitted_at   REAL NOT NULL,
        claim_window   REAL NOT NULL CHECK (claim_window > 0),
        lease_duration REAL NOT NULL CHECK (lease_duration > 0),
        renew_interval REAL NOT NULL CHECK (renew_interval > 0 AND renew_interval < lease_duration),
        poll_interval  REAL NOT NULL CHECK (poll_interval > 0)
    );
    CREATE INDEX jobs_by_name ON jobs(name, submitted_at) WHERE name IS NOT NULL;

    CREATE TABLE job_state (
        job_id          TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        phase           TEXT NOT NULL CHECK (phase IN ('submitting', 'starting', 'waiting', 'running', 'finished')),
        outcome         TEXT CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'cancelled',
                                                'dependency_failed', 'submission_failed', 'lost')),
        revision        INTEGER NOT NULL,
        credential_hash BLOB,                      -- SHA-256 of the launch credential, until claimed
        claim_deadline  REAL,
        supervisor_id   TEXT,
        supervisor_pid  INTEGER,
        supervisor_start_time INTEGER,
        supervisor_boot_id TEXT,
        lease_expires_at REAL,
        waiting_for     TEXT CHECK (waiting_for IN ('dependencies', 'not_before', 'retry', 'slot')),
        wait_detail     TEXT,                      -- why it waits, for humans
        wait_until      REAL,
        slot_held       INTEGER NOT NULL DEFAULT 0 CHECK (slot_held IN (0, 1)),
        attempts        INTEGER NOT NULL DEFAULT 0,
        cancel_requested_at REAL,
        exit_code       INTEGER,
        exit_signal     INTEGER,
        detail          TEXT,                      -- why it ended this way, for humans
        finished_at     REAL,
        CHECK ((phase = 'finished') = (outcome IS NOT NULL)),
        CHECK ((credential_hash IS NULL) = (claim_deadline IS NULL)),
        CHECK (phase = 'submitting' OR credential_hash IS NULL),
        CHECK (phase IN ('submitting', 'finished') OR supervisor_id IS NOT NULL),
        CHECK ((phase = 'waiting') = (waiting_for IS NOT NULL))
    );
    CREATE INDEX job_state_active ON job_state(phase) WHERE phase != 'finished';
    CREATE INDEX job_state_slots ON job_state(slot_held) WHERE slot_held = 1;

    CREATE TABLE dependencies (
        job_id     TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        depends_on TEXT NOT NULL REFERENCES jobs(id),
        condition  TEXT NOT NULL CHECK (condition IN ('success', 'failure', 'end')),
        PRIMARY KEY (job_id, depends_on, condition)
    );
    CREATE INDEX dependencies_by_target ON dependencies(depends_on);

    CREATE TABLE attempts (
        job_id     TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        number     INTEGER NOT NULL CHECK (number >= 1),
        started_at REAL NOT NULL,
        ended_at   REAL,
        pid        INTEGER,
        start_time INTEGER,
        boot_id    TEXT,
        pgid       INTEGER,
        exit_code  INTEGER,
        signal     INTEGER,
        outcome    TEXT,                          -- succeeded, failed, timed_out, cancelled, spawn_failed
        error      TEXT,
        log_path   TEXT NOT NULL,
        PRIMARY KEY (job_id, number)
    );
    CREATE UNIQUE INDEX one_active_attempt ON attempts(job_id) WHERE ended_at IS NULL;

    CREATE TABLE events (
        id     INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        at     REAL NOT NULL,
        kind   TEXT NOT NULL,
        data   TEXT                               -- JSON
    );
    CREATE INDEX events_by_job ON events(job_id, id);

    CREATE TABLE groups (
        name       TEXT PRIMARY KEY,
        slot_limit INTEGER NOT NULL CHECK (slot_limit >= 0),
        revision   INTEGER NOT NULL DEFAULT 1
    );
    """,
    # 2: what a waiting supervisor asks costs O(1) in the length of the queue. A job's place in its
    # group's line (group, priority, submission time) is copied into job_state, filled by a trigger
    # from the immutable jobs row, so that the line is one partial index in take-a-slot order, and
    # the holders of a group's slots another.
    """
    ALTER TABLE job_state ADD COLUMN line_group TEXT;
    ALTER TABLE job_state ADD COLUMN line_priority INTEGER;
    ALTER TABLE job_state ADD COLUMN line_at REAL;
    UPDATE job_state SET line_group = (SELECT group_name FROM jobs WHERE id = job_id),
                         line_priority = (SELECT priority FROM jobs WHERE id = job_id),
                         line_at = (SELECT submitted_at FROM jobs WHERE id = job_id);
    CREATE TRIGGER job_state_line_fill AFTER INSERT ON job_state
    BEGIN
        UPDATE job_state SET line_group = (SELECT group_name FROM jobs WHERE id = NEW.job_id),
                             line_priority = (SELECT priority FROM jobs WHERE id = NEW.job_id),
                             line_at = (SELECT submitted_at FROM jobs WHERE id = NEW.job_id)
         WHERE job_id = NEW.job_id;
    END;
    CREATE INDEX job_state_line ON job_state(line_group, line_priority DESC, line_at, job_id)
        WHERE phase = 'waiting' AND waiting_for = 'slot';
    CREATE INDEX job_state_holders ON job_state(line_group) WHERE slot_held = 1;
    DROP INDEX job_state_slots;
    CREATE INDEX jobs_by_submission ON jobs(submitted_at, id);
    CREATE INDEX job_state_deadlines ON job_state(claim_deadline) WHERE phase = 'submitting';
    """,
    # 3: handles and holds. Every job gets a short per-home number (its handle: what people type),
    # the existing ones in submission order, from a sequence that never goes back (a pruned job's
    # number is never given to another). A waiting job can be held back (held_at, and 'held' as a
    # reason to wait): SQLite cannot change a CHECK constraint in place, so job_state is rebuilt.
    """
    ALTER TABLE jobs ADD COLUMN handle INTEGER;
    CREATE TEMP TABLE handle_numbers (id TEXT PRIMARY KEY, n INTEGER NOT NULL);
    INSERT INTO handle_numbers SELECT id, row_number() OVER (ORDER BY submitted_at, id) FROM jobs;
    UPDATE jobs SET handle = (SELECT n FROM handle_numbers WHERE handle_numbers.id = jobs.id);
    DROP TABLE temp.handle_numbers;
    CREATE UNIQUE INDEX jobs_by_handle ON jobs(handle);
    CREATE TABLE handle_sequence (
        one  INTEGER PRIMARY KEY CHECK (one = 1),
        last INTEGER NOT NULL CHECK (last >= 0)
    );
    INSERT INTO handle_sequence (one, last) VALUES (1, (SELECT coalesce(max(handle), 0) FROM jobs));

    CREATE TABLE job_state_new (
        job_id          TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        phase           TEXT NOT NULL CHECK (phase IN ('submitting', 'starting', 'waiting', 'running', 'finished')),
        outcome         TEXT CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'cancelled',
                                                'dependency_failed', 'submission_failed', 'lost')),
        revision        INTEGER NOT NULL,
        credential_hash BLOB,
        claim_deadline  REAL,
        supervisor_id   TEXT,
        supervisor_pid  INTEGER,
        supervisor_start_time INTEGER,
        supervisor_boot_id TEXT,
        lease_expires_at REAL,
        waiting_for     TEXT CHECK (waiting_for IN ('dependencies', 'not_before', 'retry', 'slot', 'held')),
        wait_detail     TEXT,
        wait_until      REAL,
        slot_held       INTEGER NOT NULL DEFAULT 0 CHECK (slot_held IN (0, 1)),
        attempts        INTEGER NOT NULL DEFAULT 0,
        cancel_requested_at REAL,
        exit_code       INTEGER,
        exit_signal     INTEGER,
        detail          TEXT,
        finished_at     REAL,
        line_group      TEXT,
        line_priority   INTEGER,
        line_at         REAL,
        held_at         REAL,                      -- set by jobman hold, cleared by jobman release
        CHECK ((phase = 'finished') = (outcome IS NOT NULL)),
        CHECK ((credential_hash IS NULL) = (claim_deadline IS NULL)),
        CHECK (phase = 'submitting' OR credential_hash IS NULL),
        CHECK (phase IN ('submitting', 'finished') OR supervisor_id IS NOT NULL),
        CHECK ((phase = 'waiting') = (waiting_for IS NOT NULL))
    );
    INSERT INTO job_state_new (job_id, phase, outcome, revision, credential_hash, claim_deadline, supervisor_id,
        supervisor_pid, supervisor_start_time, supervisor_boot_id, lease_expires_at, waiting_for, wait_detail,
        wait_until, slot_held, attempts, cancel_requested_at, exit_code, exit_signal, detail, finished_at,
        line_group, line_priority, line_at)
    SELECT job_id, phase, outcome, revision, credential_hash, claim_deadline, supervisor_id,
        supervisor_pid, supervisor_start_time, supervisor_boot_id, lease_expires_at, waiting_for, wait_detail,
        wait_until, slot_held, attempts, cancel_requested_at, exit_code, exit_signal, detail, finished_at,
        line_group, line_priority, line_at FROM job_state;
    DROP TABLE job_state;
    ALTER TABLE job_state_new RENAME TO job_state;
    CREATE INDEX job_state_active ON job_state(phase) WHERE phase != 'finished';
    CREATE INDEX job_state_line ON job_state(line_group, line_priority DESC, line_at, job_id)
        WHERE phase = 'waiting' AND waiting_for = 'slot';
    CREATE INDEX job_state_holders ON job_state(line_group) WHERE slot_held = 1;
    CREATE INDEX job_state_deadlines ON job_state(claim_deadline) WHERE phase = 'submitting';
    CREATE TRIGGER job_state_line_fill AFTER INSERT ON job_state
    BEGIN
        UPDATE job_state SET line_group = (SELECT group_name FROM jobs WHERE id = NEW.job_id),
                             line_priority = (SELECT priority FROM jobs WHERE id = NEW.job_id),
                             line_at = (SELECT submitted_at FROM jobs WHERE id = NEW.job_id)
         WHERE job_id = NEW.job_id;
    END;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class DatabaseMissing(BadInput):
    """The database is missing or empty where the home shows it existed: never silently start afresh."""

    exit_code = 1


def _uri(path: str, **params: str) -> str:
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?" + "&".join(f"{k}={v}" for k, v in params.items())


def connect(path: str, *, create: bool = True, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
            read_only_fallback: bool = False) -> sqlite3.Connection:
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
            if not (read_only_fallback and getattr(e, "sqlite_errorcode", 0) & 0xFF == 14 and _read_only_fs(path)):
                raise
            return _open(path, busy_timeout_ms, immutable=True)
    except sqlite3.DatabaseError as e:
        raise BadInput(f"cannot open the jobman database {path}: {e}; "
                       f"check JOBMAN_HOME or move the damaged file aside") from None


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


def _open(path: str, busy_timeout_ms: int, immutable: bool = False) -> sqlite3.Connection:
    params = {"immutable": "1"} if immutable else {"mode": "rw"}
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
        raise BadInput(f"the jobman database {path} has schema version {version}, newer than this jobman "
                       f"understands ({SCHEMA_VERSION}); upgrade jobman")
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
                for statement in _statements(MIGRATIONS[number - 1]):
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
            for statement in _statements(MIGRATIONS[number - 1]):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


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
