"""One job on an agent: its state, with its phase explicit.

    CLAIMED ─launch─> RUNNING ─stop()─> STOPPING
       │                 │                 │
       │ (a stop, a failure before start)  │ its shell reaped (or, adopted, seen gone)
       v                 v                 v
     ENDED <─────────────┴─────────────────┘  its process group gone, artifacts and output going up
       │
       v
     CLOSED ─settled (slotend.finish)─> DONE   (the agent drops it)

Why a slot is stopped is a Stop, kept beside the phase: a cancel, a timeout, its cost cap, the record taken over
(lost), what the shell left in its group (leftover), the agent's shutdown, or a hand-back (its agent drains and
it never started). The phase says where the slot is; the stop says what its end records.
"""
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core import documents as d


class SlotIO(Protocol):
    """What a slot's transfers offer (agent.jobio.JobIO on this host; the simulator's and the tests' own)."""

    output_path: str

    def inputs(self, refs: list, work_dir: str) -> tuple[str, Any]: ...

    def inputs_in(self) -> bool: ...

    def tell(self, message: str) -> None: ...

    def redact_also(self, secrets: list[str]) -> None: ...  # called only for a job with secret-looking --env values

    def cancel(self) -> None: ...

    def close(self, upload_artifacts: bool) -> tuple[str, str | None]: ...


class Phase:
    CLAIMED = "claimed"    # claimed: its claim being checked, its inputs arriving; no process yet
    RUNNING = "running"    # its process runs (spawned here, or left by the agent this one replaced and watched)
    STOPPING = "stopping"  # its process group was sent SIGTERM (SIGKILL after --kill-after)
    ENDED = "ended"        # its shell is gone (or never started): its output and artifacts go up, then it settles
    CLOSED = "closed"      # its output and artifacts are up: ready to settle (again, if settling failed)
    DONE = "done"          # settled, or nothing left to record: the agent drops it


class Stop:
    CANCEL = "cancel"
    TIMEOUT = "timeout"
    COST_CAP = "cost_cap"
    LOST = "lost"          # the running record is no longer this attempt's: nothing is recorded
    LEFTOVER = "leftover"  # the shell exited; what it left in its group does not outlive the job
    SHUTDOWN = "shutdown"  # a second SIGTERM/SIGINT: recorded cancelled by the shutdown
    HANDBACK = "handback"  # never started, and its agent drains: back to the queue
    KEPT = "kept"          # its keeper stopped it (this agent did not renew in time): recorded as a lost worker


