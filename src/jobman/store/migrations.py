"""jobman's schema, as migrations: migration N takes user_version N-1 to N.

Never edit a released migration: add a new one, and raise database.SCHEMA_VERSION with it (this module is
loaded only to create or migrate a database; tests/jobman/test_schema.py checks the two agree, and that a
database of the previous version migrates and keeps its jobs). Pieces two migrations both create (the job_state
table is rebuilt by migration 3) are written once, below, and stay as they were released.
"""

# A job's place in its group's line, copied from the immutable jobs row when its state row is made.
_LINE_FILL_TRIGGER = """
    CREATE TRIGGER job_state_line_fill AFTER INSERT ON job_state
    BEGIN
        UPDATE job_state SET line_group = (SELECT group_name FROM jobs WHERE id = NEW.job_id),
                             line_priority = (SELECT priority FROM jobs WHERE id = NEW.job_id),
                             line_at = (SELECT submitted_at FROM jobs WHERE id = NEW.job_id)
         WHERE job_id = NEW.job_id;
    END;
"""
# The line in take-a-slot order, and the holders of a group's slots.
_LINE_INDEXES = """
    CREATE INDEX job_state_line ON job_state(line_group, line_priority DESC, line_at, job_id)
        WHERE phase = 'waiting' AND waiting_for = 'slot';
    CREATE INDEX job_state_holders ON job_state(line_group) WHERE slot_held = 1;
"""

# job_state, which migration 3 rebuilds: the columns and checks both versions have, written once.
_STATE_HEAD = """
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
        lease_expires_at REAL,"""
_STATE_BODY = """
        wait_detail     TEXT,                      -- why it waits, for humans
        wait_until      REAL,
        slot_held       INTEGER NOT NULL DEFAULT 0 CHECK (slot_held IN (0, 1)),
        attempts        INTEGER NOT NULL DEFAULT 0,
        cancel_requested_at REAL,
        exit_code       INTEGER,
        exit_signal     INTEGER,
        detail          TEXT,                      -- why it ended this way, for humans
        finished_at     REAL,"""
_STATE_CHECKS = """
        CHECK ((phase = 'finished') = (outcome IS NOT NULL)),
        CHECK ((credential_hash IS NULL) = (claim_deadline IS NULL)),
        CHECK (phase = 'submitting' OR credential_hash IS NULL),
        CHECK (phase IN ('submitting', 'finished') OR supervisor_id IS NOT NULL),
        CHECK ((phase = 'waiting') = (waiting_for IS NOT NULL))"""

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
""" + _STATE_HEAD + """
        waiting_for     TEXT CHECK (waiting_for IN ('dependencies', 'not_before', 'retry', 'slot')),
""" + _STATE_BODY + """
""" + _STATE_CHECKS + """
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
    """ + _LINE_FILL_TRIGGER + """
    """ + _LINE_INDEXES + """
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
""" + _STATE_HEAD + """
        waiting_for     TEXT CHECK (waiting_for IN ('dependencies', 'not_before', 'retry', 'slot', 'held')),
""" + _STATE_BODY + """
        line_group      TEXT,
        line_priority   INTEGER,
        line_at         REAL,
        held_at         REAL,                      -- set by jobman hold, cleared by jobman release
""" + _STATE_CHECKS + """
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
    """ + _LINE_INDEXES + """
    CREATE INDEX job_state_deadlines ON job_state(claim_deadline) WHERE phase = 'submitting';
    """ + _LINE_FILL_TRIGGER + """
    """,
    # 4: the lease round. One waiting supervisor at a time (named here until expires_at) renews the
    # leases of every waiting job whose supervisor verifies as alive, so that the others sleep.
    """
    CREATE TABLE lease_round (
        one           INTEGER PRIMARY KEY CHECK (one = 1),
        supervisor_id TEXT NOT NULL,
        expires_at    REAL NOT NULL
    );
    """,
    # 5: a sweep keeps thousands of jobs waiting: `jobman list` finds the newest waiting and the newest finished
    # jobs from an index each, however many of the other kind are newer (line_at is the job's submission
    # time), and so does the holder of the lease round the waiters it may hand the round on to.
    """
    CREATE INDEX job_state_waiting_newest ON job_state(line_at DESC, job_id DESC) WHERE phase = 'waiting';
    CREATE INDEX job_state_finished_newest ON job_state(line_at DESC, job_id DESC) WHERE phase = 'finished';
    """,
    # 6: bringing lost work back. A restart is found from the job it restarts (restart_of, copied from its spec
    # when it is submitted), so that a restart by state, group or name takes each job once and `jobman list` can
    # tell the lost jobs nobody has restarted; lost jobs are read from an index of their own, and so are cancels
    # asked of unfinished jobs (a reconcile pass carries out those whose supervisor cannot answer). A column, not
    # an index over the spec's JSON: that index would refuse to build over one damaged spec, and the home with it.
    """
    ALTER TABLE jobs ADD COLUMN restart_of TEXT;
    UPDATE jobs SET restart_of = CASE WHEN json_valid(spec) THEN json_extract(spec, '$.restart_of') END;
    CREATE INDEX jobs_by_restart_of ON jobs(restart_of) WHERE restart_of IS NOT NULL;
    CREATE INDEX job_state_lost ON job_state(job_id) WHERE outcome = 'lost';
    CREATE INDEX job_state_cancels ON job_state(job_id) WHERE cancel_requested_at IS NOT NULL AND phase != 'finished';
    """,
    # 7: the lease round reads the windows of every waiting job each round. In the jobs table they share a row with
    # the spec (about 2 KB for a sweep's job: two rows to a page), so each read touched a page of its own: half
    # of the round's query time at 10,000 waiting. A covering index holds them a hundred to a page.
    """
    CREATE INDEX jobs_windows ON jobs(id, lease_duration, renew_interval);
    """,
    # 8: the lease round's cover. Rewriting every waiting job's lease each round cost a write per job; instead
    # the round's holder watches each waiting supervisor's end (a pidfd each) and writes, per round, only when
    # it last saw them all alive (verified_at). A covered job's lease is that time plus its own lease length
    # (lease_cover), or its own lease_expires_at if later (queries.LEASE_END). term counts the round's
    # changes of holder, so that a holder knows when another may have covered jobs it does not watch.
    """
    ALTER TABLE job_state ADD COLUMN lease_cover REAL;
    ALTER TABLE lease_round ADD COLUMN verified_at REAL;
    ALTER TABLE lease_round ADD COLUMN term INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX job_state_covered ON job_state(job_id) WHERE lease_cover IS NOT NULL;
    """,
    # 9: a group can be paused and resumed with its limit kept (paused_at: when jobman group pause was run; a
    # paused group lends no slot, whatever its limit), and a cancel keeps the reason it was given (cancel_reason,
    # written with cancel_requested_at, or with the outcome of a submission cancelled before its claim).
    """
    ALTER TABLE groups ADD COLUMN paused_at REAL;
    ALTER TABLE job_state ADD COLUMN cancel_reason TEXT;
    """,
]
