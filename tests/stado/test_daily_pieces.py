"""The pure pieces behind daily use: --env parsing and masking, the environment a job is given, the $STADO_BIN shim
and the work root's store file, batch name templates, short ids, selections over a real local-directory store."""
import os
import stat
import subprocess

import pytest

from stado.agent.environment import THREAD_NAMES, job_environment, shim_text, store_env_text
from stado.agent.hostfiles import store_env_file
from stado.commands.batch import name_template
from stado.core import documents as d
from stado.core import keys
from stado.core.errors import BadInput, JobNotFound
from stado.core.spec import JobSpec, parse_env, shown_spec, spec_from_json
from stado.objectstore.file import FileStore
from stado.queue.selection import select, short_ids


def test_parse_env_takes_the_first_equals_and_refuses_what_no_shell_could_set():
    assert parse_env("A=b=c") == ("A", "b=c") and parse_env("_X1=") == ("_X1", "")
    for text, said in (("A", "no '='"), ("=v", "empty variable name"), ("9A=v", "bad --env name"),
                       ("A-B=v", "bad --env name"), ("STADO_BIN=x", "the agent sets STADO_BIN"),
                       ("A=x\0y", "without NUL")):
        with pytest.raises(BadInput, match=said):
            parse_env(text)


def test_a_spec_keeps_its_env_and_an_older_spec_reads_the_same():
    spec = JobSpec("true", env=(("A", "1"), ("MY_TOKEN", "abcdefgh")))
    raw = spec.to_json()
    assert raw["env"] == {"A": "1", "MY_TOKEN": "abcdefgh"}
    assert spec_from_json(raw) == spec
    assert "env" not in JobSpec("true").to_json()  # absent when empty
    assert shown_spec(raw)["env"] == {"A": "1", "MY_TOKEN": "***"} and raw["env"]["MY_TOKEN"] == "abcdefgh"
    with pytest.raises(BadInput):
        spec_from_json(dict(raw, env={"A": 1}))


def test_the_job_environment_has_the_thread_counts_its_env_and_the_agents_own_last():
    env = job_environment({"PATH": "/bin", "OMP_NUM_THREADS": "64", "CUDA_VISIBLE_DEVICES": "0,1"},
                          stado_bin="/s", job_id="J", started_at="T", inputs_json="[]", inputs_file="/f", cores=3,
                          devices=("1",), spec_env=(("OMP_NUM_THREADS", "1"), ("CUDA_VISIBLE_DEVICES", "0"),
                                                    ("PATH", "/opt/bin"), ("MODE", "x")))
    assert [env[k] for k in THREAD_NAMES] == ["3", "1", "3", "3"]  # the job's own thread count wins over --cores
    assert env["CUDA_VISIBLE_DEVICES"] == "1"  # the devices reserved, whatever the job's env says
    assert (env["PATH"], env["MODE"], env["WC_JOB_ID"]) == ("/opt/bin", "x", "J")


def test_the_shim_holds_no_secret_and_reaches_the_store_file(tmp_path):
    root = tmp_path / "root"
    (root / "agents").mkdir(parents=True, mode=0o700)
    store_env = {"STADO_CONFIG": "/etc/stado.toml", "AWS_SECRET_ACCESS_KEY": "it's-Zq9-hidden", "AWS_SESSION_TOKEN": None}
    path = store_env_file(str(root), store_env_text(store_env))
    assert store_env_file(str(root), store_env_text(store_env)) == path  # the same content, the same file
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and os.path.dirname(path) == str(root / "agents")
    other = store_env_file(str(root), store_env_text(dict(store_env, STADO_CONFIG="/other.toml")))
    assert other != path  # another store's agents never overwrite it
    shim = tmp_path / "stado"
    shim.write_text(shim_text("/usr/bin/env", path, "J"))
    shim.chmod(0o700)
    assert "Zq9" not in shim.read_text()
    ran = subprocess.run([str(shim)], env={"PATH": os.environ["PATH"], "AWS_SESSION_TOKEN": "mine"},
                         capture_output=True, text=True)
    got = dict(line.split("=", 1) for line in ran.stdout.splitlines())
    assert got["AWS_SECRET_ACCESS_KEY"] == "it's-Zq9-hidden" and "AWS_SESSION_TOKEN" not in got
    os.unlink(path)
    ran = subprocess.run([str(shim)], capture_output=True, text=True)
    assert ran.returncode == 4 and "store settings of the agents of this work root are gone" in ran.stderr


