"""Honest errors and a safe terminal in stado: corrupt schedules, endpoints that cannot work,
other people's text escaped on the terminal."""
import time
import json
import subprocess

import pytest

from .support import STADO, stado

FILE_ONLY = pytest.mark.parametrize("store_target", ["file"], indirect=True)


@FILE_ONLY
def test_a_corrupt_schedule_is_reported_beside_the_healthy_ones_and_removable(stado_env, store):
    stado(stado_env, "schedule", "add", "good", "0 3 * * *", "--", "make", "all")
    store.put("schedules/broken.json", b"{not json")
    store.put("schedules/odd.json", json.dumps({"name": "odd"}).encode())  # JSON, but no cron nor spec
    listed = stado(stado_env, "schedule", "list")
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("good  0 3 * * * (UTC)") and lines[0].endswith("make all"), listed.stdout
    assert any(line.startswith("problem: schedules/broken.json: corrupt document") and
               "`stado schedule rm broken` removes it" in line for line in lines), listed.stdout
    assert any("schedules/odd.json" in line and "`stado schedule rm odd` removes it" in line for line in lines)
    shown = json.loads(stado(stado_env, "schedule", "list", "--json").stdout)
    assert [s["name"] for s in shown["schedules"]] == ["good"] and len(shown["problems"]) == 2
    paused = stado(stado_env, "schedule", "pause", "broken", ok=False)
    assert paused.returncode == 1 and "`stado schedule rm broken` removes it" in paused.stderr
    assert len(paused.stderr.strip().splitlines()) == 1
    for name in ("broken", "odd"):
        assert stado(stado_env, "schedule", "rm", name).stdout.startswith(f"corrupt schedule document {name} removed")
    assert [e.key for e in store.list("schedules/")] == ["schedules/good.json"]
    assert json.loads(stado(stado_env, "schedule", "list", "--json").stdout)["problems"] == []
    assert stado(stado_env, "schedule", "rm", "good").stdout.startswith("schedule good removed")


