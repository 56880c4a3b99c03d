"""The lease round's cover, on a real database and real processes: the round's holder watches each waiting
supervisor's end (a pidfd each) and keeps their leases by writing one row a round, not a row per job. What
must hold: a covered job's lease never has less than a renewal interval left while its supervisor lives; a
supervisor that ends is uncovered before the round moves on, so its lease runs out as it would have alone and
the job is then found lost; a new holder never vouches for a job it does not watch; and where no pidfd can be
had, the round falls back to renewing each lease. Here the round's own function runs on a virtual clock, with
`sleep` processes standing in for the waiting supervisors."""
from runkit.core.clock import ManualClock
import os
import resource
import subprocess
import sys
import textwrap

import pytest

from jobman.commands import reconcile
from jobman.store import database, lease_round as records, queries, transitions
from jobman.supervisor import lease_round
from runkit.core.hashing import sha256
from runkit.core.ids import uuid7
from runkit.system import proc
from runkit.system.deathwatch import DeathWatch

CREDENTIAL = b"c" * 32
LEASE, PERIOD = 15.0, 5.0
WINDOWS = {"claim": 10.0, "lease": LEASE, "renew": PERIOD, "poll": 30.0}
T0 = 1_000_000.0
DUE = T0 + LEASE - 2 * PERIOD + 0.5  # a round at which every own lease taken at T0 has less than two periods left


@pytest.fixture
def conn(tmp_path):
    connection = database.connect(str(tmp_path / "jobman.db"))
    yield connection
    connection.close()


@pytest.fixture
def sleepers():
    started: list[subprocess.Popen] = []

    def start(count: int) -> list[subprocess.Popen]:
        new = [subprocess.Popen(["sleep", "600"]) for _ in range(count)]
        started.extend(new)
        return new

    yield start
    for p in started:
        p.kill()
        p.wait()


def waiting_job(conn, supervisor: subprocess.Popen) -> str:
    """A job claimed by `supervisor` (its real identity) and waiting for a slot, its own lease taken at T0."""
    job_id = uuid7()
    spec = {"version": 1, "argv": ["true"], "executable": "/bin/true", "cwd": "/", "env": {}, "name": None,
            "group": database.DEFAULT_GROUP, "priority": 0, "windows": dict(WINDOWS)}
    transitions.submit(conn, job_id=job_id, spec=spec, dependencies=[], credential_hash=sha256(CREDENTIAL),
                       clock=ManualClock(T0 - 1, 0.0))
    ident = proc.identity(supervisor.pid)
    claimed = transitions.claim(conn, job_id, sha256(CREDENTIAL), uuid7(), ident.pid, ident.start_time,
                                ident.boot_id, T0)
    transitions.set_waiting(conn, job_id, claimed["revision"], "held", "held", None, T0, False)
    return job_id


