"""A month of daily use, through the real CLI: several jobs at once (ids, names, --state, --name), batch name
templates, --env, the cancel reason, and agents in `stado status` (short ids, the window, `agent forget`)."""
import json
import signal
import sys

import pytest

from .support import Agent, machine_status, run_until_idle, stado, status_json, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file"], indirect=True)


def _state(env, job) -> str:
    return machine_status(env, job)["state"]


def _completed(env, tmp_path, command="true", name="done") -> str:
    job = submit(env, command, "--name", name)
    assert run_until_idle(env, tmp_path, name=f"agent-{name}").returncode == 0
    assert _state(env, job) in ("completed", "failed")
    return job


def test_a_cancel_of_several_jobs_does_each_one_and_names_those_it_could_not(stado_env, tmp_path):
    done = _completed(stado_env, tmp_path)
    first, second = submit(stado_env, "true", "--name", "q-1"), submit(stado_env, "true", "--name", "q-2")
    proc = stado(stado_env, "cancel", done, "q-1", "q-2", "--reason", "not needed", ok=False)
    assert proc.returncode == 1, proc.stderr  # the first job not done: it had already ended otherwise
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"{done}: already completed")
    assert lines[1] == f"{first}: cancelled before it started" and lines[2].startswith(second)
    assert proc.stderr.strip() == f"stado: 1 of 3 job(s) not cancelled: {done} (each one's line says why)"
    assert _state(stado_env, first) == _state(stado_env, second) == "cancelled"  # the others were done all the same
    shown = json.loads(stado(stado_env, "status", "q-1", "--json").stdout)
    assert (shown["cancel_reason"], shown["outcome"]) == ("not needed", "cancelled")
    assert "cancel_reason:    not needed" in stado(stado_env, "status", "q-1").stdout


def test_a_job_that_names_nothing_stops_the_command_before_anything_is_done(stado_env):
    queued = submit(stado_env, "true", "--name", "waiting-one")
    proc = stado(stado_env, "cancel", "waiting-one", "no-such-job", ok=False)
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.strip() == "stado: no job named 'no-such-job': see `stado status` for names and ids"
    assert _state(stado_env, queued) == "queued"
    for args in (("cancel", "--state", "running"), ("job", "hold", "--name", "nothing-*"),
                 ("wait", "--state", "failed")):
        proc = stado(stado_env, *args, ok=False)
        assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "no job matches" in proc.stderr
    proc = stado(stado_env, "cancel", "--state", "sleeping", ok=False)
    assert proc.returncode == 2 and "bad --state 'sleeping'" in proc.stderr
    proc = stado(stado_env, "cancel", ok=False)
    assert proc.returncode == 2 and "--state STATE or --name GLOB" in proc.stderr
    assert _state(stado_env, queued) == "queued"


def test_filters_choose_and_narrow(stado_env, tmp_path):
    done = _completed(stado_env, tmp_path, name="sweep-0")
    ids = stado(stado_env, "submit", "--batch", _lines(tmp_path, "true", "true", "true"),
                "--name", "sweep-{n}").stdout.split()
    other = submit(stado_env, "true", "--name", "other")
    held = stado(stado_env, "job", "hold", "--name", "sweep-*", "--state", "queued")  # sweep-0 has ended: not chosen
    assert [line.split()[1] for line in held.stdout.splitlines()] == ids
    assert all(machine_status(stado_env, job)["state"] == "queued" for job in ids + [other])
    listing = json.loads(stado(stado_env, "status", "--state", "queued", "--name", "sweep-*", "--json").stdout)
    assert sorted(j["id"] for j in listing["jobs"]) == sorted(ids) and listing["matched"] == 3
    assert all(j["held"] for j in listing["jobs"])
    table = stado(stado_env, "status", "--state", "queued").stdout
    assert other in table and done not in table and "4 job(s) shown: those that match --state queued" in table
    assert stado(stado_env, "status", "--state", "failed").stdout.strip() == "no job matches --state failed"
    # Jobs given and a filter: those of them that match.
    proc = stado(stado_env, "job", "release", "sweep-0", ids[0], "--state", "queued")
    assert proc.stdout.splitlines() == [f"job {ids[0]} released: it is claimed in its place in the queue again"]
    proc = stado(stado_env, "job", "hold", done, ids[0], ok=False)
    assert proc.returncode == 1 and f"job {done} has ended (completed)" in proc.stdout
    assert "1 of 2 job(s) not held" in proc.stderr
    assert json.loads(stado(stado_env, "status", ids[0], "--json").stdout)["held"]  # held all the same
    details = stado(stado_env, "status", ids[1], ids[2]).stdout
    assert details.count("state:            queued") == 2 and "\n\nid:" in details
    several = json.loads(stado(stado_env, "status", ids[1], "other", "--json").stdout)
    assert [j["id"] for j in several["jobs"]] == [ids[1], other]


