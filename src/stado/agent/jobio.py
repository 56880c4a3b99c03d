"""What a slot moves between its job and the store, each on a thread of its own, so that the agent's loop
(lease renewals, signals, other slots) never waits on a transfer: the job's inputs before it starts,
its output while it runs, its artifacts and the rest of its output once it has ended.

What the agent does about its inputs is also written into the job's output, as `[stado] ...` lines
before the job's own: a fetch that stops moving stays visible there as stalled, with the bytes so far and
how long nothing has moved (`stado job watch`), and the job can be cancelled by name meanwhile.
"""
import os
import time

from ..core.brief import brief
from ..queue import artifacts
from ..core.errors import ArtifactError, BadInput
from ..objectstore.base import ObjectStore, StoreError
from ..queue.checkpoints import CheckpointPump
from ..queue.output import OutputPump, OutputUploader
from ..store.transfer import Progress, Worker, human

PROGRESS_EVERY = 5.0  # seconds between progress lines while inputs arrive (at most: a fast-polling agent says more)
STALLED_EVERY = 60.0  # at most this long between lines while a fetch stays stalled (hours of them stay readable)


class JobIO:
    def __init__(self, store: ObjectStore, job_id: str, job_dir: str, secrets: list[str], *, poll_seconds: float,
                 stall_seconds: float | None, log, notify, clock, attempt: int = 1):
        self.store, self.job_id, self.job_dir, self.attempt = store, job_id, job_dir, attempt
        self.clock = clock  # the agent's: the store's time, what the artifacts' manifest is stamped with
        self.stall_seconds, self.log, self.notify = stall_seconds, log, notify
        self.progress_every = min(PROGRESS_EVERY, max(0.5, 5 * poll_seconds))
        self.output_path = os.path.join(job_dir, "output.log")
        self.out = OutputPump(OutputUploader(store, job_id, self.output_path, secrets, attempt=attempt), poll_seconds,
                              log).start()
        self.checkpoints = CheckpointPump(store, job_id, job_dir, poll_seconds, log).start()
        self._fetch: Worker | None = None
        self._told = 0.0
        self._closing: Worker | None = None

    def redact_also(self, secrets: list[str]) -> None:
        """Values the job's output is redacted of besides its agent's (its own --env secrets)."""
        self.out.uploader.redactor.add(secrets)

    def tell(self, message: str) -> None:
        """A line for the agent's log and for the job's output."""
        self.log(f"{self.job_id}: {message}")
        fd = os.open(self.output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"[stado] {message}\n".encode())
        finally:
            os.close(fd)

    # -- before it starts ----------------------------------------------------------------------------

    def inputs(self, refs: list[dict], work_dir: str) -> tuple[str, object]:
        """('done', delivered) | ('running', None) | ('retry', why) | ('failed', why). A fetch that stalled or
        met a store error keeps what arrived; the next call starts one that resumes from it."""
        if not refs:
            return "done", []
        if self._fetch is None:
            progress = Progress()
            partial_dir = os.path.join(self.job_dir, "inputs.partial")
            self._fetch = Worker(lambda p: artifacts.fetch_inputs(self.store, refs, work_dir, progress=p,
                                                                  stall_seconds=self.stall_seconds,
                                                                  partial_dir=partial_dir),
                                 progress, stall_seconds=self.stall_seconds, name=f"inputs-{self.job_id}",
                                 notify=self.notify).start()
            self._told = time.monotonic()
            return "running", None
        state = self._fetch.check()
        progress = self._fetch.progress
        if state == "running":
            stalled = progress.stalled_for()
            # While stalled, lines come further apart as the stall lasts (half its length, within bounds).
            every = self.progress_every if stalled is None else max(self.progress_every, min(STALLED_EVERY, stalled / 2))
            if time.monotonic() - self._told >= every:
                self._told = time.monotonic()
                resumed = f", resumed at {human(progress.resumed)}" if progress.resumed else ""
                hint = f" (`stado cancel {self.job_id}` stops it; it goes on if bytes move again)" if stalled else ""
                self.tell(f"fetching inputs: {progress.describe()}{resumed}{hint}")
            return "running", None
        worker, self._fetch = self._fetch, None
        error = worker.error
        if state == "done":
            resumed = f" (resumed at {human(progress.resumed)})" if progress.resumed else ""
            took = time.monotonic() - progress.started
            self.tell(f"inputs fetched: {human(progress.total)} in {took:.1f} s{resumed}")
            return "done", worker.result
        if state == "stalled":
            self.tell(f"fetching inputs stopped moving ({error}); what arrived is kept and the next attempt resumes "
                      "from it")
            return "retry", str(error)
        if isinstance(error, (ArtifactError, BadInput)):
            return "failed", str(error)
        if isinstance(error, OSError):
            return "failed", f"could not write its inputs: {error}"
        if isinstance(error, StoreError):
            self.tell(f"inputs could not be fetched ({type(error).__name__}: {brief(str(error), 200)}); retrying on the "
                      "next tick")
            return "retry", str(error)
        return "failed", f"internal error while fetching its inputs: {type(error).__name__}: {brief(str(error), 200)}"

    def inputs_in(self) -> bool:
        """A fetch has ended (done, stalled or failed): inputs() has news, whatever the poll says."""
        return self._fetch is not None and self._fetch.check() != "running"

    def cancel(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()

    # -- once it has ended ---------------------------------------------------------------------------

    def close(self, upload_artifacts: bool) -> tuple[str, str | None]:
        """('running', None) | ('retry', why) | ('done', why its artifacts could not be uploaded, or None):
        its staged artifacts (when it ran to an end of its own), then the rest of its output."""
        if self._closing is None:
            self.cancel()
            self._closing = Worker(lambda _: self._close(upload_artifacts), Progress(), stall_seconds=float("inf"),
                                   name=f"close-{self.job_id}", notify=self.notify).start()
            return "running", None
        if self._closing.check() == "running":
            return "running", None
        worker, self._closing = self._closing, None
        error = worker.error
        if error is None:
            return "done", None
        if isinstance(error, StoreError):
            self.log(f"{self.job_id}: its artifacts could not be uploaded ({type(error).__name__}: {brief(str(error), 200)});"
                     " trying again")
            return "retry", str(error)
        if isinstance(error, OSError):
            self.out.finish()
            return "done", f"could not upload its artifacts: {error}"
        self.out.finish()
        return "done", f"internal error while uploading its artifacts: {type(error).__name__}: {brief(str(error), 200)}"

    def _close(self, upload_artifacts: bool) -> None:
        self.checkpoints.finish()
        if upload_artifacts:
            manifest = artifacts.upload_staged(self.store, self.job_id, self.job_dir, first_attempt=self.attempt == 1,
                                               now=self.clock.wall())
            for entry in manifest.get("refused", ()):
                self.tell(f"artifact {entry['name']!r} not uploaded: {entry['reason']}")
        self.out.finish()
        self.out.done.wait()
