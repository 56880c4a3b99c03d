"""Transfers and output uploads, driven step by step over the in-memory store (wrapped to fail or stop)."""
import hashlib
import json
import os
import time
import threading

import pytest

from stado.core import keys
from stado.store import transfer
from stado.core.errors import ChecksumMismatch, TransferStalled
from stado.objectstore import StoreUnavailable
from stado.objectstore.memory import MemoryStore
from stado.queue.output import OutputUploader
from stado.store.transfer import Progress, Worker

from .faulty import LostResponses


class Ranges(LostResponses):
    """Counts the bytes get_range delivers; fails every `fail_every`-th call; `gate` (an Event) blocks the
    calls after `block_after` bytes until it is set, as a link that stopped moving."""

    def __init__(self, inner, fail_every=0, block_after=None):
        super().__init__(inner, 0)
        self.fail_every, self.block_after = fail_every, block_after
        self.calls = self.delivered = 0
        self.gate = threading.Event()

    def get_range(self, key, start, length):
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise StoreUnavailable("connection reset")
        if self.block_after is not None and self.delivered >= self.block_after:
            self.gate.wait()
        blob = self.inner.get_range(key, start, length)
        self.delivered += len(blob.data)
        return blob


DATA = os.urandom(3_000_000)
SHA = hashlib.sha256(DATA).hexdigest()


def _fetch(store, partial, stall=5.0, sha=SHA):
    return transfer.download(store, "blob", str(partial), size=len(DATA), sha256=sha, progress=Progress(len(DATA)),
                             stall_seconds=stall)


def test_a_download_rides_out_failing_ranges_without_starting_again(tmp_path):
    inner = MemoryStore()
    inner.put("blob", DATA)
    store = Ranges(inner, fail_every=2)
    partial = tmp_path / "p"
    assert _fetch(store, partial) == str(partial)
    assert partial.read_bytes() == DATA and store.delivered == len(DATA) and store.calls >= 3


def test_a_stalled_download_is_abandoned_and_the_next_resumes_from_its_partial_file(tmp_path):
    inner = MemoryStore()
    inner.put("blob", DATA)
    store = Ranges(inner, block_after=1_000_000)
    partial = tmp_path / "p"
    progress = Progress(len(DATA))
    worker = Worker(lambda p: transfer.download(store, "blob", str(partial), size=len(DATA), sha256=SHA, progress=p,
                                                stall_seconds=0.3), progress, stall_seconds=0.3, name="t").start()
    with pytest.raises(TransferStalled, match="no bytes moved for 0.3 s after"):
        transfer.watch(worker)
    kept = partial.stat().st_size
    assert kept >= 1_000_000
    store.block_after = None
    store.gate.set()  # the abandoned request returns now: its bytes must not be written
    assert worker.wait(5)
    assert partial.stat().st_size == kept
    before = store.delivered
    progress = Progress(len(DATA))
    transfer.download(store, "blob", str(partial), size=len(DATA), sha256=SHA, progress=progress, stall_seconds=5)
    assert partial.read_bytes() == DATA and progress.resumed == kept
    assert store.delivered - before == len(DATA) - kept


def test_a_replaced_object_starts_again_and_bad_bytes_are_not_kept(tmp_path):
    inner = MemoryStore()
    inner.put("blob", DATA[:1_000_000])
    partial = tmp_path / "p"
    with pytest.raises(ChecksumMismatch, match="got 1000000 bytes"):
        _fetch(inner, partial)
    assert not partial.exists()
    # An earlier attempt's bytes of another version of the object are thrown away, not mixed in.
    partial.write_bytes(b"x" * 500_000)
    (tmp_path / "p.json").write_text(json.dumps({"key": "blob", "size": 3000000, "sha256": SHA, "version": ["old", None]}))
    inner.put("blob", DATA)
    _fetch(inner, partial)
    assert partial.read_bytes() == DATA


def test_kept_bytes_that_fail_verification_are_fetched_again_from_zero(tmp_path):
    inner = MemoryStore()
    version = inner.put("blob", DATA)
    partial = tmp_path / "p"
    partial.write_bytes(b"\0" * 700_000)  # what a crash mid-write can leave: the size, not the bytes
    (tmp_path / "p.json").write_text(json.dumps({"key": "blob", "size": 3000000, "sha256": SHA,
                                                        "version": list(version)}))
    progress = Progress(len(DATA))
    transfer.download(inner, "blob", str(partial), size=len(DATA), sha256=SHA, progress=progress, stall_seconds=5)
    assert partial.read_bytes() == DATA and progress.done == len(DATA) and progress.resumed == 0


