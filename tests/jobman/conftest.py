"""Fixtures for jobman's tests: a fresh $JOBMAN_HOME per test, the real CLI as a subprocess, the
real SQLite file for inspection, and a teardown that kills whatever the test left running."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import kill_all, pids_with_env, wait_for

BIN = Path(sys.executable).parent
JOBMAN = str(BIN / "jobman")

# When a job_state row's lease runs out, the lease round's cover included: written out here, so that a test does
# not take jobman's word for it.
LEASE_END = ("CASE WHEN lease_cover IS NULL THEN lease_expires_at ELSE max(coalesce(lease_expires_at, 0),"
             " (SELECT verified_at FROM lease_round) + lease_cover) END")

# Short windows so that lease expiry and claim deadlines take fractions of a second. Claims get a
# generous window: on a loaded 2-core CI machine a supervisor can take a while to start.
FAST_WINDOWS = {"JOBMAN_CLAIM_WINDOW": "10s", "JOBMAN_LEASE": "1s", "JOBMAN_RENEW_INTERVAL": "0.2s",
                "JOBMAN_POLL_INTERVAL": "1s"}


class Jobman:
    """The jobman CLI against one home directory."""

    def __init__(self, home: Path):
        self.home = home
        # Output that depends on the terminal is set by the tests that check it.
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("JOBMAN_") and k not in ("COLUMNS", "LINES", "NO_COLOR")}
        self.env.update(FAST_WINDOWS)
        self.env["JOBMAN_HOME"] = str(home)
        self.env["PATH"] = f"{BIN}:{self.env.get('PATH', '/usr/bin:/bin')}"

    def __call__(self, *args, env=None, timeout=60, input=None, check=False) -> subprocess.CompletedProcess:
        result = subprocess.run([JOBMAN, *args], env={**self.env, **(env or {})}, capture_output=True, text=True,
                                timeout=timeout, input=input)
        if check and result.returncode != 0:
            raise AssertionError(f"jobman {' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result

    def run(self, *command, opts=(), env=None) -> str:
        """Submit a job; return its id."""
        result = self("run", "--print-id", *opts, "--", *command, env=env, check=True)
        job_id = result.stdout.strip()
        assert len(job_id) == 36, result.stdout
        return job_id

    def show(self, job: str) -> dict:
        return json.loads(self("show", job, "--json", check=True).stdout)

    def state(self, job_id: str) -> dict:
        """The raw job_state row, read straight from SQLite, and lease_end: when its lease runs out (LEASE_END)."""
        with self.db() as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute(f"SELECT *, {LEASE_END} AS lease_end FROM job_state WHERE job_id = ?",
                               (job_id,)).fetchone()
            return dict(row) if row else None

    def db(self):
        return sqlite3.connect(self.home / "jobman.db", timeout=30)

    def count_jobs(self) -> int:
        if not (self.home / "jobman.db").exists():
            return 0
        with self.db() as conn:
            return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]

    def handle(self, job_id: str) -> int:
        with self.db() as conn:
            return conn.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]

    def in_table(self, table: str, *job_ids: str) -> bool:
        """Whether `jobman list`'s table has a row for every job (rows begin with the job's handle)."""
        shown = {line.split()[0] for line in table.splitlines()[1:] if line.strip()}
        return all(str(self.handle(job_id)) in shown for job_id in job_ids)

    def wait_finished(self, job_id: str, timeout: float = 20.0) -> dict:
        return wait_for(lambda: (s := self.state(job_id)) and s["phase"] == "finished" and s,
                        timeout=timeout, message=f"job {job_id} to finish")

    def processes(self) -> list[int]:
        return pids_with_env("JOBMAN_HOME", str(self.home))


@pytest.fixture
def jobman(tmp_path):
    jm = Jobman(tmp_path / "home")
    yield jm
    kill_all(jm.processes())
