"""The lease promise a worker writes into its running documents (pure).

lease_expires_at = now + --poll-seconds + the longest a renewal has been measured landing late in
this process (capped, so one long stall such as a laptop asleep does not stretch every later promise)
+ how long the last renewal write took.
"""
from dataclasses import dataclass


@dataclass
class LeasePromise:
    poll_seconds: float
    late_cap: float = 60.0
    longest_late: float = 0.0
    last_write: float = 0.0

    def promise(self, now: float) -> float:
        return now + self.poll_seconds + min(self.longest_late, self.late_cap) + self.last_write

    def observed(self, due: float, began: float, ended: float) -> None:
        """A renewal due at `due` started at `began` and its write finished at `ended`."""
        self.longest_late = max(self.longest_late, began - due)
        self.last_write = max(0.0, ended - began)
