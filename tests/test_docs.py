"""The fleet walk-through in docs/stado.md works when pasted: the test runs its shell block as written (all but
its first line, which installs what `make test` already installed) and checks what it says it prints."""
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEED_PORTS = (8333, 9333, 8080, 8888, 18333, 19333, 18080, 18888)  # weed mini's defaults, and their gRPC ports


def _walkthrough() -> str:
    text = (ROOT / "docs" / "stado.md").read_text()
    section = text[text.index("### A two-agent fleet on SeaweedFS"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    first, rest = block.split("\n", 1)
    assert first.startswith("make install test-deps"), first
    return f'export PATH="{Path(sys.executable).parent}:$PATH"\n' + rest


def _taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_two_agent_seaweedfs_walkthrough_runs_as_pasted(tmp_path):
    taken = [p for p in WEED_PORTS if _taken(p)]
    assert not taken, f"the walk-through's SeaweedFS needs ports {taken} free on 127.0.0.1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STADO_", "AWS_"))}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               TMPDIR=str(tmp_path))
    proc = subprocess.run(["bash", "-e", "-c", _walkthrough()], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "hello\n" in proc.stdout
    assert "6 completed" in proc.stdout and "2 agent(s)" in proc.stdout, out[-3000:]
    assert "FAIL" not in proc.stdout
    assert not (tmp_path / "data" / "stado").exists()  # everything went to the configured store


def test_the_local_directory_walkthrough_script_runs(tmp_path):
    """docs/fleet-walkthrough.sh, the walk-through on the local directory store that docs/stado.md names."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STADO_", "AWS_"))}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               TMPDIR=str(tmp_path), PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.run(["bash", str(ROOT / "docs" / "fleet-walkthrough.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "hello\n" in proc.stdout and '"name": "greeting.txt"' in proc.stdout
    assert "6 completed" in proc.stdout and "2 agent(s)" in proc.stdout, out[-3000:]
    assert proc.stdout.rstrip().endswith("walk-through done")
    assert "FAIL" not in proc.stdout and "1 artifact(s) of" in proc.stdout
    assert not (tmp_path / "data" / "stado").exists()  # its own scratch store, not the user's
    assert list(tmp_path.glob("tmp.*")) == []  # and it removed its scratch directory
