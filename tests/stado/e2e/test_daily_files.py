"""Files in and out of jobs, through the real CLI and agents (issue 13): artifacts keep their mode,
`stado submit --upload`, `stado job rerun` re-resolving inputs given by name; and `stado --version`."""
import hashlib
import json
import os
import re
import stat
import subprocess

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
