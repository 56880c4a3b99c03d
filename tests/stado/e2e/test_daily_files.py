"""Files in and out of jobs, through the real CLI and agents: artifacts keep their mode,
`stado submit --upload`, `stado job rerun` reading the original inputs (or names resolved again with
--fresh-inputs); and `stado --version`."""
import hashlib
import json
import os
import re
import stat
import subprocess
import sys

from .support import STADO, machine_status, run_until_idle, stado, submit


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_artifacts_keep_their_mode_into_inputs_and_results(stado_env, tmp_path, store):
    producer = submit(stado_env, "printf '#!/bin/sh\\necho tool-ran\\n' > tool.sh; chmod 750 tool.sh; "
                      "echo secret > key.txt; chmod 600 key.txt; echo plain > plain.txt; chmod 644 plain.txt; "
                      "$STADO_BIN artifact put tool.sh key.txt plain.txt", "--name", "maker")
    consumer = submit(stado_env, f"./tool.sh > {tmp_path}/consumer.txt", "--input", "maker:tool.sh")
    agent = run_until_idle(stado_env, tmp_path, "--slots", "2")
    assert machine_status(stado_env, producer)["state"] == "completed", agent.log()
    assert machine_status(stado_env, consumer)["state"] == "completed", agent.log()
    assert (tmp_path / "consumer.txt").read_text() == "tool-ran\n"  # delivered executable into the work dir

    manifest = json.loads(store.get(f"status/{producer}/manifest.json").data)
    assert {a["name"]: a["mode"] for a in manifest["artifacts"]} == {"tool.sh": 0o750, "key.txt": 0o600,
                                                                     "plain.txt": 0o644}
    out = tmp_path / "out"
    stado(stado_env, "results", producer, str(out))
    assert (_mode(out / "tool.sh"), _mode(out / "key.txt"), _mode(out / "plain.txt")) == (0o750, 0o600, 0o644)
    assert subprocess.run([str(out / "tool.sh")], capture_output=True, text=True).stdout == "tool-ran\n"

    # A manifest written before modes were kept restores the files as before (0644), executable or not.
    for entry in manifest["artifacts"]:
        del entry["mode"]
    store.put(f"status/{producer}/manifest.json", json.dumps(manifest).encode())
    old = tmp_path / "old"
    stado(stado_env, "results", producer, str(old))
    assert {_mode(old / name) for name in ("tool.sh", "key.txt", "plain.txt")} == {0o644}
    # A mode that is not permission bits makes the manifest malformed: refused, nothing written.
    manifest["artifacts"][0]["mode"] = 0o4755
    store.put(f"status/{producer}/manifest.json", json.dumps(manifest).encode())
    bad = stado(stado_env, "results", producer, str(tmp_path / "bad"), ok=False)
    assert bad.returncode == 5 and "malformed manifest entry" in bad.stderr and not (tmp_path / "bad").exists()


