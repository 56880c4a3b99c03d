"""The first month's sweep, replayed: 300 jobs in a group of 4 with a retry, two of which fail; the failure is
fixed and the failed jobs restarted by selector; `wait --group` answers the same whenever it is asked, and says
success once the restarts have succeeded."""
import json

SWEEP = 300
FAILING = (7, 150)


def test_a_sweep_with_a_limit_and_retries_fails_twice_is_fixed_and_restarted(jobman, tmp_path):
    jobman("group", "set", "sweep", "--limit", "4", check=True)
    check = " && ".join(f"[ {{}} -ne {n} ]" for n in FAILING)
    command = f"test -e {tmp_path}/ok-{{}} || {{ {check}; }}"
    done = jobman("run", "--array", f"1-{SWEEP}", "--group", "sweep", "--retries", "1", "--name", "sweep-{}", "--",
                  "sh", "-c", command, check=True, timeout=300)
    handles = done.stdout.split()
    assert len(handles) == SWEEP
    first = jobman("wait", "--group", "sweep", "-q", timeout=600)
    assert first.returncode == 1, first.stderr  # the first failure's own exit status
    assert [line for line in first.stderr.splitlines() if "failed" in line] == [
        f"jobman: job {handles[n - 1]} (sweep-{n}): failed (exit status 1)" for n in FAILING]
    again = jobman("wait", "--group", "sweep", "-q")
    assert (again.returncode, again.stderr) == (first.returncode, first.stderr)  # the same answer, asked later
    failed = json.loads(jobman("list", "--state", "failed", "--json", check=True).stdout)
    assert sorted(job["name"] for job in failed) == sorted(f"sweep-{n}" for n in FAILING)
    assert all(job["attempts"] == 2 for job in failed)  # the retry ran, and failed too

    for n in FAILING:
        (tmp_path / f"ok-{n}").touch()
    restarted = jobman("restart", "--state", "failed", "--group", "sweep", check=True)
    new = restarted.stdout.split()
    assert len(new) == 2 and all(h.isdigit() for h in new)
    for old in (handles[n - 1] for n in FAILING):
        assert [r["handle"] for r in jobman.show(old)["restarted_as"]] != []
    assert jobman("wait", *new, timeout=120).returncode == 0
    assert jobman("wait", "--group", "sweep", "-q").returncode == 0  # each failure answered by its restart
    assert jobman("wait", handles[FAILING[0] - 1]).returncode == 1  # named, a job answers for itself
    assert "no jobs match" in jobman("list", "--state", "failed", "--hide-restarted").stdout


def test_restart_prints_the_new_ids_with_print_id(jobman):
    handle = jobman("run", "--", "true", check=True).stdout.strip()
    assert jobman("wait", handle).returncode == 0
    new_id = jobman("restart", "--print-id", handle, check=True).stdout.strip()
    assert jobman.show(new_id)["id"] == new_id and jobman.show(new_id)["restart_of"]["id"] == jobman.show(handle)["id"]
