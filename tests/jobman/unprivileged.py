"""jobman run by a user who is not root, for the tests whose fault root would not feel: a database file made
read-only by its mode (`chmod 0400`) stops a user's writes, never root's. The suite runs as root here, so the CLI
(and so every supervisor and target it starts) runs as `nobody`, in a home that user owns, from a copy of the
sources that user can read, with an interpreter it can run. Without any of these the test fails, naming what
is missing: it never skips."""
import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import kill_all
from tests.jobman.conftest import FAST_WINDOWS, Jobman

USER = "nobody"
SRC = Path(__file__).resolve().parents[2] / "src"
# The test's own interpreter may live where another user cannot reach it (under /root); Debian's is for everyone.
CANDIDATES = (sys.executable, "/usr/bin/python3")


class UserJobman(Jobman):
    """The jobman CLI as USER, against a home that user owns. Reads go through the CLI as well: a root process
    that opened the database would make its WAL files root's when none existed."""

    def __init__(self, home: Path, python: str, src: Path, user: pwd.struct_passwd):
        super().__init__(home)
        self.python, self.user = python, user
        self.env = {k: v for k, v in self.env.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        self.env.update(PYTHONPATH=str(src), HOME=str(home.parent), USER=user.pw_name, LOGNAME=user.pw_name)

    def __call__(self, *args, env=None, timeout=60, input=None, check=False) -> subprocess.CompletedProcess:
        result = subprocess.run([self.python, "-m", "jobman", *args], env={**self.env, **(env or {})},
                                capture_output=True, text=True, timeout=timeout, input=input, cwd=self.home.parent,
                                user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        if check and result.returncode != 0:
            raise AssertionError(f"jobman {' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result

    def state(self, job_id: str) -> dict:
        return self.show(job_id)

    def jobs(self) -> list[dict]:
        return json.loads(self("list", "--all", "--json", check=True).stdout)


def _python_for(user: pwd.struct_passwd) -> str:
    for candidate in CANDIDATES:
        try:
            ran = subprocess.run([candidate, "-c", "import _sqlite3"], user=user.pw_uid, group=user.pw_gid,
                                 extra_groups=[], capture_output=True, cwd="/", timeout=60)
        except OSError:
            continue
        if ran.returncode == 0:
            return candidate
    pytest.fail(f"no Python interpreter that user {user.pw_name} may run (tried {', '.join(CANDIDATES)})")


@contextlib.contextmanager
def unprivileged_jobman(windows=FAST_WINDOWS):
    """A UserJobman in a fresh home owned by USER; every process of the home is killed afterwards."""
    if os.geteuid() != 0:
        pytest.fail("this test runs jobman as another user (a file's mode stops only a user who is not root): "
                    "run the suite as root")
    try:
        user = pwd.getpwnam(USER)
    except KeyError:
        pytest.fail(f"this test runs jobman as the user {USER!r}, which this machine lacks")
    top = Path(tempfile.mkdtemp(prefix="jobman-user-", dir="/tmp"))  # /tmp: every user may pass through it
    try:
        src = top / "src"
        for package in ("jobman", "runkit"):
            shutil.copytree(SRC / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
        for path in [top, *top.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid)
        jm = UserJobman(top / "home", _python_for(user), src, user)
        jm.env.update(windows)
        try:
            yield jm
        finally:
            kill_all(jm.processes())
    finally:
        shutil.rmtree(top, ignore_errors=True)
