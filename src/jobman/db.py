"""SQLite: connection settings, the schema, its migrations, and short write transactions.

WAL mode, synchronous=FULL (a printed job id must survive power loss), foreign keys on, and a
long busy timeout. Every write transaction starts with BEGIN IMMEDIATE: in WAL mode a read
transaction that later tries to write fails at once with SQLITE_BUSY instead of waiting.
"""
import os
import sqlite3
import time

from .errors import BadInput

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
]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str, *, create: bool = True) -> sqlite3.Connection:
    """Open the database (creating it 0600 on first use) and bring its schema up to date."""
    if create and not os.path.exists(path):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError as e:
            raise BadInput(f"cannot create the jobman database {path}: {e.strerror}; "
                           f"set JOBMAN_HOME to a writable directory") from None
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            _migrate(conn)
        elif version > SCHEMA_VERSION:
            raise BadInput(f"the jobman database {path} has schema version {version}, newer than this jobman "
                           f"understands ({SCHEMA_VERSION}); upgrade jobman")
    except sqlite3.DatabaseError as e:
        raise BadInput(f"cannot open the jobman database {path}: {e}; "
                       f"check JOBMAN_HOME or move the damaged file aside") from None
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _statements(MIGRATIONS[number - 1]):
                conn.execute(statement)
            if number == 1:
                conn.execute("INSERT INTO groups (name, slot_limit) VALUES (?, ?)",
                             (DEFAULT_GROUP, default_group_limit()))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str):
    # executescript() would COMMIT our transaction; split instead (no ';' inside our statements).
    for part in script.split(";"):
        lines = [line.split("--", 1)[0] for line in part.splitlines()]
        statement = "\n".join(lines).strip()
        if statement:
            yield statement


class Transaction:
    """`with Transaction(conn):` runs the block in BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error)."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self):
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        return False


def now() -> float:
    return time.time()
