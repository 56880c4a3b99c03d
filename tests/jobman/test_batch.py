"""`jobman run --array SPEC` and `jobman run --from FILE`: many jobs from one command, each with
the handoff of one job and a supervisor of its own. Bad input refuses the whole batch before anything is
committed; a batch stopped part way (a failed handoff, an interrupt) says which jobs were submitted, and
leaves none of the others half submitted."""
import json
import signal
import subprocess

from tests.helpers import wait_for
from tests.jobman.conftest import JOBMAN


def states(jobman) -> dict[str, dict]:
    with jobman.db() as conn:
        rows = conn.execute("SELECT job_id, phase, outcome, supervisor_id FROM job_state").fetchall()
    return {r[0]: {"phase": r[1], "outcome": r[2], "supervisor_id": r[3]} for r in rows}


def finish(cli) -> tuple[list[str], str]:
    """The ids the CLI prints from now on (read through the text buffer readline() filled) and its stderr,
    once it has exited."""
    with cli:
        rest = cli.stdout.read().split()
        err = cli.stderr.read()
    return rest, err


def test_an_array_runs_one_job_per_index_with_the_index_in_its_command_and_environment(jobman, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = jobman("run", "--print-id", "--array", "1-10,20-30:5", "--name", "seed", "--", "sh", "-c",
                    f"echo {{}} $JOBMAN_ARRAY_INDEX > {out}/{{}}", check=True)
    ids = result.stdout.split()
    assert len(ids) == 13 and len(set(ids)) == 13
    assert jobman("wait", "-q", *ids, timeout=60).returncode == 0
    indices = list(range(1, 11)) + [20, 25, 30]
    assert sorted(int(p.name) for p in out.iterdir()) == indices
    assert all((out / str(i)).read_text() == f"{i} {i}\n" for i in indices)
    # One supervisor per job, in submission order: handles follow the indices; names carry them.
    shown = [jobman.show(job_id) for job_id in ids]
    assert [s["handle"] for s in shown] == list(range(1, 14))
    assert [s["name"] for s in shown] == [f"seed-{i}" for i in indices]
    assert len({s["supervisor"]["id"] for s in shown}) == 13


def test_from_a_file_each_line_is_a_job_and_json_lists_them(jobman, tmp_path):
    commands = tmp_path / "jobs.txt"
    target = tmp_path / "words"
    commands.write_text(f"# a sweep\n\nsh -c 'echo \"$0\" >> {target}' 'two words'\n"
                        f"   sh -c 'echo $0 >> {target}' one  # trailing comment\n")
    result = jobman("run", "--print-id", "--from", str(commands), "--json", check=True)
    listed = json.loads(result.stdout)
    assert [item["index"] for item in listed] == [1, 2]
    assert all(set(item) == {"id", "handle", "name", "supervisor_id", "index"} for item in listed)
    assert jobman("wait", "-q", *(item["id"] for item in listed), timeout=30).returncode == 0
    assert sorted(target.read_text().splitlines()) == ["one", "two words"]
    # `--from -` reads the commands from stdin.
    piped = jobman("run", "--print-id", "--from", "-", input="true\ntrue\ntrue\n", check=True)
    assert len(piped.stdout.split()) == 3


def test_bad_input_refuses_the_whole_batch_and_submits_nothing(jobman, tmp_path):
    jobman.run("true")  # the database exists: nothing may be added to it
    before = jobman.count_jobs()
    bad_line = tmp_path / "bad.txt"
    bad_line.write_text("true\necho 'unclosed\n")
    missing = tmp_path / "missing.txt"
    missing.write_text("true\ntrue\nno-such-command-xyz\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    cases = {
        ("--array", "5-1", "--", "true"): "--array",
        ("--array", "1-3", "--", "no-such-command-{}"): "--array index 1: command not found",
        ("--array", "1,2,1", "--", "true"): "names an index twice",
        ("--array", "1-200000", "--", "true"): "more than 100000 jobs",
        ("--array", "1-3", "--from", str(bad_line)): "do not go together",
        ("--from", str(bad_line)): "line 2: No closing quotation",
        ("--from", str(missing)): "command 3: command not found",
        ("--from", str(empty)): "no command in it",
        ("--from", str(tmp_path / "absent.txt")): "cannot read it",
        ("--from", str(bad_line), "--", "true"): "put none after --",
        ("--array", "1-3", "--name", "{}", "--", "true"): "digits only",
        ("--array", "1-3", "--group", "nope", "--", "true"): "group 'nope' does not exist",
    }
    for args, words in cases.items():
        result = jobman("run", "--print-id", *args)
        assert result.returncode == 2, (args, result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, result.stderr)
        assert result.stdout == ""
        assert jobman.count_jobs() == before, args


def test_a_batch_that_fails_half_way_says_what_was_submitted_and_leaves_nothing_half_submitted(jobman, tmp_path):
    """One supervisor is killed before its claim once 40 jobs have been handed over: that job ends
    submission_failed, the batch stops committing, the handoffs under way finish, and the jobs it never
    reached are not in the database at all."""
    marker = tmp_path / "arm"
    jobman("group", "set", "held", "--limit", "0", check=True)
    env = {**jobman.env, "JOBMAN_TEST_FAULT": "supervisor:one_dies_before_claim", "JOBMAN_TEST_MARKER": str(marker)}
    cli = subprocess.Popen([JOBMAN, "run", "--print-id", "--array", "1-400", "--group", "held", "--", "true"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = [cli.stdout.readline().strip() for _ in range(40)]
    marker.write_text("")  # armed: the next supervisor to reach its claim dies there
    rest, err = finish(cli)
    printed += rest
    assert cli.returncode == 1, err
    assert not marker.exists()  # the fault fired
    jobs = states(jobman)
    failed = [j for j, s in jobs.items() if s["outcome"] == "submission_failed"]
    assert len(failed) == 1
    assert sorted(printed) == sorted(j for j in jobs if j not in failed)  # every other job was handed over
    assert all(s["supervisor_id"] for j, s in jobs.items() if j not in failed)
    wait_for(lambda: all(s["phase"] == "waiting" for j, s in states(jobman).items() if j not in failed), timeout=30)
    assert 40 < len(jobs) < 400  # it stopped: the rest was never committed
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert f"({failed[0]}) was not submitted" in lines[0]
    assert lines[1].startswith(f"jobman: error: stopped: submitted {len(printed)} of 400 jobs")
    assert "nothing was" in lines[1]
    jobman("group", "set", "held", "--limit", "8", check=True)
    assert jobman("wait", "-q", *printed, timeout=120).returncode == 0


def test_an_interrupted_batch_finishes_the_handoffs_under_way_and_submits_no_more(jobman):
    jobman("group", "set", "held", "--limit", "0", check=True)
    cli = subprocess.Popen([JOBMAN, "run", "--print-id", "--array", "1-1000", "--group", "held", "--", "true"], env=jobman.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = [cli.stdout.readline().strip() for _ in range(20)]
    cli.send_signal(signal.SIGINT)
    rest, err = finish(cli)
    printed += rest
    assert cli.returncode == 130, err
    jobs = states(jobman)
    assert sorted(printed) == sorted(jobs)  # every job committed was handed over, and printed
    assert all(s["supervisor_id"] for s in jobs.values())
    wait_for(lambda: all(s["phase"] == "waiting" for s in states(jobman).values()), timeout=30)
    assert len(jobs) < 1000
    assert f"interrupted: submitted {len(jobs)} of 1000 jobs" in err
    jobman("group", "set", "held", "--limit", "8", check=True)
    assert jobman("wait", "-q", *printed, timeout=120).returncode == 0
