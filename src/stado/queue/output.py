"""Uploading a job's output as it runs: redacted, in numbered chunks, on a thread of its own so that no
upload ever delays the agent's loop (its lease renewals), with a cap on what the store keeps.

The cap keeps the END of the output (the last lines are usually the error), as jobman's log cap does:
when the chunks in the store would pass it, the oldest are deleted and the newest deleted chunk's key
holds a marker saying how many bytes were dropped. Output written faster than the store takes it is
skipped unread once more of it is waiting than the cap could keep (it would be dropped anyway), so
redaction never spends anything on it; a marker chunk says where and how much.

A line with no newline yet (`fetching ... `, `\r` progress) is uploaded once it has waited
`partial_after` seconds, all but the bytes that could be the start of a secret (StreamRedactor).
"""
import os
import threading
import time

from runkit.core.records import record
from runkit.core.redact import StreamRedactor

from ..core import keys
from ..objectstore.base import ObjectStore, StoreError

CHUNK_LIMIT = 4 * 1024 * 1024   # bytes read, redacted and uploaded per step
TOTAL_LIMIT = 64 * 1024 * 1024  # bytes of output the store keeps per job
PARTIAL_AFTER = 0.5             # seconds an unterminated line waits before it is uploaded
MARKER_ROOM = 256

Chunk = record("Chunk", "seq size dropped")  # dropped: bytes a marker chunk stands for (0: output)


def _limit_text(limit: int) -> str:
    return f"{limit // (1 << 20)} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


class OutputUploader:
    def __init__(self, store: ObjectStore, job_id: str, path: str, secrets: list[str], *,
                 total_limit: int = TOTAL_LIMIT, partial_after: float = PARTIAL_AFTER, attempt: int = 1):
        self.store, self.job_id, self.path, self.attempt = store, job_id, path, attempt
        self.redactor = StreamRedactor(secrets)
        self.total_limit, self.partial_after = total_limit, partial_after
        self.offset = 0         # bytes of the output file consumed (read, or skipped unread)
        self.uploaded = 0       # bytes put, in all
        self.dropped = 0        # bytes of output the store does not hold
        self.seq = 0
        self.kept: list[Chunk] = []  # chunks in the store, oldest first
        self._kept_bytes = 0
        self._unsent: list[tuple[bytes, int]] = []  # chunks whose upload failed: sent first next time
        self._skipped = 0       # bytes skipped since the last marker
        self._held_since: float | None = None

    def step(self, final: bool = False, *, now: float) -> bool:
        """One bounded piece of work: send what failed before, or read up to CHUNK_LIMIT new bytes, redact
        them and upload one chunk (after a marker, if output was skipped). True when more is waiting.
        With `final`, the unterminated last line goes too. A StoreError leaves the chunk for next time."""
        if self._unsent:
            self._flush_unsent()
            return True
        size = self._size()
        if size - self.offset > self.total_limit:
            jump = size - self.offset - self.total_limit
            self.offset += jump
            self._skipped += jump
            self.redactor.skip()
        data = self._read(CHUNK_LIMIT) if size > self.offset else b""
        more = self.offset < size
        text = self.redactor.feed(data, final=final and not more)
        self._skipped += self.redactor.discarded
        self.redactor.discarded = 0
        if self.redactor.holding and not (final and not more):
            self._held_since = self._held_since or now
            if now - self._held_since >= self.partial_after:
                text += self.redactor.release_partial()
                self._held_since = now if self.redactor.holding else None
        else:
            self._held_since = None
        if self._skipped and (text or (final and not more)):
            marker = (f"[stado: {self._skipped} bytes of output were dropped here: more was waiting than the "
                      f"{_limit_text(self.total_limit)} output cap keeps]\n").encode()
            self._unsent.append((marker, self._skipped))
            self.dropped += self._skipped
            self._skipped = 0
        if text:
            self._unsent.append((text, 0))
        self._flush_unsent()
        return more

    def _flush_unsent(self) -> None:
        while self._unsent:
            data, dropped = self._unsent[0]
            self._make_room(len(data))
            self.store.put(keys.output_chunk(self.job_id, self.seq + 1, self.attempt), data)
            self.seq += 1
            self.uploaded += len(data)
            self.kept.append(Chunk(self.seq, len(data), dropped))
            self._kept_bytes += len(data)
            self._unsent.pop(0)

    def _make_room(self, incoming: int) -> None:
        """Delete the oldest chunks until `incoming` fits under the cap; the newest deleted chunk's key
        then holds a marker for all of them (put first, so no reader sees bytes missing unannounced)."""
        gone = []
        while self.kept and self._kept_bytes + incoming > self.total_limit - MARKER_ROOM:
            chunk = self.kept.pop(0)
            self._kept_bytes -= chunk.size
            gone.append(chunk)
        if not gone:
            return
        dropped = sum(c.dropped or c.size for c in gone)
        marker = (f"[stado: {dropped} bytes of earlier output were dropped by the {_limit_text(self.total_limit)} "
                  "output cap]\n").encode()
        try:
            self.store.put(keys.output_chunk(self.job_id, gone[-1].seq, self.attempt), marker)
            for chunk in gone[:-1]:
                self.store.delete(keys.output_chunk(self.job_id, chunk.seq, self.attempt))
        except StoreError:
            self.kept[:0] = gone  # as it was: tried again with the next chunk
            self._kept_bytes += sum(c.size for c in gone)
            raise
        self.dropped += sum(c.size for c in gone if not c.dropped)
        self.kept.insert(0, Chunk(gone[-1].seq, len(marker), dropped))
        self._kept_bytes += len(marker)

    def _size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def _read(self, limit: int) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return b""
        try:
            data = os.pread(fd, limit, self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        return data


class OutputPump:
    """Runs an OutputUploader on a thread of its own: steps back to back while output is waiting, then
    one look every `interval` seconds (at most one upload per interval for a job that prints slowly).
    finish() asks for the rest, unterminated line included; `done` is set once it is all up (or the
    store kept failing for `give_up` seconds, which is logged)."""

    def __init__(self, uploader: OutputUploader, interval: float, log, *, give_up: float = 300.0):
        self.uploader, self.interval, self.log, self.give_up = uploader, interval, log, give_up
        self.done = threading.Event()
        self._wake = threading.Event()
        self._final = False
        self._thread = threading.Thread(target=self._run, name=f"output-{uploader.job_id}", daemon=True)

    def start(self) -> "OutputPump":
        self._thread.start()
        return self

    def finish(self) -> None:
        self._final = True
        self._wake.set()

    def _run(self) -> None:
        failing_since, said = None, None
        while True:
            final = self._final
            try:
                more = self.uploader.step(final=final, now=time.monotonic())
                failing_since = None
            except StoreError as e:
                more = False
                failing_since = failing_since or time.monotonic()
                if said is not type(e):
                    from ..core.brief import brief

                    said = type(e)
                    self.log(f"{self.uploader.job_id}: output upload failed ({type(e).__name__}: {brief(str(e), 160)}); "
                             "trying again")
                if final and time.monotonic() - failing_since > self.give_up:
                    self.log(f"{self.uploader.job_id}: output upload gave up after {self.give_up:g} s of store errors")
                    self.done.set()
                    return
            if final and not more and failing_since is None:
                self.done.set()
                return
            if not more:
                self._wake.wait(self.interval)
                self._wake.clear()