def test_rerun_and_wait_over_several_jobs(stado_env, tmp_path):
    good = submit(stado_env, "true", "--name", "run-good")
    bad = submit(stado_env, "exit 3", "--name", "run-bad")
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    proc = stado(stado_env, "wait", "--name", "run-*", ok=False)
    assert proc.returncode == 3
    [line] = proc.stderr.splitlines()
    assert line.startswith("run-bad (") and line.endswith("): failed (exit 3)") and bad not in line
    short = line[len("run-bad ("):line.index(")")]
    assert bad.startswith(short) and len(short) < len(bad)
    assert stado(stado_env, "status", short).stdout.startswith(f"id:               {bad}")  # it finds the job
    proc = stado(stado_env, "job", "rerun", "--name", "run-*", "--key", "k1", ok=False)
    assert proc.returncode == 2 and "--key names one rerun" in proc.stderr
    proc = stado(stado_env, "job", "rerun", "run-good", "run-bad")
    reruns = [line.split() for line in proc.stdout.splitlines()]
    assert [(words[1:]) for words in reruns] == [["rerun", "of", good], ["rerun", "of", bad]]
    assert [machine_status(stado_env, words[0])["state"] for words in reruns] == ["queued", "queued"]
    data = json.loads(stado(stado_env, "job", "rerun", good, "--json").stdout)
    assert data["rerun_of"] == good  # one job alone answers as before


def test_env_is_set_by_the_agent_and_shown_masked(stado_env, tmp_path):
    dump = tmp_path / "env.json"
    job = submit(stado_env, f"{sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))' > {dump}; "
                            "echo token=$API_TOKEN mode=$MODE",
                 "--cores", "3", "--env", "MODE=fast", "--env", "EMPTY=", "--env", "API_TOKEN=s3cr3t-t0ken",
                 "--env", "EQ=a=b", "--name", "with-env")
    details = stado(stado_env, "status", "with-env").stdout
    assert "env:              API_TOKEN=*** EMPTY= EQ=a=b MODE=fast" in details and "s3cr3t" not in details
    data = json.loads(stado(stado_env, "status", "with-env", "--json").stdout)
    assert data["env"]["API_TOKEN"] == "***" and data["spec"]["env"]["API_TOKEN"] == "***"
    assert run_until_idle(stado_env, tmp_path, "--cores", "4").returncode == 0
    assert _state(stado_env, job) == "completed"
    seen = json.loads(dump.read_text())
    assert (seen["MODE"], seen["EMPTY"], seen["EQ"], seen["API_TOKEN"]) == ("fast", "", "a=b", "s3cr3t-t0ken")
    assert [seen[k] for k in ("CARGO_BUILD_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")] \
        == ["3"] * 4
    assert stado(stado_env, "logs", job).stdout == "token=[REDACTED] mode=fast\n"  # its own secret, as the agent's
    rerun = stado(stado_env, "job", "rerun", job).stdout.strip()  # the spec travels whole
    assert json.loads(stado(stado_env, "status", rerun, "--json").stdout)["env"]["MODE"] == "fast"


@pytest.mark.parametrize("flag, said", [("NOEQUALS", "bad --env 'NOEQUALS': use --env NAME=VALUE"),
                                        ("=x", "bad --env: empty variable name"),
                                        ("1X=y", "bad --env name '1X'"),
                                        ("WC_JOB_ID=x", "the agent sets WC_JOB_ID for every job")])
def test_a_bad_env_is_refused_in_one_line_and_nothing_is_written(stado_env, flag, said):
    proc = stado(stado_env, "submit", "true", "--env", flag, ok=False)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert said in line
    assert status_json(stado_env)["jobs"] == []


