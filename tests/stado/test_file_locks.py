"""The local-directory store's bucket locks under real faults: a writer stopped (SIGSTOP) while it holds one, and a
writer whose bytes come slowly.

Before: every write held its bucket's flock across writing its temporary file, its fsync, the rename and the
directory's fsync, and every other writer waited for it without a bound. An agent stopped inside that window blocked
every writer of the bucket (its job's keeper's requeue, the other agents' reaper passes) for as long as it was
stopped, with nothing said; a 100 MB artifact upload held its bucket for as long as its bytes took to come."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from stado.objectstore.base import NotFound, StoreError, StoreUnavailable
from stado.objectstore.file import FileStore
from tests.helpers import wait_for

KEY = "running/j1.json"

HOLDER = """
import os, signal, sys
from stado.objectstore.file import FileStore
store = FileStore(sys.argv[1])
held = store._lock(sys.argv[2])   # exactly where a writer holds its bucket's lock
held.__enter__()
print("held", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
held.__exit__()
"""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_writer_stopped_holding_a_lock_is_named_and_others_are_not_held_for_ever(tmp_path):
    root = str(tmp_path / "store")
    store = FileStore(root, lock_wait=0.5)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, root, KEY], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        wait_for(lambda: _state(holder.pid) == "T", message="the holder stopped")
        began = time.monotonic()
        with pytest.raises(StoreUnavailable) as raised:
            store.put(KEY, b"{}")
        waited = time.monotonic() - began
        assert 0.4 <= waited < 5.0, waited
        message = str(raised.value)
        assert f"process {holder.pid} (stopped)" in message and "kill -CONT" in message, message
        assert "\n" not in message
        with pytest.raises(NotFound):
            store.get(KEY)  # nothing was written
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.wait(10)
        holder.stdout.close()
    store.put(KEY, b"{}")  # resumed, it let go: the bucket takes writes again
    assert store.get(KEY).data == b"{}"


def test_a_writer_whose_bytes_come_slowly_holds_no_lock_meanwhile(tmp_path):
    store = FileStore(str(tmp_path / "store"), lock_wait=5.0)
    go_on, streaming = threading.Event(), threading.Event()

    def slow_chunks():
        yield b"x" * 1_000_000
        streaming.set()
        go_on.wait(30)
        yield b"y" * 1_000_000

    slow = threading.Thread(target=store.put_chunks, args=(KEY, slow_chunks()))
    slow.start()
    try:
        assert streaming.wait(10)
        quick_done = threading.Event()
        quick = threading.Thread(target=lambda: (store.put(KEY, b"quick"), quick_done.set()))
        quick.start()
        # The quick write of the same key lands while the slow one's bytes are still coming.
        assert quick_done.wait(3.0), "a write waited for another writer's bytes to come"
        assert store.get(KEY).data == b"quick"
    finally:
        go_on.set()
        slow.join(30)
    assert store.get(KEY).data == b"x" * 1_000_000 + b"y" * 1_000_000  # the later rename wins, whole
    assert os.listdir(tmp_path / "store" / "tmp") == []


def test_a_bad_lock_wait_setting_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STADO_FILE_LOCK_WAIT", "soon")
    with pytest.raises(StoreError) as raised:
        FileStore(str(tmp_path / "store"))
    assert "STADO_FILE_LOCK_WAIT='soon' is not a number of seconds" in str(raised.value)
