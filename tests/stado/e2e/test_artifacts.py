"""Artifacts: staged inside a job, uploaded with a manifest, downloaded and verified; inputs delivered."""
import hashlib
import json

import pytest

from .support import machine_status, run_until_idle, stado, submit


def test_results_round_trip_inputs_and_checksum_mismatch(stado_env, tmp_path, store):
    producer = submit(stado_env, "printf 'weights-v1' > model.bin; mkdir d; echo note > d/readme.txt; "
                      "$STADO_BIN artifact put model.bin d/readme.txt", "--name", "train")
    consumer = submit(stado_env, f"cat model.bin > {tmp_path}/seen.txt; cat \"$WC_ARTIFACT_INPUTS_FILE\" > "
                      f"{tmp_path}/inputs-file.json; printf '%s' \"$WC_ARTIFACT_INPUTS_JSON\" > {tmp_path}/inputs-env.json",
                      "--input", "train:model.bin")
    agent = run_until_idle(stado_env, tmp_path, "--slots", "2")
    assert agent.returncode == 0, agent.log()
    assert machine_status(stado_env, producer)["state"] == "completed"
    assert machine_status(stado_env, consumer)["state"] == "completed", agent.log()
    # The dependent job got the input, verified, in its work directory, and listed in both variables.
    assert (tmp_path / "seen.txt").read_text() == "weights-v1"
    listed = json.loads((tmp_path / "inputs-env.json").read_text())
    assert listed == json.loads((tmp_path / "inputs-file.json").read_text())
    assert [(i["job"], i["name"], i["size"], i["sha256"]) for i in listed] == [
        (producer, "model.bin", 10, hashlib.sha256(b"weights-v1").hexdigest())]

    out = tmp_path / "results"
    shown = json.loads(stado(stado_env, "results", "train", str(out), "--json").stdout)
    assert sorted(a["name"] for a in shown["artifacts"]) == ["model.bin", "readme.txt"]
    assert (out / "model.bin").read_bytes() == b"weights-v1" and (out / "readme.txt").read_text() == "note\n"
    manifest = json.loads(store.get(f"status/{producer}/manifest.json").data)
    assert {a["name"]: a["sha256"] for a in manifest["artifacts"]}["model.bin"] == hashlib.sha256(
        b"weights-v1").hexdigest()

    store.put(f"status/{producer}/artifacts/model.bin", b"weights-v2")  # bytes changed behind the manifest
    again = tmp_path / "again"
    bad = stado(stado_env, "results", producer, str(again), ok=False)
    assert bad.returncode == 5 and "verification failed for model.bin" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert not (again / "model.bin").exists() and (again / "readme.txt").exists()


def test_a_path_traversal_artifact_name_is_refused(stado_env, tmp_path, store):
    job = submit(stado_env, "true")
    run_until_idle(stado_env, tmp_path)
    evil = b"owned"
    manifest = {"job": job, "artifacts": [{"name": "../escaped.txt", "size": len(evil),
                                           "sha256": hashlib.sha256(evil).hexdigest()}]}
    store.put(f"status/{job}/manifest.json", json.dumps(manifest).encode())
    store.put(f"status/{job}/artifacts/escaped.txt", evil)
    target = tmp_path / "out" / "inner"
    got = stado(stado_env, "results", job, str(target), ok=False)
    assert got.returncode == 5 and "unsafe artifact name '../escaped.txt'" in got.stderr
    assert not (tmp_path / "out" / "escaped.txt").exists() and not any(target.glob("*"))
    # Inside a job, a name that could climb out is refused as well.
    job2 = submit(stado_env, "echo x > f; $STADO_BIN artifact put --name .. f")
    run_until_idle(stado_env, tmp_path)
    status = machine_status(stado_env, job2)
    assert (status["state"], status["exit_code"]) == ("failed", 5)


def test_an_input_whose_producer_failed_fails_the_dependent_without_running_it(stado_env, tmp_path):
    producer = submit(stado_env, "exit 1", "--name", "broken")
    consumer = submit(stado_env, f"touch {tmp_path}/ran", "--input", "broken:model.bin")
    run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, producer)["state"] == "failed"
    status = machine_status(stado_env, consumer)
    assert (status["state"], status["error"]["class"]) == ("failed", "input_unavailable")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_dot_file_artifact_is_uploaded_like_any_other(stado_env, tmp_path):
    job = submit(stado_env, "printf secret-config > .hidden; printf v > .x.1.tmp; "
                 "$STADO_BIN artifact put .hidden .x.1.tmp")
    agent = run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, job)["state"] == "completed", agent.log()
    out = tmp_path / "out"
    shown = json.loads(stado(stado_env, "results", job, str(out), "--json").stdout)
    assert sorted(a["name"] for a in shown["artifacts"]) == [".hidden", ".x.1.tmp"]
    assert (out / ".hidden").read_text() == "secret-config" and (out / ".x.1.tmp").read_text() == "v"


def test_results_of_a_job_that_has_not_finished_has_its_own_exit_code(stado_env, tmp_path):
    job = submit(stado_env, "true")
    got = stado(stado_env, "results", job, str(tmp_path / "out"), ok=False)
    assert got.returncode == 6 and f"job {job} has not finished (queued): it has no results yet" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    stado(stado_env, "cancel", job)
    ended = stado(stado_env, "results", job, str(tmp_path / "out"), ok=False)
    assert ended.returncode == 1 and "ended cancelled without a result manifest" in ended.stderr
