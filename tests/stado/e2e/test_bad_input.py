"""Bad input: one-line errors that name the problem, a non-zero exit, and nothing written."""
import json
import socket

import pytest

from stado.core import keys

from .support import stado


def nothing_written(store):
    return [e.key for e in store.list("")] == []


@pytest.mark.parametrize("args, code, words", [
    (["submit", ""], 2, "empty command"),
    (["submit", "   "], 2, "empty command"),
    (["submit", "true", "--spot", "maybe"], 2, "invalid choice: 'maybe'"),
    (["submit", "true", "--cores", "many"], 2, "'many' is not a whole number"),
    (["submit", "true", "--cores", "0"], 2, "bad cores 0"),
    (["submit", "true", "--timeout", "soon"], 2, "malformed duration"),
    (["submit", "true", "--memory", "lots"], 2, "malformed size"),
    (["submit", "true", "--input", "nocolon"], 2, "use --input JOB:NAME"),
    (["submit", "true", "--input", "ghost:a.txt"], 3, "--input ghost:a.txt: no job has the id or name 'ghost'"),
    (["submit", "true", "--name", "has space"], 2, "bad job name"),
    (["submit", "true", "--frobnicate"], 2, "unrecognized arguments"),
    (["cancel", "ghost"], 3, "no job named 'ghost'"),
    (["machine", "status", "01a22a99-e71e-74c4-ad5a-198d46f1de5a"], 3, "no job"),
    (["agent", "--slots", "0"], 2, "--slots must be at least 1"),
    (["agent", "--accelerators", "-1"], 2, "--accelerators must be a whole number from 0 to 1024"),
    (["agent", "--capabilities", "a b"], 2, "bad capability 'a b'"),
    (["agent", "--capabilities", "gpu,x/y"], 2, "bad capability 'x/y'"),
])
def test_bad_input_is_refused_in_one_line(stado_env, store, args, code, words):
    got = stado(stado_env, *args, ok=False)
    assert got.returncode == code, got.stderr
    assert words in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert got.stdout == ""
    assert nothing_written(store)


def test_a_bad_batch_line_submits_nothing(stado_env, store, tmp_path):
    batch = tmp_path / "jobs.json"
    batch.write_text('[{"command": "true"}, {"command": "true", "cores": -2}]')
    got = stado(stado_env, "submit", "--batch", str(batch), ok=False)
    assert got.returncode == 2 and "entry 2: bad cores -2" in got.stderr and "nothing was submitted" in got.stderr
    lines = tmp_path / "jobs.txt"
    lines.write_text("echo one\n# a comment\necho two\n")
    toml = tmp_path / "jobs.toml"
    toml.write_text('[[job]]\ncommand = "echo three"\nname = "three"\n[[job]]\ncommand = "echo four"\nnope = 1\n')
    got = stado(stado_env, "submit", "--batch", str(toml), ok=False)
    assert got.returncode == 2 and "job 2: unknown field(s) nope" in got.stderr
    assert nothing_written(store)
    ids = stado(stado_env, "submit", "--batch", str(lines)).stdout.split()
    assert len(ids) == 2 and ids == sorted(ids)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WRONG_SECRET = {"s3": {"AWS_SECRET_ACCESS_KEY": "not-the-secret"},
                "azure": {"AZURE_STORAGE_ACCOUNT_KEY": "bm90LXRoZS1rZXk="}}


