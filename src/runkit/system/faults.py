"""Fault points: named places where a test makes a process crash or misbehave, to open a crash window
exactly rather than by timing. Both tools use this one mechanism; each names its own variable.

A tool makes one `FaultPoints(prog, variable, ...)`; the variable holds the active points, comma-separated.
`hit` crashes the process there, without any cleanup: by SIGKILL (what a crash looks like from outside),
or, when the tool gives an exit code, by announcing the point on stderr and `os._exit(code)` (a crash
whose cause a test can tell from its exit status). `active` lets the caller misbehave in its own way.
`pause` and `linger` stop at a point until the test has done what it came to do (they need a marker
variable: the point touches that file to say it has arrived).
"""
import os

SIGKILL = 9
LINGER_LIMIT = 60.0  # a test that never releases a lingering process does not leave it behind for ever
_POLL = 0.01


class FaultPoints:
    def __init__(self, prog: str, variable: str, *, exit_code: int | None = None,
                 marker_variable: str | None = None, environ=os.environ):
        self.prog = prog
        self.active_points = frozenset(p.strip() for p in environ.get(variable, "").split(",") if p.strip())
        self.exit_code = exit_code
        self.marker = environ.get(marker_variable) if marker_variable else None

    def active(self, point: str) -> bool:
        return point in self.active_points

    def hit(self, point: str) -> None:
        if point not in self.active_points:
            return
        if self.exit_code is None:
            os.kill(os.getpid(), SIGKILL)
            return
        os.write(2, f"{self.prog}: fault point {point}: exiting as a crash would\n".encode())
        os._exit(self.exit_code)

    def pause(self, point: str) -> None:
        """Touch the marker, then stop here until a signal ends the process."""
        if point in self.active_points:
            self._arrive()
            import time

            while True:  # not signal.pause(): a signal landing before pause() is entered would be missed for ever
                time.sleep(0.05)

    def linger(self, point: str) -> None:
        """Touch the marker, then wait until the test removes it (having sent its signals, say): a window
        that stays open exactly as long as the test needs."""
        if point in self.active_points:
            self._arrive()
            import time

            deadline = time.monotonic() + LINGER_LIMIT
            while self.marker and os.path.exists(self.marker) and time.monotonic() < deadline:
                time.sleep(_POLL)

    def _arrive(self) -> None:
        if self.marker:
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
