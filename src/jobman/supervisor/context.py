"""What the supervisor's collaborators (its lease, its wait loop, its attempts) are given: the store, which job
and which supervisor, the job's windows, the clock, the process layer and the log. Not the supervisor: they
return what they decided (wait.Begin or wait.Finish, attempt.AttemptEnd) and the owner records it (owner.py)."""
from runkit.core.clock import Clock

from ..store.trouble import PatientDatabase
from ..store import transitions


class SupervisorContext:
    __slots__ = ("clock", "db", "group", "home", "job_id", "lease_seconds", "log", "poll_every", "processes",
                 "renew_every", "supervisor_id")

    def __init__(self, *, db: PatientDatabase, home: str, job_id: str, supervisor_id: str, group: str, lease_seconds: float,
                 renew_every: float, poll_every: float, clock: Clock, processes, log):
        self.db = db                        # the job's database, its calls waiting out storage trouble
        self.home, self.job_id, self.supervisor_id, self.group = home, job_id, supervisor_id, group
        self.lease_seconds = lease_seconds  # the job's windows (jobman.handoff.spec.windows_from_env)
        self.renew_every = renew_every
        self.poll_every = poll_every
        self.clock = clock                  # wall(): every time the supervisor writes or compares with the database
        self.processes = processes          # processes.Processes, or the in-process tier's fake
        self.log = log                      # a line in the job's supervisor log

    def record_waits(self) -> None:
        """Record in the job's events how long the database kept this supervisor waiting (and why), now that
        it can be written; whatever cannot be written yet waits for the next renewal."""
        db = self.db
        while db.waits:
            ok, _ = db.try_once("record a wait for the database", transitions.add_attempt_note, self.job_id,
                                "database_waited", self.clock.wall(), **db.waits[0])
            if not ok:
                return
            db.waits.pop(0)