def test_version_and_usage():
    version = subprocess.run([STADO, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and re.fullmatch(r"stado \d+\.\d+\.\d+\S*\n", version.stdout)
    bare = subprocess.run([STADO], capture_output=True, text=True)
    assert bare.returncode == 2 and bare.stdout == "" and bare.stderr.startswith("usage: stado")
    assert "stado --version" in bare.stderr


def _store_keys(store) -> list[str]:
    return sorted(entry.key for entry in store.list(""))


def test_submit_upload_delivers_a_local_file_verified_and_rerun_reuses_it(stado_env, tmp_path, store):
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,2\n")
    tool = tmp_path / "run.sh"
    tool.write_text("#!/bin/sh\nwc -l < in.csv\n")
    tool.chmod(0o755)
    job = submit(stado_env, f"./run.sh > {tmp_path}/seen-$WC_JOB_ID.txt", "--upload", str(data), "--upload", str(tool))
    spec = json.loads(stado(stado_env, "status", job, "--json").stdout)["spec"]
    assert spec["inputs"] == [
        {"job": job, "name": "in.csv", "upload": True, "size": 8, "sha256": hashlib.sha256(b"a,b\n1,2\n").hexdigest(),
         "mode": _mode(data)},
        {"job": job, "name": "run.sh", "upload": True, "size": tool.stat().st_size,
         "sha256": hashlib.sha256(tool.read_bytes()).hexdigest(), "mode": 0o755}]
    assert store.get(f"status/{job}/uploads/in.csv").data == b"a,b\n1,2\n"
    data.write_text("changed after submission\n")  # what was sent is what runs
    again = stado(stado_env, "job", "rerun", job, "--beside").stdout.strip()
    agent = run_until_idle(stado_env, tmp_path)
    for one in (job, again):
        assert machine_status(stado_env, one)["state"] == "completed", agent.log()
        assert (tmp_path / f"seen-{one}.txt").read_text() == "2\n"
    rerun_spec = json.loads(stado(stado_env, "status", again, "--json").stdout)["spec"]
    assert rerun_spec["inputs"] == spec["inputs"]  # the upload is reused from the first job's prefix

    # Bytes changed behind the recorded SHA-256 fail the job before it runs, like any input.
    store.put(f"status/{job}/uploads/in.csv", b"a,b\n1,3\n")
    third = stado(stado_env, "job", "rerun", job).stdout.strip()
    run_until_idle(stado_env, tmp_path)
    status = machine_status(stado_env, third)
    assert (status["state"], status["error"]["class"]) == ("failed", "input_unavailable"), status
    assert "verification failed for in.csv" in status["error"]["message"]
    assert not (tmp_path / f"seen-{third}.txt").exists()


def test_a_batch_sends_its_upload_once_for_every_job(stado_env, tmp_path, store):
    data = tmp_path / "shared.txt"
    data.write_text("shared\n")
    batch = tmp_path / "jobs.txt"
    batch.write_text(f"cat shared.txt > {tmp_path}/one.txt\ncat shared.txt > {tmp_path}/two.txt\n")
    first, second = stado(stado_env, "submit", "--batch", str(batch), "--upload", str(data)).stdout.split()
    assert [k for k in _store_keys(store) if "/uploads/" in k] == [f"status/{first}/uploads/shared.txt"]
    assert json.loads(stado(stado_env, "status", second, "--json").stdout)["spec"]["inputs"][0]["job"] == first
    run_until_idle(stado_env, tmp_path)
    assert (tmp_path / "one.txt").read_text() == (tmp_path / "two.txt").read_text() == "shared\n"


def test_a_bad_upload_is_one_line_exit_2_and_writes_nothing(stado_env, tmp_path, store):
    producer = submit(stado_env, "echo m > model.bin; $STADO_BIN artifact put model.bin", "--name", "maker")
    run_until_idle(stado_env, tmp_path)
    before = _store_keys(store)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "same.txt").write_text(d)
    (tmp_path / "model.bin").write_text("local")
    unreadable = tmp_path / "locked.txt"
    unreadable.write_text("x")
    unreadable.chmod(0)
    cases = [(["--upload", str(tmp_path / "missing.txt")], "no such file"),
             (["--upload", str(tmp_path / "a")], "not a regular file"),
             (["--upload", str(tmp_path / "a/same.txt"), "--upload", str(tmp_path / "b/same.txt")],
              "already has an input named 'same.txt'"),
             (["--input", "maker:model.bin", "--upload", str(tmp_path / "model.bin")],
              "already has an input named 'model.bin'"),
             (["--upload", "/dev/null"], "not a regular file")]
    if os.geteuid() != 0:  # root reads any file
        cases.append((["--upload", str(unreadable)], "cannot read it (Permission denied)"))
    for flags, message in cases:
        got = stado(stado_env, "submit", "cat same.txt", *flags, ok=False)
        assert got.returncode == 2 and message in got.stderr and "nothing was submitted" in got.stderr, (flags, got)
        assert len(got.stderr.strip().splitlines()) == 1 and got.stdout == ""
    assert _store_keys(store) == before and producer in "".join(before)


def test_a_large_upload_is_streamed_not_held_in_memory(stado_env, tmp_path, store):
    """48 MiB goes up in parts (cloud backends) or straight to the store's file: the submitting CLI's peak
    memory grows far less than the file's size over a tiny upload's."""
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    small.write_bytes(b"s")
    with open(big, "wb") as f:
        for n in range(48):
            f.write(bytes([n]) * (1 << 20))

    def peak_kib(path) -> tuple[str, int]:
        """`stado submit --upload PATH` run in a Python of its own that reports its VmHWM (the peak resident
        memory of the process's own address space: ru_maxrss would include the forking pytest's)."""
        report = tmp_path / "hwm"
        code = ("import sys; from stado.cli import main; code = main(sys.argv[2:]); "
                "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]; "
                "open(sys.argv[1], 'w').write(hwm); sys.exit(code)")
        got = subprocess.run([sys.executable, "-c", code, str(report), "submit",
                              f"sha256sum {path.name} > {tmp_path}/{path.name}.sum", "--upload", str(path)],
                             env=stado_env, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        return got.stdout.strip(), int(report.read_text())

    _, small_peak = peak_kib(small)
    job, big_peak = peak_kib(big)
    assert big_peak - small_peak < 24 * 1024, (small_peak, big_peak)  # KiB: well under the 48 MiB file
    assert store.head(f"status/{job}/uploads/big.bin").size == 48 << 20
    agent = run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, job)["state"] == "completed", agent.log()
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    assert (tmp_path / "big.bin.sum").read_text().split()[0] == digest


def test_rerun_reads_the_original_inputs_and_fresh_inputs_resolves_names_again(stado_env, tmp_path):
    version = tmp_path / "version"
    version.write_text("v1")
    v1 = submit(stado_env, f"cp {version} model.bin; $STADO_BIN artifact put model.bin", "--name", "producer")
    by_name = submit(stado_env, f"cat model.bin > {tmp_path}/seen-$WC_JOB_ID", "--input", "producer:model.bin")
    by_id = submit(stado_env, f"cat model.bin > {tmp_path}/seen-$WC_JOB_ID", "--input", f"{v1}:model.bin")
    run_until_idle(stado_env, tmp_path)
    assert (tmp_path / f"seen-{by_name}").read_text() == (tmp_path / f"seen-{by_id}").read_text() == "v1"

    def record(job):
        return json.loads(stado(stado_env, "status", job, "--json").stdout)

    def inputs_of(job):
        return record(job)["spec"]["inputs"]

    assert inputs_of(by_name) == [{"job": v1, "name": "model.bin", "given": "producer"}]
    assert inputs_of(by_id) == [{"job": v1, "name": "model.bin"}]
    assert record(by_name)["rerun_inputs"] is None  # not a rerun

    version.write_text("v2")  # the producer is fixed and run again
    v2 = stado(stado_env, "job", "rerun", "producer").stdout.strip()
    run_until_idle(stado_env, tmp_path)
    assert v2 != v1 and machine_status(stado_env, v2)["state"] == "completed"

    exact = json.loads(stado(stado_env, "job", "rerun", by_name, "--json").stdout)
    fresh = json.loads(stado(stado_env, "job", "rerun", "--fresh-inputs", by_name, "--json").stdout)
    pinned = stado(stado_env, "job", "rerun", "--fresh-inputs", by_id).stdout.strip()
    # The exact spec by default: the producer the original read, though a newer job now has its name.
    assert exact["inputs"] == inputs_of(exact["id"]) == [{"job": v1, "name": "model.bin", "given": "producer"}]
    assert exact["rerun_inputs"] == record(exact["id"])["rerun_inputs"] == "original"
    assert fresh["inputs"] == inputs_of(fresh["id"]) == [{"job": v2, "name": "model.bin", "given": "producer"}]
    assert fresh["rerun_inputs"] == record(fresh["id"])["rerun_inputs"] == "fresh"
    assert "rerun_inputs:     fresh" in stado(stado_env, "status", fresh["id"]).stdout
    assert inputs_of(pinned) == [{"job": v1, "name": "model.bin"}]  # given by id: nothing to resolve again
    agent = run_until_idle(stado_env, tmp_path)
    seen = {job: (tmp_path / f"seen-{job}").read_text() for job in (exact["id"], fresh["id"], pinned)}
    assert seen == {exact["id"]: "v1", fresh["id"]: "v2", pinned: "v1"}, agent.log()
    # The name stays as given: --fresh-inputs on a rerun of a rerun still resolves it.
    assert inputs_of(stado(stado_env, "job", "rerun", "--fresh-inputs", exact["id"]).stdout.strip())[0]["job"] == v2
