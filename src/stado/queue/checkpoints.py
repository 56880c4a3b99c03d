"""Checkpoints: what a long job writes as it goes, evidence to the reaper that it is working (the rule: a blob
under the job's checkpoint prefix newer than a passed promise keeps the job alive).

Inside a job, `$STADO_BIN checkpoint put FILE` only stages the file next to the job's inputs file (the
job's environment holds no store credentials); the agent uploads staged checkpoints while the job runs,
on a thread of its own, to status/<id>/checkpoints/<name>, and removes each staged copy once it is up.
A multi-gigabyte checkpoint can starve the job's small renewals on a slow link: its upload's own
last_modified is what then speaks for the job.
"""
import json
import os
import threading
import time

from . import artifacts
from ..core import keys
from ..objectstore.base import ObjectStore, StoreError

STAGING = "checkpoints"
STAGING_TMP = "checkpoints.tmp"


def stage(paths: list[str], env: dict[str, str], name: str | None = None) -> list[dict]:
    return artifacts.stage(paths, env, name, what="checkpoint", into=STAGING, tmp_dir=STAGING_TMP)


class CheckpointPump:
    """Uploads a job's staged checkpoints, oldest first, every `interval` seconds while the job runs."""

    def __init__(self, store: ObjectStore, job_id: str, job_dir: str, interval: float, log):
        self.store, self.job_id, self.interval, self.log = store, job_id, interval, log
        self.job_dir = job_dir
        self.staging = os.path.join(job_dir, STAGING)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"checkpoints-{job_id}", daemon=True)

    def start(self) -> "CheckpointPump":
        self._thread.start()
        return self

    def finish(self) -> None:
        """Upload what is staged now, then stop."""
        self._stop.set()
        self._thread.join()
        self.step()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.step()

    def step(self) -> None:
        try:
            names = sorted(os.listdir(self.staging), key=lambda n: os.stat(os.path.join(self.staging, n)).st_mtime)
        except OSError:
            return
        for name in names:
            path = os.path.join(self.staging, name)
            began = time.clock_gettime(time.CLOCK_BOOTTIME)
            try:
                with open(path, "rb") as f:
                    data = f.read()
                self.store.put(keys.checkpoint_prefix(self.job_id) + name, data)
                os.unlink(path)
                _landed(self.job_dir, began)
            except (OSError, StoreError) as e:
                from ..core.brief import brief

                self.log(f"{self.job_id}: checkpoint {name!r} not uploaded yet ({type(e).__name__}: "
                         f"{brief(str(e), 160)}); trying again")
                return
            self.log(f"{self.job_id}: checkpoint {name!r} uploaded ({len(data)} bytes)")


CHECKPOINTED = "checkpointed.json"  # when the last checkpoint that landed began its upload (CLOCK_BOOTTIME)


def _landed(job_dir: str, began: float) -> None:
    """Tell the job's keeper (stado/agent/keeper.py) a checkpoint landed: evidence the job works, as the reaper reads it."""
    tmp = os.path.join(job_dir, CHECKPOINTED + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps({"began": began}))
        os.replace(tmp, os.path.join(job_dir, CHECKPOINTED))
    except OSError:
        pass