def end(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def row(conn, job_id: str):
    return queries.load_state(conn, job_id)


class Holder:
    """A supervisor holding the round: its id, its own (waiting) job, its watch and its term."""

    def __init__(self, conn, job_id: str):
        self.conn, self.job_id, self.id = conn, job_id, row(conn, job_id)["supervisor_id"]
        self.watch, self.term = DeathWatch(), None

    def round(self, now: float):
        result = lease_round.run(self.conn, self.id, self.job_id, now, PERIOD, proc.verify, self.watch, self.term)
        if result is not None:
            self.term = result[3]
        return result

    def close(self):
        self.watch.close()


def test_a_covered_job_is_written_once_and_its_lease_follows_the_round(conn, sleepers):
    supervisors = sleepers(4)
    jobs = [waiting_job(conn, s) for s in supervisors]
    holder = Holder(conn, jobs[0])
    try:
        now = DUE
        assert holder.round(now) is not None
        covered = {j: row(conn, j) for j in jobs}
        assert all(r["lease_cover"] == LEASE and r["lease_end"] == now + LEASE for r in covered.values())
        revisions = {j: r["revision"] for j, r in covered.items()}
        for _ in range(20):  # 100 s: the own leases are long gone, the covers keep them
            now += 0.9 * PERIOD
            before = conn.total_changes
            assert holder.round(now) is not None
            assert conn.total_changes - before == 2  # the round's own row, held and verified: nothing else
            for j in jobs:
                r = row(conn, j)
                assert r["revision"] == revisions[j] and r["lease_end"] - now == LEASE
        assert queries.due_for_reconcile(conn, now + LEASE - 0.1) == []
    finally:
        holder.close()


def test_a_supervisor_that_ends_is_uncovered_and_its_job_then_found_lost(conn, sleepers, tmp_path):
    supervisors = sleepers(3)
    jobs = [waiting_job(conn, s) for s in supervisors]
    holder = Holder(conn, jobs[0])
    try:
        now = DUE
        holder.round(now)
        last_seen = now
        end(supervisors[1])
        now += 0.9 * PERIOD
        holder.round(now)
        dead = row(conn, jobs[1])
        # Its lease is its own again, as the round last kept it: from the last time it was seen alive.
        assert dead["lease_cover"] is None and dead["lease_end"] == last_seen + LEASE
        assert jobs[1] not in holder.watch
        assert row(conn, jobs[2])["lease_end"] == now + LEASE
        # Until it runs out the job is not lost; after, the reconcile pass finds it so, and only it.
        assert reconcile.run(conn, str(tmp_path), last_seen + LEASE - 0.1) == []
        while now < last_seen + LEASE:
            now += 0.9 * PERIOD
            holder.round(now)
        assert reconcile.run(conn, str(tmp_path), now) == [(jobs[1], "lost")]
        assert row(conn, jobs[2])["phase"] == "waiting" and row(conn, jobs[2])["lease_end"] == now + LEASE
    finally:
        holder.close()


def test_a_stopped_supervisor_lives_and_keeps_its_cover(conn, sleepers):
    supervisors = sleepers(2)
    jobs = [waiting_job(conn, s) for s in supervisors]
    holder = Holder(conn, jobs[0])
    os.kill(supervisors[1].pid, 19)  # SIGSTOP
    try:
        now = DUE
        for _ in range(10):
            holder.round(now)
            now += 0.9 * PERIOD
        assert row(conn, jobs[1])["lease_end"] >= now - 0.9 * PERIOD + LEASE - 0.001
    finally:
        os.kill(supervisors[1].pid, 18)  # SIGCONT
        holder.close()


def test_a_new_holder_vouches_only_for_what_it_watches(conn, sleepers):
    """The first holder stops; meanwhile a covered supervisor dies. The holder that takes the round up watches
    every covered job it can: the dead one's cover ends at the first holder's last sight of it, before the new
    holder moves the round's time on. The first holder, back, finds the round taken and writes nothing."""
    supervisors = sleepers(4)
    jobs = [waiting_job(conn, s) for s in supervisors]
    first, second = Holder(conn, jobs[0]), Holder(conn, jobs[1])
    try:
        now = DUE
        first.round(now)
        first_seen = now
        end(supervisors[3])
        now += 2 * PERIOD + 0.1  # the first holder's hold has run out
        assert second.round(now) is not None
        assert second.term == first.term + 1
        dead = row(conn, jobs[3])
        assert dead["lease_cover"] is None and dead["lease_end"] == first_seen + LEASE
        assert all(row(conn, j)["lease_end"] == now + LEASE for j in jobs[:3])
        assert set(second.watch.keys()) == set(jobs[:3])
        assert first.round(now + 0.1) is None  # held by the second: the first writes nothing
        # Handed back and forth, each holder's watch is made whole again at each of its terms.
        records.release(conn, second.id, second.job_id)
        second.close()
        second.watch, second.term = DeathWatch(), None
        first.watch.close()
        first.watch, first.term = DeathWatch(), None
        now += 0.5
        assert first.round(now) is not None
        assert set(first.watch.keys()) == set(jobs[:3])
        assert all(row(conn, j)["lease_end"] == now + LEASE for j in jobs[:3])
    finally:
        first.close()
        second.close()


def test_any_change_of_a_covered_job_makes_its_lease_its_own(conn, sleepers):
    supervisors = sleepers(1)
    job = waiting_job(conn, supervisors[0])
    holder = Holder(conn, job)
    try:
        now = DUE
        holder.round(now)
        state = row(conn, job)
        transitions.set_waiting(conn, job, state["revision"], "slot", "full", None, now + 1, False)
        changed = row(conn, job)
        assert changed["lease_cover"] is None and changed["lease_expires_at"] == now + LEASE
        holder.round(now + 0.9 * PERIOD)  # its own lease is not due yet: left as it is
        assert row(conn, job)["lease_cover"] is None
        holder.round(now + 1.8 * PERIOD)  # due, and it still waits: covered again
        assert row(conn, job)["lease_cover"] == LEASE
    finally:
        holder.close()


def test_without_descriptors_to_spare_the_round_renews_each_lease(tmp_path, sleepers):
    """A holder whose descriptor limit leaves no room for pidfds (hard limit 300: the watch keeps 320 free)
    renews every due lease as a supervisor renews its own, and covers none."""
    supervisors = sleepers(3)
    db = tmp_path / "jobman.db"
    setup = database.connect(str(db))
    jobs = [waiting_job(setup, s) for s in supervisors]
    setup.close()
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))
        sys.path.insert(0, {str(os.path.abspath("src"))!r})
        from jobman.store import database
        from jobman.supervisor import lease_round
        from runkit.system import proc
        from runkit.system.deathwatch import DeathWatch
        conn = database.connect({str(db)!r}, create=False)
        sup = conn.execute("SELECT supervisor_id FROM job_state WHERE job_id = ?", ({jobs[0]!r},)).fetchone()[0]
        watch = DeathWatch()
        print(lease_round.run(conn, sup, {jobs[0]!r}, {DUE}, {PERIOD}, proc.verify, watch)[3])
        print(len(watch))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "0"
    conn = database.connect(str(db), create=False)
    try:
        for j in jobs:
            r = row(conn, j)
            assert r["lease_cover"] is None and r["lease_expires_at"] == DUE + LEASE
    finally:
        conn.close()


def test_the_watch_sees_an_end_shares_a_descriptor_and_gives_the_limit_back(sleepers):
    a, b = sleepers(2)
    soft_before = resource.getrlimit(resource.RLIMIT_NOFILE)
    watch = DeathWatch()
    ia, ib = proc.identity(a.pid), proc.identity(b.pid)
    assert watch.watch("a1", ia.pid, ia.start_time, ia.boot_id)
    assert watch.watch("a2", ia.pid, ia.start_time, ia.boot_id)  # one process, two keys: one descriptor
    assert watch.watch("b", ib.pid, ib.start_time, ib.boot_id)
    assert not watch.watch("old", ib.pid, ib.start_time - 1, ib.boot_id)  # a recycled pid is someone else
    assert not watch.watch("elsewhere", ib.pid, ib.start_time, "another-boot")
    assert watch.ended() == set()
    end(a)
    assert watch.ended() == {"a1", "a2"}
    watch.forget("a1")
    assert watch.ended() == {"a2"}
    watch.close()
    assert len(watch) == 0 and resource.getrlimit(resource.RLIMIT_NOFILE) == soft_before
