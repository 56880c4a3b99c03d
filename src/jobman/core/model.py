"""The job as the rest of jobman sees it: its spec, its state and its attempts, as small frozen records
built from the store's rows here, in one place, so that no column name travels further than this file.

runkit's Frozen records, not dataclasses: every supervisor loads this module (once it owns its job, and at each
return from its lean form); nor `typing`: the fields' types are written for the type checker alone.
"""
from runkit.core.frozen import Frozen

TYPE_CHECKING = False  # (typing.TYPE_CHECKING without importing typing: the type checker takes any name so spelled)


class Row(Frozen):
    """A Frozen record that can be built from a store row."""

    __slots__ = ()

    @classmethod
    def from_row(cls, row, **extra):
        """A record from a store row (sqlite3.Row) with whichever of the record's columns it holds."""
        if row is None:
            return None
        columns = row.keys()
        return cls(**{name: row[name] for name in cls._fields if name in columns and name not in extra}, **extra)


class JobState(Row):
    """A job's runtime state (job_state), with the scheduling columns of its immutable row."""

    __slots__ = ("job_id", "phase", "outcome", "revision", "claim_deadline", "supervisor_id", "supervisor_pid",
                 "supervisor_start_time", "supervisor_boot_id", "lease_expires_at", "lease_cover", "lease_end", "waiting_for", "wait_detail",
                 "wait_until", "slot_held", "attempts", "cancel_requested_at", "cancel_reason", "held_at", "exit_code", "exit_signal", "detail",
                 "finished_at", "group_name", "priority", "submitted_at", "lease_duration", "renew_interval",
                 "poll_interval")
    if TYPE_CHECKING:  # the fields' types, as the columns are (a field its row lacks is None)
        job_id: str
        phase: str
        outcome: str | None
        revision: int
        claim_deadline: float | None
        supervisor_id: str | None
        supervisor_pid: int | None
        supervisor_start_time: int | None
        supervisor_boot_id: str | None
        lease_expires_at: float | None
        lease_cover: float | None   # the lease round covers it (store.lease_round): its lease length
        lease_end: float | None     # when its lease runs out, cover included (store.queries.LEASE_END), where read
        waiting_for: str | None
        wait_detail: str | None
        wait_until: float | None
        slot_held: int
        attempts: int
        cancel_requested_at: float | None
        cancel_reason: str | None
        held_at: float | None
        exit_code: int | None
        exit_signal: int | None
        detail: str | None
        finished_at: float | None
        group_name: str
        priority: int
        submitted_at: float
        lease_duration: float
        renew_interval: float
        poll_interval: float

    @property
    def finished(self) -> bool:
        return self.phase == "finished"


class Job(JobState):
    """A job as commands list and show it: its state plus its display name and stored spec (JSON text)."""

    __slots__ = ("name", "spec", "handle", "started_at", "restarted_as")
    if TYPE_CHECKING:  # the fields' types, as the columns are (a field its row lacks is None)
        name: str | None
        spec: str
        handle: int | None
        started_at: float | None
        restarted_as: str | None  # JSON: [[id, handle], ...] of the jobs that restart it

    @classmethod
    def from_row(cls, row, **extra):
        job = super().from_row(row, **extra)
        if job is not None and job.job_id is None:  # rows of jobs JOIN job_state name the id "id" too
            object.__setattr__(job, "job_id", row["id"])
        return job


class Snapshot(JobState):
    """What a waiting supervisor reads to decide (store.queries.snapshot): its state, its dependencies
    as [(job_id, condition, phase, outcome, name)], and its group's slots."""

    __slots__ = ("deps", "deps_stale", "slot_limit", "group_paused", "slots_held", "holders_stale", "round_holder", "round_until")
    if TYPE_CHECKING:  # the fields' types, as the columns are (a field its row lacks is None)
        deps: list
        deps_stale: int
        slot_limit: int | None  # the slots its group lends now: 0 while the group is paused
        group_paused: int | None
        slots_held: int
        holders_stale: int
        round_holder: str | None
        round_until: float | None

    @classmethod
    def from_row(cls, row, **extra):
        from runkit.core.jsonfast import loads

        return None if row is None else super().from_row(row, deps=loads(row["deps"]), **extra)


class Attempt(Row):
    """One attempt of a job (attempts), with where its output went."""

    __slots__ = ("number", "started_at", "ended_at", "pid", "start_time", "boot_id", "pgid", "exit_code", "signal",
                 "outcome", "error", "log_path")
    if TYPE_CHECKING:  # the fields' types, as the columns are (a field its row lacks is None)
        number: int
        started_at: float
        ended_at: float | None
        pid: int | None
        start_time: int | None
        boot_id: str | None
        pgid: int | None
        exit_code: int | None
        signal: int | None
        outcome: str | None
        error: str | None
        log_path: str

    @property
    def duration(self) -> float | None:
        return (self.ended_at - self.started_at) if self.ended_at else None


class JobSpec(Row):
    """The immutable specification a job was submitted with (jobman.handoff.spec builds it). `data` is the whole
    stored mapping, as `jobman show --json` prints it."""

    __slots__ = ("argv", "env", "executable", "cwd", "umask", "timeout", "kill_after", "retry", "log_limit",
                 "separate_stderr", "not_before", "data")
    if TYPE_CHECKING:  # the fields' types, as the columns are (a field its row lacks is None)
        argv: list[str]
        env: dict[str, str]
        executable: str
        cwd: str | None
        umask: int
        timeout: float | None
        kill_after: float
        retry: dict
        log_limit: int | None
        separate_stderr: bool
        not_before: float | None
        data: dict

    @classmethod
    def from_json(cls, text: str) -> "JobSpec":
        """Raises ValueError, KeyError or TypeError for a stored spec that is not one."""
        from runkit.core.jsonfast import loads

        return cls.from_dict(loads(text))

    @classmethod
    def from_dict(cls, spec: dict) -> "JobSpec":
        # Every key jobman.handoff.spec.build has written since the first version: a spec that lacks one is no job's, and
        # fails here (KeyError), not mid-run.
        log = spec["log"]
        return cls(argv=spec["argv"], env=spec["env"], executable=spec["executable"], cwd=spec["cwd"],
                   umask=spec["umask"], timeout=spec["timeout"], kill_after=spec["kill_after"], retry=spec["retry"],
                   log_limit=log["limit"], separate_stderr=bool(log["separate_stderr"]),
                   not_before=spec["not_before"], data=spec)