def test_an_empty_object_downloads_to_an_empty_file(tmp_path):
    inner = MemoryStore()
    inner.put("blob", b"")
    partial = tmp_path / "p"
    transfer.download(inner, "blob", str(partial), size=0, sha256=hashlib.sha256(b"").hexdigest(),
                      progress=Progress(), stall_seconds=5)
    transfer.publish(str(partial), str(tmp_path / "empty"))
    assert (tmp_path / "empty").read_bytes() == b"" and not partial.exists()


def test_a_download_that_only_fails_ends_after_the_stall_window(tmp_path):
    inner = MemoryStore()
    inner.put("blob", DATA)
    with pytest.raises(TransferStalled, match="last error: connection reset"):
        _fetch(Ranges(inner, fail_every=1), tmp_path / "p", stall=0.3)


# -- output ---------------------------------------------------------------------------------------

def _uploaded(store, job="j"):
    chunks = sorted((keys.chunk_seq(e.key), store.get(e.key).data) for e in store.list(keys.output_prefix(job)))
    return b"".join(data for _, data in chunks)


def _drain(uploader, final=True):
    while uploader.step(final=final, now=time.monotonic()):
        pass


def test_the_cap_keeps_the_end_and_marks_what_it_dropped(tmp_path):
    store, path = MemoryStore(), tmp_path / "out.log"
    up = OutputUploader(store, "j", str(path), [], total_limit=64 * 1024)
    lines = [f"line {i:06d} of the job's output\n".encode() for i in range(20000)]
    with open(path, "ab") as f:
        for i in range(0, len(lines), 500):  # written in bursts, pumped between them
            f.write(b"".join(lines[i:i + 500]))
            f.flush()
            up.step(now=time.monotonic())
    _drain(up)
    kept = _uploaded(store)
    total = sum(map(len, lines))
    assert len(kept) <= 64 * 1024 and kept.endswith(lines[-1])
    marker = kept.split(b"\n", 1)[0]
    dropped = int(marker.split()[1])
    assert marker == f"[stado: {dropped} bytes of earlier output were dropped by the 65536 bytes output cap]".encode()
    assert dropped + len(kept) - len(marker) - 1 == total  # every byte is either kept or counted


def test_output_far_ahead_of_the_uploader_is_skipped_unread(tmp_path):
    store, path = MemoryStore(), tmp_path / "out.log"
    up = OutputUploader(store, "j", str(path), ["hunter2-secret"], total_limit=64 * 1024)
    body = b"".join(f"row {i} hunter2-secret\n".encode() for i in range(100000))
    path.write_bytes(body + b"the error at the end\n")
    _drain(up)
    kept = _uploaded(store)
    assert kept.endswith(b"the error at the end\n") and b"hunter2-secret" not in kept
    assert up.uploaded < 2 * 64 * 1024, "what the cap would drop was never read, redacted or uploaded"
    assert kept.startswith(b"[stado: ") and b"dropped" in kept.split(b"\n", 1)[0]


def test_a_partial_line_goes_up_after_a_quiet_moment_and_nothing_is_lost_when_the_store_fails(tmp_path):
    path = tmp_path / "out.log"
    store = FailingPuts(MemoryStore())
    up = OutputUploader(store, "j", str(path), [], partial_after=0.5)
    path.write_bytes(b"done: 1\nfetching model.bin ... ")
    up.step(now=100.0)
    assert _uploaded(store.inner) == b"done: 1\n"
    up.step(now=100.2)
    assert _uploaded(store.inner) == b"done: 1\n"
    store.failures = 1
    with pytest.raises(StoreUnavailable):
        up.step(now=100.6)
    up.step(now=100.7)
    assert _uploaded(store.inner) == b"done: 1\nfetching model.bin ... "
    with open(path, "ab") as f:
        f.write(b"42%\rfetching model.bin ... 100%\n")
    _drain(up)
    assert _uploaded(store.inner) == b"done: 1\nfetching model.bin ... 42%\rfetching model.bin ... 100%\n"


class FailingPuts(LostResponses):
    def __init__(self, inner):
        super().__init__(inner, 0)
        self.failures = 0

    def put(self, key, data):
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("connection reset while writing")
        return self.inner.put(key, data)