@pytest.mark.parametrize("store_target", ["s3", "azure"], indirect=True)
def test_unreachable_backend_and_wrong_credentials(store_target, stado_env, store, tmp_path):
    url = {"s3": "s3://stado/x", "azure": "az://stado/x"}[store_target.backend]
    config = tmp_path / "unreachable.toml"
    config.write_text(f'[store]\nurl = "{url}"\nendpoint = "http://127.0.0.1:{_closed_port()}"\n'
                      'allow_http = true\n'
                      'max_retries = 0\nretry_timeout = 1\nconnect_timeout = 1\n')
    got = stado({**stado_env, "STADO_CONFIG": str(config)}, "submit", "true", ok=False)
    assert got.returncode == 4 and "cannot reach" in got.stderr and len(got.stderr.strip().splitlines()) == 1
    wrong = {**stado_env, **WRONG_SECRET[store_target.backend]}
    for args in (["submit", "true"], ["status"], ["agent", "--until-idle"]):
        got = stado(wrong, *args, ok=False)
        assert got.returncode == 4 and "refused" in got.stderr, got.stderr
        assert len(got.stderr.strip().splitlines()) == 1
    assert nothing_written(store)
    missing = tmp_path / "missing.toml"
    got = stado({**stado_env, "STADO_CONFIG": str(missing)}, "status", ok=False)
    assert got.returncode == 2 and "does not exist" in got.stderr


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_unusable_work_roots_and_result_directories_are_one_line_errors(stado_env, tmp_path, store):
    from .support import run_until_idle, submit

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for root in ("/proc/nope", str(a_file), str(a_file / "below")):
        got = stado(stado_env, "agent", "--work-root", root, "--until-idle", ok=False)
        assert got.returncode == 2, got.stderr
        assert f"--work-root {root}" in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert nothing_written(store)
    job = submit(stado_env, "echo x > f; $STADO_BIN artifact put f")
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    for target in (str(a_file), "/proc/x", str(a_file / "below")):
        got = stado(stado_env, "results", job, target, ok=False)
        assert got.returncode == 2, got.stderr
        assert f"cannot write results into {target}" in got.stderr, got.stderr
        assert len(got.stderr.strip().splitlines()) == 1, got.stderr


# Every command and every text argument, given bytes that are not UTF-8 (the shell passes them; Python smuggles
# them through as lone surrogates) or an empty value where one means nothing: one line, exit 2, nothing written,
# never a traceback. "JOB" is replaced by a real job's id.
UNDECODABLE = "x\udcff"
CRON = "*/5 * * * *"
TEXT_ARGS = [
    ["submit", "BAD"], ["submit", "true", "--name", "BAD"], ["submit", "true", "--memory", "BAD"],
    ["submit", "true", "--capabilities", "BAD"], ["submit", "true", "--provider", "BAD"],
    ["submit", "true", "--timeout", "BAD"], ["submit", "true", "--input", "BAD"], ["submit", "true", "--input", "JOB:BAD"],
    ["submit", "true", "--spot", "BAD"], ["submit", "true", "--cores", "BAD"], ["submit", "true", "--priority", "BAD"],
    ["submit", "true", "--cost-cap", "BAD"], ["submit", "true", "--retries", "BAD"],
    ["status", "BAD"], ["job", "watch", "BAD"], ["job", "rerun", "BAD"], ["job", "BAD"], ["cancel", "BAD"],
    ["cancel", "JOB", "--reason", "BAD"], ["queue", "pause", "--reason", "BAD"], ["queue", "BAD"],
    ["machine", "status", "BAD"], ["machine", "may-delete", "BAD"], ["results", "BAD", "DIR"], ["repair", "BAD"],
    ["schedule", "add", "BAD", CRON, "--", "true"], ["schedule", "add", "s", "BAD", "--", "true"],
    ["schedule", "add", "s", CRON, "--tz", "BAD", "--", "true"], ["schedule", "add", "s", CRON, "--", "echo", "BAD"],
    ["schedule", "add", "s", CRON, "--memory", "BAD", "--", "true"],
    ["schedule", "rm", "BAD"], ["schedule", "pause", "BAD"], ["schedule", "resume", "BAD"],
    ["agent", "--host", "BAD"], ["agent", "--capabilities", "BAD"], ["agent", "--memory", "BAD"],
    ["agent", "--provider", "BAD"], ["agent", "--accelerator-devices", "BAD"], ["agent", "--slots", "BAD"],
    ["reap", "--margin", "BAD"], ["ui", "--host", "BAD"], ["artifact", "put", "f", "--name", "BAD"],
    ["checkpoint", "put", "f", "--name", "BAD"], ["wait", "BAD"], ["wait", "JOB", "--timeout", "BAD"],
    ["job", "hold", "BAD"], ["job", "release", "BAD"], ["BAD"],
]


def _shown(args):
    return " ".join(a.replace("BAD", "X") for a in args)


@pytest.fixture
def one_job(stado_env, store, tmp_path):
    """A finished job (so that selectors and --input have something to find), and the store's keys after it."""
    from .support import run_until_idle, submit

    job = submit(stado_env, "echo hi > f; $STADO_BIN artifact put f", "--name", "made")
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    return job, sorted(e.key for e in store.list(""))


