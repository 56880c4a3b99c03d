"""The docs say what works, because it runs here.

Every ```sh block of the two guides (docs/jobman-guide.md, docs/stado-guide.md) runs with bash -e in a scratch
directory of its own: a fresh JOBMAN_HOME, and stado's default store (the per-user local directory) under a
fresh XDG_DATA_HOME, with the venv's bin first on PATH. A block that fails fails the test, never skips it.
Examples that cannot run here (S3 credentials, systemd, long sleeps, a reboot) are fenced ```console or
```text, and are not run.

The two-agent SeaweedFS walk-through of docs/stado-guide.md runs as pasted (all but its first line, which
installs what `make test` already installed), and docs/fleet-walkthrough.sh runs as a script."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GUIDES = ("docs/jobman-guide.md", "docs/stado-guide.md")
WEED_PORTS = (8333, 9333, 8080, 8888, 18333, 19333, 18080, 18888)  # weed mini's defaults, and their gRPC ports
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def shell_blocks(page: str) -> list[tuple[int, str]]:
    """(line number, text) of every ```sh block of `page`."""
    text = (ROOT / page).read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(2)) for m in FENCE.finditer(text) if m.group(1) == "sh"]


def _scratch_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with nothing yet: a scratch HOME, XDG directories and JOBMAN_HOME; nothing
    inherited that would point jobman or stado at the caller's own state or store."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JOBMAN_", "STADO_", "AWS_", "AZURE_", "GOOGLE_")) and k not in ("COLUMNS", "NO_COLOR")}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), TMPDIR=str(tmp_path), JOBMAN_HOME=str(tmp_path / "jobman"),
               PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}")
    return env


def run_block(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """bash -e over `block`, in a session of its own: whatever it left running in the background is killed once
    it returns (or times out), so that nothing outlives the test."""
    with subprocess.Popen(["bash", "-e", "-c", block], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_guides_have_shell_blocks():
    for page in GUIDES:
        assert len(shell_blocks(page)) >= 5, page  # the fence is ```sh; a renamed fence would run nothing


@pytest.mark.parametrize("page,line,block", [(page, line, block) for page in GUIDES
                                             for line, block in shell_blocks(page)],
                         ids=lambda value: str(value) if isinstance(value, int) else None)
def test_a_guide_block_runs(page, line, block, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = _scratch_env(tmp_path)
    started = time.monotonic()
    proc = run_block(block, work, env)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, f"{page}:{line} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"{page}:{line}\n{proc.stderr[-3000:]}"
    assert seconds < 20, f"{page}:{line} took {seconds:.1f} s: keep the guides' blocks quick"


def _walkthrough() -> str:
    text = (ROOT / "docs" / "stado-guide.md").read_text()
    section = text[text.index("### A two-agent fleet on SeaweedFS"):]
    block = re.search(r"```console\n(.*?)```", section, re.S).group(1)
    first, rest = block.split("\n", 1)
    assert first.startswith("make weed "), first  # the light target: the tools and weed, not the test suite's
    return f'export PATH="{BIN}:$PATH"\n' + rest


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
    """docs/fleet-walkthrough.sh, the walk-through on the local directory store that docs/stado-guide.md names."""
    assert "docs/fleet-walkthrough.sh" in (ROOT / "docs" / "stado-guide.md").read_text()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STADO_", "AWS_"))}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               TMPDIR=str(tmp_path), PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}")
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


# --- links and paths ----------------------------------------------------------------------------------------

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w./-])((?:src|tests|bench|demo|docs|mk)/[\w./-]*\w)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_every_page_is_at_most_its_size():
    sizes = {page: (ROOT / page).stat().st_size for page in PAGES}
    assert sizes["README.md"] <= 15_000, sizes["README.md"]
    assert {page: size for page, size in sizes.items() if size > 40_000} == {}


def test_every_link_of_the_docs_leads_somewhere():
    broken = []
    for name in PAGES:
        page = ROOT / name
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"\w+:", target):
                continue  # a URL: none is expected, and none is checked
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{name}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{name}: {target} (no such heading)")
    assert broken == []


def test_every_path_the_docs_name_exists():
    missing = []
    for name in PAGES:
        for path in PATH.findall((ROOT / name).read_text()):
            path = path.rstrip(".")
            if not (ROOT / path).exists() and not any((ROOT / path).parent.glob((ROOT / path).name + "*")):
                missing.append(f"{name}: {path}")
    assert missing == []
