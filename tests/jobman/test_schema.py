"""Schema migrations: a database made by an earlier release is brought up to date in place and keeps
every job, and ends up with the same schema as a database made fresh. The old DDL is written out here
as that release created it (never derived from store/migrations.py, which it checks)."""
from runkit.core.clock import ManualClock
import sqlite3

import pytest

from jobman.core.errors import JobmanError
from jobman.store import database, groups, queries, transitions

# The schema of user_version 1, as jobman's first release created it.
VERSION_1 = """
CREATE TABLE jobs (id TEXT PRIMARY KEY, name TEXT, spec TEXT NOT NULL,
    group_name TEXT NOT NULL REFERENCES groups(name), priority INTEGER NOT NULL DEFAULT 0, submitted_at REAL NOT NULL,
    claim_window REAL NOT NULL CHECK (claim_window > 0), lease_duration REAL NOT NULL CHECK (lease_duration > 0),
    renew_interval REAL NOT NULL CHECK (renew_interval > 0 AND renew_interval < lease_duration),
    poll_interval REAL NOT NULL CHECK (poll_interval > 0));
CREATE INDEX jobs_by_name ON jobs(name, submitted_at) WHERE name IS NOT NULL;
CREATE TABLE job_state (job_id TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    phase TEXT NOT NULL CHECK (phase IN ('submitting', 'starting', 'waiting', 'running', 'finished')),
    outcome TEXT CHECK (outcome IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'dependency_failed',
                                    'submission_failed', 'lost')),
    revision INTEGER NOT NULL, credential_hash BLOB, claim_deadline REAL, supervisor_id TEXT, supervisor_pid INTEGER,
    supervisor_start_time INTEGER, supervisor_boot_id TEXT, lease_expires_at REAL,
    waiting_for TEXT CHECK (waiting_for IN ('dependencies', 'not_before', 'retry', 'slot')), wait_detail TEXT,
    wait_until REAL, slot_held INTEGER NOT NULL DEFAULT 0 CHECK (slot_held IN (0, 1)),
    attempts INTEGER NOT NULL DEFAULT 0, cancel_requested_at REAL, exit_code INTEGER, exit_signal INTEGER,
    detail TEXT, finished_at REAL,
    CHECK ((phase = 'finished') = (outcome IS NOT NULL)), CHECK ((credential_hash IS NULL) = (claim_deadline IS NULL)),
    CHECK (phase = 'submitting' OR credential_hash IS NULL),
    CHECK (phase IN ('submitting', 'finished') OR supervisor_id IS NOT NULL),
    CHECK ((phase = 'waiting') = (waiting_for IS NOT NULL)));
CREATE INDEX job_state_active ON job_state(phase) WHERE phase != 'finished';
CREATE INDEX job_state_slots ON job_state(slot_held) WHERE slot_held = 1;
CREATE TABLE dependencies (job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    depends_on TEXT NOT NULL REFERENCES jobs(id), condition TEXT NOT NULL CHECK (condition IN ('success', 'failure', 'end')),
    PRIMARY KEY (job_id, depends_on, condition));
CREATE INDEX dependencies_by_target ON dependencies(depends_on);
CREATE TABLE attempts (job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    number INTEGER NOT NULL CHECK (number >= 1), started_at REAL NOT NULL, ended_at REAL, pid INTEGER,
    start_time INTEGER, boot_id TEXT, pgid INTEGER, exit_code INTEGER, signal INTEGER, outcome TEXT, error TEXT,
    log_path TEXT NOT NULL, PRIMARY KEY (job_id, number));
CREATE UNIQUE INDEX one_active_attempt ON attempts(job_id) WHERE ended_at IS NULL;
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    at REAL NOT NULL, kind TEXT NOT NULL, data TEXT);
CREATE INDEX events_by_job ON events(job_id, id);
CREATE TABLE groups (name TEXT PRIMARY KEY, slot_limit INTEGER NOT NULL CHECK (slot_limit >= 0),
    revision INTEGER NOT NULL DEFAULT 1);
INSERT INTO groups (name, slot_limit) VALUES ('default', 2);
PRAGMA user_version = 1;
"""
JOBS = [  # (id, name, priority, submitted_at, phase, outcome, waiting_for)
    ("01900000-0000-7000-8000-000000000001", "built", 0, 100.0, "finished", "succeeded", None),
    ("01900000-0000-7000-8000-000000000002", None, 0, 101.0, "waiting", None, "slot"),
    ("01900000-0000-7000-8000-000000000003", "urgent", 5, 102.0, "waiting", None, "slot"),
    ("01900000-0000-7000-8000-000000000004", None, 0, 103.0, "running", None, None),
]


