"""Both command lines end the same way (runkit.cli.climain.run_main): a reader that closed the pipe early gets exit 0
and no traceback (`jobman list | head -1`, as git and ls do), Ctrl-C exits 130, the tool's own errors are one line
and its exit code. The CLIs run as real processes, their stdout a pipe whose reader is already gone."""
import json
import os
import signal
import subprocess
import sys

import pytest

from runkit.cli.climain import run_main

PYTHON = sys.executable


def _closed_pipe_run(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write meets EPIPE
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("tool, args", [("jobman", ["list"]), ("jobman", ["--help"]), ("stado", ["--help"]),
                                        ("stado", ["status"]), ("stado", ["submit", "true"])])
def test_a_closed_pipe_ends_the_command_quietly_with_0(tool, args, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "stado.toml").write_text(f'[store]\nurl = "file://{store}"\n')
    env = dict(os.environ, JOBMAN_HOME=str(tmp_path / "home"), STADO_CONFIG=str(tmp_path / "stado.toml"))
    if tool == "jobman" and args == ["list"]:  # a job, so that list has a row to print
        subprocess.run([PYTHON, "-m", "jobman", "run", "--name", "one", "--", "true"], env=env, check=True,
                       capture_output=True, timeout=60)
    got = _closed_pipe_run([PYTHON, "-m", tool, *args], env)
    assert got.returncode == 0, got.stderr.decode()
    assert got.stderr == b""


def test_a_submit_that_skips_the_interpreters_teardown_still_says_everything(tmp_path):
    """`stado submit` ends with runkit.cli.climain.leave (os._exit once stdout and stderr are flushed): through a pipe
    (block-buffered) its id arrives whole and names a queued job; its refusals keep their line and exit code."""
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "stado.toml").write_text(f'[store]\nurl = "file://{store}"\n')
    env = dict(os.environ, STADO_CONFIG=str(tmp_path / "stado.toml"))
    done = subprocess.run([PYTHON, "-m", "stado", "submit", "true"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    job = done.stdout.strip()
    status = subprocess.run([PYTHON, "-m", "stado", "status", job], env=env, capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 0 and "queued" in status.stdout, (done.stdout, status.stdout, status.stderr)
    refused = subprocess.run([PYTHON, "-m", "stado", "submit", "--priority", "high", "true"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("stado: ") and refused.stderr.count("\n") == 1, refused.stderr


CLOSED = {"stdout": ">&-", "stderr": "2>&-", "both": ">&- 2>&-"}


def _with_closed(which: str, argv: list[str], env: dict) -> subprocess.CompletedProcess:
    """argv run with its stdout, its stderr or both closed (as a shell's `>&-` leaves them), the other ones caught:
    through sh, which closes them before it execs the command."""
    return subprocess.run(["sh", "-c", f'exec "$@" {CLOSED[which]}', "sh", *argv], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("which", sorted(CLOSED))
def test_a_jobman_run_with_a_closed_stream_exits_0_and_its_job_runs_once(which, tmp_path):
    """`jobman run -- CMD >&-` used to end in a traceback, exit 1, though the job was submitted and ran (`2>&-`:
    exit 1 after printing the handle). Once the job is owned the command exits 0; with stdout closed its handle is
    said on stderr instead."""
    ledger = tmp_path / "ledger"
    env = dict(os.environ, JOBMAN_HOME=str(tmp_path / "home"))
    done = _with_closed(which, [PYTHON, "-m", "jobman", "run", "--", "sh", "-c", f"echo ran >> {ledger}"], env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    listed = json.loads(subprocess.run([PYTHON, "-m", "jobman", "list", "--json"], env=env, capture_output=True,
                                       text=True, timeout=60, check=True).stdout)
    assert len(listed) == 1
    handle = str(listed[0]["handle"])
    if which == "stdout":
        assert done.stderr == f"jobman: stdout is closed; it would have printed: {handle}\n"
    elif which == "stderr":
        assert done.stdout == f"{handle}\n"
    wait = subprocess.run([PYTHON, "-m", "jobman", "wait", handle], env=env, capture_output=True, timeout=60)
    assert wait.returncode == 0
    assert ledger.read_text() == "ran\n"


@pytest.mark.parametrize("which", sorted(CLOSED))
def test_a_stado_submit_with_a_closed_stream_exits_0_and_queues_its_job_once(which, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "stado.toml").write_text(f'[store]\nurl = "file://{store}"\n')
    env = dict(os.environ, STADO_CONFIG=str(tmp_path / "stado.toml"))
    done = _with_closed(which, [PYTHON, "-m", "stado", "submit", "true"], env)
    assert done.returncode == 0, done.stderr
    status = json.loads(subprocess.run([PYTHON, "-m", "stado", "status", "--json"], env=env, capture_output=True,
                                       text=True, timeout=60, check=True).stdout)
    [job] = status["jobs"]
    assert job["state"] == "queued"
    if which == "stdout":
        assert done.stderr == f"stado: stdout is closed; it would have printed: {job['id']}\n"


def test_a_jobman_run_whose_stdout_is_full_exits_0_and_names_its_job_on_stderr(tmp_path):
    """A handle that cannot be written (stdout on a full device) is the same: the job is owned, exit 0, and stderr
    says which job it was, for a single run and for each job of a batch."""
    env = dict(os.environ, JOBMAN_HOME=str(tmp_path / "home"))
    with open("/dev/full", "w") as full:
        one = subprocess.run([PYTHON, "-m", "jobman", "run", "--", "true"], env=env, stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        batch = subprocess.run([PYTHON, "-m", "jobman", "run", "--array", "1-3", "--", "true"], env=env, stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60)
    assert one.returncode == 0 and batch.returncode == 0, (one.stderr, batch.stderr)
    assert one.stderr == "jobman: could not print on stdout (No space left on device): 1\n"
    assert batch.stderr.splitlines() == [f"jobman: could not print on stdout (No space left on device): {n}"
                                         for n in (2, 3, 4)]


def test_the_tools_own_errors_are_one_line_and_their_code(capsys):
    class Refused(Exception):
        pass

    assert run_main(lambda: (_ for _ in ()).throw(Refused("no such job")), lambda e: (str(e), 3), "tool") == 3
    assert capsys.readouterr().err == "tool: no such job\n"


def test_an_error_that_is_not_the_tools_goes_on_as_a_traceback():
    with pytest.raises(ZeroDivisionError):
        run_main(lambda: 1 // 0, lambda e: None, "tool")


def test_ctrl_c_exits_130(capsys):
    def interrupted() -> int:
        raise KeyboardInterrupt

    assert run_main(interrupted, lambda e: ("never", 1), "tool") == 130
    assert capsys.readouterr().err == ""


def test_ctrl_c_of_a_real_command_exits_130(tmp_path):
    """`stado job watch` of a job nobody runs waits until interrupted: SIGINT ends it with 130, no traceback."""
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "stado.toml").write_text(f'[store]\nurl = "file://{store}"\n')
    env = dict(os.environ, STADO_CONFIG=str(tmp_path / "stado.toml"))
    job = subprocess.run([PYTHON, "-m", "stado", "submit", "sleep 60"], env=env, check=True, capture_output=True,
                         text=True, timeout=60).stdout.strip()
    watch = subprocess.Popen([PYTHON, "-m", "stado", "job", "watch", job], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stderr is not None
        watch.stderr.readline()  # its first state line: the command is past start-up and waiting
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    finally:
        watch.kill()
    assert watch.returncode == 130, err
    assert "Traceback" not in err
