"""The unit tier: jobman's store, selectors and acknowledgement in-process, on a real SQLite database
in a temporary directory (no mocks, no subprocesses): fast enough to run on every change."""
from runkit.core.clock import ManualClock
import os

import pytest

from jobman.store import database, transitions
from runkit.core.hashing import sha256
from runkit.core.ids import uuid7

CREDENTIAL = b"c" * 32
WINDOWS = {"claim": 10.0, "lease": 15.0, "renew": 5.0, "poll": 30.0}


@pytest.fixture
def conn(tmp_path):
    connection = database.connect(str(tmp_path / "jobman.db"))
    yield connection
    connection.close()


def spec(**overrides) -> dict:
    """A resolved spec as jobman.handoff.spec.build makes one (only what the store reads matters here)."""
    return {"version": 1, "argv": ["true"], "executable": "/bin/true", "cwd": "/", "env": {}, "name": None,
            "group": database.DEFAULT_GROUP, "priority": 0, "windows": dict(WINDOWS), **overrides}


def submit(conn, now: float = 1000.0, dependencies=(), **overrides) -> str:
    job_id = uuid7()
    transitions.submit(conn, job_id=job_id, spec=spec(**overrides), dependencies=list(dependencies),
                       credential_hash=sha256(CREDENTIAL), clock=ManualClock(now, 0.0))
    return job_id


def claim(conn, job_id: str, now: float = 1001.0, supervisor_id: str | None = None):
    return transitions.claim(conn, job_id, sha256(CREDENTIAL), supervisor_id or uuid7(), os.getpid(), 1, "boot",
                             now)
