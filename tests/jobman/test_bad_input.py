"""Bad input: a one-line error naming the problem and what to do, a non-zero exit, nothing written."""
import pytest


def assert_one_line_error(result, *needles):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jobman: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("args, needles", [
    (["run", "--"], ["no command given", "jobman run -- COMMAND"]),
    (["run"], ["no command given"]),
    (["run", "--cwd", "/no/such/dir", "--", "true"], ["/no/such/dir", "does not exist", "--cwd"]),
    (["run", "--env", "NOEQUALS", "--", "true"], ["malformed --env 'NOEQUALS'", "NAME=VALUE"]),
    (["run", "--env", "=x", "--", "true"], ["malformed --env"]),
    (["run", "--env", "1A=b", "--", "true"], ["malformed --env"]),
    (["run", "--env-policy", "sometimes", "--", "true"], ["--env-policy"]),
    (["run", "--", "no-such-command-xyz"], ["command not found", "no-such-command-xyz"]),
    (["run", "--bogus-flag", "--", "true"], ["unrecognized arguments: --bogus-flag", "--help"]),
    # Small ones found with a real queue: text that is not UTF-8 (the shell hands Python bytes, which it
    # smuggles through as lone surrogates), names that would break `jobman list`, an empty --cwd, caps
    # that would silently mean "no cap" or could not be kept.
    (["run", "--name", "bad\udcff", "--", "true"], ["--name", "not valid UTF-8"]),
    (["run", "--name", "two\nlines", "--", "true"], ["bad --name", "printable"]),
    (["run", "--name", "tab\there", "--", "true"], ["bad --name", "printable"]),
    (["run", "--name", "bell\x07", "--", "true"], ["bad --name"]),
    (["run", "--group", "g\udcff", "--", "true"], ["bad --group"]),
    (["run", "--after", "x\udcff", "--", "true"], ["no job matches"]),
    (["run", "--cwd", "", "--", "true"], ["--cwd is empty"]),
    (["run", "--log-limit", "0.5", "--", "true"], ["rounds to 0 bytes", "0 for no cap"]),
    (["run", "--log-limit", "0.0001K", "--", "true"], ["rounds to 0 bytes"]),
    (["run", "--log-limit", "100", "--", "true"], ["below 8192 bytes", "two filesystem blocks"]),
    (["group", "set", "g\udcff", "--limit", "1"], ["bad group name"]),
])
def test_bad_run_input_writes_nothing(jobman, args, needles):
    result = jobman(*args)
    assert_one_line_error(result, *needles)
    assert not jobman.home.exists()


def test_unknown_selector(jobman):
    jobman.run("true")
    before = jobman.count_jobs()
    for command in (["show", "nope"], ["logs", "nope"], ["wait", "nope"], ["cancel", "nope"]):
        assert_one_line_error(jobman(*command), "no job matches 'nope'")
    assert jobman.count_jobs() == before


def test_ambiguous_prefix(jobman):
    a = jobman.run("true")
    b = jobman.run("true")
    common = 0
    while a[common] == b[common]:
        common += 1
    prefix = a[:common]
    assert len(prefix.replace("-", "")) >= 6  # ids from the same moment share their time bits
    result = jobman("show", prefix)
    assert_one_line_error(result, "ambiguous", a, b)
    assert jobman.show(a[:common + 1])["id"] == a


def test_short_prefix_is_refused(jobman):
    job_id = jobman.run("true")
    assert_one_line_error(jobman("show", job_id[:4]), "at least 6 characters")


