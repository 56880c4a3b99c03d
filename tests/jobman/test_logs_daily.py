"""logs: no JOB means the newest job; --follow puts each attempt's header first; a cut log keeps >= 90%
of its cap from a line boundary on."""
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import kill_all
from tests.jobman.conftest import JOBMAN, Jobman

LINE = 100  # bytes per numbered line, newline included
WRITER = ("import os\n"
          "for i in range({n}):\n"
          "    os.write(1, (f'{{i:09d}} ' + 'x' * {pad} + '\\n').encode())\n")


def test_logs_without_job_shows_the_newest(jobman):
    assert jobman("logs").returncode == 2  # nothing submitted yet: one line, not a traceback
    first = jobman.run("echo", "first")
    second = jobman.run("echo", "second")
    jobman("wait", first, second, check=True)
    assert jobman("logs", check=True).stdout == "second\n"
    assert jobman("logs", "--tail", "1", check=True).stdout == "second\n"


def _read_lines(proc, count: int, timeout: float = 30.0) -> list[str]:
    lines, buffer = [], b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while len(lines) < count:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"timed out with {lines} {buffer!r}"
        chunk = os.read(fd, 4096)
        assert chunk, f"follow ended early after {lines} {buffer!r}"
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        lines += [line.decode() for line in done]
    assert not buffer
    return lines


def test_follow_puts_each_attempts_header_before_its_output(jobman, tmp_path):
    # Each attempt prints, then waits for its own gate: the follower sees attempt N's output while
    # attempt N is the only one, which is when the header used to come late.
    script = (f"n=$(cat {tmp_path}/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > {tmp_path}/count; "
              f"echo run $n; while [ ! -e {tmp_path}/gate$n ]; do sleep 0.02; done; [ $n -ge 3 ]")
    job_id = jobman.run("sh", "-c", script, opts=["--retries", "2"])
    follower = subprocess.Popen([JOBMAN, "logs", "--follow", job_id], env=jobman.env, stdout=subprocess.PIPE)
    try:
        seen = _read_lines(follower, 2)
        for n in (1, 2):
            (tmp_path / f"gate{n}").touch()
            seen += _read_lines(follower, 2)
        (tmp_path / "gate3").touch()
        assert follower.wait(timeout=30) == 0
        assert seen == ["==> attempt 1 <==", "run 1", "==> attempt 2 <==", "run 2", "==> attempt 3 <==", "run 3"]
        assert follower.stdout.read() == b""
    finally:
        kill_all([follower.pid])
        follower.stdout.close()
    # The plain read agrees with what was followed.
    assert jobman("logs", job_id, check=True).stdout.splitlines() == seen


@pytest.fixture(params=["ext4", "tmpfs"])
def capped_home(request, tmp_path):
    """A jobman home on the test's filesystem (the cap collapses) or on tmpfs (the cap punches holes)."""
    if request.param == "ext4":
        yield Jobman(tmp_path / "home")
        return
    assert os.path.isdir("/dev/shm"), "this test needs a tmpfs at /dev/shm"
    base = tempfile.mkdtemp(dir="/dev/shm", prefix="jobman-cap-")
    jm = Jobman(Path(base) / "home")
    try:
        yield jm
    finally:
        kill_all(jm.processes())
        shutil.rmtree(base, ignore_errors=True)


def test_a_cut_log_keeps_at_least_90_percent_of_its_cap_from_a_line_on(capped_home):
    jm = capped_home
    lines, cap = 100_000, 1024 * 1024  # 10 MB through a 1 MiB cap
    job_id = jm.run(sys.executable, "-c", WRITER.format(n=lines, pad=LINE - 11), opts=["--log-limit", "1M"])
    jm("wait", job_id, check=True)
    out = jm("logs", job_id, check=True).stdout.encode()
    marker, _, kept = out.partition(b"\n")
    dropped = int(re.fullmatch(rb"\[jobman: (\d+) bytes of earlier output were dropped by the log size limit\]",
                               marker).group(1))
    assert dropped + len(kept) == lines * LINE  # every byte shown or counted
    assert 0.9 * cap <= len(kept) <= cap, len(kept)
    numbers = [int(line[:9]) for line in kept.splitlines()]
    assert all(len(line) == LINE - 1 for line in kept.splitlines())  # the first kept line is a whole line
    assert numbers == list(range(numbers[0], lines))
