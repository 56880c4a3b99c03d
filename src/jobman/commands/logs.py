"""Reading a job's output: per-attempt log files, with the span the size cap dropped marked, and
following them live across retries until the job ends."""
import os
import time

from ..core.home import cut_path, stderr_log_path
from ..core.model import Attempt, JobState
from ..store import queries
from runkit.core.jsonfast import loads
from runkit.core.outcomes import exit_status

FOLLOW_POLL = 0.1


def _cut(path: str) -> tuple[int, int, bool]:
    """(bytes the cap dropped from the front, bytes by which file offsets lag output offsets, whether the
    first kept byte begins a line); a lone number is a cut that moved the data."""
    try:
        with open(cut_path(path)) as f:
            fields = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return 0, 0, True
    if not fields:
        return 0, 0, True
    return fields[0], fields[1] if len(fields) > 1 else fields[0], bool(fields[2]) if len(fields) > 2 else True


def _attempts(conn, job_id: str) -> list:
    return [Attempt.from_row(row) for row in queries.attempts(conn, job_id)]


def _stream_path(attempt, stderr: bool) -> str:
    path = attempt.log_path
    return stderr_log_path(path) if stderr else path


def _marker(dropped: int) -> bytes:
    return f"[jobman: {dropped} bytes of earlier output were dropped by the log size limit]\n".encode()


def _read_from(path: str, logical: int) -> tuple[bytes, int]:
    """Bytes of `path` from logical offset `logical` (counting bytes the cap cut from the front). Reading
    from before the cut gives the marker, then the kept output from its first whole line on."""
    cut = _cut(path)
    dropped, shift, at_line_start = cut
    start = max(logical, dropped)
    try:
        with open(path, "rb") as f:
            f.seek(start - shift)
            data = f.read()
    except FileNotFoundError:
        data = b""
    # The cut count and the file are read separately: re-check the count so a cut in between is noticed.
    if _cut(path) != cut:
        return (_marker(dropped - logical), dropped) if logical < dropped else (b"", logical)
    if logical >= dropped:
        return data, logical + len(data)
    skip = 0
    if not at_line_start and (newline := data.find(b"\n")) >= 0:
        skip = newline + 1  # the partial line the cut fell in: counted with the dropped bytes
    return _marker(dropped - logical + skip) + data[skip:], start + len(data)


def _logical_end(path: str) -> int:
    """Where the output of a log file ends, counting what the cap cut from its front."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        size = 0
    return size + _cut(path)[1]


def tail_lines(data: bytes, n: int) -> bytes:
    if n <= 0:
        return b""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[-n:])


def read(conn, job_id: str, *, attempt: int | None, stderr: bool, tail: int | None, out) -> bool:
    """Write the selected output to `out`. Returns False when the job has no attempt yet."""
    attempts = _attempts(conn, job_id)
    if attempt is not None:
        attempts = [a for a in attempts if a.number == attempt]
    if not attempts:
        return False
    chunks = []
    for a in attempts:
        if len(attempts) > 1:
            chunks.append(f"==> attempt {a.number} <==\n".encode())
        data, _ = _read_from(_stream_path(a, stderr), 0)
        chunks.append(data)
    data = b"".join(chunks)
    out.write(tail_lines(data, tail) if tail is not None else data)
    out.flush()
    return True


def collect(conn, job_id: str, *, attempt: int | None, stderr: bool, tail: int | None) -> list[dict]:
    """The selected output as data (for --json): one entry per attempt."""
    entries = []
    for a in _attempts(conn, job_id):
        if attempt is not None and a.number != attempt:
            continue
        path = _stream_path(a, stderr)
        data, _ = _read_from(path, 0)
        if tail is not None:
            data = tail_lines(data, tail)
        entries.append({"attempt": a.number, "stream": "stderr" if stderr else "output", "log": path,
                        "bytes_dropped": _cut(path)[0], "text": data.decode(errors="replace")})
    return entries


def follow(conn, job_id: str, *, attempt: int | None, stderr: bool, tail: int | None, out, reconcile) -> int:
    """Stream output as it is written, moving on to each new attempt, until the job ends.
    Returns the job's exit status."""
    current, logical, first = attempt, 0, True
    shown_header = set()
    # A header must come before its attempt's output: if the job may retry, attempt 1 has one too.
    retries = (loads(queries.spec_json(conn, job_id)).get("retry") or {}).get("retries", 0) if attempt is None else 0
    while True:
        reconcile()
        state = JobState.from_row(queries.load_state(conn, job_id))
        attempts = _attempts(conn, job_id)
        if current is None and attempts:
            current = attempts[0].number
        row = next((a for a in attempts if a.number == current), None)
        if row is not None:
            if retries or len(attempts) > 1 or row.number > 1:
                if current not in shown_header:
                    out.write(f"==> attempt {current} <==\n".encode())
                    shown_header.add(current)
            data, logical = _read_from(_stream_path(row, stderr), logical)
            if first and tail is not None:
                data = tail_lines(data, tail)
            first = False
            if data:
                out.write(data)
                out.flush()
            newer = [a.number for a in attempts if a.number > current]
            if row.ended_at is not None and newer and attempt is None:
                current, logical = newer[0], 0
                continue
        if state.finished and (row is None or row.ended_at is not None or state.outcome == "lost"):
            data, logical = (_read_from(_stream_path(row, stderr), logical) if row is not None else (b"", 0))
            if data:
                out.write(data)
                out.flush()
            return exit_status(state.outcome, state.exit_code, state.exit_signal)
        time.sleep(FOLLOW_POLL)


def since(conn, job_id: str, after: tuple[int, int], *, stderr: bool = False,
          first_max: int | None = None) -> tuple[list, tuple[int, int], bool]:
    """Output written after `after` ((attempt, logical offset in it); (0, 0): from the start), as (attempt, bytes)
    pieces in order; the position reached; and whether nothing more will come (the job has finished and all its
    output was read). The state is read before the output, so output written before the job finished is never
    missed. first_max: of an attempt read from its start, only its newest first_max bytes, after a line saying how
    many were left out. What `jobman ui` tails a running job's log with."""
    state = JobState.from_row(queries.load_state(conn, job_id))
    attempt, logical = after
    pieces = []
    for a in _attempts(conn, job_id):
        if a.number < attempt:
            continue
        if a.number > attempt:
            attempt, logical = a.number, 0
        path = _stream_path(a, stderr)
        if logical == 0 and first_max is not None:
            start = _logical_end(path) - first_max
            if start > _cut(path)[0]:
                pieces.append((a.number, f"[jobman: {start} bytes of earlier output not shown here; jobman logs "
                                         f"{job_id} shows them]\n".encode()))
                logical = start
        data, logical = _read_from(path, logical)
        if data:
            pieces.append((a.number, data))
    return pieces, (attempt, logical), state.finished
