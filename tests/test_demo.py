"""`make demo`'s script runs real pipelines on both tools and touches nothing of the user's: run with a
scratch HOME and XDG directories, it leaves them empty (its state lives under the repository's .cache/)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_the_demo_runs_and_leaves_the_users_stores_untouched(tmp_path):
    home = tmp_path / "home"
    xdg = {name: tmp_path / name.lower() for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")}
    for path in (home, *xdg.values()):
        path.mkdir()
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           **{k: str(v) for k, v in xdg.items()}}
    done = subprocess.run(["sh", str(REPO / "demo" / "demo.sh")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "sum: 5050" in done.stdout and "attempt 3: sum of x = 4" in done.stdout
    for path in (home, *xdg.values()):
        assert list(path.rglob("*")) == [], f"the demo wrote into {path}"
