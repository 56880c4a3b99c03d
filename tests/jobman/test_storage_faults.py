"""Storage trouble is waited out, never fatal: a write lock held by another process, a full disk, a
read-only home, a database file deleted, replaced or truncated. Real SQLite files, real filesystems
(a small tmpfs, a read-only bind mount), real supervisors."""
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.helpers import alive, kill_all, wait_for
from tests.jobman.conftest import JOBMAN, Jobman
from tests.jobman.mounts import fill, read_only_view, small_tmpfs

# Holds a write transaction on the database (as a backup tool or `sqlite3` in a shell would), says so,
# and commits after the given number of seconds.
HOLD_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def supervisor_log(jobman, job_id) -> str:
    return (jobman.home / "logs" / job_id / "supervisor.log").read_text()


def no_tracebacks(jobman):
    for log in (jobman.home / "logs").rglob("supervisor.log"):
        text = log.read_text()
        assert "Traceback" not in text and "supervisor error" not in text, text


def gated(gate) -> list[str]:
    return ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"]


def test_a_write_lock_held_for_three_leases_is_waited_out(jobman, tmp_path):
    """One job runs and another waits for its slot while another process holds BEGIN IMMEDIATE for 3x the
    lease (1 s here); the running job ends meanwhile. Both finish normally afterwards, nothing is lost, and
    the supervisors' logs say what they waited for and how long."""
    gate = tmp_path / "gate"
    jobman("group", "set", "one", "--limit", "1", check=True)
    running = jobman.run(*gated(gate), opts=["--group", "one"])
    wait_for(lambda: jobman.state(running)["phase"] == "running")
    waiting = jobman.run("true", opts=["--group", "one"])
    wait_for(lambda: jobman.state(waiting)["waiting_for"] == "slot")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, str(jobman.home / "jobman.db"), "3"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        gate.touch()  # the running job's target ends while its outcome cannot be written
        time.sleep(1.5)  # past a lease: every lease has expired; the supervisors live on
        listed = jobman("list", "--json")  # reading is never blocked by a writer (WAL)
        assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 2, listed.stderr
        assert {j["outcome"] for j in json.loads(listed.stdout)} == {None}  # nothing judged lost
        assert alive(jobman.state(running)["supervisor_pid"]) and alive(jobman.state(waiting)["supervisor_pid"])
    finally:
        assert holder.wait(timeout=30) == 0
        holder.stdout.close()
    assert jobman("wait", running, waiting, timeout=60).returncode == 0
    assert jobman.state(running)["outcome"] == jobman.state(waiting)["outcome"] == "succeeded"
    for job_id in (running, waiting):
        log = supervisor_log(jobman, job_id)
        assert "waiting for the database: could not" in log and "the database is busy" in log, log
        assert "the database works again after" in log, log
        waits = [e for e in jobman.show(job_id)["events"] if e["kind"] == "database_waited"]
        assert waits and all(w["reason"].startswith("the database is busy") and w["seconds"] > 0 for w in waits)
    no_tracebacks(jobman)


DEFAULT_WINDOWS = {"JOBMAN_CLAIM_WINDOW": "10s", "JOBMAN_LEASE": "15s", "JOBMAN_RENEW_INTERVAL": "5s",
                   "JOBMAN_POLL_INTERVAL": "30s"}


