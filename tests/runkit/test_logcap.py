"""The log cap against a real writer process appending with O_APPEND while the cap cuts, in each of
its three ways: collapse (ext4, where tmp_path lives), punch (tmpfs: /dev/shm) and copy (forced)."""
import os
import subprocess
import sys
import tempfile

import pytest

from runkit.system.logcap import LogCap

LINE = 100  # bytes per numbered line, newline included
LINES = 200_000  # 20 MB through a 256 KiB cap
END = b"THE END\n"
# Writes the numbered lines while the cap cuts, says so by creating a marker file, then, once told
# the cutting has stopped (its stdin closes), a last line. A file, not a pipe, carries "done": the
# writer then has nothing to lose if the test's end of a pipe goes away first.
WRITER = (f"import os, sys\n"
          f"fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
          f"for i in range({LINES}):\n"
          f"    os.write(fd, (f'{{i:09d}} ' + 'x' * {LINE - 11} + '\\n').encode())\n"
          f"open(sys.argv[2], 'w').close()\n"
          f"sys.stdin.read()\n"
          f"os.write(fd, {END!r})\n")


def _run_capped(path: str, limit: int, modes=None) -> LogCap:
    open(path, "wb").close()
    cap = LogCap(path, limit, **({"modes": modes} if modes else {}))
    done = path + ".done"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path, done], stdin=subprocess.PIPE)
    while not os.path.exists(done):
        assert writer.poll() is None, f"the writer ended early ({writer.returncode})"
        cap.enforce()
    os.unlink(done)
    writer.stdin.close()
    assert writer.wait(timeout=60) == 0
    cap.enforce()
    return cap


def _kept(path: str, cap: LogCap) -> bytes:
    with open(path, "rb") as f:
        f.seek(cap.dropped - cap.shift)
        return f.read()


def _numbers(data: bytes) -> list[int]:
    assert data.endswith(END)
    lines = data[:-len(END)].split(b"\n")
    assert lines[-1] == b""
    return [int(line[:9]) for line in lines[1:-1]]  # the first may be a partial line where the cut fell


def _tmpfs_dir() -> str:
    assert os.path.isdir("/dev/shm"), "this test needs a tmpfs at /dev/shm"
    return tempfile.mkdtemp(dir="/dev/shm", prefix="logcap-test-")


@pytest.mark.parametrize("where,modes,expect", [("tmp", None, "collapse"), ("shm", None, "punch")])
def test_a_cut_loses_nothing_and_keeps_the_newest(tmp_path, where, modes, expect):
    base = str(tmp_path) if where == "tmp" else _tmpfs_dir()
    path = os.path.join(base, "out.log")
    try:
        limit = 256 * 1024
        cap = _run_capped(path, limit, modes)
        assert cap.mode == expect
        kept = _kept(path, cap)
        assert cap.dropped + len(kept) == LINES * LINE + len(END)  # every byte is either kept or counted as dropped
        numbers = _numbers(kept)
        assert numbers == list(range(numbers[0], LINES))  # no gap, newest last
        assert len(kept) <= limit and cap.size() == len(kept)
        assert len(kept) >= 0.9 * limit  # a cut keeps at least 90% of the cap
        assert os.stat(path).st_blocks * 512 <= limit + 64 * 1024  # the space used stays under the cap
    finally:
        if where == "shm":
            os.unlink(path)
            os.rmdir(base)


def test_copy_truncate_keeps_whole_lines_in_order_and_the_newest(tmp_path):
    """The last resort (a filesystem that can neither collapse nor punch): a line appended in the instant
    between the last size check and the truncate may be lost, which is why it is the last resort, but no
    line is ever overwritten or reordered, and the file holds to the cap and ends with the newest."""
    path = str(tmp_path / "out.log")
    limit = 256 * 1024
    cap = _run_capped(path, limit, modes=("copy",))
    assert cap.mode == "copy" and cap.shift == cap.dropped
    kept = _kept(path, cap)
    numbers = _numbers(kept)
    assert len(kept) <= limit and numbers[-1] == LINES - 1 and numbers == sorted(set(numbers))
    for line in kept[:-len(END)].split(b"\n")[1:-1]:
        assert len(line) == LINE - 1 and line[10:] == b"x" * (LINE - 11)
    assert cap.dropped + len(kept) > (LINES * LINE + len(END)) * 0.95  # the races lose little


def test_a_cap_smaller_than_a_block_holds_to_the_block(tmp_path):
    path = str(tmp_path / "out.log")
    cap = _run_capped(path, 1000)
    block = max(os.stat(path).st_blksize, 4096)
    assert cap.size() <= 1000 + 2 * block
    assert _numbers(_kept(path, cap))[-1] == LINES - 1
