"""`stado logs`: a job's output as its agent stored it (redacted, every attempt's in order, or one attempt's), with
nothing added: no state lines, no attempt headers (`stado job watch` has those). `--tail N` reads chunks from the
end only until it has N lines; `--follow` streams new chunks until the job is terminal, then ends with the job's
exit status (the table `stado job watch` and `jobman wait` use)."""
import time
from collections.abc import Iterator

from ..core import keys
from ..queue.lookup import view
from ..objectstore.base import NotFound, ObjectStore
from .watch import exit_status


def _listed(store: ObjectStore, job_id: str, attempt: int | None) -> list[tuple[tuple[int, int], str]]:
    """((attempt, chunk number), key) of the job's output chunks, in order (one LIST)."""
    found = []
    for entry in store.list(keys.output_prefix(job_id)):
        seq = keys.chunk_seq(entry.key)
        if seq is not None and (attempt is None or seq[0] == attempt):
            found.append((seq, entry.key))
    return sorted(found)


def _get(store: ObjectStore, key: str) -> bytes:
    try:
        return store.get(key).data
    except NotFound:  # removed since the listing (the job pruned): as if listed a moment later
        return b""


def tail_of(store: ObjectStore, job_id: str, lines: int | None, attempt: int | None = None
            ) -> tuple[bytes, tuple[int, int]]:
    """(the last `lines` lines of the output, or all of it; the last chunk read). Chunks are read from the end
    until there are enough lines, so the tail of a long output costs a few GETs, not one per chunk."""
    listed = _listed(store, job_id, attempt)
    last = listed[-1][0] if listed else (0, 0)
    if lines is None:
        return b"".join(_get(store, key) for _, key in listed), last
    if lines == 0:
        return b"", last
    parts: list[bytes] = []
    newlines = 0
    for _, key in reversed(listed):
        data = _get(store, key)
        parts.append(data)
        newlines += data.count(b"\n")
        if newlines > lines:  # one more than asked: the line before the first kept ends inside what was read
            break
    text = b"".join(reversed(parts))
    kept = text.splitlines(keepends=True)[-lines:]
    return b"".join(kept), last


def follow(store: ObjectStore, job_id: str, after: tuple[int, int], *, attempt: int | None = None,
           interval: float = 0.5, clock=time) -> Iterator[bytes | int]:
    """New output after the chunk `after`, as it is stored, then the job's exit status (an int) once it is terminal
    and its last chunk read."""
    while True:
        data = view(store, job_id)  # read before the chunks: output stored before it turned terminal is all listed
        for seq, key in _listed(store, job_id, attempt):
            if seq > after:
                chunk = _get(store, key)
                after = seq
                if chunk:
                    yield chunk
        if data.terminal:
            from ..core.documents import status_json

            yield exit_status(status_json(data))
            return
        clock.sleep(interval)