def _refused(stado_env, store, tmp_path, one_job, args, bad):
    job, before = one_job
    argv = [bad if a == "BAD" else job if a == "JOB" else str(tmp_path / "out") if a == "DIR" else
            a.replace("BAD", bad) for a in args]
    got = stado({**stado_env, "STADO_HOST": "testhost"}, *argv, ok=False)
    assert "Traceback" not in got.stderr, got.stderr
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1, (got.returncode, got.stderr)
    assert got.stdout == ""
    assert sorted(e.key for e in store.list("")) == before
    return got.stderr


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
class TestUndecodableBytes:
    @pytest.mark.parametrize("args", TEXT_ARGS, ids=_shown)
    def test_refused_in_one_line_and_nothing_changes(self, stado_env, store, tmp_path, one_job, args):
        _refused(stado_env, store, tmp_path, one_job, args, UNDECODABLE)

    def test_a_command_is_refused_with_what_to_do(self, stado_env, store, tmp_path, one_job):
        said = _refused(stado_env, store, tmp_path, one_job, ["submit", "printf BAD"], UNDECODABLE)
        assert "not valid UTF-8" in said and "printf '\\377'" in said

    def test_a_batch_entry_escaping_them_is_refused(self, stado_env, store, tmp_path, one_job):
        batch = tmp_path / "jobs.json"
        batch.write_text('[{"command": "echo \\udcff"}]')
        said = _refused(stado_env, store, tmp_path, one_job, ["submit", "--batch", str(batch)], UNDECODABLE)
        assert "entry 1" in said and "not valid UTF-8" in said

    def test_a_config_file_holding_one_is_one_line(self, stado_env, store, tmp_path, one_job):
        config = tmp_path / "stado.toml"
        config.write_bytes(b'# caf\xe9\n[store]\nurl = "file:///tmp/x"\n')
        for args in (["status"], ["submit", "true"], ["agent", "--until-idle"], ["doctor"]):
            got = stado({**stado_env, "STADO_CONFIG": str(config)}, *args, ok=False)
            assert got.returncode == 2 and "Traceback" not in got.stderr, got.stderr
            assert "is not UTF-8 text (byte 0xe9" in got.stderr and len(got.stderr.strip().splitlines()) == 1


    def test_a_user_name_holding_them_is_recorded_as_text(self, stado_env, store, tmp_path, one_job):
        said = stado({**stado_env, "USER": UNDECODABLE}, "queue", "pause")
        assert said.stdout.startswith("queue is now paused by x\ufffd@"), said.stdout  # U+FFFD, shown as itself
        assert json.loads(store.get(keys.QUEUE_PAUSE).data)["by"].startswith("x\ufffd@")


EMPTY_ARGS = [
    ["status", ""], ["submit", "true", "--memory", ""], ["submit", "true", "--capabilities", ""],
    ["submit", "true", "--provider", ""], ["submit", "true", "--timeout", ""], ["submit", "true", "--name", ""],
    ["submit", "true", "--upload", ""], ["submit", "--batch", ""], ["cancel", "JOB", "--reason", ""],
    ["queue", "pause", "--reason", ""], ["job", "watch", ""], ["results", "JOB", ""], ["repair", ""],
    ["schedule", "add", "s", CRON, "--tz", "", "--", "true"], ["schedule", "add", "s", CRON, "--provider", "", "--", "true"],
    ["schedule", "rm", ""], ["agent", "--host", ""], ["agent", "--host", "a/b"], ["agent", "--memory", ""],
    ["agent", "--capabilities", ""], ["agent", "--provider", ""], ["agent", "--work-root", ""], ["ui", "--host", ""],
    ["artifact", "put", "f", "--name", ""], ["wait", ""], ["job", "hold", ""], ["job", "release", ""],
]


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
@pytest.mark.parametrize("args", EMPTY_ARGS, ids=lambda args: " ".join(a or "''" for a in args))
def test_empty_values_that_mean_nothing_are_refused(stado_env, store, tmp_path, one_job, args):
    _refused(stado_env, store, tmp_path, one_job, args, UNDECODABLE)


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_an_input_its_completed_producer_never_made_is_refused(stado_env, store, tmp_path, one_job):
    job, before = one_job
    for selector in ("made", job):
        said = _refused(stado_env, store, tmp_path, one_job, ["submit", "true", "--input", f"{selector}:nosuch"], "")
        assert f"job {job} completed without an artifact named 'nosuch' (it has: f)" in said, said
    from .support import submit

    assert submit(stado_env, "cat f", "--input", "made:f")  # the artifact it did make is taken