class _Site:
    """A plain web server (Python's own), serving a directory: something that answers HTTP but is no store."""

    def __init__(self, root):
        import functools
        import http.server
        import threading

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *a, **k: None
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@FILE_ONLY
@pytest.mark.parametrize("url, path", [("s3://site/q", ""), ("az://site/q", "/devstoreaccount1")])
def test_a_plain_web_server_as_the_endpoint_is_not_an_object_store(stado_env, tmp_path, url, path):
    root = tmp_path / "www"
    root.mkdir()
    site = _Site(root)
    try:
        config = tmp_path / "web.toml"
        config.write_text(f'[store]\nurl = "{url}"\nendpoint = "{site.endpoint}{path}"\nallow_http = true\n'
                          'max_retries = 0\n' + ('region = "us-east-1"\n' if url.startswith("s3") else "emulator = true\n"))
        env = {**stado_env, "STADO_CONFIG": str(config), "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}
        for args in (["status"], ["submit", "true"], ["schedule", "list"], ["agent", "--until-idle", "--work-root",
                                                                            str(tmp_path / "w")]):
            got = stado(env, *args, ok=False)
            assert got.returncode == 4, (args, got.stderr)
            assert "is not an object store (" in got.stderr and "check the endpoint in STADO_CONFIG" in got.stderr
            assert len(got.stderr.strip().splitlines()) == 1, got.stderr
        (root / "site").mkdir()  # now the listing's path exists: the server answers 200 with an HTML page
        got = stado(env, "status", ok=False)
        assert got.returncode == 4 and "is not an object store" in got.stderr, got.stderr
        assert len(list(root.rglob("*"))) == 1  # nothing was written there
    finally:
        site.close()


TITLE = "\x1b]0;owned\x07"  # retitles a terminal that prints it raw


def _no_control(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\r"), repr(text)


@FILE_ONLY
def test_other_people_s_text_is_escaped_on_the_terminal_and_exact_in_json_and_output(stado_env, store, tmp_path):
    from stado.core.documents import iso

    from .support import run_until_idle, submit

    command = f"printf '{TITLE}'\necho two"
    job = submit(stado_env, command, "--name", "evil")
    table = stado(stado_env, "status").stdout
    _no_control(table)
    rows = [line for line in table.splitlines() if line.startswith(job)]
    assert len(rows) == 1 and rows[0].endswith("printf '\\e]0;owned\\x07'\\necho two"), table
    # header, the one job, the counts, and that no agent serves the queue
    assert len(table.splitlines()) == 4 and "no live agent serves this queue" in table.splitlines()[3]
    details = stado(stado_env, "status", "evil").stdout
    _no_control(details)
    assert "command:          printf '\\e]0;owned\\x07'\\necho two" in details, details
    assert json.loads(stado(stado_env, "status", "evil", "--json").stdout)["command"] == command
    assert json.loads(stado(stado_env, "status", "--json").stdout)["jobs"][0]["command"] == command

    paused = stado(stado_env, "queue", "pause", "--reason", f"maintenance{TITLE}\nsecond line").stdout
    _no_control(paused)
    assert paused.count("\n") == 1 and "maintenance\\e]0;owned\\x07\\nsecond line" in paused
    shown = stado(stado_env, "status").stdout
    _no_control(shown)
    assert shown.startswith("queue PAUSED by ") and "maintenance\\e]0;owned\\x07\\nsecond line" in shown
    assert json.loads(stado(stado_env, "status", "--json").stdout)["paused"]["reason"] == f"maintenance{TITLE}\nsecond line"
    stado(stado_env, "queue", "resume")

    stado(stado_env, "schedule", "add", "tick", "0 3 * * *", "--", "echo", f"a{TITLE}\nb")
    listed = stado(stado_env, "schedule", "list").stdout
    _no_control(listed)
    assert listed.count("\n") == 1 and listed.rstrip().endswith("echo a\\e]0;owned\\x07\\nb"), listed

    # An agent record someone else wrote (another stado, or by hand): its host and capabilities are escaped too.
    store.put("agents/fake.json", json.dumps({
        "instance_ref": f"local@{TITLE}", "last_seen": iso(time.time()), "live_for": 600, "slots": 1, "running": [],
        "capabilities": [f"gpu{TITLE}"], "provider": f"p{TITLE}"}).encode())
    agents = stado(stado_env, "status").stdout
    _no_control(agents)
    assert "local@\\e]0;owned\\x07 [0/1 slots busy]" in agents and "capabilities gpu\\e]0;owned\\x07" in agents, agents
    store.delete("agents/fake.json")

    # Error messages quote other people's text escaped too.
    missing = stado(stado_env, "submit", "true", "--upload", f"no{TITLE}such", ok=False)
    _no_control(missing.stderr)
    assert "no\\e]0;owned\\x07such" in missing.stderr

    # The job's own output is its bytes: `job watch` passes them through as they were written.
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    watched = subprocess.run([STADO, "job", "watch", job], env=stado_env, capture_output=True, timeout=60)
    assert watched.returncode == 0 and watched.stdout == TITLE.encode() + b"two\n", watched


@FILE_ONLY
def test_schedule_add_takes_every_submit_flag_and_its_fired_jobs_get_them(stado_env, store, tmp_path):
    """--name, --input and --upload too (they were refused): the input resolved and the upload stored once, when
    the schedule is added; each fired job then receives both."""
    import signal

    from .support import Agent, machine_status, run_until_idle, submit, wait_for

    producer = submit(stado_env, "echo weights > model.bin; $STADO_BIN artifact put model.bin", "--name", "train")
    assert run_until_idle(stado_env, tmp_path, name="producer").returncode == 0
    upload = tmp_path / "settings.txt"
    upload.write_text("lr=0.1\n")
    out = tmp_path / "seen"
    stado(stado_env, "schedule", "add", "nightly", "* * * * * *", "--name", "fired", "--priority", "7",
          "--input", "train:model.bin", "--upload", str(upload), "--capabilities", "gpu", "--timeout", "1m",
          "--", "cat", "model.bin", "settings.txt", ">>", str(out))
    spec = json.loads(stado(stado_env, "schedule", "list", "--json").stdout)["schedules"][0]["spec"]
    assert (spec["name"], spec["priority"], spec["capabilities"], spec["timeout"]) == ("fired", 7, ["gpu"], 60)
    model, settings = spec["inputs"]
    assert (model["job"], model["name"], model["given"]) == (producer, "model.bin", "train")
    assert settings["name"] == "settings.txt" and settings["upload"] and settings["size"] == 7
    assert [e.key for e in store.list(f"status/{settings['job']}/")] == [
        f"status/{settings['job']}/uploads/settings.txt"]  # stored once, under an id no job takes
    upload.write_text("changed afterwards\n")  # what was stored is what runs
    agent = Agent(stado_env, tmp_path, "--capabilities", "gpu")
    try:
        wait_for(lambda: out.exists() and out.read_text().count("lr=0.1") >= 1, timeout=30,
                 message="a fired job ran with its input and upload")
    finally:
        agent.proc.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)
    assert out.read_text().startswith("weights\nlr=0.1\n"), out.read_text()
    fired = [r for r in json.loads(stado(stado_env, "status", "--json", "--all").stdout)["jobs"] if r["name"] == "fired"]
    assert fired and machine_status(stado_env, fired[0]["id"])["state"] in ("completed", "running")
    uploads = [e.key for e in store.list("status/") if "/uploads/" in e.key]
    again = stado(stado_env, "schedule", "add", "nightly", "* * * * *", "--upload", str(upload), "--", "true", ok=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert [e.key for e in store.list("status/") if "/uploads/" in e.key] == uploads  # nothing stored for it


@FILE_ONLY
def test_stado_wait_has_jobman_wait_s_exit_table(stado_env, tmp_path):
    import signal

    from .support import Agent, submit

    gate = tmp_path / "gate"
    ok = submit(stado_env, "true", "--name", "ok")
    three = submit(stado_env, "exit 3")
    gated = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done; kill -TERM $$")
    # Nothing runs yet: a wait with a timeout gives up with 120, naming what is unfinished; the jobs go on.
    started = time.monotonic()
    gave_up = stado(stado_env, "wait", ok, three, "--timeout", "0.3s", ok=False)
    assert gave_up.returncode == 120 and time.monotonic() - started < 10
    assert f"wait timed out; still unfinished: {ok}, {three} (they go on)" in gave_up.stderr
    assert stado(stado_env, "wait", "nosuch", ok, ok=False).returncode == 3  # an unknown job: nothing waited for
    agent = Agent(stado_env, tmp_path, "--slots", "3")
    try:
        waiting = subprocess.Popen([STADO, "wait", "ok", three, gated, "--interval", "0.2"], env=stado_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        both = stado(stado_env, "wait", ok, "ok", "--json")  # the same job twice is waited for once
        assert both.returncode == 0 and [j["id"] for j in json.loads(both.stdout)["jobs"]] == [ok]
        assert waiting.poll() is None  # the gated job still runs
        gate.touch()
        out, err = waiting.communicate(timeout=30)
        assert waiting.returncode == 3, err  # the first, in argument order, that did not succeed
        # Named by name and short id (these jobs have no name: the short id alone), never the bare UUID.
        lines = [line.rsplit(": ", 1) for line in err.splitlines()]
        assert [said for _, said in lines] == ["failed (exit 3)", "failed (exit 143)"] and out == ""
        assert [job.startswith(short) and len(short) < len(job) for (short, _), job in zip(lines, (three, gated))] \
            == [True, True]
        got = json.loads(stado(stado_env, "wait", gated, ok, "--json", ok=False).stdout)
        assert got["exit_status"] == 143 and [j["exit_status"] for j in got["jobs"]] == [143, 0]
        queued = submit(stado_env, f"touch {tmp_path}/ran", "--capabilities", "none-here")
        stado(stado_env, "cancel", queued)
        assert stado(stado_env, "wait", queued, ok=False).returncode == 125
    finally:
        agent.proc.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)


def test_job_hold_and_release(stado_env, store, tmp_path):
    """A held job is not claimed; released, it runs in its place (one slot runs a, b, c in submission order though a
    was held and released); holding or releasing a job that is not queued says so and exits 1."""
    from .support import machine_status, run_until_idle, submit

    order = tmp_path / "order"
    a, b, c = (submit(stado_env, f"echo {n} >> {order}", "--name", n) for n in "abc")
    said = stado(stado_env, "job", "hold", "a").stdout
    assert said.startswith(f"job {a} held: no agent claims it until `stado job release {a}`"), said
    assert stado(stado_env, "job", "hold", a).stdout.startswith(f"job {a} was already held by ")
    shown = json.loads(stado(stado_env, "job", "hold", a, "--json").stdout)
    assert shown["changed"] is False and shown["held"]["by"]
    assert json.loads(stado(stado_env, "status", "a", "--json").stdout)["held"]["by"] == shown["held"]["by"]
    assert any(line.startswith(a) and "queued/held" in line for line in stado(stado_env, "status").stdout.splitlines())
    stado(stado_env, "job", "release", "a")
    stado(stado_env, "job", "hold", "c")
    from stado.ui.reads import board

    queue = {row["id"]: row for row in board(store, now=time.time())["queue"]["jobs"]}  # the dashboard's rows say it too
    assert queue[c]["held"]["by"] and queue[a]["held"] is None
    assert run_until_idle(stado_env, tmp_path).returncode == 0  # c is held: the agent is idle without it
    assert order.read_text() == "a\nb\n"
    assert machine_status(stado_env, c)["state"] == "queued"
    done = stado(stado_env, "job", "hold", b, ok=False)
    assert done.returncode == 1 and f"job {b} has ended (completed): only a queued job can be held" in done.stderr
    assert stado(stado_env, "job", "release", "b", ok=False).returncode == 1
    assert stado(stado_env, "job", "release", c).stdout.startswith(f"job {c} released")
    assert stado(stado_env, "job", "release", c).stdout.startswith(f"job {c} was not held; nothing changed")
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    assert order.read_text() == "a\nb\nc\n"
    assert stado(stado_env, "job", "hold", "nosuch", ok=False).returncode == 3


@FILE_ONLY
def test_an_agent_s_log_escapes_other_people_s_text(stado_env, tmp_path):
    from .support import run_until_idle, submit

    submit(stado_env, "true")
    stado(stado_env, "queue", "pause", "--reason", f"upgrade{TITLE}")
    agent = run_until_idle(stado_env, tmp_path)
    log = agent.log_path.read_bytes().decode()
    assert "queue paused by " in log and "(upgrade\\e]0;owned\\x07)" in log, log
    _no_control(log)


@FILE_ONLY
def test_holding_a_running_job_says_so_and_changes_nothing(stado_env, store, tmp_path):
    import signal

    from .support import Agent, machine_status, submit, wait_for

    gate = tmp_path / "gate"
    job = submit(stado_env, f"while [ ! -e {gate} ]; do sleep 0.05; done")
    agent = Agent(stado_env, tmp_path)
    try:
        wait_for(lambda: machine_status(stado_env, job)["state"] == "running", timeout=30, message="running")
        before = cas_state(store, job)
        for verb in ("hold", "release"):
            got = stado(stado_env, "job", verb, job, ok=False)
            assert got.returncode == 1 and len(got.stderr.strip().splitlines()) == 1, got.stderr
            assert f"job {job} is running on local@testhost, not queued: only a queued job can be" in got.stderr
        assert cas_state(store, job) == before
        gate.touch()
        assert stado(stado_env, "wait", job).returncode == 0
    finally:
        gate.touch()
        agent.proc.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)


def cas_state(store, job):
    """The job's queue and running keys (running/ is renewed every poll: its version moves on by itself)."""
    return sorted(e.key for prefix in ("queue/", "running/", "ready/") for e in store.list(prefix) if job in e.key)
