"""Handles: the short per-home number of every job, typed wherever JOB is taken (issue 13)."""
import json
import sqlite3

from tests.jobman.conftest import Jobman


def test_every_job_gets_the_next_handle_and_any_command_takes_it(jobman):
    first = jobman.run("true", opts=["--name", "build"])
    second = jobman.run("sh", "-c", "exit 3")
    jobman("wait", first, second)
    listed = {j["id"]: j for j in json.loads(jobman("list", "--json", check=True).stdout)}
    assert listed[first]["handle"] == 1 and listed[second]["handle"] == 2
    assert jobman.show("2")["id"] == second  # the canonical id stays the UUIDv7
    assert jobman("wait", "2").returncode == 3
    assert jobman("logs", "1", check=True).returncode == 0
    table = jobman("list", check=True).stdout.splitlines()
    assert table[0].split()[0] == "#" and [line.split()[0] for line in table[1:]] == ["2", "1"]
    assert second not in "\n".join(table)  # the table speaks in handles, not in full ids
    assert "job:         2" in jobman("show", "2", check=True).stdout
    dependent = jobman.run("true", opts=["--after", "2"])  # as a dependency selector too
    assert jobman.show(dependent)["dependencies"][0]["job"] == second
    as_json = json.loads(jobman("run", "--json", "--", "true", check=True).stdout)
    assert as_json["handle"] == 4 and len(as_json["id"]) == 36


def test_a_pruned_handle_is_never_given_again(jobman):
    ids = [jobman.run("true") for _ in range(3)]
    jobman("wait", *ids, check=True)
    jobman("prune", check=True)
    fresh = jobman.run("true")
    assert jobman.show(fresh)["handle"] == 4
    result = jobman("show", "2")
    assert result.returncode == 2 and "no job has handle 2" in result.stderr and len(result.stderr.splitlines()) == 1


def test_names_of_digits_only_are_refused_so_handles_and_names_never_collide(jobman):
    result = jobman("run", "--name", "42", "--", "true")
    assert result.returncode == 2 and "digits" in result.stderr and len(result.stderr.splitlines()) == 1
    assert jobman.count_jobs() == 0
    named = jobman.run("true", opts=["--name", "v42"])
    assert jobman.show("v42")["id"] == named and jobman.show("1")["id"] == named


def test_an_old_database_gets_handles_in_submission_order(tmp_path):
    """Migration 3 numbers the jobs of an existing home in submission order, and the next job follows."""
    from jobman.store import migrations, schema as db

    home = tmp_path / "home"
    home.mkdir()
    path = str(home / "jobman.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for migration in migrations.MIGRATIONS[:2]:
        for statement in db._statements(migration):
            conn.execute(statement)
    conn.execute("INSERT INTO groups (name, slot_limit) VALUES ('default', 2)")
    # Inserted out of order: the numbers follow submission time, not insertion.
    for n, at in [(0, 300.0), (1, 100.0), (2, 200.0)]:
        job_id = f"0000000{n}-0000-7000-8000-000000000000"
        conn.execute("INSERT INTO jobs VALUES (?, NULL, ?, 'default', 0, ?, 10, 15, 5, 1)",
                     (job_id, json.dumps({"argv": ["true"]}), at))
        conn.execute("INSERT INTO job_state (job_id, phase, outcome, revision, finished_at)"
                     " VALUES (?, 'finished', 'succeeded', 1, ?)", (job_id, at))
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    jm = Jobman(home)
    listed = {j["id"][:8]: j["handle"] for j in json.loads(jm("list", "--json", check=True).stdout)}
    assert listed == {"00000001": 1, "00000002": 2, "00000000": 3}
    # Handles never begin with 0 and ids begin with the time in hex: digits after a 0 stay an id prefix.
    assert jm.show("0000000200")["id"] == "00000002-0000-7000-8000-000000000000"
    fresh = jm.run("true")
    assert jm.show(fresh)["handle"] == 4 and jm.show("3")["id"].startswith("00000000")
    with jm.db() as check:
        assert check.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
