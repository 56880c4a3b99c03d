"""Uploading a job's output as it runs: redacted, in numbered chunks, at most one request per call,
with a cap on the total so a runaway job cannot fill the store."""
import os

from runkit.redact import StreamRedactor

from . import keys
from .objectstore.base import ObjectStore

CHUNK_LIMIT = 4 * 1024 * 1024
TOTAL_LIMIT = 64 * 1024 * 1024


class OutputUploader:
    def __init__(self, store: ObjectStore, job_id: str, path: str, secrets: list[str], *,
                 total_limit: int = TOTAL_LIMIT):
        self.store, self.job_id, self.path = store, job_id, path
        self.redactor = StreamRedactor(secrets)
        self.offset = 0        # bytes of the output file read so far
        self.uploaded = 0      # bytes uploaded
        self.seq = 0
        self.total_limit = total_limit
        self.dropped = 0

    def pump(self, final: bool = False) -> None:
        """Upload what is new (one chunk). With `final`, upload everything left, chunk by chunk."""
        while True:
            data = self._read(CHUNK_LIMIT)
            more = len(data) == CHUNK_LIMIT
            text = self.redactor.feed(data, final=final and not more)
            if text:
                self._put(text)
            if not (final and more):
                return

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

    def _put(self, text: bytes) -> None:
        room = self.total_limit - self.uploaded
        if room <= 0:
            self.dropped += len(text)
            return
        if len(text) > room:
            self.dropped += len(text) - room
            text = text[:room] + f"\n[stado: output cap of {self.total_limit} bytes reached; the rest is not uploaded]\n".encode()
        self.seq += 1
        self.store.put(keys.output_chunk(self.job_id, self.seq), text)
        self.uploaded += len(text)