def test_unwritable_home(jobman, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = jobman("run", "--", "true", env={"JOBMAN_HOME": str(blocker / "home")})
    assert_one_line_error(result, "cannot create the jobman state directory", "JOBMAN_HOME")
    assert blocker.read_text() == "not a directory"


def test_unknown_command(jobman):
    assert_one_line_error(jobman("frobnicate"), "unknown command 'frobnicate'", "jobman --help")


def test_bad_window_setting(jobman):
    result = jobman("run", "--", "true", env={"JOBMAN_LEASE": "1s", "JOBMAN_RENEW_INTERVAL": "2s"})
    assert_one_line_error(result, "JOBMAN_RENEW_INTERVAL", "shorter")
    assert not jobman.home.exists()


@pytest.mark.parametrize("args, flag", [
    (["run", "--delay", "-1s", "--", "true"], "--delay"),
    (["run", "--delay=-1s", "--", "true"], "--delay"),
    (["run", "--delay", "-5", "--", "true"], "--delay"),
    (["run", "--timeout", "-1s", "--", "true"], "--timeout"),
    (["run", "--retry-delay", "-1m", "--", "true"], "--retry-delay"),
    (["run", "--kill-after", "-.5s", "--", "true"], "--kill-after"),
    (["run", "--retry-max-delay", "-1h", "--", "true"], "--retry-max-delay"),
    (["wait", "--timeout", "-1s", "some-job"], "--timeout"),
    (["wait", "some-job", "--timeout=-1s"], "--timeout"),
    (["prune", "--older-than", "-1h"], "--older-than"),
])
def test_negative_duration_names_the_problem(jobman, args, flag):
    """`-1s` looks like an option to argparse: the error must still say what is wrong with the value."""
    result = jobman(*args)
    assert_one_line_error(result, f"{flag}: bad duration", "must be >= 0")
    assert "expected one argument" not in result.stderr
    assert not jobman.home.exists()


@pytest.mark.parametrize("args, needles", [
    (["--delay", "1e300"], ["--delay", "at most 100 years"]),
    (["--delay", "99999999999999999999d"], ["--delay", "at most 100 years"]),
    (["--retry-delay", "1e300"], ["--retry-delay", "at most 100 years"]),
    (["--timeout", "1e300"], ["--timeout", "at most 100 years"]),
    (["--kill-after", "1e300"], ["--kill-after", "at most 100 years"]),
    (["--retry-max-delay", "1e300"], ["--retry-max-delay", "at most 100 years"]),
    (["--not-before", "@1e400"], ["--not-before", "'@1e400'"]),
    (["--not-before", "@nan"], ["--not-before", "'@nan'"]),
    (["--not-before", "@1e14"], ["--not-before", "out of range"]),
    (["--not-before", ""], ["--not-before", "empty time"]),
    (["--not-before", "  "], ["--not-before", "empty time"]),
])
def test_out_of_range_times_are_refused(jobman, args, needles):
    result = jobman("run", *args, "--", "true")
    assert_one_line_error(result, *needles)
    assert not jobman.home.exists()


def test_unrepresentable_stored_time_cannot_crash_a_supervisor_or_show(jobman):
    """A record written before times were checked (here: not before 1e300) is shown as the raw number."""
    import json
    import subprocess
    import sys

    from tests.helpers import wait_for

    script = ("import os; from jobman.commands import api; from jobman.handoff import spec as s\n"
              "sp = s.build(argv=['true'], cwd=None, env_policy='inherit', env_pairs=[], environ=os.environ, name='old',"
              " group='default', priority=0, not_before=1e300, retry=s.default_retry(), timeout=None, kill_after=10.0,"
              " log_limit=s.DEFAULT_LOG_LIMIT, separate_stderr=False, windows=s.windows_from_env(os.environ))\n"
              "print(api.run(sp, [])['id'])\n")
    made = subprocess.run([sys.executable, "-c", script], env=jobman.env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip()
    state = wait_for(lambda: (s := jobman.state(job_id))["phase"] == "waiting" and s, message="the job to wait")
    assert state["waiting_for"] == "not_before" and "1e+300" in state["wait_detail"]
    shown = jobman("show", job_id, check=True)
    assert "not before:  1e+300" in shown.stdout
    listed = jobman("list", check=True)
    assert "1e+300" in listed.stdout
    assert json.loads(jobman("list", "--json", check=True).stdout)[0]["phase"] == "waiting"
    jobman("cancel", job_id, check=True)
    assert jobman.wait_finished(job_id)["outcome"] == "cancelled"


@pytest.mark.parametrize("args, needles", [
    (["run", "--priority", "99999999999999999999", "--", "true"], ["--priority", "between"]),
    (["run", "--priority", "-99999999999999999999", "--", "true"], ["--priority", "between"]),
    (["run", "--retries", "99999999999999999999", "--", "true"], ["--retries", "between 0 and"]),
    (["run", "--retryable-exit-code", "99999999999999999999", "--", "true"], ["between 0 and 255"]),
    (["run", "--log-limit", "99999999999999999999G", "--", "true"], ["--log-limit", "at most"]),
    (["group", "set", "g", "--limit", "99999999999999999999"], ["bad limit", "1000000"]),
])
def test_huge_numbers_are_refused(jobman, args, needles):
    result = jobman(*args)
    assert_one_line_error(result, *needles)
    assert not jobman.home.exists()


def test_largest_allowed_numbers_are_accepted(jobman):
    job_id = jobman.run("true", opts=["--priority", str(2**31 - 1), "--retries", "1000000", "--log-limit", "1024G"])
    assert jobman.show(job_id)["priority"] == 2**31 - 1
    assert jobman("group", "set", "g", "--limit", "1000000").returncode == 0


@pytest.mark.parametrize("args, needles", [
    (["run", "--group", "nosuch", "--", "true"], ["group 'nosuch' does not exist", "jobman group set nosuch"]),
    (["run", "--after-success", "nope", "--", "true"], ["no job matches 'nope'"]),
    (["run", "--after", "0123456789", "--", "true"], ["no job matches '0123456789'"]),
])
def test_bad_input_on_a_fresh_home_creates_nothing(jobman, args, needles):
    assert_one_line_error(jobman(*args), *needles)
    assert not jobman.home.exists()
    jobman.home.mkdir()  # a home the user made, still without a database
    assert_one_line_error(jobman(*args), *needles)
    assert list(jobman.home.iterdir()) == []


def test_reading_a_home_that_does_not_exist_creates_nothing(jobman):
    import json
    import os

    groups = json.loads(jobman("group", "list", "--json", check=True).stdout)
    assert groups == [{"name": "default", "limit": os.cpu_count(), "paused": False, "running": 0, "waiting": 0}]
    assert "default" in jobman("group", "list", check=True).stdout
    assert jobman("list", check=True).stdout == "no jobs\n"
    assert jobman("reconcile", check=True).returncode == 0
    assert jobman("prune", check=True).returncode == 0
    for command in (["show", "x"], ["logs", "x"], ["wait", "x"], ["cancel", "x"]):
        assert_one_line_error(jobman(*command), "no job matches 'x'")
    assert not jobman.home.exists()
    jobman.run("true")  # and the first submission still creates the home and the default group
    assert json.loads(jobman("group", "list", "--json", check=True).stdout)[0]["name"] == "default"


def test_state_directory_is_private_when_jobman_creates_it(jobman, tmp_path):
    import os
    import stat

    nested = tmp_path / "x" / "y" / "home"
    jobman("run", "--", "true", env={"JOBMAN_HOME": str(nested)}, check=True)
    for path in (nested, nested / "logs", nested / "bells"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
    mine = tmp_path / "made-by-the-user"
    mine.mkdir()
    os.chmod(mine, 0o755)
    jobman("run", "--", "true", env={"JOBMAN_HOME": str(mine)}, check=True)
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o755  # not jobman's to change


@pytest.mark.parametrize("args, needles", [
    (["list", "--limit", "-1"], ["--limit must be between 1 and"]),
    (["list", "--limit", "0"], ["--limit must be between 1 and"]),
    (["list", "--limit", "99999999999999999999"], ["--limit must be between 1 and"]),
    (["logs", "JOB", "--tail", "-1"], ["--tail must be between 0 and"]),
    (["logs", "JOB", "-n", "-1"], ["--tail must be between 0 and"]),
    (["logs", "JOB", "--tail", "99999999999999999999"], ["--tail must be between 0 and"]),
])
def test_bad_counts_of_reading_commands(jobman, args, needles):
    job_id = jobman.run("echo", "hi")
    jobman("wait", job_id, check=True)
    assert_one_line_error(jobman(*[job_id if a == "JOB" else a for a in args]), *needles)
    assert jobman("logs", job_id, "--tail", "1", check=True).stdout == "hi\n"
    assert len(jobman("list", "--limit", "1", "--json", check=True).stdout.split('"id"')) == 2


@pytest.mark.parametrize("command", ["show", "logs", "wait", "cancel"])
def test_a_selector_that_is_not_utf8(jobman, command):
    jobman.run("true")
    before = jobman.count_jobs()
    assert_one_line_error(jobman(command, "x\udcff"), "not valid UTF-8")
    assert jobman.count_jobs() == before


def test_exact_zero_log_limit_means_no_cap_and_8k_is_kept(jobman):
    for limit in ("0", "0K", "8K"):
        job_id = jobman.run("true", opts=["--log-limit", limit])
        assert jobman.show(job_id)["spec"]["log"]["limit"] == (8192 if limit == "8K" else 0)


# Every command and every option that takes text, given bytes that are not UTF-8 (the shell passes them; Python
# smuggles them through as lone surrogates): one line, exit 2, nothing written, never a traceback.
# What a job's command itself may hold is bytes (`run -- printf '\xff'`): that is run, not refused.
UNDECODABLE = "x\udcff"
UNDECODABLE_ARGS = [
    ["show", UNDECODABLE], ["logs", UNDECODABLE], ["wait", UNDECODABLE], ["cancel", UNDECODABLE],
    ["restart", UNDECODABLE], ["hold", UNDECODABLE], ["release", UNDECODABLE], ["signal", UNDECODABLE, "TERM"],
    ["signal", "JOB", UNDECODABLE], ["priority", UNDECODABLE, "1"], ["priority", "JOB", UNDECODABLE],
    ["prune", UNDECODABLE], ["list", "--name", UNDECODABLE], ["list", "--group", UNDECODABLE],
    ["list", "--state", UNDECODABLE], ["wait", "--group", UNDECODABLE], ["group", "set", UNDECODABLE, "--limit", "1"],
    ["group", "rm", UNDECODABLE], ["completion", UNDECODABLE], ["run", "--name", UNDECODABLE, "--", "true"],
    ["run", "--group", UNDECODABLE, "--", "true"], ["run", "--cwd", UNDECODABLE, "--", "true"],
    ["run", "--after", UNDECODABLE, "--", "true"],
    ["run", "--not-before", UNDECODABLE, "--", "true"], ["run", "--timeout", UNDECODABLE, "--", "true"],
    ["logs", "JOB", "--tail", UNDECODABLE], [UNDECODABLE],
]


@pytest.mark.parametrize("args", UNDECODABLE_ARGS, ids=lambda args: " ".join(a.replace(UNDECODABLE, "BAD")
                                                                              for a in args))
def test_undecodable_bytes_anywhere_are_one_line_and_change_nothing(jobman, args):
    job_id = jobman.run("true")
    jobman("wait", job_id, check=True)
    before = jobman.count_jobs()
    result = jobman(*[job_id if a == "JOB" else a for a in args])
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (result.returncode, result.stderr)
    assert jobman.count_jobs() == before


def test_undecodable_bytes_in_a_command_are_run_as_given(jobman, tmp_path):
    out = tmp_path / "out"
    job_id = jobman.run("sh", "-c", f"printf '%s' \"$1\" > {out}", "sh", UNDECODABLE)
    assert jobman("wait", job_id).returncode == 0
    assert out.read_bytes() == b"x\xff"
    assert "Traceback" not in jobman("show", job_id).stderr and "Traceback" not in jobman("list").stderr
