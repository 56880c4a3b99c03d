"""`stado submit --key KEY`, a batch's `key` field and `stado job rerun --key`, as a script uses them: the same
command run again returns the same job; the key given another request is refused in one line, nothing written."""
import json

import pytest

from .support import run_until_idle, stado

FILE_ONLY = pytest.mark.parametrize("store_target", ["file"], indirect=True)


def everything(store):
    return sorted((e.key, store.get(e.key).data) for e in store.list(""))


@FILE_ONLY
def test_the_same_keyed_submit_again_returns_its_job(stado_env, store):
    first = stado(stado_env, "submit", "--key", "deploy-7", "--name", "deploy", "make deploy")
    again = stado(stado_env, "submit", "--key", "deploy-7", "--name", "deploy", "make deploy", "--json")
    job = first.stdout.strip()
    assert json.loads(again.stdout) == {"jobs": [{"id": job, "name": "deploy", "queued": True, "existing": True,
                                                  "indexed": True}]}
    assert [j["id"] for j in json.loads(stado(stado_env, "status", "--json", "--all").stdout)["jobs"]] == [job]
    before = everything(store)
    for other in (["make deploy", "--cores", "2"], ["make clean"]):
        refused = stado(stado_env, "submit", "--key", "deploy-7", "--name", "deploy", *other, ok=False)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.startswith(f"stado: --key deploy-7 already submitted job {job}, with another command "
                                         "or other flags; nothing was submitted")
        assert len(refused.stderr.strip().splitlines()) == 1
    assert everything(store) == before


@FILE_ONLY
def test_a_keyed_job_that_ran_is_returned_not_run_again(stado_env, store, tmp_path):
    ran = tmp_path / "ran.txt"
    job = stado(stado_env, "submit", "--key", "once", f"echo x >> {ran}").stdout.strip()
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    assert stado(stado_env, "submit", "--key", "once", f"echo x >> {ran}").stdout.strip() == job
    assert run_until_idle(stado_env, tmp_path, name="again").returncode == 0
    assert ran.read_text() == "x\n"


@FILE_ONLY
def test_bad_keys_are_one_line_and_write_nothing(stado_env, store, tmp_path):
    lines = tmp_path / "two.txt"
    lines.write_text("true\nfalse\n")
    for args in (["submit", "--key", "a b", "true"], ["submit", "--key", "x" * 201, "true"],
                 ["submit", "--key", "../up", "true"], ["submit", "--key", "", "true"],
                 ["submit", "--batch", str(lines), "--key", "k"]):
        got = stado(stado_env, *args, ok=False)
        assert got.returncode == 2 and got.stdout == "" and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert everything(store) == []


@FILE_ONLY
def test_a_batch_s_keys_make_it_safe_to_run_again(stado_env, store, tmp_path):
    batch = tmp_path / "jobs.json"
    batch.write_text(json.dumps([{"command": "echo a", "key": "nightly-a"}, {"command": "echo b", "key": "nightly-b"},
                                 {"command": "echo c"}]))
    first = stado(stado_env, "submit", "--batch", str(batch)).stdout.split()
    again = stado(stado_env, "submit", "--batch", str(batch)).stdout.split()
    assert again[:2] == first[:2] and again[2] != first[2]  # the entry without a key is a new job each time
    batch.write_text(json.dumps([{"command": "echo a", "key": "nightly-a"}, {"command": "echo B", "key": "nightly-b"}]))
    before = everything(store)
    refused = stado(stado_env, "submit", "--batch", str(batch), ok=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert f"--key nightly-b already submitted job {first[1]}" in refused.stderr
    assert everything(store) == before
    batch.write_text(json.dumps([{"command": "echo a", "key": "twice"}, {"command": "echo b", "key": "twice"}]))
    assert stado(stado_env, "submit", "--batch", str(batch), ok=False).returncode == 2
    assert everything(store) == before


@FILE_ONLY
def test_a_keyed_rerun_again_returns_the_same_rerun(stado_env, store, tmp_path):
    job = stado(stado_env, "submit", "true").stdout.strip()
    assert run_until_idle(stado_env, tmp_path).returncode == 0
    first = stado(stado_env, "job", "rerun", job, "--key", "rerun-1").stdout.strip()
    assert stado(stado_env, "job", "rerun", job, "--key", "rerun-1").stdout.strip() == first != job