@dataclass
class Slot:
    doc: d.Job
    version: Any                        # the running record's Version (None: a re-adoption not yet verified)
    job_dir: str
    phase: str = Phase.CLAIMED
    stop: str | None = None             # why its group is (to be) stopped: a Stop
    process: dict | None = None         # pid, pgid, start time, boot id, work dir of the job's shell
    started_at: float = 0.0             # the attempt's start, by the store's clock (the claim's; kept across a re-adoption)
    started_mono: float = 0.0           # when its process started, on this agent's monotonic clock
    io: SlotIO = None  # type: ignore[assignment]  # its JobIO (set as it begins): transfers on threads of their own
    verify: tuple | None = None         # (queue doc, version): a claim whose genuineness is still to be read
    cancel_seen: tuple | None = None    # (running doc, version): the cancel as the write it refused read it
    launch_due: float = 0.0             # when to try again to fetch its inputs and spawn it
    result: dict | None = None          # an outcome decided without a process (input unavailable, spawn error)
    dependency_failed: dict | None = None  # a dependency that can never hold, as the claim pass found it
    delivered: list | None = None       # its inputs, once fetched and verified
    exit: tuple | None = None           # (exit code, signal) once the shell has exited; (None, None): unknown
    stop_sent: float = 0.0
    kill_sent: bool = False
    renew_due: float = 0.0              # when its next renewal is due, on the agent's monotonic clock
    promised_until: float = 0.0         # when its current promise runs out, on the agent's monotonic clock
    close_due: float = 0.0              # when to try closing again after a store error
    upload_error: str | None = None     # why its artifacts could not be uploaded
    adopted: bool = False               # watched, not spawned, by this agent (left by the worker it replaced)
    exit_watch: object = None           # an adopted shell pinned, to read its exit status (ProcessHost.watch_exit)
    keeper_wait: float | None = None    # an adopted shell gone unrecorded: until when its live keeper's word is awaited
    cost_note: str | None = None        # why it was stopped for its cost (admission.past_cap)
    overtaken: tuple | None = None      # (running doc or None, its version): a renewal met another writer's move
    retick: bool = False                # the loop found the lock taken: the renewal wakes it when done
    renewing: bool = False              # a renewal is in flight on the renewals' thread (made without the lock)
    renewed: tuple | None = None        # (claim held, outcome) of a renewal the loop is to record (apply_renewal)
    keeper: dict | None = None          # its keeper process (ProcessHost.keep), told when the slot is settled
    trying: dict | None = None          # the renewal in flight, as its keeper is told (nonce, began, lease, base)
    # Nonces of renewals whose answer was an error since the last one known to have landed: any may have landed
    # (its keeper takes a record holding one for its own agent's write).
    unanswered: tuple = ()
    renew_took: float = 0.0             # how long the last renewal that landed took to write
    pulsed: float | None = None         # when the last pulse after a failed renewal that landed began
    # Held by whoever writes the running record for this slot (its renewals' thread, or the loop), with the slot's
    # doc and version: each side only tries it, and comes back when the other is done.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def job_id(self) -> str:
        return self.doc.id

    @property
    def pgid(self) -> int | None:
        return self.process["pgid"] if self.process else None

    @property
    def stopping_words(self) -> str:
        """'stopping process group N', or what stands for it when no process of the slot ever started."""
        return f"stopping process group {self.pgid}" if self.pgid is not None else "no process of it had started"

    @property
    def stopped_words(self) -> str:
        """'process group N stopped', or 'not started' when no process of the slot ever started."""
        return f"process group {self.pgid} stopped" if self.pgid is not None else "not started"

    @property
    def started(self) -> bool:
        """Its process was spawned, or it failed before it could be."""
        return self.phase != Phase.CLAIMED

    @property
    def live(self) -> bool:
        """Its shell may still run (spawned or adopted, not yet seen gone)."""
        return self.phase in (Phase.RUNNING, Phase.STOPPING)

    @property
    def gone(self) -> bool:
        """Its shell has ended, or never started: its exit is known (or known unknown)."""
        return self.phase in (Phase.ENDED, Phase.CLOSED, Phase.DONE)

    def ended(self, exit_status: tuple) -> None:
        self.exit, self.phase = exit_status, Phase.ENDED

    def due(self, now_mono: float, poll: float, kill_after: float | None = None, renewals: bool = True) -> float:
        """When this slot next needs the loop (`kill_after`: when stopping, SIGKILL falls due that long after SIGTERM;
        `renewals`: the loop renews it, rather than a thread of its own)."""
        due = self.renew_due if renewals else float("inf")
        if not self.started:
            due = min(due, self.launch_due)
        if self.close_due > now_mono:
            due = min(due, self.close_due)
        timeout = self.doc.spec.timeout
        if timeout and self.process and self.stop is None and not self.gone:
            due = min(due, self.started_mono + timeout)  # kept by the agent's own timer, not the next poll
        if self.stop and self.process and not self.kill_sent and self.stop_sent and kill_after is not None:
            due = min(due, self.stop_sent + kill_after)  # to the millisecond, not at the next 50 ms look
        if self.stop or (self.adopted and not self.gone):
            due = min(due, now_mono + min(0.05 if self.stop else 0.5, poll))
        return due


def promised_until(doc: d.Job, written_mono: float) -> float:
    """When the promise in `doc` runs out on this agent's monotonic clock: from when its write began (the
    store's stamp, by which the reaper judges it, is no earlier)."""
    lease = doc.lease_seconds
    return written_mono + (lease if isinstance(lease, (int, float)) else 0.0)


def attempt_start(doc: d.Job, now: float) -> float:
    """The attempt's start by the store's clock: its record's started_at, else `now` (the claim just made)."""
    return d.parse_iso(doc.started_at) or now
