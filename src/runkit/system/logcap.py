"""Keeping a log file that a target appends to directly within a size cap, newest output kept.

The target holds the file open with O_APPEND and never waits for us, so the oldest bytes must go
without ever moving under a write in flight. In order of preference, decided at the first cut:

- collapse (ext4, xfs): fallocate(FALLOC_FL_COLLAPSE_RANGE) removes the oldest blocks and shifts
  the rest down; the target's next append lands at the new end. Nothing is copied, nothing lost.
- punch (tmpfs, btrfs, ...): fallocate(FALLOC_FL_PUNCH_HOLE) frees the oldest bytes in place. The
  file's offsets never move, so no write can be lost; its apparent size keeps growing while the
  space it uses stays under the cap.
- copy (a filesystem with neither): the newest part is copied to the front and the file truncated
  after it. Output appended in the instant between the last look at the size and the truncate is
  lost (the classic copytruncate race), so this is the last resort only.

Readers map output offsets to file offsets with two numbers the caller publishes: `dropped`,
bytes of output gone from the front (they print a marker for them), and `shift`, how far the
file's offsets lag the output's (collapse and copy move data; punch does not). A third,
`at_line_start`, says whether the first kept byte begins a line (the byte before the cut was a
newline): if not, readers skip the partial line, so what follows their marker starts at a line.
"""
import os

from . import host

# After a cut, keep the newest 92% of the cap: a reader is promised at least 90% of it, even after
# it skips the partial line where the cut fell. (A cut costs a write-back of what is not on disk yet,
# so cutting a little each time costs more cuts, not more bytes written.)
KEEP_FRACTION = 0.92
MODES = ("collapse", "punch", "copy")


class LogCap:
    def __init__(self, path: str, limit: int, modes: tuple[str, ...] = MODES):
        self.path, self.limit = path, limit
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self.dropped = 0  # bytes of output cut from the front, in all
        self.shift = 0  # bytes by which file offsets lag output offsets
        self.at_line_start = True  # whether the first kept byte begins a line
        self._modes = list(modes)  # what is still worth trying; the first one that works stays
        self._block = max(os.fstat(self.fd).st_blksize, 4096)

    @property
    def mode(self) -> str | None:
        return self._modes[0] if self._modes else None

    def size(self) -> int:
        """Bytes of output the file holds now (holes not counted)."""
        return os.fstat(self.fd).st_size - (self.dropped - self.shift)

    def enforce(self) -> int:
        """Cut the file back under the cap if it grew past it. Returns the bytes dropped by this call."""
        if self.limit <= 0:
            return 0
        file_size = os.fstat(self.fd).st_size
        end = file_size + self.shift  # output offset of the end
        if end - self.dropped <= self.limit:
            return 0
        cut_to = end - int(self.limit * KEEP_FRACTION)  # output offset where kept output starts
        while self._modes:
            mode = self._modes[0]
            if mode == "collapse":
                length = cut_to - self.shift
                length -= length % self._block
                if file_size - length > self.limit and length + self._block < file_size:
                    length += self._block  # rounded down, the cut would leave more than the cap
                if length <= 0:
                    return 0  # a cap under two blocks holds to the block: copying would risk the newest bytes
                boundary = self._line_starts_at(length)
                if host.collapse_range(self.fd, 0, length):
                    self.at_line_start = boundary
                    self._settle("collapse")
                    return self._moved(length)
            elif mode == "punch":
                # Punching keeps file offsets equal to output offsets, so only a file never moved may.
                # Start at a block boundary: the partial block the last punch ended in is freed now.
                start = self.dropped - self.dropped % self._block
                boundary = self._line_starts_at(cut_to) if self.shift == 0 else True
                if self.shift == 0 and host.punch_hole(self.fd, start, cut_to - start):
                    self.at_line_start = boundary
                    self._settle("punch")
                    done, self.dropped = cut_to - self.dropped, cut_to
                    return done
                if self.dropped:
                    return 0  # punching worked before: offsets must not start moving now; try again later
            else:
                self.at_line_start = self._line_starts_at(cut_to - self.shift)
                return self._moved(self._copy_truncate(cut_to - self.shift))
            self._modes.pop(0)  # EOPNOTSUPP and the like: this filesystem cannot; try the next way
        return 0

    def _line_starts_at(self, file_offset: int) -> bool:
        """Whether the byte at file_offset begins a line (read before the cut takes the byte before it)."""
        try:
            return file_offset <= 0 or os.pread(self.fd, 1, file_offset - 1) == b"\n"
        except OSError:
            return False

    def _settle(self, mode: str) -> None:
        # Once a way has worked, keep to it (and, after collapse, only copy shares its offset rule).
        if mode == "collapse":
            self._modes = ["collapse", "copy"]
        elif mode == "punch":
            self._modes = ["punch"]

    def _moved(self, length: int) -> int:
        self.dropped += length
        self.shift += length
        return length

    def _copy_truncate(self, cut: int) -> int:
        """Move the file's bytes from `cut` on to the front and truncate after them. Returns how many went.

        The target only ever appends at the end, and everything is moved down by `cut` bytes, so no
        write of ours lands where the target writes: the one race left is an append landing between
        the last look at the size and the truncate, which the truncate then loses."""
        pos, src = 0, cut
        while (end := os.fstat(self.fd).st_size) > src:
            while src < end:
                data = os.pread(self.fd, min(end - src, 1 << 20), src)
                if not data:
                    break
                os.pwrite(self.fd, data, pos)
                pos, src = pos + len(data), src + len(data)
        os.ftruncate(self.fd, pos)
        return cut

    def close(self) -> None:
        os.close(self.fd)