def _lines(tmp_path, *commands) -> str:
    path = tmp_path / "batch.txt"
    path.write_text("".join(f"{c}\n" for c in commands))
    return str(path)


def test_a_line_batch_names_its_jobs_from_a_template_and_runs_braces_as_written(stado_env, tmp_path):
    out = tmp_path / "braces.txt"
    batch = _lines(tmp_path, f"{sys.executable} -c 'd = {{}}; print(d)' > {out}", "# a comment", "", "echo {} {{}}")
    ids = stado(stado_env, "submit", "--batch", batch, "--name", "sweep-{n}", "--env", "K=V").stdout.split()
    names = {j["id"]: j["name"] for j in status_json(stado_env)["jobs"]}
    assert [names[i] for i in ids] == ["sweep-1", "sweep-2"]
    assert machine_status(stado_env, "sweep-2")["command"] == "echo {} {{}}"
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    assert out.read_text() == "{}\n"
    assert stado(stado_env, "logs", "sweep-2").stdout == "{} {{}}\n"
    listed = tmp_path / "jobs.json"
    listed.write_text(json.dumps([{"command": "true"}, {"command": "true", "name": "own-name"}]))
    ids = stado(stado_env, "submit", "--batch", str(listed), "--name", "j-{n}").stdout.split()
    names = {j["id"]: j["name"] for j in status_json(stado_env)["jobs"]}
    assert [names[i] for i in ids] == ["j-1", "own-name"]
    before = len(status_json(stado_env)["jobs"])
    for template, said in (("bad/{n}", "bad --name template 'bad/{n}'"), ("plain", "--name names one job")):
        proc = stado(stado_env, "submit", "--batch", batch, "--name", template, ok=False)
        assert proc.returncode == 2 and said in proc.stderr and proc.stdout == ""
    assert len(status_json(stado_env)["jobs"]) == before  # nothing written


def test_status_shows_agents_by_short_id_hides_long_gone_ones_and_forgets_a_dead_one(stado_env, tmp_path):
    (tmp_path / "live").mkdir()
    dead = Agent(stado_env, tmp_path, name="dead", host="host-a")
    live = Agent(stado_env, tmp_path / "live", name="live", host="host-b")
    try:
        wait_for(lambda: len(status_json(stado_env)["agents"]) == 2, timeout=30, message="both agents' records")
        ids = {a["instance_ref"]: a["agent"] for a in status_json(stado_env)["agents"]}
        dead.proc.send_signal(signal.SIGKILL)
        dead.proc.wait(10)
        wait_for(lambda: [a["agent"] for a in status_json(stado_env)["stale_agents"]] == [ids["local@host-a"]],
                 timeout=30, message="the killed agent's record to go stale")
        table = stado(stado_env, "status").stdout
        stale = next(line for line in table.splitlines() if line.startswith("  local@host-a "))
        short = stale.rsplit("; agent ", 1)[1]
        assert ids["local@host-a"].startswith(short) and short != ids["local@host-a"] and "last seen" in stale
        assert any(line.startswith("  local@host-b ") and "slots busy" in line for line in table.splitlines())
        hidden = stado(stado_env, "status", "--agents-window", "0s").stdout
        assert "local@host-a" not in hidden
        assert "1 agent(s) silent longer than 0 s not shown (--all-agents)" in hidden
        assert "local@host-a" in stado(stado_env, "status", "--agents-window", "0s", "--all-agents").stdout
        gone = json.loads(stado(stado_env, "status", "--agents-window", "0s", "--json").stdout)["gone_agents"]
        assert [a["agent"] for a in gone] == [ids["local@host-a"]]  # --json stays complete
        proc = stado(stado_env, "agent", "forget", ids["local@host-b"], ok=False)
        assert proc.returncode == 1 and "is live" in proc.stderr and "nothing was removed" in proc.stderr
        assert stado(stado_env, "agent", "forget", "ffffffff", ok=False).returncode == 3
        said = stado(stado_env, "agent", "forget", short).stdout
        assert said.startswith(f"agent {ids['local@host-a']} on local@host-a forgotten")
        after = status_json(stado_env)
        assert after["stale_agents"] == [] and [a["instance_ref"] for a in after["agents"]] == ["local@host-b"]
    finally:
        dead.stop()
        live.stop()
