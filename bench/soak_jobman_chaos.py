"""The faults the jobman soak injects, each recorded in the FaultLog with when and whom it hit:

- supervisor_kill: SIGKILL of a random live supervisor (`jobman __supervise JOB`, or one that has been to its
  lean waiting form and back: `... __resume JOB ...`, and the lean form itself, bash named `jobman-wait`);
- supervisor_stop: SIGSTOP of a random supervisor for 1.5x to 3x its lease, then SIGCONT;
- cli_kill: SIGKILL of a random `jobman run` (preferably one whose supervisor has started: mid-handoff);
- db_lock: a process-like holder of BEGIN IMMEDIATE on jobman.db for about 3x the lease;
- disk_full: the home's filesystem (a small tmpfs when run as root) filled to the last byte for a moment.
"""
import errno
import os
import signal
import subprocess
import sys
import time

from soak_common import Chaos, ChaosUser, FaultLog, processes, signal_quietly


class JobmanChaos(ChaosUser):
    def __init__(self, rng, home, faults: FaultLog, lease: float, mean_gap: float, fill_path=None):
        self.rng, self.home, self.faults, self.lease = rng, str(home), faults, lease
        self.fill_path = fill_path          # a file on the home's filesystem to fill it with (None: no disk_full)
        self._busy: set[str] = set()         # lasting faults of which one at a time runs
        self._stopped: set[int] = set()
        actions = {"supervisor_kill": (4, self.supervisor_kill), "supervisor_stop": (3, self.supervisor_stop),
                   "cli_kill": (4, self.cli_kill), "db_lock": (1, self.db_lock)}
        if fill_path is not None:
            actions["disk_full"] = (1, self.disk_full)
        self.chaos = Chaos(rng, actions, mean_gap, early=("cli_kill",))

    # -- whom to hit -------------------------------------------------------------------------------------

    def _ours(self, p) -> bool:
        return f"JOBMAN_HOME={self.home}".encode() in p.environ().split(b"\0")

    def supervisors(self):
        return [p for p in processes() if job_of(p) and p.pid not in self._stopped and self._ours(p)]

    def clis(self):
        procs = processes()
        children = {p.ppid for p in procs if "__supervise" in p.argv}
        found = [p for p in procs if len(p.argv) > 2 and p.argv[1].endswith("/jobman") and p.argv[2] == "run"
                 and self._ours(p)]
        return found, [p for p in found if p.pid in children]

    # -- the faults --------------------------------------------------------------------------------------

    def supervisor_kill(self):
        found = self.supervisors()
        if found:
            victim = self.rng.choice(found)
            t = time.time()
            if signal_quietly(victim.pid, signal.SIGKILL):
                self.faults.add("supervisor_kill", t, pid=victim.pid, job=job_of(victim))
                return True
        return False

    def supervisor_stop(self):
        found = self.supervisors()
        if not found:
            return False
        victim = self.rng.choice(found)
        hold = self.lease * self.rng.uniform(1.5, 3.0)
        t0 = time.time()
        if not signal_quietly(victim.pid, signal.SIGSTOP):
            return False
        self._stopped.add(victim.pid)

        def resume():
            try:
                self.chaos.sleep(hold)
            finally:
                signal_quietly(victim.pid, signal.SIGCONT)
                self._stopped.discard(victim.pid)
                self.faults.add("supervisor_stop", t0, time.time(), pid=victim.pid, job=job_of(victim))

        self.chaos.lasting(resume)
        return True

    def cli_kill(self):
        found, handing_off = self.clis()
        pool = handing_off if handing_off and self.rng.random() < 0.75 else found
        if not pool:
            return False
        victim = self.rng.choice(pool)
        name = victim.argv[victim.argv.index("--name") + 1] if "--name" in victim.argv else None
        t = time.time()
        if signal_quietly(victim.pid, signal.SIGKILL):
            self.faults.add("cli_kill", t, pid=victim.pid, job=name,
                            detail="mid-handoff" if victim in handing_off else "anywhere")
            return True
        return False

    def db_lock(self):
        if "db_lock" not in self._busy:
            self._busy.add("db_lock")
            self.chaos.lasting(self._hold_lock, self.lease * 3)
        return True

    def _hold_lock(self, hold: float):
        """BEGIN IMMEDIATE held by another process (as a backup tool or `sqlite3` in a shell would)."""
        code = ("import sqlite3, sys, time\n"
                "c = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE'); print('held', flush=True)\n"
                "sys.stdin.read(); c.execute('ROLLBACK')\n")
        holder = subprocess.Popen([sys.executable, "-c", code, os.path.join(self.home, "jobman.db")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            if holder.stdout.readline().strip() != "held":
                raise RuntimeError("the lock holder could not take the write lock")
            t0 = time.time()
            self.chaos.sleep(hold)
        finally:
            holder.stdin.close()
            holder.wait(60)
            holder.stdout.close()
            self._busy.discard("db_lock")
        self.faults.add("db_lock", t0, time.time(), pid=holder.pid, detail=f"{hold:.1f} s")

    def disk_full(self):
        if "disk_full" not in self._busy:
            self._busy.add("disk_full")
            self.chaos.lasting(self._fill, self.rng.uniform(0.5, 2.0))
        return True

    def _fill(self, hold: float):
        """Write a file until the filesystem has not one byte left; keep it `hold` seconds; remove it."""
        try:
            fd = os.open(self.fill_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                for size in (1 << 20, 1 << 12, 1):
                    block = b"\0" * size
                    while True:
                        try:
                            os.write(fd, block)
                        except OSError as e:
                            if e.errno != errno.ENOSPC:
                                raise
                            break
                t0 = time.time()
                self.chaos.sleep(hold)
            finally:
                os.close(fd)
                os.unlink(self.fill_path)
            self.faults.add("disk_full", t0, time.time(), detail=f"{hold:.1f} s")
        finally:
            self._busy.discard("disk_full")


def job_of(p) -> str | None:
    """The job a process supervises, if it is a supervisor in any of its forms (None otherwise)."""
    for word in ("__supervise", "__resume"):
        if word in p.argv[:-1]:
            return p.argv[p.argv.index(word) + 1]
    return None


def mount_small_tmpfs(path, size: str) -> bool:
    """Mount a tmpfs of `size` at `path` (root only). False when it cannot be done."""
    if os.geteuid() != 0:
        return False
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                          capture_output=True, text=True)
    return done.returncode == 0


def unmount(path) -> None:
    for _ in range(50):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
            return
        time.sleep(0.2)
    subprocess.run(["umount", "-l", str(path)], capture_output=True)
