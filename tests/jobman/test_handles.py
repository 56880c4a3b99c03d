"""Handles: the short per-home number of every job, typed wherever JOB is taken."""
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
    from jobman.store import database as db, migrations

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


def test_run_prints_the_handle_and_the_commands_that_change_jobs_echo_it(jobman):
    """jobman run prints the handle (what people type); --print-id and --json give the UUID. cancel, hold,
    release, signal and priority answer in handles too."""
    first = jobman("run", "--", "sleep", "30", check=True).stdout
    assert first == "1\n"
    as_id = jobman("run", "--print-id", "--group", "default", "--delay", "1h", "--", "true", check=True).stdout.strip()
    assert len(as_id) == 36 and jobman.show("2")["id"] == as_id
    batch = jobman("run", "--array", "1-3", "--delay", "1h", "--", "true", check=True).stdout
    assert batch == "3\n4\n5\n"
    batch_ids = jobman("run", "--print-id", "--array", "1-2", "--delay", "1h", "--", "true", check=True).stdout.split()
    assert [jobman.show(i)["handle"] for i in batch_ids] == [6, 7]
    assert jobman("hold", "3", "4", check=True).stdout.startswith("job 3: held")
    assert jobman("release", "3", check=True).stdout.startswith("job 3: released")
    assert jobman("priority", "4", "9", check=True).stdout == "job 4: priority 9\n"
    wait_for_running(jobman, "1")
    assert jobman("signal", "1", "USR2", check=True).stdout.startswith("job 1: sent SIGUSR2")
    cancelled = jobman("cancel", "2", as_id, "5", check=True).stdout.splitlines()
    assert cancelled == ["job 2: cancelled", "job 5: cancelled"]  # a job named twice is acted on once
    assert as_id not in jobman("cancel", "1", check=True).stdout


def wait_for_running(jobman, job: str) -> None:
    from tests.helpers import wait_for

    wait_for(lambda: jobman.show(job)["phase"] == "running", message=f"job {job} running")


def test_last_names_the_newest_job_wherever_a_job_is_taken(jobman):
    """`--after-success last` depends on the newest job of the home, as tsp -d does; any command takes it."""
    refused = jobman("run", "--after-success", "last", "--", "true")
    assert refused.returncode == 2 and "no job has been submitted yet" in refused.stderr
    assert jobman.count_jobs() == 0
    gate = jobman.run("sh", "-c", "exit 4", opts=["--delay", "300ms"])
    after = jobman.run("true", opts=["--after-success", "last"])
    assert jobman.show(after)["dependencies"][0]["job"] == gate
    assert jobman.show("last")["id"] == after
    assert jobman("wait", after).returncode != 0 and jobman.show(after)["state"] == "dependency_failed"
    named = jobman("run", "--name", "last", "--", "true")
    assert named.returncode == 2 and "`last` names the newest job" in named.stderr and jobman.count_jobs() == 2