def make_version_1(path: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(VERSION_1)
    conn.execute("PRAGMA journal_mode = WAL")
    for job_id, name, priority, at, phase, outcome, waiting_for in JOBS:
        conn.execute("INSERT INTO jobs VALUES (?, ?, '{\"argv\": [\"true\"], \"env\": {}}', 'default', ?, ?, 10, 15, 5, 30)",
                     (job_id, name, priority, at))
        conn.execute("INSERT INTO job_state (job_id, phase, outcome, revision, supervisor_id, waiting_for, slot_held)"
                     " VALUES (?, ?, ?, 3, 's', ?, ?)", (job_id, phase, outcome, waiting_for, int(phase == "running")))
        conn.execute("INSERT INTO events (job_id, at, kind) VALUES (?, ?, 'job_submitted')", (job_id, at))
    conn.execute("INSERT INTO dependencies VALUES (?, ?, 'success')", (JOBS[1][0], JOBS[0][0]))
    conn.close()


def shape(conn) -> dict:
    """Tables with their columns, and the names of indexes and triggers: what the code relies on."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return {"columns": {t: [tuple(c)[1:] for c in conn.execute(f"PRAGMA table_info({t})")] for t in tables},
            "others": sorted(tuple(r) for r in conn.execute("SELECT type, name, tbl_name FROM sqlite_master"
                                                            " WHERE type IN ('index', 'trigger')"))}


def test_a_version_1_database_migrates_and_keeps_its_jobs(tmp_path):
    path = str(tmp_path / "jobman.db")
    make_version_1(path)
    conn = database.connect(path, create=False)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == database.SCHEMA_VERSION > 1
    assert queries.count_jobs(conn) == len(JOBS)
    for job_id, name, priority, at, phase, outcome, _ in JOBS:
        job = queries.job(conn, job_id)
        assert (job["name"], job["priority"], job["submitted_at"], job["phase"], job["outcome"], job["revision"]) == (
            name, priority, at, phase, outcome, 3)
        assert [e["kind"] for e in queries.events(conn, job_id)] == ["job_submitted"]
    assert [d["depends_on"] for d in queries.dependencies(conn, JOBS[1][0])] == [JOBS[0][0]]
    # The waiting jobs stand in their group's line in take-a-slot order; the running one holds a slot.
    assert queries.line(conn, "default") == [JOBS[2][0], JOBS[1][0]]
    assert queries.slots_held(conn, "default") == 1 and queries.free_slots(conn, "default") == 1
    # And the migrated database takes new jobs as a fresh one does.
    transitions.submit(conn, job_id="01900000-0000-7000-8000-000000000005", dependencies=[("built", "success")],
                       spec={"name": None, "group": "default", "priority": 9, "argv": ["true"], "env": {},
                             "windows": {"claim": 10.0, "lease": 15.0, "renew": 5.0, "poll": 30.0}},
                       credential_hash=b"h" * 32, clock=ManualClock(200.0, 0.0))
    assert queries.load_state(conn, "01900000-0000-7000-8000-000000000005")["line_priority"] == 9
    conn.close()


def test_a_migrated_database_has_the_shape_of_a_fresh_one(tmp_path):
    make_version_1(str(tmp_path / "old.db"))
    migrated = database.connect(str(tmp_path / "old.db"), create=False)
    fresh = database.connect(str(tmp_path / "fresh.db"))
    assert shape(migrated) == shape(fresh)


def test_migration_runs_once_and_a_newer_database_is_refused(tmp_path):
    path = str(tmp_path / "jobman.db")
    make_version_1(path)
    database.connect(path, create=False).close()
    again = database.connect(path, create=False)  # already current: nothing to do, nothing lost
    assert queries.count_jobs(again) == len(JOBS)
    again.execute(f"PRAGMA user_version = {database.SCHEMA_VERSION + 1}")
    again.close()
    with pytest.raises(JobmanError, match="newer than this jobman understands"):
        database.connect(path, create=False)


def test_the_schema_version_is_the_number_of_migrations():
    """database.py names the version without loading the migrations (every command and supervisor opens the
    database; only creating or migrating one needs their text)."""
    from jobman.store.migrations import MIGRATIONS

    assert database.SCHEMA_VERSION == len(MIGRATIONS)


def test_version_8_migrates_to_paused_groups_and_cancel_reasons(tmp_path):
    """Migration 9 adds groups.paused_at and job_state.cancel_reason: a version 8 home keeps its groups' limits,
    unpaused, and its jobs, with no reason for the cancels asked before."""
    path = str(tmp_path / "jobman.db")
    make_version_1(path)
    conn = database.connect(path, create=False)
    transitions.set_group_limit(conn, "gpu", 2)
    conn.execute("UPDATE job_state SET cancel_requested_at = 5.0 WHERE job_id = ?", (JOBS[3][0],))
    conn.execute("ALTER TABLE groups DROP COLUMN paused_at")
    conn.execute("ALTER TABLE job_state DROP COLUMN cancel_reason")
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    migrated = database.connect(path, create=False)
    assert migrated.execute("PRAGMA user_version").fetchone()[0] == database.SCHEMA_VERSION
    assert [tuple(r) for r in queries.groups(migrated, "gpu")] == [("gpu", 2, None, 0, 0)]
    assert queries.free_slots(migrated, "gpu") == 2 and not groups.is_paused(migrated, "gpu")
    state = queries.load_state(migrated, JOBS[3][0])
    assert state["cancel_requested_at"] == 5.0 and state["cancel_reason"] is None
    assert queries.count_jobs(migrated) == len(JOBS)
    assert shape(migrated) == shape(database.connect(str(tmp_path / "fresh.db")))