@pytest.mark.slow
def test_a_submission_behind_a_write_lock_held_past_the_claim_window_is_accepted(jobman, tmp_path):
    """Another process holds BEGIN IMMEDIATE for 15 s, past the default 10 s claim window, while a `jobman run` and
    a `jobman run --array 1-5` wait for the lock. The claim deadline used to be reckoned from before that wait, so
    the job was committed with its deadline passed: the claim was refused, submission_failed, exit 1. The deadline
    and the job_submitted time now run from the commit: every job is accepted and runs once."""
    ledger = tmp_path / "ledger"
    jobman.run("true", env=DEFAULT_WINDOWS)  # the database exists
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, str(jobman.home / "jobman.db"), "15"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        env = {**jobman.env, **DEFAULT_WINDOWS}
        one = subprocess.Popen([JOBMAN, "run", "--print-id", "--", "sh", "-c", f"echo single >> {ledger}"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        array = subprocess.Popen([JOBMAN, "run", "--print-id", "--array", "1-5", "--", "sh", "-c",
                                  f"echo {{}} >> {ledger}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        assert holder.wait(timeout=60) == 0
        released = time.time()
        single_out, single_err = one.communicate(timeout=60)
        array_out, array_err = array.communicate(timeout=60)
    finally:
        holder.kill()
        holder.stdout.close()
    assert one.returncode == 0, single_err
    assert array.returncode == 0, array_err
    ids = single_out.split() + array_out.split()
    assert len(ids) == 6
    assert jobman("wait", *ids, timeout=60).returncode == 0
    assert sorted(ledger.read_text().split()) == ["1", "2", "3", "4", "5", "single"]
    for job_id in ids:
        submitted = jobman.show(job_id)["events"][0]
        assert submitted["kind"] == "job_submitted"
        assert submitted["at"] >= released - 0.5, (submitted, released)  # from the commit, not before the wait
        assert submitted["claim_deadline"] == pytest.approx(submitted["at"] + 10)


def test_reading_commands_work_on_a_read_only_home(jobman, tmp_path):
    done = jobman.run("sh", "-c", "echo hello")
    assert jobman("wait", done).returncode == 0
    # An abandoned job whose reconciliation would write: its supervisor is killed, its lease runs out.
    abandoned = jobman.run("sleep", "30")
    wait_for(lambda: jobman.state(abandoned)["phase"] == "running")
    kill_all([jobman.state(abandoned)["supervisor_pid"]])
    time.sleep(1.2)  # past its lease
    keeper = sqlite3.connect(jobman.home / "jobman.db")  # holds the WAL and its index open on the writable side
    keeper.execute("SELECT count(*) FROM jobs").fetchone()
    before = (jobman.home / "jobman.db").read_bytes()
    for with_wal in (True, False):
        if not with_wal:  # no process has the database open: SQLite has no WAL index to share
            keeper.close()
            kill_all(jobman.processes())
            with jobman.db() as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for suffix in ("-wal", "-shm"):
                (jobman.home / f"jobman.db{suffix}").unlink(missing_ok=True)
            before = (jobman.home / "jobman.db").read_bytes()
        view = tmp_path / f"ro-{with_wal}"
        with read_only_view(jobman.home, view):
            ro = Jobman(view)
            listed = ro("list")
            assert listed.returncode == 0 and jobman.in_table(listed.stdout, done, abandoned), listed.stderr
            assert listed.stderr.startswith("jobman: note: skipped the reconcile pass") and \
                len(listed.stderr.splitlines()) == 1, listed.stderr
            for args in (["list", "--json"], ["show", done], ["logs", done], ["wait", done], ["group", "list"]):
                result = ro(*args)
                assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
            assert "hello" in ro("logs", done).stdout
            refused = ro("reconcile")
            assert refused.returncode == 1 and "cannot reconcile" in refused.stderr
            assert len(refused.stderr.splitlines()) == 1
            submitted = ro("run", "--print-id", "--", "true")
            assert submitted.returncode != 0 and len(submitted.stderr.splitlines()) == 1
        assert (jobman.home / "jobman.db").read_bytes() == before
    assert jobman.state(abandoned)["phase"] == "running"  # nothing was written while read-only
    jobman("reconcile", check=True)
    assert jobman.state(abandoned)["outcome"] == "lost"


def test_a_home_filled_to_the_last_byte_while_jobs_run(tmp_path):
    mount = tmp_path / "small"
    gate = tmp_path / "gate"  # outside the full filesystem
    with small_tmpfs(mount, "16m"):
        jobman = Jobman(mount / "home")
        try:
            quiet = jobman.run(*gated(gate), opts=["--name", "quiet"])
            noisy = jobman.run("sh", "-c", f"echo before; while [ ! -e {gate} ]; do sleep 0.02; done; "
                                           f"head -c 100000 /dev/zero || exit 3")
            follower = jobman.run("true", opts=["--after", "quiet"])
            wait_for(lambda: jobman.state(noisy)["phase"] == "running" and jobman.state(quiet)["phase"] == "running")
            filler = mount / "filler"
            assert fill(filler) > 0
            with open(mount / "one-more-byte", "wb", buffering=0) as f:
                try:
                    f.write(b"x")
                    full = False
                except OSError:
                    full = True
            assert full, "the filesystem should be full to the last byte"
            before = jobman.count_jobs()
            refused = jobman("run", "--print-id", "--", "true")
            if refused.returncode != 0:  # the WAL had no room: one line, exit 1, nothing submitted
                assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
                assert jobman.count_jobs() == before
            listed = jobman("list")
            assert listed.returncode == 0 and jobman.in_table(listed.stdout, quiet), listed.stderr
            gate.touch()  # both targets end while the disk is full; the noisy one cannot write
            time.sleep(2.0)
            for job_id in (quiet, noisy):
                state = jobman.state(job_id)
                assert state["phase"] != "finished" or state["outcome"] != "lost"
                assert state["phase"] == "finished" or alive(state["supervisor_pid"])
            filler.unlink()  # room again: whatever waited is recorded now
            assert jobman("wait", quiet, follower, timeout=60).returncode == 0
            assert jobman("wait", noisy, timeout=60).returncode == 3
            shown = jobman.show(noisy)
            assert "the filesystem of its log was full" in shown["detail"], shown["detail"]
            assert "log_disk_full" in [e["kind"] for e in shown["events"]]
            if refused.returncode == 0:
                assert jobman("wait", refused.stdout.strip(), timeout=60).returncode == 0
            no_tracebacks(jobman)
            lost = [j for j in json.loads(jobman("list", "--json", check=True).stdout) if j["outcome"] == "lost"]
            assert lost == []
        finally:
            kill_all(jobman.processes())


def test_a_database_deleted_under_a_supervisor_is_never_recreated(jobman, tmp_path):
    """The supervisor stops claiming the job, leaves its target to finish and says so; no command makes
    a fresh, empty database where the old one was."""
    gate, out = tmp_path / "gate", tmp_path / "out"
    job_id = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; echo finished > {out}")
    wait_for(lambda: jobman.state(job_id)["phase"] == "running")
    supervisor = jobman.state(job_id)["supervisor_pid"]
    db = jobman.home / "jobman.db"
    moved = tmp_path / "moved.db"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.link(f"{db}{suffix}", f"{moved}{suffix}")
    db.unlink()
    log = jobman.home / "logs" / job_id / "supervisor.log"
    wait_for(lambda: "was deleted" in log.read_text(), message="the supervisor to notice")
    assert "no longer claims job" in log.read_text() and "left to finish" in log.read_text()
    assert alive(supervisor)  # it waits for its target, which it does not stop
    for args in (["run", "--", "true"], ["list"], ["reconcile"], ["show", job_id]):
        result = jobman(*args)
        assert result.returncode == 1 and "is missing" in result.stderr, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1
        assert not db.exists()
    gate.touch()
    wait_for(lambda: out.exists() and not alive(supervisor), message="the target to finish, then the supervisor")
    assert "ended with exit code 0; not recorded" in log.read_text()
    os.rename(moved, db)  # put back: the record explains what it knows
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{moved}{suffix}"):
            os.rename(f"{moved}{suffix}", f"{db}{suffix}")
    # Its lease runs out and its supervisor is gone: lost, as nothing recorded how the target ended.
    wait_for(lambda: jobman("reconcile", check=True) and jobman.state(job_id)["outcome"] == "lost")


def test_a_replaced_database_is_not_written_to(jobman, tmp_path):
    job_id = jobman.run("sleep", "30")
    wait_for(lambda: jobman.state(job_id)["phase"] == "running")
    supervisor = jobman.state(job_id)["supervisor_pid"]
    db = jobman.home / "jobman.db"
    copy = tmp_path / "copy.db"
    with jobman.db() as conn:
        conn.execute(f"VACUUM INTO '{copy}'")
    # A restore from a backup: another file at the path, with the same records (and no WAL of the old one).
    for suffix in ("-wal", "-shm"):
        (jobman.home / f"jobman.db{suffix}").unlink(missing_ok=True)
    os.replace(copy, db)
    log = jobman.home / "logs" / job_id / "supervisor.log"
    wait_for(lambda: "was replaced" in log.read_text(), message="the supervisor to notice")
    revision = jobman.state(job_id)["revision"]
    time.sleep(1.0)  # several renewal intervals: none of them may land in the new file
    assert jobman.state(job_id)["revision"] == revision
    assert alive(supervisor)
    kill_all([jobman.state(job_id)["supervisor_pid"]])


def test_an_emptied_database_is_refused_not_started_afresh(jobman):
    job_id = jobman.run("true")
    jobman("wait", job_id, check=True)
    kill_all(jobman.processes())
    db = jobman.home / "jobman.db"
    for suffix in ("-wal", "-shm"):
        (jobman.home / f"jobman.db{suffix}").unlink(missing_ok=True)
    os.truncate(db, 0)
    for args in (["list"], ["run", "--", "true"], ["show", job_id]):
        result = jobman(*args)
        assert result.returncode == 1 and "is empty (truncated?)" in result.stderr, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1
    assert db.stat().st_size == 0


def test_an_old_database_is_migrated(tmp_path):
    """A version-1 database (as jobman made it before the line indexes) is brought up to date in place,
    with its waiting jobs in line."""
    from jobman.store import database as db, migrations

    path = str(tmp_path / "jobman.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in db._statements(migrations.MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("INSERT INTO groups (name, slot_limit) VALUES ('default', 2)")
    for n, (phase, waiting_for) in enumerate([("waiting", "slot"), ("finished", None), ("waiting", "slot")]):
        job_id = f"0000000{n}-0000-7000-8000-000000000000"
        conn.execute("INSERT INTO jobs VALUES (?, NULL, '{}', 'default', ?, ?, 10, 15, 5, 1)", (job_id, n, 100.0 + n))
        conn.execute("INSERT INTO job_state (job_id, phase, outcome, revision, supervisor_id, waiting_for)"
                     " VALUES (?, ?, ?, 1, 's', ?)", (job_id, phase, "succeeded" if phase == "finished" else None,
                                                      waiting_for))
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    migrated = db.connect(path, create=False)
    assert migrated.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    from jobman.store import queries

    assert queries.line(migrated, "default") == ["00000002-0000-7000-8000-000000000000",
                                                 "00000000-0000-7000-8000-000000000000"]


def test_a_full_home_is_full_not_damaged_and_reading_still_works(tmp_path):
    """`jobman list` on a full home said 'disk I/O error ... move the damaged file aside' (exit 2), and
    following that advice moves a healthy database away. Reading commands work; writing ones say the disk is
    full, in one line, exit 1; nothing suggests moving the database."""
    mount = tmp_path / "small"
    with small_tmpfs(mount, "8m"):
        jobman = Jobman(mount / "home")
        done = jobman.run("sh", "-c", "echo hello")
        assert jobman("wait", done).returncode == 0
        kill_all(jobman.processes())  # no connection open: SQLite removed its WAL and index, and must make them
        assert fill(mount / "filler") > 0
        for args in (["list"], ["list", "--json"], ["show", done], ["logs", done], ["wait", done]):
            result = jobman(*args)
            assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
        assert "hello" in jobman("logs", done).stdout
        for args in (["run", "--", "true"], ["cancel", done], ["group", "set", "g", "--limit", "1"]):
            result = jobman(*args)
            assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, (args, result.stderr)
            assert "is full" in result.stderr and "aside" not in result.stderr and "damaged" not in \
                result.stderr.replace("not damaged", ""), (args, result.stderr)


def test_damage_is_told_by_sqlite_and_exits_1(jobman, tmp_path):
    """Damage (a garbage file, a table missing) is one line, exit 1, and only what fails SQLite's own checks is
    called damaged. A database from a newer jobman exits 1 too; a home that is a file is named as such."""
    job_id = jobman.run("true")
    jobman("wait", job_id, check=True)
    kill_all(jobman.processes())
    db = jobman.home / "jobman.db"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE events")
    for args in (["show", job_id], ["run", "--", "true"], ["list"]):
        result = jobman(*args)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        if result.returncode:
            assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, (args, result.stderr)
            assert "lacks part of its schema" in result.stderr and "events" in result.stderr, result.stderr
    assert jobman("show", job_id).returncode == 1
    for suffix in ("-wal", "-shm"):
        (jobman.home / f"jobman.db{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 200)
    for args in (["list"], ["show", job_id], ["run", "--", "true"]):
        result = jobman(*args)
        assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, (args, result.stderr)
        assert "is damaged (SQLite: file is not a database)" in result.stderr and "aside" in result.stderr
    other = Jobman(tmp_path / "newer")
    other.run("true")
    kill_all(other.processes())
    with sqlite3.connect(other.home / "jobman.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    newer = other("list")
    assert newer.returncode == 1 and "newer than this jobman understands" in newer.stderr
    afile = tmp_path / "a-file"
    afile.write_text("")
    result = Jobman(afile)("list")
    assert result.returncode == 2 and "is a file, not a directory" in result.stderr


READING = [["list"], ["list", "--json"], ["show", "JOB"], ["logs", "JOB"], ["wait", "JOB"], ["group", "list"]]


@pytest.mark.parametrize("table", ["jobs", "job_state", "attempts", "events", "dependencies", "groups",
                                   "handle_sequence", "lease_round"])
def test_each_reading_command_on_a_database_missing_a_table(jobman, table):
    """A database missing one of its tables made `jobman show` and `run` end in a traceback. Every
    reading command either reads what is there, or says in one line (exit 1) that the database lacks part of its
    schema; none writes, none tracebacks."""
    job_id = jobman.run("true")
    jobman("wait", job_id, check=True)
    kill_all(jobman.processes())
    with sqlite3.connect(jobman.home / "jobman.db") as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(f"DROP TABLE {table}")
    for args in READING:
        result = jobman(*[job_id if a == "JOB" else a for a in args])
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert result.returncode in (0, 1), (args, result.returncode, result.stderr)
        if result.returncode == 1:
            assert len(result.stderr.strip().splitlines()) == 1 and "lacks part of its schema" in result.stderr, \
                (args, result.stderr)


def test_a_read_only_spell_of_the_database_file_leaves_no_supervisor_stuck():
    """`chmod 0400 jobman.db` for 5 s, as its owner (not root, whom a mode does not stop): C after B after A, and A
    ends during the spell. A supervisor that opens the database meanwhile (one back from its lean form, rung by A)
    gets a read-only connection without an error, and its writes are refused; it used to try them again on that
    connection for ever, the file writable again or not, and the chain never ended. Now each try refused as
    read-only opens the database anew, and the chain runs once the file is writable."""
    from tests.jobman.unprivileged import unprivileged_jobman

    with unprivileged_jobman() as jm:
        gate = jm.home.parent / "gate"
        a = jm.run(*gated(gate), opts=["--name", "A"])
        b = jm.run("true", opts=["--name", "B", "--after-success", "A"])
        c = jm.run("true", opts=["--name", "C", "--after-success", "B"])
        wait_for(lambda: jm.state(a)["phase"] == "running"
                 and all(jm.state(j)["waiting_for"] == "dependencies" for j in (b, c)), timeout=30)
        db = jm.home / "jobman.db"
        db.chmod(0o400)
        spell_began = time.monotonic()
        try:
            gate.touch()  # A ends; its supervisor's connection was opened writable and records it
            logs = lambda: "".join(supervisor_log(jm, j) for j in (b, c))  # noqa: E731
            wait_for(lambda: "the database is read-only" in logs(), timeout=30,
                     message="a supervisor to meet the read-only file")
            time.sleep(max(0.0, 5.0 - (time.monotonic() - spell_began)))  # the spell itself lasts 5 s
        finally:
            db.chmod(0o600)
        writable = time.monotonic()
        wait_for(lambda: all(jm.state(j)["outcome"] == "succeeded" for j in (a, b, c)), timeout=30,
                 message="the chain to run once the file is writable")
        assert time.monotonic() - writable < 20
        assert "the database works again after" in logs() and "opens the database again" in logs(), logs()
        waited = [e for j in (b, c) for e in jm.show(j)["events"] if e["kind"] == "database_waited"]
        assert any(w["reason"].startswith("the database is read-only") for w in waited), waited
        assert [e["kind"] for j in (a, b, c) for e in jm.show(j)["events"]].count("attempt_started") == 3
        no_tracebacks(jm)