def test_name_templates_number_jobs_and_say_what_they_made():
    assert name_template("sweep-{n}", 12) == "sweep-12" and name_template("{n}.x-{n}", 1) == "1.x-1"
    with pytest.raises(BadInput, match="it makes 'a b-1'"):
        name_template("a b-{n}", 1)


def test_short_ids_are_the_shortest_prefixes_that_tell_ids_apart():
    ids = ["01a23f21-c84e-7870-909f-710de564c176", "01a23f21-c84e-7871-a413-efd0335f9f29",
           "01b00000-0000-7000-8000-000000000000"]
    shown = short_ids(ids)
    assert shown == {ids[0]: "01a23f21-c84e-7870", ids[1]: "01a23f21-c84e-7871", ids[2]: "01b00000"}
    assert all(i.startswith(s) for i, s in shown.items())


def _put(store, job_id: str, name: str | None, state: str = "queued") -> None:
    doc = d.queued_doc(job_id, JobSpec("true", name=name).to_json(), now=0.0, submitter="t", nonce=job_id[-6:])
    store.put_if_absent(keys.state_key(state, job_id), d.encode(doc.raw))
    if name:
        store.put(keys.name_entry(name, job_id), job_id.encode())


def test_select_finds_every_job_given_first_and_filters_narrow(tmp_path):
    store = FileStore(str(tmp_path / "store"))
    a, b, c = ("0193aa00-1111-7000-8000-00000000000" + str(i) for i in (1, 2, 3))
    _put(store, a, "sweep-1")
    _put(store, b, "sweep-2", state="failed")
    _put(store, c, "other")
    store.put(keys.name_entry("sweep-9", "0193aa00-1111-7000-8000-000000000009"), b"never written")
    assert select(store, ["sweep-2", a, a]) == [b, a]  # in the order given, each once
    assert select(store, [], name="sweep-*") == [a, b]  # a name entry whose job was never written: skipped
    assert select(store, [], state="queued") == [a, c]
    assert select(store, [], name="sweep-*", state="failed") == [b]
    assert select(store, [a, c], name="sweep-*") == [a]
    with pytest.raises(JobNotFound, match="no job matches --state running"):
        select(store, [], state="running")
    with pytest.raises(JobNotFound):
        select(store, [a, "missing"])
    with pytest.raises(BadInput, match="bad --state"):
        select(store, [a], state="done")


def test_a_batch_entrys_env_table_is_set_over_the_env_flags(tmp_path):
    from types import SimpleNamespace

    from stado.commands.batch import read_batch, submission_from_args

    args = SimpleNamespace(name="b-{n}", priority=0, capabilities=[], cores=2, memory=None, accelerators=0,
                           provider=[], spot="allow", cost_cap=None, timeout=None, retries=0, input=[], upload=[],
                           key=None, batch=str(tmp_path / "b.toml"), env=["A=flag", "B=flag"])
    (tmp_path / "b.toml").write_text('[[job]]\ncommand = "true"\nenv = {B = "entry", C = "entry"}\n\n'
                                     '[[job]]\ncommand = "false"\nname = "own"\n')
    first, second = read_batch(args.batch, defaults=submission_from_args(args, command="true"))
    assert dict(first.spec.env) == {"A": "flag", "B": "entry", "C": "entry"} and first.spec.name == "b-1"
    assert dict(second.spec.env) == {"A": "flag", "B": "flag"} and second.spec.name == "own"
    (tmp_path / "b.toml").write_text('[[job]]\ncommand = "true"\nenv = {B = 1}\n')
    with pytest.raises(BadInput, match="job 1: env must be a table"):
        read_batch(args.batch, defaults=submission_from_args(args, command="true"))
