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
